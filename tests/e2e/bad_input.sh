#!/usr/bin/env bash
# bad_input.sh BIN_DIR TEST|all: the tools must refuse bad input cleanly.
#
# Each test asserts that the tool fails with a non-zero status and exactly one
# line on stderr, and, where there is a target, that the target is left
# running, neither stopped nor traced, and later exits 0 by itself (its memory
# is a self-checking pattern: heap_pattern), and that no gen-* directory
# appears. Restore tests corrupt a copy of a good checkpoint: cr_restart must
# refuse it and start no process, cr_info --verify (if built) must fail, and
# the untouched copy must still restore (so the refusal was for the right
# reason).
#
# Needs root (mount, setpriv to nobody); CI runs as root. The test programs are
# taken from $E2E_PROG_DIR (default BIN_DIR/e2e).
# Prints "PASS bad_input TEST" or "FAIL bad_input TEST: reason". Exit status:
# 0 pass, 1 fail, 2 usage, 77 skip (only for a missing kernel feature).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTS=(no-such-pid has-children not-traceable debugged readonly-dir private-dir disk-full scratch-limit corrupt-pages corrupt-addr
  corrupt-meta corrupt-header truncated-pages restart-missing pid-taken usage-errors)
usage() {
  echo "usage: $0 BIN_DIR TEST|all" >&2
  echo "  TEST: ${TESTS[*]}" >&2
  exit 2
}
(($# == 2)) || usage
BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
  echo "FAIL bad_input $2: no directory $1"
  exit 1
}
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
TOOL_TIMEOUT=60
NOBODY=65534

if ((EUID != 0)); then
  echo "note: bad_input tests need root (mount, setpriv); running as uid $EUID, expect failures" >&2
fi

if [[ $TEST == all ]]; then
  failed=0
  for t in "${TESTS[@]}"; do
    rc=0
    bash "$0" "$BIN_DIR" "$t" || rc=$?
    ((rc == 0 || rc == 77)) || failed=1
  done
  exit "$failed"
fi
[[ " ${TESTS[*]} " == *" $TEST "* ]] || usage

E2E_CASE="bad_input $TEST" # for pass, fail and skip (lib.sh)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bad-$TEST.XXXXXX")
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err")

AS_NOBODY=(setpriv "--reuid=$NOBODY" "--regid=$NOBODY" --clear-groups)

# nobody_copy PATH: prints the path of a copy of the program PATH that user
# nobody can execute: the build tree may sit under a directory only root can
# enter (a CI clone in a 0700 directory, say).
nobody_copy() {
  mkdir -p -m 755 "$WORK/nobody-bin"
  cp "$1" "$WORK/nobody-bin/"
  chmod 755 "$WORK/nobody-bin/${1##*/}"
  echo "$WORK/nobody-bin/${1##*/}"
}

# start_target [--nobody] MIB STEPS: starts heap_pattern (MIB of pattern, then
# STEPS steps of 10 ms) with its ready file in READY_DIR and TARGET_ENV in its
# environment, waits until it is ready and sets TPID.
READY_DIR=$WORK
TARGET_ENV=()
start_target() {
  local wrap=() prog=$PROG_DIR/heap_pattern
  [[ -x $prog ]] || fail "test program $prog not built"
  if [[ $1 == --nobody ]]; then
    wrap=("${AS_NOBODY[@]}")
    prog=$(nobody_copy "$prog")
    shift
  fi
  local cmd=("${wrap[@]}" env "${TARGET_ENV[@]}" "$prog" "$READY_DIR/ready" "$1" "$2")
  (close_fds && exec "${cmd[@]}" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  local rc=0
  wait_file "$READY_DIR/ready" "$TPID" 30 || rc=$?
  ((rc == 0)) || fail "target did not become ready: $(first_line "$WORK/prog.err")"
}

# tool CMD...: runs a tool (bounded), stdout and stderr to $WORK/tool.out and
# $WORK/tool.err; sets TOOL_RC.
tool() {
  TOOL_RC=0
  timeout "$TOOL_TIMEOUT" "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
}

# expect_refusal WHAT: the last tool run failed cleanly: non-zero, not a crash
# or a timeout, exactly one line on stderr.
expect_refusal() {
  ((TOOL_RC != 0)) || fail "$1 succeeded"
  ((TOOL_RC < 124)) || fail "$1 $(describe_status "$TOOL_RC") (crash, timeout or not runnable)"
  is_one_line "$WORK/tool.err" ||
    fail "$1 failed ($TOOL_RC) without exactly one line on stderr ($(wc -l <"$WORK/tool.err") lines)"
  echo "  $1 -> $(first_line "$WORK/tool.err")"
}

# expect_no_generation DIR: no gen-* became visible in DIR (a missing DIR is fine).
expect_no_generation() {
  if compgen -G "$1/gen-*" >/dev/null; then fail "a gen-* directory appeared in $1"; fi
  local left
  left=$(find "$1" -mindepth 1 -maxdepth 1 -printf "%f " 2>/dev/null) || true
  [[ -z $left ]] || echo "  note: left behind in ${1#"$WORK"/}: $left"
}

# expect_target_running: the target is alive, neither stopped nor traced.
expect_target_running() {
  local st
  st=$(proc_state "$TPID")
  [[ $st != - && $st != Z ]] || fail "target is gone after the refusal"
  [[ $st != T && $st != t ]] || fail "target left stopped (state $st)"
  [[ $(tracer_of "$TPID") == 0 ]] || fail "target left traced by $(tracer_of "$TPID")"
}

# expect_target_ok: the target finishes by itself and its self-check passes.
expect_target_ok() {
  wait_exit "$TPID" 30 || fail "target still running 30s later"
  ((EXIT_STATUS == 0)) ||
    fail "target $(describe_status "$EXIT_STATUS") after the refusal: $(first_line "$WORK/prog.err")"
}

need_tmpfs() {
  grep -qw tmpfs /proc/filesystems || skip "kernel has no tmpfs"
}

# mount_tmpfs DIR OPTIONS: a tmpfs at DIR (unmounted on exit).
mount_tmpfs() {
  mkdir -p "$1"
  mount -t tmpfs -o "$2" tmpfs "$1" 2>"$WORK/tool.err" ||
    fail "cannot mount a tmpfs ($2): $(first_line "$WORK/tool.err")"
  MOUNTS+=("$1")
}

# flip_byte FILE OFFSET: inverts the byte at OFFSET.
flip_byte() {
  local b
  b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  [[ -n $b ]] || fail "cannot read byte $2 of $1"
  # shellcheck disable=SC2059 # the format is the escaped byte
  printf "$(printf '\\%03o' $((b ^ 0xff)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# A good checkpoint of a target that was then killed: GOOD (the directory),
# GEN (its generation directory) and DEAD_PID (the target's former PID).
make_good_checkpoint() {
  [[ -x $BIN_DIR/cr_restart ]] || fail "$BIN_DIR/cr_restart not built"
  start_target 8 150
  GOOD=$WORK/good
  tool "$BIN_DIR/cr_full" --dir "$GOOD" "$TPID"
  ((TOOL_RC == 0)) || fail "cr_full of the target failed: $(first_line "$WORK/tool.err")"
  { kill -9 "$TPID" || true; } 2>/dev/null
  { wait_exit "$TPID" 10; } 2>/dev/null || fail "target still there after kill -9"
  DEAD_PID=$TPID
  GEN=$(compgen -G "$GOOD/gen-*" | sort | tail -n 1)
  [[ -n $GEN ]] || fail "cr_full wrote no gen-* directory"
}

# expect_restore_refused DIR: cr_info --verify and cr_restart refuse DIR, and
# no process was started; then the good copy still verifies and restores.
expect_restore_refused() {
  local bad=$1
  if [[ -x $BIN_DIR/cr_info ]]; then
    tool "$BIN_DIR/cr_info" --dir "$bad" --verify
    ((TOOL_RC != 0)) || fail "cr_info --verify accepted the damaged image"
    ((TOOL_RC < 124)) || fail "cr_info --verify $(describe_status "$TOOL_RC")"
    echo "  cr_info --verify -> $(first_line "$WORK/tool.err")"
  fi
  tool "$BIN_DIR/cr_restart" --dir "$bad"
  expect_refusal "cr_restart of the damaged image"
  # The restored program would have the old PID, and would write its verdict
  # (or a failure) to prog.err, reopened by path: neither may happen.
  # (Another process may have been given the number meanwhile: pid_max is
  # small here and the suite starts thousands. What must not exist is our
  # program under it.)
  [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$DEAD_PID/cmdline") != *heap_pattern* ]] ||
    fail "a process with the checkpointed PID $DEAD_PID runs the program"
  [[ ! -s $WORK/prog.err ]] || fail "the program ran from the damaged image: $(first_line "$WORK/prog.err")"

  if [[ -x $BIN_DIR/cr_info ]]; then
    tool "$BIN_DIR/cr_info" --dir "$GOOD" --verify
    ((TOOL_RC == 0)) || fail "control: cr_info --verify of the intact copy failed: $(first_line "$WORK/tool.err")"
  fi
  tool "$BIN_DIR/cr_restart" --dir "$GOOD"
  ((TOOL_RC == 0)) ||
    fail "control: restore of the intact copy $(describe_status "$TOOL_RC"): $(first_line "$WORK/tool.err") $(first_line "$WORK/prog.err")"
}

# corrupt_copy: a copy of the good checkpoint to damage; sets BAD_GEN.
corrupt_copy() {
  cp -a "$GOOD" "$WORK/bad"
  BAD_GEN=$WORK/bad/${GEN##*/}
}

# offset_in_data FILE HEADER_SIZE: the middle of FILE's data after its header.
offset_in_data() {
  local size
  size=$(stat -c %s "$1")
  ((size > $2)) || fail "$1 has no data after its $2-byte header"
  echo $(($2 + (size - $2) / 2))
}

case $TEST in
  usage-errors)
    # Every tool: an unknown option, a missing required one, a bad value:
    # status 2 and one line on stderr that names the tool.
    for t in cr_full cr_incr cr_compact cr_untrack cr_restart cr_info cr_check cr_recv cr_migrate \
      cr_noded cr_job cr_pause cr_run cr_plan; do
      for args in "--no-such-option" "" "--dir"; do
        [[ $t == cr_check && -z $args ]] && continue # needs nothing
        [[ $t == cr_check && $args == --dir ]] && continue
        # shellcheck disable=SC2086 # the words of args on purpose
        tool "$BIN_DIR/$t" $args
        expect_refusal "$t ${args:-(no arguments)}"
        ((TOOL_RC == 2)) || fail "$t ${args:-(no arguments)}: status $TOOL_RC, not 2 (a usage error)"
        [[ $(first_line "$WORK/tool.err") == "$t: "* ]] || fail "$t ${args:-(no arguments)}: the line does not name the tool"
      done
    done
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" --adaptive maybe 1
    expect_refusal "cr_full --adaptive maybe"
    ((TOOL_RC == 2)) || fail "cr_full --adaptive maybe: status $TOOL_RC, not 2"
    pass "every tool's usage error is one line naming it, status 2"
    ;;
  no-such-pid)
    start_target 16 200 # a bystander: nothing may happen to it either
    sleep 0 &
    dead=$!
    wait "$dead"
    [[ ! -e /proc/$dead ]] || fail "could not find a free PID"
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$dead"
    expect_refusal "cr_full of missing PID $dead"
    expect_no_generation "$WORK/ck"
    expect_target_running
    expect_target_ok
    ;;

  has-children)
    # A process with a child: the child would be lost, so it is refused.
    (close_fds && exec bash -c 'sleep 30 & wait' </dev/null >/dev/null 2>&1) &
    TPID=$!
    OWN_PIDS+=("$TPID")
    for ((i = 0; i < 100; i++)); do
      [[ -n $(cat /proc/$TPID/task/*/children 2>/dev/null) ]] && break
      sleep 0.05
    done
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
    expect_refusal "cr_full of a process with a child"
    grep -q "has child process .* (sleep): checkpoint the whole tree with --tree" "$WORK/tool.err" ||
      fail "refused for another reason: $(first_line "$WORK/tool.err")"
    expect_no_generation "$WORK/ck"
    [[ $(proc_state "$TPID") == S ]] || fail "target not running after the refusal"
    [[ $(tracer_of "$TPID") == 0 ]] || fail "target still traced after the refusal"
    ;;

  not-traceable)
    # A root-owned target; cr_full as nobody into a directory nobody owns.
    chmod 755 "$WORK"
    mkdir "$WORK/ck"
    chown $NOBODY:$NOBODY "$WORK/ck"
    start_target 16 200
    tool "${AS_NOBODY[@]}" "$(nobody_copy "$BIN_DIR/cr_full")" --dir "$WORK/ck" "$TPID"
    expect_refusal "cr_full as nobody of a root process"
    grep -q "cannot trace PID $TPID" "$WORK/tool.err" ||
      fail "refused for another reason: $(first_line "$WORK/tool.err")"
    expect_no_generation "$WORK/ck"
    expect_target_running
    expect_target_ok
    ;;

  debugged)
    # gdb holds the target (attached, stopped, until WORK/hold goes): one
    # line naming gdb; once gdb lets go, the target runs on and finishes.
    command -v gdb >/dev/null || skip "gdb is not installed"
    start_target 16 200
    : >"$WORK/hold"
    (close_fds && exec gdb -q -nx -batch -p "$TPID" -ex "shell while [ -e $WORK/hold ]; do sleep 0.1; done" \
      </dev/null >"$WORK/gdb.out" 2>&1) &
    GDB=$!
    OWN_PIDS+=("$GDB")
    for ((i = 0; i < 200; i++)); do
      [[ $(tracer_of "$TPID") == "$GDB" ]] && break
      sleep 0.05
    done
    [[ $(tracer_of "$TPID") == "$GDB" ]] || fail "gdb did not attach: $(first_line "$WORK/gdb.out")"
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
    expect_refusal "cr_full of a process gdb holds"
    grep -q "PID $TPID is traced by PID $GDB (gdb)" "$WORK/tool.err" ||
      fail "refused for another reason: $(first_line "$WORK/tool.err")"
    expect_no_generation "$WORK/ck"
    rm "$WORK/hold"
    wait_exit "$GDB" 30 || fail "gdb did not detach"
    expect_target_running
    expect_target_ok
    ;;

  readonly-dir)
    need_tmpfs
    mount_tmpfs "$WORK/ro" ro,size=1m
    start_target 16 200
    tool "$BIN_DIR/cr_full" --dir "$WORK/ro" "$TPID"
    expect_refusal "cr_full into a read-only directory"
    expect_target_running
    tool "$BIN_DIR/cr_full" --dir "$WORK/ro/sub" "$TPID"
    expect_refusal "cr_full into a new directory on a read-only file system"
    expect_no_generation "$WORK/ro"
    expect_target_running
    expect_target_ok
    ;;

  private-dir)
    # A target owned by nobody, so nobody may trace it; the directory is
    # root's and 0700. The control checkpoint into nobody's own directory
    # proves the refusal was for the directory, not for ptrace.
    chmod 755 "$WORK"
    mkdir "$WORK/nobody"
    chown $NOBODY:$NOBODY "$WORK/nobody"
    mkdir -m 700 "$WORK/private"
    READY_DIR=$WORK/nobody
    start_target --nobody 16 300
    cr_full=$(nobody_copy "$BIN_DIR/cr_full")
    tool "${AS_NOBODY[@]}" "$cr_full" --dir "$WORK/private" "$TPID"
    expect_refusal "cr_full as nobody into root's 0700 directory"
    grep -q "Permission denied" "$WORK/tool.err" ||
      fail "refused for another reason: $(first_line "$WORK/tool.err")"
    expect_target_running
    tool "${AS_NOBODY[@]}" "$cr_full" --dir "$WORK/private/sub" "$TPID"
    expect_refusal "cr_full as nobody creating a directory inside root's 0700 directory"
    expect_no_generation "$WORK/private"
    expect_target_running
    tool "${AS_NOBODY[@]}" "$cr_full" --dir "$WORK/nobody/ck" "$TPID"
    ((TOOL_RC == 0)) ||
      fail "control: nobody cannot checkpoint its own process: $(first_line "$WORK/tool.err")"
    expect_target_running
    expect_target_ok
    ;;

  disk-full)
    need_tmpfs
    mount_tmpfs "$WORK/full" size=4m
    start_target 32 300
    tool "$BIN_DIR/cr_full" --dir "$WORK/full" "$TPID"
    expect_refusal "cr_full of 32 MiB into a 4 MiB file system"
    expect_no_generation "$WORK/full"
    expect_target_running
    expect_target_ok
    ;;

  scratch-limit)
    # A process whose output file is on tmpfs (saved with each checkpoint,
    # docs/jobs.md) holding 3 MiB: refused under --scratch-max 2, naming the
    # file, and the process keeps running; saved under --scratch-max 4.
    need_tmpfs
    mount_tmpfs "$WORK/scratch" size=16m
    head -c $((3 << 20)) /dev/urandom >"$WORK/scratch/log"
    (close_fds && exec "$PROG_DIR/heap_pattern" "$READY_DIR/ready" 8 300 \
      </dev/null >>"$WORK/scratch/log" 2>"$WORK/prog.err") &
    TPID=$!
    OWN_PIDS+=("$TPID")
    wait_file "$READY_DIR/ready" "$TPID" 30 || fail "target did not become ready"
    tool "$BIN_DIR/cr_full" --scratch-max 2 --dir "$WORK/ck" "$TPID"
    expect_refusal "cr_full --scratch-max 2 of a process holding a 3 MiB file on tmpfs"
    grep -q "$WORK/scratch/log" "$WORK/tool.err" || fail "the refusal does not name the file"
    expect_no_generation "$WORK/ck"
    expect_target_running
    tool "$BIN_DIR/cr_full" --scratch-max 4 --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full --scratch-max 4: $(first_line "$WORK/tool.err")"
    expect_target_ok
    ;;

  corrupt-pages | corrupt-addr | corrupt-meta)
    make_good_checkpoint
    corrupt_copy
    case $TEST in
      corrupt-pages) file=pages.img header=4096 ;;
      corrupt-addr) file=addr.img header=64 ;;
      corrupt-meta) file=meta.img header=64 ;;
    esac
    off=$(offset_in_data "$BAD_GEN/$file" "$header")
    flip_byte "$BAD_GEN/$file" "$off"
    echo "  flipped byte $off of $file"
    expect_restore_refused "$WORK/bad"
    ;;

  corrupt-header)
    make_good_checkpoint
    corrupt_copy
    flip_byte "$BAD_GEN/meta.img" 16 # the generation number, covered by the header hash
    echo "  flipped byte 16 of meta.img"
    expect_restore_refused "$WORK/bad"
    ;;

  truncated-pages)
    make_good_checkpoint
    corrupt_copy
    size=$(stat -c %s "$BAD_GEN/pages.img")
    truncate -s $((size / 2)) "$BAD_GEN/pages.img"
    echo "  truncated pages.img from $size to $((size / 2)) bytes"
    expect_restore_refused "$WORK/bad"
    ;;

  restart-missing)
    mkdir "$WORK/empty"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/empty"
    expect_refusal "cr_restart of an empty directory"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/missing"
    expect_refusal "cr_restart of a missing directory"
    make_good_checkpoint
    tool "$BIN_DIR/cr_restart" --dir "$GOOD" --generation 99
    expect_refusal "cr_restart of a missing generation"
    [[ ! -e /proc/$DEAD_PID ]] || fail "a process with the checkpointed PID $DEAD_PID exists"
    [[ ! -s $WORK/prog.err ]] || fail "the program ran: $(first_line "$WORK/prog.err")"
    ;;

  pid-taken)
    # The original still runs, so its PID is taken: cr_restart must refuse and
    # leave it alone; with --new-pid the copy runs beside it to a good end.
    [[ -x $BIN_DIR/cr_restart ]] || fail "$BIN_DIR/cr_restart not built"
    TARGET_ENV=(E2E_NEW_PID_OK=1)
    start_target 8 300
    tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
    ((TOOL_RC == 0)) || fail "cr_full of the target failed: $(first_line "$WORK/tool.err")"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/ck"
    expect_refusal "cr_restart while PID $TPID is in use"
    expect_target_running
    tool "$BIN_DIR/cr_restart" --dir "$WORK/ck" --new-pid
    ((TOOL_RC == 0)) ||
      fail "cr_restart --new-pid $(describe_status "$TOOL_RC"): $(first_line "$WORK/tool.err") $(first_line "$WORK/prog.err")"
    expect_target_ok
    ;;
esac
pass
