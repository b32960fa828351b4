#!/usr/bin/env bash
# live.sh BIN_DIR TRACKER MODE: cr_full --live / cr_incr --live (issue 14).
#   restore        heap_pattern keeps rewriting its memory while cr_full --live
#                  and two cr_incr --live run (the second with --kill); the
#                  chain is restored and the program checks every byte it
#                  wrote (exit 0). Its 512 chunks outnumber the steps left
#                  after the checkpoint, so most chunks are checked as the
#                  image brought them back, not as rewritten after.
#   process-exits  the target ends during the pre-copy: cr_full --live fails
#                  with a one-line cause and no generation becomes visible.
#   tool-killed    cr_full --live killed with SIGKILL during the pre-copy (at
#                  several instants): the target keeps running, untraced, no
#                  generation appears; then a cr_full --live succeeds and its
#                  restore passes the program's own check.
# The tool is preloaded with slow_precopy.so (CKPT_PRELOAD_PRECOPY_SLEEP):
# it waits before a pre-copy round's copy while the target runs, so the test
# can end one or the other in that window. Nothing of this is in the library.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

BIN_DIR=$1
TRACKER=$2
MODE=$3
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
SLOW=$PROG_DIR/slow_precopy.so
fail() {
  echo "FAIL live $TRACKER $MODE: $*"
  exit 1
}
if [[ $TRACKER != hash ]] &&
  ! "$BIN_DIR/cr_check" --json | grep -q "\"$TRACKER\":{\"detail\":\"[^\"]*\",\"ok\":true"; then
  echo "SKIP live $TRACKER: this kernel cannot run the $TRACKER tracker (see cr_check)"
  exit 77
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-live.XXXXXX")
install_traps
CKPT=$WORK/ckpt

start_target() { # MIB STEPS
  rm -f "$WORK/ready"
  (close_fds && exec "$PROG_DIR/heap_pattern" "$WORK/ready" "$1" "$2" </dev/null \
    >"$WORK/prog.out" 2>"$WORK/prog.err") &
  PID=$!
  OWN_PIDS+=("$PID")
  wait_file "$WORK/ready" "$PID" 60 || fail "target did not become ready"
}
gens() { ls "$CKPT" 2>/dev/null | grep '^gen-' || true; }
restore_and_check() {
  { kill -9 "$PID" && wait "$PID"; } 2>/dev/null || true
  local rc=0
  timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/restart.out" \
    2>"$WORK/restart.err" || rc=$?
  ((rc == 0)) || fail "restored program: $(describe_status $rc): $(first_line "$WORK/restart.err")"
}
json_field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1"; }

case $MODE in
restore)
  start_target 512 700
  "$BIN_DIR/cr_full" --live --json --dir "$CKPT" --tracker "$TRACKER" "$PID" >"$WORK/full.json" \
    2>"$WORK/tool.err" || fail "cr_full --live: $(first_line "$WORK/tool.err")"
  rounds=$(json_field "$WORK/full.json" live_rounds)
  if [[ $TRACKER != hash ]]; then
    ((rounds >= 1)) || fail "cr_full --live ran no pre-copy round: $(cat "$WORK/full.json")"
  fi
  for kill in "" --kill; do
    sleep 0.3
    "$BIN_DIR/cr_incr" --live $kill --json --dir "$CKPT" "$PID" >"$WORK/incr.json" \
      2>"$WORK/tool.err" || fail "cr_incr --live $kill: $(first_line "$WORK/tool.err")"
  done
  "$BIN_DIR/cr_info" --dir "$CKPT" --verify >/dev/null 2>"$WORK/info.err" ||
    fail "cr_info --verify: $(first_line "$WORK/info.err")"
  [[ $(gens | wc -l) == 3 ]] || fail "expected 3 generations, found: $(gens)"
  restore_and_check
  ;;
process-exits)
  start_target 256 1500
  LD_PRELOAD=$SLOW CKPT_PRELOAD_PRECOPY_SLEEP=1.5 "$BIN_DIR/cr_full" --live --dir "$CKPT" --tracker "$TRACKER" \
    "$PID" >/dev/null 2>"$WORK/tool.err" &
  tool=$!
  sleep 1
  kill -TERM "$PID"
  rc=0
  wait "$tool" || rc=$?
  ((rc != 0)) || fail "cr_full --live succeeded although the process ended during the pre-copy"
  is_one_line "$WORK/tool.err" || fail "expected a one-line cause, got: $(cat "$WORK/tool.err")"
  [[ -z $(gens) ]] || fail "a generation became visible: $(gens)"
  [[ -z $(ls -A "$CKPT" 2>/dev/null | grep -v '^replaced-' || true) ]] ||
    fail "files left in the checkpoint directory: $(ls -A "$CKPT")"
  ;;
tool-killed)
  start_target 256 3000
  kills=0
  # (Not earlier: a kill inside the tracker's arm, between the injected
  # userfaultfd() and its dup3 to fd 1000, leaves the new fd at a low number,
  # as with a plain cr_full: see the report of issue 14.)
  for delay in 0.3 0.6 0.9 1.4; do
    LD_PRELOAD=$SLOW CKPT_PRELOAD_PRECOPY_SLEEP=0.5 "$BIN_DIR/cr_full" --live --dir "$CKPT" --tracker "$TRACKER" \
      "$PID" >/dev/null 2>&1 &
    tool=$!
    sleep "$delay"
    if kill -9 "$tool" 2>/dev/null; then kills=$((kills + 1)); fi
    { wait "$tool"; } 2>/dev/null || true
    st=$(proc_state "$PID")
    [[ $st != - && $st != Z ]] || fail "target gone after killing cr_full --live at ${delay}s"
    [[ $st != t && $st != T ]] || fail "target left stopped after a kill at ${delay}s"
    [[ $(tracer_of "$PID") == 0 ]] || fail "target still traced after a kill at ${delay}s"
    [[ -z $(gens) ]] || fail "a generation became visible after a kill at ${delay}s: $(gens)"
  done
  ((kills > 0)) || fail "cr_full --live always finished before it could be killed"
  "$BIN_DIR/cr_full" --live --dir "$CKPT" --tracker "$TRACKER" "$PID" >/dev/null \
    2>"$WORK/tool.err" || fail "cr_full --live after the kills: $(first_line "$WORK/tool.err")"
  restore_and_check
  ;;
*) fail "unknown mode" ;;
esac
echo "PASS live $TRACKER $MODE"
