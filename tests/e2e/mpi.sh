#!/usr/bin/env bash
# mpi.sh BIN_DIR MODE WORKLOAD [ACTION]: a 4-rank MPI job on this node
# (bench/workloads/mpi) checkpointed by its launcher's PID as one job.
# Modes (how the job is started):
#   ompi-vader      Open MPI, shared-memory transport, no single copy:
#                   --mca pml ob1 --mca btl "vader,self"
#                   --mca btl_vader_single_copy_mechanism none
#   ompi-vader-cma  the same with cross-memory attach (process_vm_readv
#                   between ranks): btl_vader_single_copy_mechanism cma
#   ompi-tcp        Open MPI over loopback TCP: --mca btl "tcp,self"
#                   (btl_tcp_if_include lo)
#   mpich           MPICH 4 (ch4:ucx) with hydra's mpiexec
# WORKLOAD: cg_mpi, stencil_mpi or transpose_mpi.
# ACTION:
#   restart (default) the uninterrupted run's result line first; then the
#                   job again: once it computes, cr_full --tree of the
#                   launcher, two cr_incr while it computes, SIGKILL to every
#                   process, its session directory and /dev/shm files
#                   removed, cr_restart; it must finish with exit 0 and
#                   exactly the reference result line.
#   pause, migrate-frozen, migrate-live
#                   cr_pause, and cr_migrate --tree to another network
#                   namespace, of the running job (mpi_move.sh)
#   inventory       prints what every process of the running job holds
#                   (helpers/job_inventory.py, Markdown) and what cr_full
#                   --tree says of it, then ends the job (docs/mpi.md).
# E2E_MPI_MIB: the job's memory in MiB (default 256); E2E_MPI_ITERS: its
# iterations (default 300); E2E_MPI_MIN_MS: the least time an iteration takes
# while the test checkpoints the job (default 200 ms, so the job cannot end
# first however fast the transport: MPICH's stencil did 150 iterations in
# 4 s, and main's cr_full + two cr_incr of a 64 MiB job outlasted a 20 s run).
# The pacing holds only while $WORK/pace exists, and the job does not end
# while it does: the test cannot lose a race with a fast job, and the
# uninterrupted run and the restored job run at full speed. E2E_TRACKER: the tracker.
# E2E_MPI_TMPDIR: where the job's TMPDIR (Open MPI's session directory) is:
# "tmpfs" (default: a directory in /dev/shm) or "default" (TMPDIR unset, as
# a job is usually run: Open MPI then uses /tmp, which may be on disk).
# Prints PASS/FAIL like run_case.sh; exit 77 = skip (this MPI is not here).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
(($# == 3 || $# == 4)) || {
  echo "usage: $0 BIN_DIR ompi-vader|ompi-vader-cma|ompi-tcp|mpich cg_mpi|stencil_mpi|transpose_mpi [restart|inventory|pause|migrate-frozen|migrate-live]" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
MODE=$2
WORKLOAD=$3
ACTION=${4:-restart}
MIB=${E2E_MPI_MIB:-256}
MIN_MS=${E2E_MPI_MIN_MS:-200}
ITERS=${E2E_MPI_ITERS:-300}
case $WORKLOAD in
  cg_mpi | stencil_mpi | transpose_mpi) ;;
  *)
    echo "unknown workload $WORKLOAD" >&2
    exit 2
    ;;
esac
NAME="mpi $MODE $WORKLOAD"
TOOL_TIMEOUT=120

E2E_CASE="$NAME" # for pass, fail and skip (lib.sh)

case $MODE in
  ompi-vader | ompi-vader-cma | ompi-tcp)
    LAUNCHER=$(command -v mpirun.openmpi) || skip "no mpirun.openmpi (Debian's openmpi-bin)"
    PROG=$BIN_DIR/workloads/mpi/openmpi/$WORKLOAD
    ;;
  mpich)
    LAUNCHER=$(command -v mpiexec.hydra) || skip "no mpiexec.hydra (Debian's mpich)"
    PROG=$BIN_DIR/workloads/mpi/mpich/$WORKLOAD
    ;;
  *)
    echo "unknown mode $MODE" >&2
    exit 2
    ;;
