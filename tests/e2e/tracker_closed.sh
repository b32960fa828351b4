#!/usr/bin/env bash
# tracker_closed.sh BIN_DIR: a program that closes every descriptor above 2
# (close_range, as daemons and spawn helpers do) also closes the tracker's
# userfaultfd. The next cr_incr must say tracking was lost (tracker_reset
# names the closed descriptor) and save everything, and the chain must still
# restore to a program that passes its own byte-for-byte check. The close is
# made inside the running program by helpers/syscall_in (an injected
# close_range(3, ~0, 0)).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
BIN_DIR=$1
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
E2E_CASE="tracker_closed" # for pass, fail and skip (lib.sh)
if ! "$BIN_DIR/cr_check" --json | grep -q '"pagemap-scan":{"detail":"[^"]*","ok":true'; then
  echo "SKIP tracker_closed: this kernel cannot run the pagemap-scan tracker (see cr_check)"
  exit 77
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-tracker-closed.XXXXXX")
install_traps
CKPT=$WORK/ckpt
(close_fds && exec "$PROG_DIR/heap_pattern" "$WORK/ready" 64 1500 </dev/null >"$WORK/prog.out" \
  2>"$WORK/prog.err") &
PID=$!
OWN_PIDS+=("$PID")
wait_file "$WORK/ready" "$PID" 60 || fail "target did not become ready"
"$BIN_DIR/cr_full" --tracker pagemap-scan --dir "$CKPT" "$PID" >/dev/null 2>"$WORK/tool.err" ||
  fail "cr_full: $(first_line "$WORK/tool.err")"
[[ -e /proc/$PID/fd/1000 ]] || fail "no tracker descriptor at fd 1000 after cr_full"
"$PROG_DIR/syscall_in" "$PID" 436 3 0xffffffff 0 >"$WORK/inject.out" 2>&1 ||
  fail "syscall_in: $(first_line "$WORK/inject.out")"
[[ $(cat "$WORK/inject.out") == 0 ]] || fail "close_range in the program returned $(cat "$WORK/inject.out")"
[[ ! -e /proc/$PID/fd/1000 ]] || fail "the program still holds fd 1000 after close_range"
"$BIN_DIR/cr_incr" --json --dir "$CKPT" "$PID" >"$WORK/incr.json" 2>"$WORK/tool.err" ||
  fail "cr_incr: $(first_line "$WORK/tool.err")"
grep -q '"tracker_reset":"[^"]*gone from the target' "$WORK/incr.json" ||
  fail "cr_incr did not report the lost tracking: $(cat "$WORK/incr.json")"
"$BIN_DIR/cr_incr" --kill --json --dir "$CKPT" "$PID" >"$WORK/incr2.json" 2>"$WORK/tool.err" ||
  fail "second cr_incr: $(first_line "$WORK/tool.err")"
grep -q '"tracker_reset":""' "$WORK/incr2.json" ||
  fail "tracking did not resume after the reset: $(cat "$WORK/incr2.json")"
{ wait "$PID"; } 2>/dev/null || true
rc=0
timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >/dev/null 2>"$WORK/restart.err" || rc=$?
((rc == 0)) || fail "restored program: $(describe_status $rc): $(first_line "$WORK/restart.err")"
echo "PASS tracker_closed"
