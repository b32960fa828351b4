#!/usr/bin/env bash
# fd_bad_input.sh BIN_DIR TEST|all: refusals about file descriptors.
#
#   changed-file     a read-only file's mtime changes after the checkpoint:
#                    cr_restart refuses with one line naming the fd and the
#                    path and starts nothing; with --force the program runs
#                    and passes its own checks
#   replaced-file    the same file replaced by a copy (same content and
#                    mtime, another inode): refused, then --force works
#   shrunk-file      a file the process writes is truncated: refused
#   changed-mapping  a privately mapped file's mtime changes: refused (naming
#                    the mapping), then --force works
#   tcp-socket       cr_full of a process holding a TCP connection whose peer
#                    is no process's fd (not yet accepted) is refused with
#                    "its peer is not in the job"; the target keeps running
#                    and finishes by itself
#   unix-socket      a UNIX stream socket whose peer another process (the
#                    target's parent) holds: "its peer is not in the job"
#   unix-inflight    a UNIX socket with a descriptor in flight (SCM_RIGHTS
#                    not yet received): refused; the program then finds its
#                    byte and descriptor still queued, once
#   shared-pipe      a pipe whose other end another process (the target's
#                    parent) holds: refused naming that process
#   shared-fifo      a FIFO another process (this script) holds open too:
#                    refused naming that process
#   lease            a file with a lease (F_SETLEASE): refused
#   pidfd            a pidfd: refused naming it
#   inotify-unlinked an inotify watch on a file unlinked since (still open):
#                    refused naming the watch and the file
#   secretmem        memfd_secret memory held as an fd and mapped: refused
#                    by name (no other process can read it)
#   secretmem-mapped the same, mapped only
#   udp-multicast    a UDP socket that joined a multicast group: refused
#                    naming the group
#   udp-peeked-empty a UDP socket whose only queued datagram is an empty one
#                    the program had peeked (no peek at an offset shows it):
#                    refused; the program then still reads it, once
#   pty-stopped      a pty whose output is stopped by flow control, with input
#                    not read: refused; both are still so afterwards
#   pty-session      a pty master whose slave is the controlling terminal of
#                    a session led outside the job: refused naming the session
# The files of the first four are in a directory outside the temporary
# directories (ondisk_dir): files in /tmp are saved whole by a checkpoint
# and written back by the restore, so they cannot have changed.
# Prints "PASS fd_bad_input TEST" or "FAIL fd_bad_input TEST: reason". Exit
# status: 0 pass, 1 fail, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTS=(changed-file replaced-file shrunk-file changed-mapping tcp-socket unix-socket unix-inflight
  shared-pipe shared-fifo lease pidfd inotify-unlinked secretmem secretmem-mapped udp-multicast udp-peeked-empty pty-stopped pty-session)