esac
[[ -x $PROG ]] || skip "$PROG was not built (no MPI found at configure time)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-mpi.XXXXXX")
install_traps
CKPT=$WORK/ckpt
PACE=$WORK/pace
LOGS=("$WORK/prog.err" "$WORK/tool.err" "$WORK/restart.err" "$WORK/prog.out")
JOB_FILES=() # /dev/shm files and SysV segments of the job, removed after the kill

# The job's own temporary directory (TMPDIR): Open MPI puts its session
# directory there, so it is ours to remove. On tmpfs, as a node's /tmp
# usually is (here /tmp is on disk): issue 11 saves files on tmpfs that vanish
# with the job. The ranks run in WORK (cwd), which is how the cleanup
# recognises them.
# With E2E_MPI_TMPDIR=default the job runs without TMPDIR: JOB_TMP is
# empty, and the session directory is Open MPI's default under /tmp.
case ${E2E_MPI_TMPDIR:-tmpfs} in
  tmpfs) JOB_TMP=$(mktemp -d /dev/shm/ckpt-e2e-mpi.XXXXXX) ;;
  default) JOB_TMP="" ;;
  *)
    echo "E2E_MPI_TMPDIR: tmpfs or default" >&2
    exit 2
    ;;
esac
[[ -n $JOB_TMP ]] || NAME+=" (default TMPDIR; /tmp is $(stat -f -c %T /tmp))"
E2E_CASE="$NAME"
# The environment the job runs in.
job_env() {
  if [[ -n $JOB_TMP ]]; then JOB_ENV=(TMPDIR="$JOB_TMP"); else JOB_ENV=(-u TMPDIR); fi
  JOB_ENV+=(UCX_NET_DEVICES=lo)
}
job_env
# $1: the pacing (ms per iteration while $PACE exists; 0: none).
launch_cmd() {
  local pace=("$1" "$PACE")
  case $MODE in
    ompi-*)
      local btl=(--mca btl "vader,self" --mca btl_vader_single_copy_mechanism none)
      [[ $MODE == ompi-vader-cma ]] && btl=(--mca btl "vader,self" --mca btl_vader_single_copy_mechanism cma)
      [[ $MODE == ompi-tcp ]] && btl=(--mca btl "tcp,self" --mca btl_tcp_if_include lo)
      echo "$LAUNCHER" --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 "${btl[@]}" \
        --mca oob_tcp_if_include lo "$PROG" "$MIB" "$ITERS" "${pace[@]}"
      ;;
    mpich) echo "$LAUNCHER" -np 4 "$PROG" "$MIB" "$ITERS" "${pace[@]}" ;;
  esac
}

# shellcheck source=mpi_job.sh
source "$HERE/mpi_job.sh"
trap cleanup EXIT

# Starts the job in the background, paced: ROOT is the launcher.
start_job() {
  : >"$WORK/prog.out"
  : >"$PACE"
  (
    close_fds
    cd "$WORK"
    # shellcheck disable=SC2046 # the command is split on purpose (no spaces in its words)
    exec env "${JOB_ENV[@]}" $(launch_cmd "$MIN_MS") </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err"
  ) &
  ROOT=$!
}

# Waits for rank 0's first progress line; MEMBERS = the job's PIDs.
wait_computing() { wait_job_computing '^iter ' 120; }

last_iter() {
  grep '^iter ' "$WORK/prog.out" | tail -n 1 | awk '{ print $2 }'
}

reference() {
  local rc=0
  (
    close_fds
    cd "$WORK"
    # shellcheck disable=SC2046
    exec env "${JOB_ENV[@]}" $(launch_cmd 0) </dev/null >"$WORK/ref.out" 2>"$WORK/ref.err"
  ) || rc=$?
  ((rc == 0)) || fail "the uninterrupted run failed ($(describe_status $rc)): $(first_line "$WORK/ref.err")"
  REF=$(grep '^result: ' "$WORK/ref.out") || fail "the uninterrupted run printed no result"
  grep -qx 'check: ok' "$WORK/ref.out" || fail "the uninterrupted run's self-check failed"
}

