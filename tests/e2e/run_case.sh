#!/usr/bin/env bash
# run_case.sh BIN_DIR CASE MODE: runs one end-to-end case (zdtm style).
#
# BIN_DIR holds the tools (cr_full, cr_restart, cr_info); the test programs are
# taken from $E2E_PROG_DIR (default BIN_DIR/e2e). Modes:
#   plain          run the program uninterrupted (checks the program itself);
#   restore        start, wait for ready, cr_full, kill -9 the original, reap
#                  it, cr_restart: the restored program must exit 0;
#   leave-running  start, wait for ready, cr_full: the original keeps running
#                  and must exit 0 by itself;
#   incremental    as restore, but after cr_full the program keeps running
#                  through two cr_incr (0.3 s apart) before the kill, and the
#                  restore reads the chain newest first;
#   compact        as incremental, then the chain is folded by cr_compact
#                  into one full generation, which is restored;
#   incremental-after-restore
#                  full + incremental, kill, restore (detached), one more
#                  incremental of the restored process, kill, restore: the
#                  chain continues across a restore;
#   new-chains     cr_full into two other directories first (chains A and B
#                  of the same live process), then the main chain as in
#                  incremental; then one more cr_incr of chain A, whose
#                  tracking the newer chains reset (it must say so and save
#                  everything), and the restore is of chain A;
#   sabotage-FLOW  FLOW (one of the above) with TEST_SABOTAGE=1: the program
#                  corrupts its own state, so it must exit 1 (proves the
#                  self-check can fail).
# Prints "PASS CASE MODE" or "FAIL CASE MODE: reason" (details on stderr).
# Exit status: 0 pass, 1 fail, 2 usage, 77 skip (only for a missing kernel
# feature). Set E2E_KEEP=1 to keep the temporary directory; E2E_TRACKER=NAME
# starts the chain with cr_full --tracker=NAME (default: auto);
# E2E_HEAP_ARGS="MIB STEPS" sizes heap_pattern (default 256 MiB, 200 steps);
# E2E_CKPT_ARGS adds options to cr_full and cr_incr (e.g. --compress).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

CASES=(heap_pattern heap_pattern_static cxx_containers fortran_jacobi
  deep_stack file_map_private fpu_vector sleeper sleeper_sleep blocked_read
  file_writer mt_compute omp_jacobi mt_blocking signal_state timers_limits seccomp_filter
  fd_regular fd_pipe fd_event fd_udp mem_advice pty_state fd_locks fd_async cwd_deleted fd_inotify)
usage() {
  echo "usage: $0 BIN_DIR CASE MODE" >&2
  echo "  CASE: ${CASES[*]}" >&2
  echo "  MODE: plain | restore | leave-running | sabotage-{plain,restore,leave-running}" >&2
  exit 2
}
(($# == 3)) || usage
BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
  echo "FAIL $2 $3: no directory $1"
  exit 1
}
CASE=$2
MODE=$3
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
READY_TIMEOUT=30 # seconds until the ready file must exist
TOOL_TIMEOUT=60  # seconds a tool may take
RUN_TIMEOUT=60   # seconds a program may run after ready

FLOW=$MODE
EXPECT=0
PROG_ENV=()
if [[ $MODE == sabotage-* ]]; then
  FLOW=${MODE#sabotage-}
  EXPECT=1
  PROG_ENV=(TEST_SABOTAGE=1)
fi
case $FLOW in plain | restore | leave-running | incremental | incremental-after-restore | compact | new-chains) ;; *) usage ;; esac
[[ " ${CASES[*]} " == *" $CASE "* ]] || usage

E2E_CASE="$CASE $MODE" # for pass, fail and skip (lib.sh)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-$CASE.XXXXXX")
install_traps
CKPT=$WORK/ckpt
LOGS=("$WORK/prog.err" "$WORK/cr_full.err" "$WORK/cr_incr.err" "$WORK/cr_info.out" "$WORK/cr_restart.err")

