#!/bin/bash
# restored_speed.sh [BIN_DIR] [MIB] [ROUNDS] [PAIRS] [K]: does a restored
# process run as fast as the original? (issue 14 item 2; docs/performance.md,
# "Speed after a restore"). For each memory advice (none, MADV_HUGEPAGE) and
# each tracker (auto, hash), K times (default 3): one workloads/rounds of MIB
# MiB (default 384) runs ROUNDS timed rounds (default 10) of a fixed kernel,
# gets a `cr_full`, runs ROUNDS more (now tracked), gets a `cr_incr --kill`
# and is restored with `cr_restart --detach`; a twin, the same program
# started afresh and never checkpointed, is started beside it. Then the K
# restored processes and the K twins take turns (SIGSTOP/SIGCONT), one whole
# round each per turn, in an order rotated every turn, PAIRS turns each
# (default 16): all see the same machine. "speed" is the twins' median round
# over the restored processes' (>= 1: the restored ones are as fast), with
# the spread of the per-process medians among the twins and among the
# restored (processes differ by where their memory landed: the method's
# floor). Also printed (medians over the K): the round before the
# checkpoint and after the restore (the same process, minutes apart), the
# first whole rounds after the cr_full and after the restore (they pay the
# first write to each page: tracking is armed again) and the memory in
# transparent huge pages before, after the cr_full and after the restore.
# Root. BIN_DIR defaults to build/bin.
set -u
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BIN=${1:-build/bin} MIB=${2:-384} ROUNDS=${3:-10} PAIRS=${4:-16} K=${5:-3}
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
# One whole round of PID (writing OUT), the others stopped: the round cut by
# its last stop is left out. Appends that round's ms to OUT.turns.
turn() { # OUT PID
  local at
  at=$(lines "$1")
  kill -CONT "$2"
  wait_lines "$1" "$2" $((at + 2))
  kill -STOP "$2"
  sed -n "$((at + 2))p" "$1" | awk '{print $4}' >>"$1.turns"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
spread() { # OUT...: max / min of the per-process medians of their turns
  local m=()
  for o in "$@"; do m+=("$(median <"$o.turns")"); done
  printf '%s\n' "${m[@]}" | sort -n | awk '{v[NR] = $1} END {printf "%.3f", v[NR] / v[1]}'
}

printf '%-8s %-7s %9s %11s %9s %9s %12s %10s %10s %10s %13s %8s %13s %13s\n' advice tracker \
  "before ms" "1st full ms" "THP full" "after ms" "1st after ms" "THP before" "THP after" \
  "twin ms" "restored ms" speed "twins spread" "rest. spread"
for advice in ${RS_ADVICE:-default huge}; do
  for tracker in ${RS_TRACKERS:-auto hash}; do
    outs=() procs=() rest=() twins=()
    before=() first_full=() thp_full=() after=() first=() thp_before=() thp_after=()
    for ((k = 0; k < K; k++)); do
      out=$W/r$k
      rm -rf "$W/ck"
      start "$out" "$advice"
      PID=$NEW
      wait_lines "$out" "$PID" $((ROUNDS + 2))
      thp_before+=("$(thp_mib "$PID")")
      at=$(lines "$out")
      before+=("$(median_ms "$out" $((at - ROUNDS + 1)) "$at")")
      # The running process after a cr_full: line at+1 is the round the
      # checkpoint cut, line at+2 the first whole round after it.
      "$BIN/cr_full" --tracker "$tracker" --dir "$W/ck" "$PID" >/dev/null 2>"$W/err" ||
        { echo "restored_speed: cr_full: $(head -n 1 "$W/err")" >&2; exit 1; }
      at=$(lines "$out")
      wait_lines "$out" "$PID" $((at + ROUNDS + 2))
      thp_full+=("$(thp_mib "$PID")")
      first_full+=("$(median_ms "$out" $((at + 2)) $((at + 2)))")
      "$BIN/cr_incr" --kill --dir "$W/ck" "$PID" >/dev/null 2>"$W/err" ||
        { echo "restored_speed: cr_incr: $(head -n 1 "$W/err")" >&2; exit 1; }
      while kill -0 "$PID" 2>/dev/null; do sleep 0.02; done
      at=$(lines "$out")
      PID=$("$BIN/cr_restart" --detach --dir "$W/ck" 2>"$W/err") ||
        { echo "restored_speed: cr_restart: $(head -n 1 "$W/err")" >&2; exit 1; }
      PIDS+=("$PID")
      # Line at+1 is the round the checkpoint cut: its time includes the
      # dump, the kill and the restore.
      wait_lines "$out" "$PID" $((at + ROUNDS + 2))
      thp_after+=("$(thp_mib "$PID")")
      after+=("$(median_ms "$out" $((at + 3)) $((at + ROUNDS + 2)))")
      first+=("$(median_ms "$out" $((at + 2)) $((at + 2)))")
      kill -STOP "$PID"
      # Its twin, started afresh, past its first rounds.
      start "$W/t$k" "$advice"
      wait_lines "$W/t$k" "$NEW" 3
      kill -STOP "$NEW"
      outs+=("$out" "$W/t$k")
      procs+=("$PID" "$NEW")
      rest+=("$out")
      twins+=("$W/t$k")
    done
    for o in "${outs[@]}"; do : >"$o.turns"; done
    n=${#outs[@]}
    for ((t = 0; t < PAIRS; t++)); do
      for ((j = 0; j < n; j++)); do
        x=$(((j + t) % n))
        turn "${outs[x]}" "${procs[x]}"
      done
    done
    kill -9 "${procs[@]}"
    twin=$(cat "${twins[@]/%/.turns}" | median)
    restored=$(cat "${rest[@]/%/.turns}" | median)
    m() { printf '%s\n' "$@" | median; }
    printf '%-8s %-7s %9s %11s %9s %9s %12s %10s %10s %10s %13s %8s %13s %13s\n' "$advice" \
      "$tracker" "$(m "${before[@]}")" "$(m "${first_full[@]}")" "$(m "${thp_full[@]}") MiB" \
      "$(m "${after[@]}")" "$(m "${first[@]}")" "$(m "${thp_before[@]}") MiB" \
      "$(m "${thp_after[@]}") MiB" "$twin" "$restored" "$(ratio "$twin" "$restored")" \
      "$(spread "${twins[@]}")" "$(spread "${rest[@]}")"
  done
done
