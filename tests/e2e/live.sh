#!/usr/bin/env bash
# live.sh BIN_DIR TRACKER MODE: cr_full --live / cr_incr --live (issue 14).
#   restore        heap_pattern keeps rewriting its memory while cr_full --live
#                  and two cr_incr --live run (the second with --kill); the
#                  chain is restored and the program checks every byte it
#                  wrote (exit 0). Its 512 chunks outnumber the steps left
#                  after the checkpoint, so most chunks are checked as the
#                  image brought them back, not as rewritten after.
#   restore-compressed  the same with --compress on every tool and pages
#                  that compress (E2E_COMPRESSIBLE=1): pre-copy rounds cut
#                  frames written by earlier rounds; the full must come out
#                  smaller than half the memory.
#   process-exits  the target ends during the pre-copy: cr_full --live fails
#                  with a one-line cause and no generation becomes visible.
#   tool-killed    cr_full --live killed with SIGKILL during the pre-copy (at
#                  three points of it): the target keeps running, untraced, no
#                  generation appears; then a cr_full --live succeeds and its
#                  restore passes the program's own check.
# The tool is preloaded with slow_precopy.so: it marks each pre-copy copy
# made while the target runs and holds in the chosen one, so the test ends
# one or the other in that window, however fast the machine. Nothing of
# this is in the library.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

BIN_DIR=$1
TRACKER=$2
MODE=$3
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
SLOW=$PROG_DIR/slow_precopy.so
E2E_CASE="live $TRACKER $MODE" # for pass, fail and skip (lib.sh)
if [[ $TRACKER != hash ]] &&
  ! "$BIN_DIR/cr_check" --json | grep -q "\"$TRACKER\":{\"detail\":\"[^\"]*\",\"ok\":true"; then
  echo "SKIP live $TRACKER: this kernel cannot run the $TRACKER tracker (see cr_check)"
  exit 77
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-live.XXXXXX")
install_traps
CKPT=$WORK/ckpt

# The program does not end while $WORK/hold exists (E2E_HOLD_FILE): on a
# slow or loaded machine its steps may all be done before the tools are.
start_target() { # MIB STEPS
  rm -f "$WORK/ready"
  touch "$WORK/hold"
  (close_fds && E2E_HOLD_FILE=$WORK/hold exec "$PROG_DIR/heap_pattern" "$WORK/ready" "$1" "$2" </dev/null \
    >"$WORK/prog.out" 2>"$WORK/prog.err") &
  PID=$!
  OWN_PIDS+=("$PID")
  wait_file "$WORK/ready" "$PID" 60 || fail "target did not become ready"
}
gens() { ls "$CKPT" 2>/dev/null | grep '^gen-' || true; }
restore_and_check() {
  { kill -9 "$PID" && wait "$PID"; } 2>/dev/null || true
  rm -f "$WORK/hold" # the restored program finishes its steps and checks
  local rc=0
  timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/restart.out" \
    2>"$WORK/restart.err" || rc=$?
  ((rc == 0)) || fail "restored program: $(describe_status $rc): $(first_line "$WORK/restart.err")"
}
# hold_tool N: starts cr_full --live (tool=PID) and waits until it is held
# in its Nth pre-copy window (slow_precopy.so); false if it ended before
# reaching it (then it succeeded, or the test fails).
hold_tool() {
  MARKS=$WORK/marks.$1
  mkdir -p "$MARKS"
  LD_PRELOAD=$SLOW CKPT_PRELOAD_PRECOPY_SLEEP=0.05 CKPT_PRELOAD_PRECOPY_MARK=$MARKS \
    CKPT_PRELOAD_PRECOPY_HOLD=$1 "$BIN_DIR/cr_full" --live --dir "$CKPT" --tracker "$TRACKER" \
    "$PID" >/dev/null 2>"$WORK/tool.err" &
  tool=$!
  OWN_PIDS+=("$tool")
  local rc=0
  wait_file "$MARKS/window-$1" "$tool" 120 || rc=$?
  ((rc != 1)) || fail "cr_full --live did not reach pre-copy window $1 in 120 s"
  ((rc == 0)) && return 0
  rc=0
  wait "$tool" || rc=$?
  ((rc == 0)) || fail "cr_full --live before window $1: $(describe_status $rc): $(first_line "$WORK/tool.err")"
  return 1
}
json_field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1"; }

