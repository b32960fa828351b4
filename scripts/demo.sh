#!/usr/bin/env bash
# The libckpt demo: runs a bundled sparse solver (a 113 MiB matrix built
# once and then only read, 3 MiB of vectors rewritten every iteration) once
# uninterrupted, then again while checkpointing it (a full checkpoint, then
# an incremental one with only the pages written since: a few MiB), kills
# it with SIGKILL, restores it from the chain, and compares the two results.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

BIN=$PWD/build/bin
WORK=$(mktemp -d /tmp/libckpt-demo.XXXXXX)
trap '[ -n "${PID:-}" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# Replaces the calling subshell with the workload, holding only stdio open
# (libckpt refuses what it cannot restore yet, e.g. stray pipes).
exec_clean() {
  for fd in $(ls /proc/$BASHPID/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done
  exec "$@"
}

# 400 iterations: the full checkpoint is taken at the first progress line
# (iteration 10) and the incremental at the next, so the solver still has
# many times as long to run as it took to get there, on any machine.
SOLVER=("$BIN/workloads/sparse" 100000 100 400)
# Its output without what differs between runs (CPU time, seconds).
result_lines() { grep -v '^rusage' "$1" | sed 's/  seconds .*//'; }

echo "== 1. uninterrupted run"
(exec_clean "${SOLVER[@]}" >"$WORK/reference.out")
result_lines "$WORK/reference.out" | tail -n 1

echo "== 2. the same run, checkpointed while it computes"
exec_clean "${SOLVER[@]}" >"$WORK/run.out" &
PID=$!
# Waits for more than $1 progress lines, not for a fixed time.
lines() { grep -c iteration "$WORK/run.out" || true; }
wait_lines() {
  for _ in $(seq 600); do
    [ "$(lines)" -gt "$1" ] && return 0
    kill -0 "$PID" 2>/dev/null || { echo "   the solver ended before progress line $(($1 + 1))" >&2; exit 1; }
    sleep 0.1
  done
  echo "   no progress line $(($1 + 1)) from the solver after 60 s" >&2
  exit 1
}
wait_lines 0
echo "   $(lines) progress line(s) printed so far: full checkpoint"
$SUDO "$BIN/cr_full" --dir "$WORK/ckpt" --json "$PID" >"$WORK/full.json"
sed 's/^/   cr_full: /' "$WORK/full.json"
seen=$(lines)
wait_lines "$seen"
echo "   $(lines) progress line(s) printed so far: incremental checkpoint (the pages written since)"
$SUDO "$BIN/cr_incr" --dir "$WORK/ckpt" --json "$PID" >"$WORK/incr.json"
sed 's/^/   cr_incr: /' "$WORK/incr.json"
mib() { sed -n 's/.*"bytes_written":\([0-9]*\).*/\1/p' "$1" | awk '{ printf "%.1f", $1 / 1048576 }'; }
echo "   the full wrote $(mib "$WORK/full.json") MiB, the incremental $(mib "$WORK/incr.json") MiB:" \
  "only the vectors it rewrote since, not the matrix"
sleep 0.5
echo "== 3. kill -9 $PID"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
PID=""
"$BIN/cr_info" --dir "$WORK/ckpt" --verify | sed 's/^/   /'

echo "== 4. restore it (newest generation first, each page read once) and let it finish"
set +e
$SUDO "$BIN/cr_restart" --dir "$WORK/ckpt"
rc=$?
set -e
echo "   restored process exited with status $rc"
echo "   its output (same file, continued at the checkpointed offset):"
tail -n 3 "$WORK/run.out" | sed 's/^/     /'

echo "== result"
want=$(result_lines "$WORK/reference.out" | tail -n 1)
got=$(result_lines "$WORK/run.out" | tail -n 1)
echo "   uninterrupted: $want"
echo "   restored:      $got"
if [ "$rc" -eq 0 ] && [ "$want" = "$got" ] && cmp -s <(result_lines "$WORK/reference.out") <(result_lines "$WORK/run.out"); then
  echo "   MATCH: the restored run finished with exactly the uninterrupted result"
else
  echo "   MISMATCH"
  exit 1
fi