# The case table: program, its arguments after the ready file, and how it is fed.
PROG=$CASE
ARGS=()
STDIN_PIPE=0 # 1: stdin is a pipe the driver writes LINE into
LINE=""
REFERENCE=0 # 1: compare $WORK/out.txt with the output of an uninterrupted run
case $CASE in
  # E2E_HEAP_ARGS="MIB STEPS": a smaller heap_pattern (the qemu guest of tests/kernel).
  heap_pattern | heap_pattern_static) read -r -a ARGS <<<"${E2E_HEAP_ARGS:-}" ;;
  file_map_private) ARGS=("$WORK") ;;
  sleeper) ARGS=(nanosleep) ;;
  sleeper_sleep)
    PROG=sleeper
    ARGS=(sleep)
    ;;
  blocked_read)
    LINE="a line from the driver ($$ $RANDOM)"
    ARGS=("$LINE")
    STDIN_PIPE=1
    ;;
  file_writer | mt_compute | omp_jacobi)
    ARGS=("$WORK/out.txt")
    REFERENCE=1
    ;;
  fd_regular | fd_pipe | fd_locks | cwd_deleted | fd_inotify) ARGS=("$WORK") ;;
esac
[[ -x $PROG_DIR/$PROG ]] || fail "test program $PROG_DIR/$PROG not built"
[[ $FLOW == plain || -x $BIN_DIR/cr_full ]] || fail "$BIN_DIR/cr_full not built"
[[ $FLOW != restore || -x $BIN_DIR/cr_restart ]] || fail "$BIN_DIR/cr_restart not built"
[[ $FLOW != incremental* && $FLOW != new-chains || -x $BIN_DIR/cr_incr ]] || fail "$BIN_DIR/cr_incr not built"

# Runs cr_incr on $PID (must succeed).
incremental() {
  local rc=0
  timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_incr" --dir "$CKPT" ${E2E_CKPT_ARGS:-} "$PID" </dev/null \
    >"$WORK/cr_incr.out" 2>"$WORK/cr_incr.err" || rc=$?
  ((rc == 0)) || fail "cr_incr $(describe_status "$rc"): $(first_line "$WORK/cr_incr.err")"
}

