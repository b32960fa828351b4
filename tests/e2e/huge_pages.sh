#!/usr/bin/env bash
# huge_pages.sh BIN_DIR: the pagemap-scan tracker keeps transparent huge pages
# huge and misses no write while blocks flip between huge and small.
#
# The program (programs/huge_flip.c) has four 2 MiB blocks in huge pages
# (MADV_HUGEPAGE + MADV_COLLAPSE) that it writes, splits, collapses, partly
# unmaps and drops pages of over rounds 0..13, keeping a copy of its memory
# and its huge-page count per round. The driver takes cr_full for round 0 and
# cr_incr for the others (pagemap-scan). Then it checks that block 0, which
# the program rewrites whole every round, was still huge at the last round
# (with huge pages write-protected as before, the first write after the
# full split it), and restores every generation: the restored process
# compares its memory byte for byte with its copy of that round ("verified
# round k").
# Prints "PASS huge_pages ..." or "FAIL huge_pages: reason".
# Exit 0 pass, 1 fail, 2 usage, 77 skip (no pagemap-scan, or no huge pages).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

# shellcheck source=round_chain.sh
source "$HERE/round_chain.sh"
round_chain_setup huge_pages huge_flip 14 "$@"
round_chain_start huge
declare -a THP
huge_kib() { # K G: the program's huge-page count at round K
  THP[$2]=$(<"$RUN/round-$1.thp")
}
round_chain_take huge_kib

printf '%4s %8s %8s\n' gen saved "THP KiB"
for ((g = 1; g <= ROUNDS; g++)); do printf '%4d %8s %8s\n' "$g" "${WRITTEN[g]}" "${THP[g]}"; done
if ((THP[1] < 8192)); then
  echo "SKIP $NAME: the program got no huge pages (MADV_COLLAPSE refused?): ${THP[1]} KiB"
  exit 77
fi
# Block 0 is rewritten whole every round: it must still be huge at the end.
# (Checked after the restores, so that a run that splits them still shows
# whether it lost a write.)
SPLIT=""
((THP[ROUNDS] >= 2048)) || SPLIT="huge pages were split: ${THP[ROUNDS]} KiB huge at the last round"

round_chain_restore_all
((${#BAD[@]} == 0)) || fail "generations ${BAD[*]} did not restore correctly${SPLIT:+; $SPLIT}"
[[ -z $SPLIT ]] || fail "$SPLIT"
echo "PASS $NAME: $ROUNDS generations restored byte for byte; ${THP[ROUNDS]} KiB still huge at the end"
