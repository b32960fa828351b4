#!/usr/bin/env bash
# pty_index.sh BIN_DIR: a restored pty keeps its number (/dev/pts/N: what
# `tty` printed, what a program stored) where it is free, even when lower
# numbers are free too (the kernel hands out the lowest). A holder takes two
# ptys, programs/pty_state takes the next two; cr_full --kill; the holder
# lets its ptys go; cr_restart: pty_state checks that its descriptors name
# the same ptys as before, and exits 0.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
BIN_DIR=$1
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
E2E_CASE="pty_index"
command -v python3 >/dev/null || skip "no python3 to hold ptys"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-pty-index.XXXXXX")
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err")
(close_fds && exec python3 -c "
import os, pty, sys, time
held = [pty.openpty() for _ in range(2)]
print(' '.join(os.ttyname(s) for _, s in held), flush=True)
while not os.path.exists(sys.argv[1]): time.sleep(0.02)
" "$WORK/release" </dev/null >"$WORK/holder.out" 2>&1) &
HOLDER=$!
OWN_PIDS+=("$HOLDER")
for _ in $(seq 200); do [[ -s $WORK/holder.out ]] && break; sleep 0.05; done
[[ -s $WORK/holder.out ]] || fail "the holder took no ptys"
(close_fds && exec "$PROG_DIR/pty_state" "$WORK/ready" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
PID=$!
OWN_PIDS+=("$PID")
wait_file "$WORK/ready" "$PID" 30 || fail "pty_state did not become ready"
ptys=$(ls -l /proc/"$PID"/fd | grep -o '/dev/pts/[0-9]*' | tr '\n' ' ')
"$BIN_DIR/cr_full" --kill --dir "$WORK/ck" "$PID" >/dev/null 2>"$WORK/tool.err" ||
  fail "cr_full: $(first_line "$WORK/tool.err")"
{ wait "$PID"; } 2>/dev/null || true
touch "$WORK/release"
wait_exit "$HOLDER" 10 || fail "the holder did not let its ptys go"
rc=0
timeout 60 "$BIN_DIR/cr_restart" --dir "$WORK/ck" </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
((rc == 0)) || fail "restored pty_state $(describe_status $rc): $(first_line "$WORK/prog.err") $(first_line "$WORK/tool.err")"
pass "$ptys kept, the holder's $(cat "$WORK/holder.out") free below them"
