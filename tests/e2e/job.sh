#!/usr/bin/env bash
# job.sh BIN_DIR MODE: a process tree (programs/job_tree.c: a session leader
# with shared anonymous memory, a pipe with unread bytes, a file at a shared
# offset, a child leading a process group, a sibling in that group, and a
# zombie) through checkpoint and restart of the whole job (cr_full --tree).
# Modes:
#   restore        cr_full --tree, SIGKILL to every process, cr_restart;
#   incremental    cr_full --tree, two cr_incr while it runs, kill, restart;
#   leave-running  cr_full --tree and cr_incr; the job must finish by itself;
#   compact        cr_full --tree and two cr_incr, kill, cr_compact: one full
#                  generation of every member is left, verified, and the job
#                  restarts from it and finishes;
#   incremental-after-restore
#                  full + incremental, kill, restart (detached), one more
#                  incremental of the restored job, kill, restart;
#   pid-taken      a member's PID is taken at restart: one line naming it,
#                  no process of the job left behind, and after the holder
#                  is gone the same checkpoint restores;
#   new-pid        a member's PID is taken at restart: cr_restart --new-pid
#                  restores the job in a PID namespace of its own, with every
#                  PID as it was there; an incremental is taken from inside
#                  (nsenter), the namespace killed, and the job restored again
#                  from it, finishing;
#   outside-pipe   a member shares a pipe with a process outside the job:
#                  one line naming both, every member released and running.
# E2E_JOB_PROG runs another program of the same protocol instead (tcp_pair),
# with E2E_JOB_PROCS processes (default 4).
# The job must end with exit 0 and "done <root pid> <nonce>". E2E_TRACKER
# picks the tracker; E2E_JOB_ROUNDS the job's length in 10 ms rounds
# (default 500; the qemu guest, where the tools are slow, uses more).
# Prints PASS/FAIL like run_case.sh; exit 77 = skip.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
(($# == 2)) || {
  echo "usage: $0 BIN_DIR MODE" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
MODE=$2
PROG=${E2E_PROG_DIR:-$BIN_DIR/e2e}/${E2E_JOB_PROG:-job_tree}
PROCS=${E2E_JOB_PROCS:-4} # processes in the job
TOOL_TIMEOUT=60
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-job.XXXXXX")
install_traps
CKPT=$WORK/ckpt
LOGS=("$WORK/prog.err" "$WORK/tool.err" "$WORK/restart.err")

E2E_CASE="job $MODE" # for pass, fail and skip (lib.sh)

# Every PID of the tree under $1 (the root first).
tree_pids() {
  local p=$1 c
  echo "$p"
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# A process of the test that only holds what it was given (a PID, a pipe)
# for a minute; its command line names WORK so the cleanup kills it, and it
# keeps none of the harness's output pipes open.
hold() {
  exec -a "$WORK/holder" sleep 60 >/dev/null 2>&1
}

start_job() {
  rm -f "$WORK/ready"
  (close_fds && exec "$PROG" "$WORK/ready" "$WORK" "${1:-${E2E_JOB_ROUNDS:-500}}" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  ROOT=$!
  OWN_PIDS+=("$ROOT")
  local rc=0
  wait_file "$WORK/ready" "$ROOT" 30 || rc=$?
  ((rc == 0)) || fail "job not ready ($rc): $(first_line "$WORK/prog.err")"
  MEMBERS=$(tree_pids "$ROOT" | tr '\n' ' ')
}

tool() {
  local rc=0
  timeout "$TOOL_TIMEOUT" "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || rc=$?
  return $rc
}

full() {
  tool "$BIN_DIR/cr_full" --tree --dir "$CKPT" ${E2E_TRACKER:+"--tracker=$E2E_TRACKER"} --json "$1" ||
    fail "cr_full --tree: $(first_line "$WORK/tool.err")"
  grep -q "\"processes\":$PROCS" "$WORK/tool.out" || fail "cr_full did not save $PROCS processes: $(cat "$WORK/tool.out")"
}
incr() {
  tool "$BIN_DIR/cr_incr" --dir "$CKPT" --json "$1" || fail "cr_incr: $(first_line "$WORK/tool.err")"
  grep -q '"kind":"incremental"' "$WORK/tool.out" || fail "cr_incr wrote no incremental"
}
verify() {
  tool "$BIN_DIR/cr_info" --dir "$CKPT" --verify || fail "cr_info --verify: $(first_line "$WORK/tool.err")"
  (($(grep -c '^  process ' "$WORK/tool.out") >= PROCS)) || fail "cr_info lists no processes"
}

# Kills every member with SIGKILL and waits until none of their PIDs exists
# (the zombie is reaped by init once its parent is gone).
kill_job() {
  local p
  for p in $MEMBERS; do kill -9 "$p" 2>/dev/null || true; done
  for ((i = 0; i < 200; i++)); do
    local alive=0
    for p in $MEMBERS; do [[ -e /proc/$p ]] && alive=1; done
    ((alive)) || return 0
    sleep 0.05
  done
  fail "PIDs of the job did not go away: $(for p in $MEMBERS; do [[ -e /proc/$p ]] && echo -n "$p "; done)"
}

# A process of ours takes the last member's PID (VICTIM) once the job is
# killed: HOLDER (ns_last_pid; retried, as other processes may take PIDs
# meanwhile).
take_member_pid() {
  VICTIM=$(echo $MEMBERS | awk '{ print $NF }')
  # The killed member's PID is free only once it is reaped (a loaded
  # machine's reaper may take a while); then other forks race ours (CI
  # builds alongside): many tries.
  for ((i = 0; i < 500; i++)); do
    [[ $(proc_state "$VICTIM") == - ]] && break
    sleep 0.02
  done
  HOLDER=0
  for ((i = 0; i < 500 && HOLDER != VICTIM; i++)); do
    ((HOLDER == 0)) || { kill -9 "$HOLDER"; wait "$HOLDER" 2>/dev/null || true; }
    echo "$((VICTIM - 1))" >/proc/sys/kernel/ns_last_pid
    hold </dev/null &
    HOLDER=$!
    OWN_PIDS+=("$HOLDER")
  done
  ((HOLDER == VICTIM)) || fail "could not take PID $VICTIM for the test"
}

check_done() {
  local status=$1 out=$2
  ((status == 0)) || fail "restored job $(describe_status "$status"): $(first_line "$WORK/prog.err") $(first_line "$WORK/restart.err")"
  grep -qx "done $(<"$WORK/ready")" "$out" || fail "the job that finished is not the one checkpointed"
}

restart_wait() {
  local rc=0
  timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err" || rc=$?
  # The restored root writes "done" on the stdout it had: prog.out (reopened).
  check_done "$rc" "$WORK/prog.out"
}

case $MODE in
  restore)
    start_job
    full "$ROOT"
    # A second full replaces the first chain: its generation goes, members and all.
    full "$ROOT"
    gens=$(cd "$CKPT" && echo gen-*)
    [[ $gens == gen-000002 ]] || fail "after a second cr_full the directory holds: $gens"
    [[ -z $(ls -A "$CKPT" | grep -v '^gen-000002$') ]] || fail "leftovers in $CKPT: $(ls -A "$CKPT")"
    verify
    kill_job
    restart_wait
    ;;
  incremental)
    start_job
    full "$ROOT"
    sleep 0.3
    incr "$ROOT"
    sleep 0.3
    incr "$ROOT"
    verify
    kill_job
    restart_wait
    ;;
  compact)
    start_job
    full "$ROOT"
    sleep 0.3
    incr "$ROOT"
    sleep 0.3
    incr "$ROOT"
    kill_job
    tool "$BIN_DIR/cr_compact" --json --dir "$CKPT" || fail "cr_compact: $(first_line "$WORK/tool.err")"
    grep -q '"generations_folded":3' "$WORK/tool.out" || fail "cr_compact folded not 3 generations: $(cat "$WORK/tool.out")"
    gens=$(cd "$CKPT" && echo gen-*)
    [[ $gens == gen-000004 ]] || fail "after cr_compact the directory holds: $gens"
    verify
    grep -q "generation 4 (full)" "$WORK/tool.out" || fail "cr_info shows no full generation 4: $(head -3 "$WORK/tool.out")"
    restart_wait
    ;;
  leave-running)
    # Paced while the tools run (however long they take here), then free.
    touch "$WORK/pace"
    E2E_PACE_FILE=$WORK/pace start_job 5000
    full "$ROOT"
    incr "$ROOT"
    for p in $MEMBERS; do
      st=$(proc_state "$p")
      [[ $st != T && $st != t && $(tracer_of "$p") == 0 ]] || fail "PID $p left stopped or traced"
    done
    rm "$WORK/pace"
    wait_exit "$ROOT" 60 || fail "job did not finish"
    check_done "$EXIT_STATUS" "$WORK/prog.out"
    ;;
  incremental-after-restore)
    start_job 400
    full "$ROOT"
    sleep 0.2
    incr "$ROOT"
    kill_job
    tool "$BIN_DIR/cr_restart" --dir "$CKPT" --detach || fail "cr_restart --detach: $(first_line "$WORK/tool.err")"
    [[ $(<"$WORK/tool.out") == "$ROOT" ]] || fail "detached restart printed $(<"$WORK/tool.out"), not $ROOT"
    sleep 0.3
    incr "$ROOT"
    grep -q '"tracker_reset":""' "$WORK/tool.out" || fail "tracking did not continue after the restore: $(cat "$WORK/tool.out")"
    kill_job
    restart_wait
    ;;
  pid-taken)
    start_job
    full "$ROOT"
    kill_job
    take_member_pid
    rc=0
    tool "$BIN_DIR/cr_restart" --dir "$CKPT" || rc=$?
    ((rc != 0)) || fail "cr_restart succeeded although PID $VICTIM was taken"
    is_one_line "$WORK/tool.err" || fail "no one-line reason: $(cat "$WORK/tool.err")"
    grep -q "PID $VICTIM" "$WORK/tool.err" || fail "the message does not name PID $VICTIM: $(first_line "$WORK/tool.err")"
    MEMBERS=${MEMBERS/$VICTIM/}
    kill_job # waits until none is left: fails if the half-made job stays
    kill -9 "$HOLDER"
    wait "$HOLDER" 2>/dev/null || true
    MEMBERS="$MEMBERS $VICTIM"
    restart_wait
    ;;
  new-pid)
    start_job 400
    full "$ROOT"
    sleep 0.2
    incr "$ROOT"
    kill_job
    take_member_pid
    # The job comes back in a PID namespace of its own, each member with its
    # PID there, and its chain continues from inside.
    tool "$BIN_DIR/cr_restart" --dir "$CKPT" --new-pid --detach ||
      fail "cr_restart --new-pid --detach: $(first_line "$WORK/tool.err")"
    INIT=$(sed -n 's/.*whose init is PID \([0-9]*\).*/\1/p' "$WORK/tool.err")
    [[ -n $INIT ]] || fail "cr_restart did not say the job's PID namespace: $(first_line "$WORK/tool.err")"
    OWN_PIDS+=("$INIT")
    R=$(<"$WORK/tool.out")
    [[ $(awk '/^NSpid:/ { print $NF }' "/proc/$R/status") == "$ROOT" ]] ||
      fail "the restored root ($R here) is not PID $ROOT in its namespace: $(grep NSpid "/proc/$R/status")"
    sleep 0.3
    tool nsenter --target "$INIT" --pid --mount "$BIN_DIR/cr_incr" --dir "$CKPT" --json "$ROOT" ||
      fail "cr_incr in the job's namespace: $(first_line "$WORK/tool.err")"
    grep -q '"tracker_reset":""' "$WORK/tool.out" || fail "tracking did not continue in the namespace: $(cat "$WORK/tool.out")"
    # Its init's end is the namespace's end: every member goes with it.
    kill -9 "$INIT"
    for ((i = 0; i < 200; i++)); do
      [[ $(proc_state "$R") == - ]] && break
      sleep 0.05
    done
    [[ $(proc_state "$R") == - ]] || fail "the job outlived its namespace's init"
    # Restored again from the incremental taken inside, waited for.
    rc=0
    timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" --new-pid </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err" || rc=$?
    check_done "$rc" "$WORK/prog.out"
    grep -q "PID namespace of its own" "$WORK/restart.err" || fail "the second restore did not use a namespace: $(first_line "$WORK/restart.err")"
    ;;
  outside-pipe)
    start_job 200
    # A process outside the job joins one of the members' pipes.
    A=$(echo $MEMBERS | awk '{ print $3 }')
    PIPE_FD=$(for f in /proc/"$A"/fd/*; do [[ $(readlink "$f") == pipe:* ]] && echo "${f##*/}" && break; done)
    [[ -n $PIPE_FD ]] || fail "member $A holds no pipe"
    hold <"/proc/$A/fd/$PIPE_FD" &
    OWN_PIDS+=("$!")
    rc=0
    tool "$BIN_DIR/cr_full" --tree --dir "$CKPT" "$ROOT" || rc=$?
    ((rc != 0)) || fail "cr_full succeeded although a pipe leads outside the job"
    is_one_line "$WORK/tool.err" || fail "no one-line reason"
    grep -q "which is not in the job" "$WORK/tool.err" || fail "refused for another reason: $(first_line "$WORK/tool.err")"
    compgen -G "$CKPT/gen-*" >/dev/null && fail "a generation became visible"
    for p in $MEMBERS; do
      [[ $(tracer_of "$p") == 0 ]] || fail "PID $p still traced after the refusal"
    done
    wait_exit "$ROOT" 60 || fail "job did not finish after the refusal"
    check_done "$EXIT_STATUS" "$WORK/prog.out"
    ;;
  *)
    echo "usage: $0 BIN_DIR restore|incremental|leave-running|incremental-after-restore|pid-taken|new-pid|outside-pipe|compact" >&2
    exit 2
    ;;
esac
pass