case $ACTION in
  inventory)
    start_job
    wait_computing
    echo "## $MODE, $WORKLOAD ($MIB MiB, launched as: $(launch_cmd "$MIN_MS" | sed "s|$BIN_DIR/||"))"
    echo
    python3 "$HERE/helpers/job_inventory.py" "$ROOT" | sed "s|$WORK|\$WORK|g; s|${JOB_TMP:-/tmp}|\$TMPDIR|g"
    echo
    rc=0
    tool "$BIN_DIR/cr_full" --tree --dir "$CKPT" "$ROOT" || rc=$?
    echo "### cr_full --tree $ROOT (exit $rc)"
    echo
    echo '```'
    sed "s|$WORK|\$WORK|g; s|${JOB_TMP:-/tmp}|\$TMPDIR|g" "$WORK/tool.err"
    echo '```'
    record_job_files
    kill_job
    exit 0
    ;;
  restart) ;;
  pause | migrate-frozen | migrate-live)
    # shellcheck source=mpi_move.sh
    source "$HERE/mpi_move.sh"
    exit 0
    ;;
  *)
    echo "unknown action $ACTION" >&2
    exit 2
    ;;
esac

START=$EPOCHREALTIME
reference
REF_TIME=$(elapsed "$START")
START=$EPOCHREALTIME
start_job
wait_computing
record_job_files
T=$EPOCHREALTIME
if ! tool "$BIN_DIR/cr_full" --tree --dir "$CKPT" ${E2E_TRACKER:+"--tracker=$E2E_TRACKER"} --json "$ROOT"; then
  grep -q "no process with PID $ROOT\$" "$WORK/tool.err" && grep -q '^result: ' "$WORK/prog.out" &&
    fail "the job finished before cr_full was done: raise E2E_MPI_ITERS ($(first_line "$WORK/tool.err"))"
  fail "cr_full --tree $ROOT (job: $MEMBERS): $(first_line "$WORK/tool.err")"
fi
T_FULL=$(elapsed "$T")
n=$(wc -w <<<"$MEMBERS")
grep -q "\"processes\":${n}[,}]" "$WORK/tool.out" || fail "cr_full did not save the job's $n processes: $(cat "$WORK/tool.out")"
at_full=$(last_iter)
T_INCR=()
for i in 1 2; do
  sleep 1
  T=$EPOCHREALTIME
  if ! tool "$BIN_DIR/cr_incr" --dir "$CKPT" --json "$ROOT"; then
    grep -q '^result: ' "$WORK/prog.out" &&
      fail "the job finished before cr_incr $i: raise E2E_MPI_ITERS or E2E_MPI_MIN_MS ($(first_line "$WORK/tool.err"))"
    fail "cr_incr $i: $(first_line "$WORK/tool.err")"
  fi
  grep -q '"kind":"incremental"' "$WORK/tool.out" || fail "cr_incr $i wrote no incremental"
  T_INCR+=("$(elapsed "$T")")
done
at_incr=$(last_iter)
T=$EPOCHREALTIME
tool "$BIN_DIR/cr_info" --dir "$CKPT" --verify || fail "cr_info --verify: $(first_line "$WORK/tool.err")"
grep -q '^result: ' "$WORK/prog.out" && fail "the job finished before it was killed"
((at_incr > at_full)) || fail "the job did not compute between the checkpoints (iter $at_full, then $at_incr)"
record_job_files
kill_job
remove_session
rm -f "$PACE" # the restored job runs the rest at full speed

T_VERIFY=$(elapsed "$T")
rc=0
T=$EPOCHREALTIME
timeout 600 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err" || rc=$?
((rc == 0)) || fail "restored job $(describe_status "$rc"): $(first_line "$WORK/restart.err")"
T_RESTART=$(elapsed "$T")
got=$(grep '^result: ' "$WORK/prog.out") || fail "the restored job printed no result"
[[ $got == "$REF" ]] || fail "the restored job's result differs: '$got', uninterrupted: '$REF'"
grep -qx 'check: ok' "$WORK/prog.out" || fail "the restored job's self-check failed"
pass "checkpointed at iter $at_full..$at_incr of $ITERS; reference run ${REF_TIME}s, checkpointed run $(elapsed "$START")s: cr_full ${T_FULL}s, cr_incr ${T_INCR[*]}s, verify ${T_VERIFY}s, restart to end ${T_RESTART}s"
