#!/usr/bin/env bash
# adaptive_tracking.sh BIN_DIR: no false negatives while the pagemap-scan
# tracker's adaptive write-protection (dirty/adaptive) moves blocks between
# hot (left unprotected, saved whole) and cold (tracked page by page).
#
# The program (programs/hot_cold.c) flips four 2 MiB blocks between hot and
# cold over rounds 0..13 and keeps a copy of its memory per round. The driver
# takes cr_full for round 0 and cr_incr for the others (pagemap-scan), and
# after each incremental records how many blocks the tracker's state left hot
# (root only: /run/libckpt/tracking/PID-START-PIDNS-BOOT.adaptive). Then every
# generation is restored and the restored process compares its memory byte
# for byte with its copy of that round ("verified round k").
# It also checks that adaptivity really took part: some incremental must have
# left blocks hot, and some later one fewer (a block went back to tracking);
# a run where nothing ever became hot would not test anything.
# Prints "PASS adaptive_tracking ..." or "FAIL adaptive_tracking: reason".
# Exit 0 pass, 1 fail, 2 usage, 77 skip (no pagemap-scan on this kernel).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

# shellcheck source=round_chain.sh
source "$HERE/round_chain.sh"
round_chain_setup adaptive_tracking hot_cold 14 "$@"
round_chain_start adaptive
declare -a HOT
MAX_HOT=0
COOLED=0
count_hot() { # K G: blocks the tracker's state leaves hot after generation G
  HOT[$2]=-
  local state
  state=$(ls /run/libckpt/tracking/"$PID"-*.adaptive 2>/dev/null | head -n 1 || true)
  if [[ -n $state && $1 -gt 0 ]]; then
    # Lines after the header: "addr backoff left sampled heavy"; hot: left > 0, not sampled.
    HOT[$2]=$(awk 'NR > 1 && $4 == 0 && $3 > 0 { n++ } END { print n + 0 }' "$state")
    ((HOT[$2] > MAX_HOT)) && MAX_HOT=${HOT[$2]}
    ((MAX_HOT > 0 && HOT[$2] < MAX_HOT)) && COOLED=1
  fi
  return 0
}
round_chain_take count_hot

printf '%4s %8s %4s\n' gen saved hot
for ((g = 1; g <= ROUNDS; g++)); do printf '%4d %8s %4s\n' "$g" "${WRITTEN[g]}" "${HOT[g]}"; done
if ((EUID == 0)); then
  ((MAX_HOT > 0)) || fail "no block was ever left hot: adaptive tracking did not take part"
  ((COOLED)) || fail "no hot block ever went back to tracking"
fi

round_chain_restore_all
((${#BAD[@]} == 0)) || fail "generations ${BAD[*]} did not restore correctly"
echo "PASS $NAME: $ROUNDS generations restored byte for byte; at most $MAX_HOT blocks hot"
