#!/bin/bash
# restored_speed.sh [BIN_DIR] [MIB] [ROUNDS] [PAIRS]: does a restored process
# run as fast as the original? (issue 14 item 2; docs/performance.md, "Speed
# after a restore"). For each memory advice (none, MADV_HUGEPAGE) and each
# tracker (auto, hash), one workloads/rounds of MIB MiB (default 384) runs
# ROUNDS timed rounds (default 15) of a fixed kernel, gets a `cr_full` and
# runs on for ROUNDS rounds (now tracked), gets a `cr_incr --kill` and is
# restored with `cr_restart --detach`. A twin, the same program started
# afresh and never checkpointed, then runs beside it, and the two take turns
# (SIGSTOP/SIGCONT) for PAIRS turns each (default 20): a whole round of the
# restored process, a whole round of the twin, order swapped every pair, so
# both see the same machine. "restored / twin" is the median of the
# restored rounds over the twin's: the figure that counts on a noisy host.
# Also printed: the median round before the checkpoint and after the
# restore (the same process, minutes apart), the first whole rounds after
# the cr_full and after the restore (they pay the first write to each page:
# tracking is armed again) and the memory in transparent huge pages
# (smaps_rollup) before, after the cr_full and after the restore; and a
# control line, a twin against a second twin the same way (the method's own
# noise). Root. BIN_DIR defaults to build/bin.
set -u
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BIN=${1:-build/bin} MIB=${2:-384} ROUNDS=${3:-15} PAIRS=${4:-20}
for x in cr_full cr_incr cr_restart workloads/rounds; do
  [[ -x $BIN/$x ]] || { echo "restored_speed: $BIN/$x missing (build it first)" >&2; exit 2; }
done
W=$(mktemp -d /var/tmp/restored_speed.XXXXXX) || exit 1
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$W"' EXIT

lines() { wc -l <"$1"; }
wait_lines() { # OUT PID N: until OUT has N lines (PID is alive)
  while (($(lines "$1") < $3)); do
    kill -0 "$2" 2>/dev/null || { echo "restored_speed: the workload ended" >&2; exit 1; }
    sleep 0.01
  done
}
thp_mib() { awk '/^AnonHugePages:/ {printf "%d", $2 / 1024}' "/proc/$1/smaps_rollup"; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
median_ms() { # OUT FIRST LAST: median round time of lines FIRST..LAST of OUT
  sed -n "$2,$3p" "$1" | awk '{print $4}' | median
}
start() { # OUT ADVICE: a new rounds process; its PID in $NEW
  : >"$1" # before the workload's own redirection: lines() must find it at once
  setsid "$BIN/workloads/rounds" "$1.ready" "$MIB" "$2" </dev/null >"$1" 2>&1 &
  NEW=$!
  disown "$NEW"
  PIDS+=("$NEW")
}
# One whole round of PID (writing OUT) while the other stays stopped: the
# round cut by its last stop is left out. Appends that round's ms to OUT.turns.
turn() { # OUT PID
  local at
  at=$(lines "$1")
  kill -CONT "$2"
  wait_lines "$1" "$2" $((at + 2))
  kill -STOP "$2"
  sed -n "$((at + 2))p" "$1" | awk '{print $4}' >>"$1.turns"
}
# PAIRS turns each of A and B, alternating (order swapped every pair): the
# median of A's rounds over B's.
alternate() { # OUT_A PID_A OUT_B PID_B
  : >"$1.turns"
  : >"$3.turns"
  kill -STOP "$2" "$4"
  for ((i = 0; i < PAIRS; i++)); do
    if ((i % 2 == 0)); then turn "$1" "$2" && turn "$3" "$4"; else turn "$3" "$4" && turn "$1" "$2"; fi
  done
  kill -CONT "$2" "$4"
  awk -v a="$(median <"$1.turns")" -v b="$(median <"$3.turns")" 'BEGIN {printf "%.3f", a / b}'
}

printf '%-8s %-7s %10s %13s %10s %10s %13s %11s %11s %10s %10s\n' advice tracker "before ms" \
  "1st full ms" "THP full" "after ms" "1st after ms" "THP before" "THP after" "twin ms" \
  "restored/twin"
for advice in default huge; do
  for tracker in auto hash; do
    rm -rf "$W/ck"
    start "$W/out" "$advice"
    PID=$NEW
    wait_lines "$W/out" "$PID" $((ROUNDS + 2))
    thp_before=$(thp_mib "$PID")
    at=$(lines "$W/out")
    before=$(median_ms "$W/out" $((at - ROUNDS + 1)) "$at")
    # The running process after a cr_full: line at+1 is the round the
    # checkpoint cut, line at+2 the first whole round after it.
    "$BIN/cr_full" --tracker "$tracker" --dir "$W/ck" "$PID" >/dev/null 2>"$W/err" ||
      { echo "restored_speed: cr_full: $(head -n 1 "$W/err")" >&2; exit 1; }
    at=$(lines "$W/out")
    wait_lines "$W/out" "$PID" $((at + ROUNDS + 2))
    thp_full=$(thp_mib "$PID")
    first_full=$(median_ms "$W/out" $((at + 2)) $((at + 2)))
    "$BIN/cr_incr" --kill --dir "$W/ck" "$PID" >/dev/null 2>"$W/err" ||
      { echo "restored_speed: cr_incr: $(head -n 1 "$W/err")" >&2; exit 1; }
    while kill -0 "$PID" 2>/dev/null; do sleep 0.02; done
    at=$(lines "$W/out")
    PID=$("$BIN/cr_restart" --detach --dir "$W/ck" 2>"$W/err") ||
      { echo "restored_speed: cr_restart: $(head -n 1 "$W/err")" >&2; exit 1; }
    PIDS+=("$PID")
    # Line at+1 is the round the checkpoint cut: its time includes the dump,
    # the kill and the restore.
    wait_lines "$W/out" "$PID" $((at + ROUNDS + 2))
    thp_after=$(thp_mib "$PID")
    after=$(median_ms "$W/out" $((at + 3)) $((at + ROUNDS + 2)))
    first=$(median_ms "$W/out" $((at + 2)) $((at + 2)))
    # The twin, started afresh, past its own first rounds.
    start "$W/twin" "$advice"
    TWIN=$NEW
    wait_lines "$W/twin" "$TWIN" 3
    ratio=$(alternate "$W/out" "$PID" "$W/twin" "$TWIN")
    twin=$(median <"$W/twin.turns")
    kill -9 "$PID" "$TWIN"
    printf '%-8s %-7s %10s %13s %10s %10s %13s %11s %11s %10s %13s\n' "$advice" "$tracker" \
      "$before" "$first_full" "${thp_full} MiB" "$after" "$first" "${thp_before} MiB" \
      "${thp_after} MiB" "$twin" "$ratio"
  done
  # Control: two twins, never checkpointed, measured the same way.
  start "$W/a" "$advice"
  A=$NEW
  start "$W/b" "$advice"
  B=$NEW
  wait_lines "$W/a" "$A" 3
  wait_lines "$W/b" "$B" 3
  ratio=$(alternate "$W/a" "$A" "$W/b" "$B")
  kill -9 "$A" "$B"
  printf '%-8s %-7s %10s %13s %10s %10s %13s %11s %11s %10s %13s\n' "$advice" "control" - - - - - \
    - - "$(median <"$W/b.turns")" "$ratio"
done