# Starts the program in the background with no fds >= 3, sets PID (and FEED,
# the write end of its stdin, for STDIN_PIPE cases).
start_program() {
  local cmd=(env "${PROG_ENV[@]}" "$PROG_DIR/$PROG" "$WORK/ready" "${ARGS[@]}")
  # Flows of several checkpoints hold the programs that know E2E_HOLD_FILE
  # (heap_pattern, mt_compute, file_map_private, cxx_containers, fd_udp, mt_blocking,
  # signal_state) until they are done.
  if [[ $FLOW == incremental* || $FLOW == compact || $FLOW == new-chains ]]; then
    : >"$WORK/hold"
    cmd=(env "E2E_HOLD_FILE=$WORK/hold" "${cmd[@]:1}")
  fi
  if ((STDIN_PIPE)); then
    coproc PROGCO { close_fds && exec "${cmd[@]}" >"$WORK/prog.out" 2>"$WORK/prog.err"; }
    PID=$PROGCO_PID
    exec {FEED}>&"${PROGCO[1]}"
  else
    (close_fds && exec "${cmd[@]}" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
    PID=$!
  fi
  OWN_PIDS+=("$PID")
}

wait_ready() {
  local rc=0
  wait_file "$WORK/ready" "$PID" "$READY_TIMEOUT" || rc=$?
  if ((rc == 2)); then
    wait_exit "$PID" 5 || true
    fail "program ended ($(describe_status "$EXIT_STATUS")) before it was ready: $(first_line "$WORK/prog.err")"
  fi
  ((rc == 0)) || fail "program not ready after ${READY_TIMEOUT}s"
  READY_ID=$(<"$WORK/ready")
}

# Writes LINE into the program's stdin (STDIN_PIPE cases) and closes it.
feed() {
  if ((STDIN_PIPE)); then
    printf '%s\n' "$LINE" >&"$FEED"
    exec {FEED}>&-
  fi
}

CKPT_TIME=""
checkpoint() {
  local rc=0 t0=$EPOCHREALTIME
  timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_full" --dir "$CKPT" ${E2E_TRACKER:+"--tracker=$E2E_TRACKER"} ${E2E_CKPT_ARGS:-} "$PID" </dev/null \
    >"$WORK/cr_full.out" 2>"$WORK/cr_full.err" || rc=$?
  CKPT_TIME=$(elapsed "$t0")
  ((rc == 0)) || fail "cr_full $(describe_status "$rc"): $(first_line "$WORK/cr_full.err")"
  compgen -G "$CKPT/gen-*" >/dev/null || fail "cr_full succeeded but wrote no gen-* in $CKPT"
  if [[ -x $BIN_DIR/cr_info ]]; then
    rc=0
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_info" --dir "$CKPT" --verify </dev/null \
      >"$WORK/cr_info.out" 2>&1 || rc=$?
    ((rc == 0)) || fail "cr_info --verify of a fresh checkpoint $(describe_status "$rc")"
  fi
}

# After cr_full, the original must run on: not stopped, not traced.
check_released() {
  local st
  st=$(proc_state "$PID")
  [[ $st != T && $st != t ]] || fail "program left stopped (state $st) after cr_full"
  [[ $(tracer_of "$PID") == 0 ]] || fail "program still traced after cr_full"
}

# Checks the program's final status against EXPECT.
check_status() {
  local status=$1 who=$2
  if ((EXPECT == 0)); then
    ((status == 0)) || fail "$who $(describe_status "$status"): $(first_line "$WORK/prog.err")"
  else
    ((status == 1)) || fail "sabotaged $who $(describe_status "$status"), expected exit 1"
    is_one_line "$WORK/prog.err" || fail "sabotaged $who gave no one-line reason on stderr"
  fi
}

check_outputs() {
  if ((EXPECT == 0)); then
    # The program that finished must be the one that became ready.
    local last
    last=$(tail -n 1 "$WORK/prog.out")
    [[ $last == done* ]] || fail "the program never reported its end (no \"done\" line on stdout)"
    [[ $last == "done $READY_ID" ]] ||
      fail "the program that finished is not the one that was checkpointed (\"$last\", ready file said \"$READY_ID\")"
  fi
  if ((REFERENCE && EXPECT == 0)); then
    cmp -s "$WORK/out.txt" "$WORK/ref/out.txt" ||
      fail "out.txt differs from an uninterrupted run: $(cmp "$WORK/out.txt" "$WORK/ref/out.txt" 2>&1 | head -n 1)"
  fi
}

# An uninterrupted run first, for cases compared with a reference output.
if ((REFERENCE && EXPECT == 0)); then
  mkdir "$WORK/ref"
  rc=0
  (close_fds && exec timeout "$RUN_TIMEOUT" "$PROG_DIR/$PROG" "$WORK/ref/ready" "$WORK/ref/out.txt" \
    </dev/null >/dev/null 2>"$WORK/ref.err") || rc=$?
  ((rc == 0)) || fail "reference run $(describe_status "$rc"): $(first_line "$WORK/ref.err")"
fi

start_program
wait_ready
case $FLOW in
  plain)
    feed
    wait_exit "$PID" "$RUN_TIMEOUT" || fail "program still running after ${RUN_TIMEOUT}s"
    check_status "$EXIT_STATUS" program
    check_outputs
    pass
    ;;

  leave-running)
    checkpoint
    check_released
    feed
    wait_exit "$PID" "$RUN_TIMEOUT" || fail "program still running ${RUN_TIMEOUT}s after cr_full"
    check_status "$EXIT_STATUS" "program after cr_full"
    check_outputs
    pass "checkpoint ${CKPT_TIME}s"
    ;;

  restore | incremental | incremental-after-restore | compact | new-chains)
    if [[ $FLOW == new-chains ]]; then
      main_ckpt=$CKPT
      for other in a b; do
        CKPT=$WORK/ck-$other
        checkpoint
        check_released
      done
      CKPT=$main_ckpt
    fi
    checkpoint
    if [[ $FLOW == incremental* || $FLOW == compact || $FLOW == new-chains ]]; then
      rounds=2
      [[ $FLOW == incremental-after-restore ]] && rounds=1
      for ((i = 0; i < rounds; i++)); do
        sleep 0.3
        incremental
      done
    fi
    if [[ $FLOW == incremental-after-restore ]]; then
      { kill -9 "$PID" || true; } 2>/dev/null
      { wait_exit "$PID" 10; } 2>/dev/null || fail "original still there 10s after kill -9"
      rc=0
      timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$CKPT" --detach </dev/null \
        >"$WORK/cr_restart.out" 2>"$WORK/cr_restart.err" || rc=$?
      ((rc == 0)) || fail "cr_restart --detach $(describe_status "$rc"): $(first_line "$WORK/cr_restart.err")"
      [[ $(cat "$WORK/cr_restart.out") == "$PID" ]] || fail "restored under another PID"
      sleep 0.3
      incremental
      # The restored process is not our child: wait for its PID to be free.
      { kill -9 "$PID" || true; } 2>/dev/null
      for ((i = 0; i < 100; i++)); do [[ $(proc_state "$PID") == - ]] && break; sleep 0.05; done
      PID_NOT_CHILD=1
    fi
    if [[ $FLOW == new-chains ]]; then
      CKPT=$WORK/ck-a
      rc=0
      timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_incr" --dir "$CKPT" --json "$PID" </dev/null \
        >"$WORK/cr_incr.out" 2>"$WORK/cr_incr.err" || rc=$?
      ((rc == 0)) || fail "cr_incr of the oldest chain $(describe_status "$rc"): $(first_line "$WORK/cr_incr.err")"
      grep -q '"tracker_reset":"[^"]' "$WORK/cr_incr.out" || [[ ${E2E_TRACKER:-auto} == hash ]] ||
        fail "cr_incr of the oldest chain trusted tracking that newer chains reset: $(head -c 300 "$WORK/cr_incr.out")"
    fi
    rm -f "$WORK/hold" # checkpoints done: the restored program may end
    if [[ -z ${PID_NOT_CHILD:-} ]]; then
      # (Braces: bash would report the killed job on stderr.)
      { kill -9 "$PID" || true; } 2>/dev/null
      { wait_exit "$PID" 10; } 2>/dev/null || fail "original still there 10s after kill -9"
      [[ ! -e /proc/$PID ]] || fail "pid $PID still in use after the original was reaped"
    fi
    if ((STDIN_PIPE)); then exec {FEED}>&-; fi
    if [[ $FLOW == compact ]]; then
      rc=0
      "$BIN_DIR/cr_compact" --dir "$CKPT" >/dev/null 2>"$WORK/cr_compact.err" || rc=$?
      ((rc == 0)) || fail "cr_compact $(describe_status "$rc"): $(first_line "$WORK/cr_compact.err")"
      gens=$(find "$CKPT" -maxdepth 1 -name 'gen-*' | wc -l)
      ((gens == 1)) || fail "$gens generations left after cr_compact, expected one full"
      "$BIN_DIR/cr_info" --dir "$CKPT" --verify | grep -q "(full)" || fail "cr_compact left no full generation"
    fi

    # The restored process gets cr_restart's stdio for the stdio that was a
    # pipe; blocked_read's line arrives a second after the restore started,
    # so it is read by the restarted, blocked read().
    t0=$EPOCHREALTIME
    set +e
    if ((STDIN_PIPE)); then
      { sleep 1 && printf '%s\n' "$LINE"; } |
        timeout "$RUN_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$CKPT" \
          >"$WORK/cr_restart.out" 2>"$WORK/cr_restart.err"
      rc=${PIPESTATUS[1]}
    else
      timeout "$RUN_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null \
        >"$WORK/cr_restart.out" 2>"$WORK/cr_restart.err"
      rc=$?
    fi
    set -e
    ((rc != 124)) || fail "cr_restart still running after ${RUN_TIMEOUT}s"
    if ((rc != 0)) && [[ ! -s $WORK/prog.err ]]; then
      # No verdict from the program itself: a tool error, or it crashed.
      fail "cr_restart $(describe_status "$rc"): $(first_line "$WORK/cr_restart.err")"
    fi
    check_status "$rc" "restored program"
    check_outputs
    pass "checkpoint ${CKPT_TIME}s, restore+run $(elapsed "$t0")s"
    ;;
esac