usage() {
  echo "usage: $0 BIN_DIR TEST|all" >&2
  echo "  TEST: ${TESTS[*]}" >&2
  exit 2
}
(($# == 2)) || usage
BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
  echo "FAIL fd_bad_input $2: no directory $1"
  exit 1
}
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
TOOL_TIMEOUT=60

if [[ $TEST == all ]]; then
  failed=0
  for t in "${TESTS[@]}"; do bash "$0" "$BIN_DIR" "$t" || failed=1; done
  exit "$failed"
fi
[[ " ${TESTS[*]} " == *" $TEST "* ]] || usage

E2E_CASE="fd_bad_input $TEST" # for pass, fail and skip (lib.sh)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-fdbad-$TEST.XXXXXX")
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err")

# start PROG ARGS...: starts a test program with its ready file in WORK, waits
# until it is ready and sets TPID.
start() {
  local prog=$PROG_DIR/$1
  shift
  [[ -x $prog ]] || fail "test program $prog not built"
  (close_fds && exec "$prog" "$WORK/ready" "$@" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  local rc=0
  wait_file "$WORK/ready" "$TPID" 30 || rc=$?
  if ((rc == 2)) && wait_exit "$TPID" 5 && ((EXIT_STATUS == 77)); then
    skip "$(first_line "$WORK/prog.out")" # the kernel lacks what the test needs
  fi
  ((rc == 0)) || fail "target did not become ready: $(first_line "$WORK/prog.err")"
}

tool() {
  TOOL_RC=0
  timeout "$TOOL_TIMEOUT" "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
}

# expect_refusal WHAT REGEX: the last tool failed cleanly with one line
# on stderr matching REGEX.
expect_refusal() {
  ((TOOL_RC != 0)) || fail "$1 succeeded"
  ((TOOL_RC < 124)) || fail "$1 $(describe_status "$TOOL_RC") (crash, timeout or not runnable)"
  is_one_line "$WORK/tool.err" || fail "$1 failed without exactly one line on stderr"
  echo "  $1 -> $(first_line "$WORK/tool.err")"
  grep -Eq "$2" "$WORK/tool.err" || fail "$1: message does not match /$2/"
}

# checkpoint_and_kill: cr_full of TPID into WORK/ck, then kill -9 and reap it.
checkpoint_and_kill() {
  tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "$TPID"
  ((TOOL_RC == 0)) || fail "cr_full failed: $(first_line "$WORK/tool.err")"
  { kill -9 "$TPID" || true; } 2>/dev/null
  { wait_exit "$TPID" 10; } 2>/dev/null || fail "target still there after kill -9"
}

# restore_refused REGEX: cr_restart refuses and no process was started.
restore_refused() {
  tool "$BIN_DIR/cr_restart" --dir "$WORK/ck"
  expect_refusal "cr_restart" "$1"
  [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$TPID/cmdline") != *"$WORK"* ]] ||
    fail "a process with the checkpointed PID $TPID runs the program"
  [[ ! -s $WORK/prog.err ]] || fail "the program ran: $(first_line "$WORK/prog.err")"
}

# restore_forced: cr_restart --force restores, and the program passes its checks.
restore_forced() {
  tool "$BIN_DIR/cr_restart" --dir "$WORK/ck" --force
  ((TOOL_RC == 0)) ||
    fail "cr_restart --force $(describe_status "$TOOL_RC"): $(first_line "$WORK/tool.err") $(first_line "$WORK/prog.err")"
  grep -q "^done $(cut -d' ' -f1 "$WORK/ready") " "$WORK/prog.out" || fail "the restored program did not finish"
}

# refused_at_checkpoint REGEX: cr_full refuses; the target runs on, unharmed.
refused_at_checkpoint() {
  tool "$BIN_DIR/cr_full" --dir "$WORK/ck" "${CK_PID:-$TPID}"
  expect_refusal "cr_full" "$1"
  if compgen -G "$WORK/ck/gen-*" >/dev/null; then fail "a gen-* directory appeared"; fi
  local st
  st=$(proc_state "$TPID")
  [[ $st != - && $st != Z ]] || fail "target is gone after the refusal"
  [[ $st != T && $st != t ]] || fail "target left stopped (state $st)"
  [[ $(tracer_of "${CK_PID:-$TPID}") == 0 ]] || fail "target left traced"
  # A live checkpoint arms tracking before its final round finds what it
  # must refuse: it takes it back (the program's own check at its end sees
  # a descriptor that appeared, too).
  tool "$BIN_DIR/cr_full" --live --dir "$WORK/ck" "${CK_PID:-$TPID}"
  expect_refusal "cr_full --live" "$1"
  if ls -l "/proc/${CK_PID:-$TPID}/fd" 2>/dev/null | grep -q userfaultfd; then
    fail "cr_full --live left a userfaultfd in the target"
  fi
  wait_exit "$TPID" 30 || fail "target still running 30s later"
  ((EXIT_STATUS == 0)) || fail "target $(describe_status "$EXIT_STATUS") after the refusal: $(first_line "$WORK/prog.err")"
}

D=$WORK/d
case $TEST in
  changed-file | replaced-file | shrunk-file | changed-mapping)
    ondisk_dir
    D=$ONDISK
    ;;
  *) mkdir "$D" ;;
esac
case $TEST in
  changed-file)
    start fd_regular "$D"
    checkpoint_and_kill
    touch -d '2001-02-03 04:05:06' "$D/ro.txt"
    restore_refused "^cr_restart: fd [0-9]+: $D/ro.txt: changed on disk since the checkpoint: modified \(mtime differs, same size\); use --force to restore anyway$"
    restore_forced
    ;;
  replaced-file)
    start fd_regular "$D"
    checkpoint_and_kill
    cp -p "$D/ro.txt" "$D/ro.new"
    mv "$D/ro.new" "$D/ro.txt"
    restore_refused "^cr_restart: fd [0-9]+: $D/ro.txt: changed on disk since the checkpoint: replaced by another file \(inode [0-9]+, was [0-9]+\); use --force"
    restore_forced
    ;;
  shrunk-file)
    start fd_regular "$D"
    checkpoint_and_kill
    truncate -s 100 "$D/reg.dat"
    restore_refused "^cr_restart: fd [0-9]+: $D/reg.dat: changed on disk since the checkpoint: size now 100 bytes, was 65536; use --force"
    ;;
  changed-mapping)
    start file_map_private "$D"
    checkpoint_and_kill
    touch -d '2001-02-03 04:05:06' "$D/file_map_private.dat"
    restore_refused "^cr_restart: mapping 0x[0-9a-f]+-0x[0-9a-f]+: $D/file_map_private.dat: changed on disk since the checkpoint: modified"
    restore_forced
    ;;
  tcp-socket)
    start fd_unsupported tcp
    refused_at_checkpoint "^cr_full: fd 3: socket:\[[0-9]+\] \(TCP connection 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:[0-9]+\): its peer is not in the job: checkpoint the whole job \(--tree of a common ancestor\), or save it in repair mode with --tcp-established$"
    ;;
  unix-socket)
    start fd_unsupported unix
    # The target is the forked child; its parent holds the peer.
    CK_PID=$(cut -d' ' -f1 "$WORK/ready")
    refused_at_checkpoint "^cr_full: fd 3: socket:\[[0-9]+\] \(UNIX stream socket \(unnamed\) -> peer inode [0-9]+\): its peer is not in the job: checkpoint the whole job \(--tree of a common ancestor\)$"
    ;;
  unix-inflight)
    start fd_unsupported unix-inflight
    refused_at_checkpoint "^cr_full: fd 3: socket:\[[0-9]+\] \(UNIX stream socket \(unnamed\)\): descriptors in flight \(SCM_RIGHTS not yet received\): not supported$"
    ;;
  shared-pipe)
    start fd_unsupported shared-pipe
    # The target is the forked child that wrote the ready file; TPID, its
    # parent, exits with the child's status.
    CK_PID=$(cut -d' ' -f1 "$WORK/ready")
    refused_at_checkpoint "^cr_full: fd 3: pipe:\[[0-9]+\]: also open in PID [0-9]+ \(fd_unsupported\), which is not in the job: checkpoint the whole job \(--tree of a common ancestor\)$"
    ;;
  shared-fifo)
    mkfifo "$WORK/ready.fifo"
    exec {HOLD}<>"$WORK/ready.fifo" # this script holds it too
    start fd_unsupported shared-fifo
    refused_at_checkpoint "^cr_full: fd 3: $WORK/ready.fifo: also open in PID $$ \(bash\), which is not in the job: checkpoint the whole job \(--tree of a common ancestor\)$"
    exec {HOLD}>&-
    ;;
  lease)
    start fd_unsupported lease
    refused_at_checkpoint "^cr_full: fd 3: $WORK/ready.lease: holds a file lease \(F_SETLEASE\): not supported$"
    ;;
  pidfd)
    start fd_unsupported pidfd
    refused_at_checkpoint "^cr_full: fd 3: anon_inode:\[pidfd\] \(a pidfd\): not supported yet$"
    ;;
  inotify-unlinked)
    start fd_unsupported inotify-unlinked
    refused_at_checkpoint "^cr_full: fd 3: anon_inode:inotify: watch 1: watches a file no longer in the tree \($WORK/ready.watched \(deleted\)\): not supported$"
    ;;
  secretmem)
    start fd_unsupported secretmem
    refused_at_checkpoint "^cr_full: (fd 3: /secretmem|mapping 0x[0-9a-f]+-0x[0-9a-f]+ /secretmem) \(deleted\): memfd_secret memory \(the kernel lets no other process read it\): not supported$"
    ;;
  secretmem-mapped)
    start fd_unsupported secretmem-mapped
    refused_at_checkpoint "^cr_full: mapping 0x[0-9a-f]+-0x[0-9a-f]+ /secretmem \(deleted\): memfd_secret memory \(the kernel lets no other process read it\): not supported$"
    ;;
  udp-multicast)
    start fd_unsupported udp-multicast
    refused_at_checkpoint "^cr_full: fd 3: socket:\[[0-9]+\] \(UDP socket 0\.0\.0\.0:0\): member of multicast group 239\.1\.2\.3: not supported$"
    ;;
  udp-peeked-empty)
    start fd_unsupported udp-peeked-empty
    refused_at_checkpoint "^cr_full: fd 3: socket:\[[0-9]+\] \(UDP socket 127\.0\.0\.1:[0-9]+\): datagrams queued that a peek cannot show \(an empty datagram read with MSG_PEEK before\): not supported$"
    ;;
  pty-stopped)
    start fd_unsupported pty-stopped
    refused_at_checkpoint "^cr_full: fd 3: /dev/ptmx: output stopped by flow control \(\^S or tcflow\): not supported yet$"
    ;;
  pty-session)
    start fd_unsupported pty-session
    CK_PID=$(cut -d' ' -f1 "$WORK/ready")
    refused_at_checkpoint "^cr_full: /dev/pts/[0-9]+: controlling terminal of session $TPID, whose leader is not in the job: checkpoint the whole session \(--tree of its leader or an ancestor\)$"
    ;;
esac
pass