case $MODE in
restore | restore-compressed)
  extra=()
  if [[ $MODE == restore-compressed ]]; then
    extra=(--compress)
    export E2E_COMPRESSIBLE=1
  fi
  start_target 512 700
  "$BIN_DIR/cr_full" --live "${extra[@]}" --json --dir "$CKPT" --tracker "$TRACKER" "$PID" \
    >"$WORK/full.json" 2>"$WORK/tool.err" || fail "cr_full --live: $(first_line "$WORK/tool.err")"
  rounds=$(json_field "$WORK/full.json" live_rounds)
  if [[ $TRACKER != hash ]]; then
    ((rounds >= 1)) || fail "cr_full --live ran no pre-copy round: $(cat "$WORK/full.json")"
  fi
  for kill in "" --kill; do
    sleep 0.3
    "$BIN_DIR/cr_incr" --live $kill "${extra[@]}" --json --dir "$CKPT" "$PID" >"$WORK/incr.json" \
      2>"$WORK/tool.err" || fail "cr_incr --live $kill: $(first_line "$WORK/tool.err")"
  done
  if ((${#extra[@]})); then
    size=$(stat -c %s "$CKPT/gen-000001/pages.img")
    ((size < 256 << 20)) || fail "the compressed full holds $((size >> 20)) MiB for 512 MiB"
    echo "compressed full: $((size >> 20)) MiB of page content for 512 MiB"
  fi
  "$BIN_DIR/cr_info" --dir "$CKPT" --verify >/dev/null 2>"$WORK/info.err" ||
    fail "cr_info --verify: $(first_line "$WORK/info.err")"
  [[ $(gens | wc -l) == 3 ]] || fail "expected 3 generations, found: $(gens)"
  restore_and_check
  ;;
process-exits)
  start_target 256 1500
  hold_tool 1 || fail "cr_full --live finished without a pre-copy round"
  kill -TERM "$PID"
  touch "$MARKS/release"
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
  # Killed in the 1st, 4th and 8th delayed pre-copy read (a window at most
  # every 0.05 s: the first round's, then later in it or in later rounds); a
  # tool that finishes before it gets there succeeds, and its generation is
  # set aside.
  kills=0
  for n in 1 4 8; do
    if ! hold_tool "$n"; then
      rm -rf "$CKPT"
      continue
    fi
    kill -9 "$tool"
    kills=$((kills + 1))
    { wait "$tool"; } 2>/dev/null || true
    st=$(proc_state "$PID")
    [[ $st != - && $st != Z ]] || fail "target gone after killing cr_full --live in pre-copy window $n"
    [[ $st != t && $st != T ]] || fail "target left stopped after a kill in pre-copy window $n"
    [[ $(tracer_of "$PID") == 0 ]] || fail "target still traced after a kill in pre-copy window $n"
    [[ -z $(gens) ]] || fail "a generation became visible after a kill in pre-copy window $n: $(gens)"
  done
  ((kills > 0)) || fail "cr_full --live made no pre-copy round to be killed in"
  echo "killed in $kills of 3 pre-copy windows"
  "$BIN_DIR/cr_full" --live --dir "$CKPT" --tracker "$TRACKER" "$PID" >/dev/null \
    2>"$WORK/tool.err" || fail "cr_full --live after the kills: $(first_line "$WORK/tool.err")"
  restore_and_check
  ;;
*) fail "unknown mode" ;;
esac
echo "PASS live $TRACKER $MODE"
