# shellcheck shell=bash
# shellcheck disable=SC2034 # TREE is read by lib.sh
# What cases/openmpi.sh and cases/mpich.sh share (sourced after lib.sh and
# corpus_begin): bench/workloads/mpi's cg_mpi, 2 ranks (this machine's
# cores), 64 MiB, launched with the MPI's default settings, TMPDIR unset
# (Open MPI's session directory in /tmp, on disk).
#   mpi_case MPI LAUNCHER...: MPI is the build's workload directory
#   (openmpi, mpich); the reference run's result line first, then the job
#   paced (the workload's own MIN_MS/PACE_FILE arguments, so it cannot end
#   before its checkpoints), cr_full --tree of the launcher and cr_incr
#   while it computes, SIGKILL to the tree, AFTER_KILL (a command line, if
#   set), the pacing off, cr_restart: exit 0 and the reference's result line.
mpi_case() {
  local mpi=$1 prog ref got
  shift
  prog=$BIN_DIR/workloads/mpi/$mpi/cg_mpi
  [[ -x $prog ]] || skip "$prog was not built (no $mpi found at configure time)"
  local t=$EPOCHREALTIME
  run_fg ref "$@" -np 2 "$prog" 64 60
  phase "uninterrupted" "$t"
  ref=$(grep '^result: ' "$WORK/ref.out") || fail "the uninterrupted run printed no result"
  : >"$WORK/pace"
  TREE=1
  start_bg run "$@" -np 2 "$prog" 64 60 300 "$WORK/pace"
  wait_until 120 "first iterations" 'grep -q "^iter " "$WORK/run.out"'
  checkpoint full
  sleep 0.5
  checkpoint incr
  local n
  n=$(tree_pids "$ROOT" | wc -l)
  kill_tree
  [[ -z ${AFTER_KILL:-} ]] || eval "$AFTER_KILL"
  rm -f "$WORK/pace"
  restore_wait
  got=$(grep '^result: ' "$WORK/run.out") || fail "the restored job printed no result"
  [[ $got == "$ref" ]] || fail "the restored job's result differs: '$got', uninterrupted: '$ref'"
  grep -qx 'check: ok' "$WORK/run.out" || fail "the restored job's self-check failed"
  corpus_pass "$n processes"
}
