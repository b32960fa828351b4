#!/bin/bash
# restored_speed.sh [BIN_DIR] [MIB] [ROUNDS]: does a checkpointed or restored
# process run as fast as the original? (issue 14 item 2; docs/performance.md,
# "Speed after a restore"). For each memory advice (none, MADV_HUGEPAGE) and
# each tracker (auto, hash), one workloads/rounds of MIB MiB (default 384)
# runs ROUNDS timed rounds (default 15) of a fixed kernel, gets a `cr_full`
# and runs on for ROUNDS rounds (the running process, now tracked), gets a
# `cr_incr --kill`, is restored with `cr_restart --detach` and runs ROUNDS
# more. Prints per case the median round before, the first whole round after
# the cr_full and the memory then in transparent huge pages (smaps_rollup),
# the median round after the restore, after/before, the first whole round
# after the restore (it pays the first write to each page: the restored
# process's tracking is armed again) and the huge pages before and after it.
# Root. BIN_DIR defaults to build/bin. LIBCKPT_KEEP_HUGE_PAGES=off in the
# environment protects huge pages as before dirty/huge_blocks (comparison).
set -u
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BIN=${1:-build/bin} MIB=${2:-384} ROUNDS=${3:-15}
for x in cr_full cr_incr cr_restart workloads/rounds; do
  [[ -x $BIN/$x ]] || { echo "restored_speed: $BIN/$x missing (build it first)" >&2; exit 2; }
done
W=$(mktemp -d /var/tmp/restored_speed.XXXXXX) || exit 1
PID=""
trap '[[ -n $PID ]] && kill -9 "$PID" 2>/dev/null; rm -rf "$W"' EXIT

lines() { wc -l <"$W/out"; }
wait_lines() { # N: until the output has N lines (the workload is alive)
  while (($(lines) < $1)); do
    kill -0 "$PID" 2>/dev/null || { echo "restored_speed: the workload ended" >&2; exit 1; }
    sleep 0.05
  done
}
thp_mib() { awk '/^AnonHugePages:/ {printf "%d", $2 / 1024}' "/proc/$PID/smaps_rollup"; }
median_ms() { # FIRST LAST: median round time of output lines FIRST..LAST
  sed -n "$1,$2p" "$W/out" | awk '{print $4}' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

printf '%-8s %-6s %10s %13s %12s %10s %10s %12s %14s %10s\n' advice tracker "before ms" \
  "1st full ms" "THP full" "after ms" after/before "1st after ms" "THP before" "THP after"
for advice in default huge; do
  for tracker in auto hash; do
    rm -rf "$W/ck" "$W/ready"
    : >"$W/out" # before the workload's own redirection: lines() must find it at once
    setsid "$BIN/workloads/rounds" "$W/ready" "$MIB" "$advice" </dev/null >"$W/out" 2>&1 &
    PID=$!
    disown "$PID"
    wait_lines $((ROUNDS + 2))
    thp_before=$(thp_mib)
    at=$(lines)
    before=$(median_ms $((at - ROUNDS + 1)) "$at")
    # The running process after a cr_full: line at+1 is the round the
    # checkpoint cut, line at+2 the first whole round after it.
    "$BIN/cr_full" --tracker "$tracker" --dir "$W/ck" "$PID" >/dev/null 2>"$W/err" ||
      { echo "restored_speed: cr_full: $(head -n 1 "$W/err")" >&2; exit 1; }
    at=$(lines)
    wait_lines $((at + ROUNDS + 2))
    thp_full=$(thp_mib)
    first_full=$(median_ms $((at + 2)) $((at + 2)))
    "$BIN/cr_incr" --kill --dir "$W/ck" "$PID" >/dev/null 2>"$W/err" ||
      { echo "restored_speed: cr_incr: $(head -n 1 "$W/err")" >&2; exit 1; }
    while kill -0 "$PID" 2>/dev/null; do sleep 0.02; done
    at=$(lines)
    PID=$("$BIN/cr_restart" --detach --dir "$W/ck" 2>"$W/err") ||
      { echo "restored_speed: cr_restart: $(head -n 1 "$W/err")" >&2; PID=""; exit 1; }
    # Line at+1 is the round the checkpoint cut: its time includes the dump,
    # the kill and the restore.
    wait_lines $((at + ROUNDS + 2))
    thp_after=$(thp_mib)
    after=$(median_ms $((at + 3)) $((at + ROUNDS + 2)))
    first=$(median_ms $((at + 2)) $((at + 2)))
    kill -9 "$PID"
    PID=""
    printf '%-8s %-6s %10s %13s %12s %10s %10s %12s %14s %10s\n' "$advice" "$tracker" "$before" \
      "$first_full" "${thp_full} MiB" "$after" \
      "$(awk -v a="$after" -v b="$before" 'BEGIN {printf "%.3f", a / b}')" "$first" \
      "${thp_before} MiB" "${thp_after} MiB"
  done
done
