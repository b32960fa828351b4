# shellcheck shell=bash
# The job's processes and what they leave outside WORK, for the scripts that
# checkpoint an MPI job by its launcher's PID (mpi.sh, bench/npb_mpi.sh).
# Sourced after lib.sh; the sourcing script sets WORK (its directory, the
# ranks' cwd), JOB_TMP (the job's TMPDIR, Open MPI's session directory in
# it; empty: the job runs without TMPDIR, and Open MPI's session directory
# is under /tmp), TOOL_TIMEOUT and JOB_FILES=(), and ROOT (the launcher's PID) once the
# job runs; wait for it to compute, then set MEMBERS (tree_pids "$ROOT").

# Every PID of the tree under $1 (the root first).
tree_pids() {
  local p=$1 c
  echo "$p"
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# wait_job_computing REGEX SECONDS: waits until the job rooted at $ROOT
# prints a line matching REGEX in $WORK/prog.out; sets MEMBERS to the tree's
# PIDs, which must be a launcher and at least 4 ranks.
wait_job_computing() {
  local deadline=$((SECONDS + $2)) n
  until grep -qE "$1" "$WORK/prog.out"; do
    [[ $(proc_state "$ROOT") != [Z-] ]] || fail "the job ended before computing: $(first_line "$WORK/prog.err")"
    ((SECONDS < deadline)) || fail "no progress line after $2 s"
    sleep 0.1
  done
  MEMBERS=$(tree_pids "$ROOT" | tr '\n' ' ')
  n=$(wc -w <<<"$MEMBERS")
  ((n >= 5)) || fail "the job has $n processes, not a launcher and 4 ranks: $MEMBERS"
}

# On exit: every process of the job (those whose cwd is in WORK) killed, its
# files outside WORK removed, then cleanup_common.
cleanup() {
  local p ours=()
  if [[ -n ${ROOT:-} ]]; then
    for p in $(tree_pids "$ROOT") ${MEMBERS:-}; do
      [[ $(readlink "/proc/$p/cwd" 2>/dev/null) == "$WORK"* ]] && ours+=("$p")
    done
  fi
  # Until they are gone: a launcher still exiting would write into WORK
  # while it is removed.
  kill_all_gone "${ours[@]}" || true
  { wait; } 2>/dev/null || true
  remove_job_files
  [[ -n ${JOB_TMP:-} ]] && rm -rf "$JOB_TMP"
  [[ -n ${JOB_TMP:-} || -z ${ROOT:-} ]] || rm -rf /tmp/ompi.*."$(id -u)"/pid."$ROOT"
  cleanup_common
}

# Records what the job keeps outside WORK that its end would leave or that a
# restart must do without: files in /dev/shm it has open or mapped, and SysV
# segments it created.
# Three commands in all: on a loaded machine a fork per fd took seconds, long
# enough for a fast job to end before its checkpoint. Deleted files are gone
# already.
record_job_files() {
  local p f maps=() fds=() pids
  for p in $MEMBERS; do
    maps+=("/proc/$p/maps")
    fds+=("/proc/$p/fd")
  done
  pids=" ${MEMBERS} "
  for f in $(
    {
      awk 'NF == 6 && $6 ~ "^/dev/shm/" { print $6 }' "${maps[@]}"
      find "${fds[@]}" -lname '/dev/shm/*' -printf '%l\n' | grep -v ' (deleted)$'
      ipcs -mp | awk -v pids="$pids" '$1 ~ /^[0-9]+$/ && index(pids, " " $3 " ") { print "shm:" $1 }'
    } 2>/dev/null | sort -u
  ); do
    [[ " ${JOB_FILES[*]} " == *" $f "* ]] || JOB_FILES+=("$f")
  done
}
remove_job_files() {
  local f
  for f in "${JOB_FILES[@]}"; do
    case $f in
      shm:*) ipcrm -m "${f#shm:}" 2>/dev/null || true ;;
      /dev/shm/*) rm -f "$f" ;;
    esac
  done
}

# The session directory, as a job killed by SIGKILL (or a reboot) leaves it:
# gone. Open MPI's is under the job's TMPDIR (without one,
# /tmp/ompi.<node>.<uid>/pid.<launcher>); hydra keeps none on disk.
remove_session() {
  remove_job_files
  if [[ -n ${JOB_TMP:-} ]]; then
    empty_dir "$JOB_TMP"
    return
  fi
  local d found=0
  for d in /tmp/ompi.*."$(id -u)"/pid."$ROOT"; do
    [[ -d $d ]] || continue
    rm -rf "$d"
    found=1
  done
  [[ ${MODE:-} != ompi-* ]] || ((found)) || fail "no Open MPI session directory of PID $ROOT under /tmp"
}

tool() {
  local rc=0
  timeout "$TOOL_TIMEOUT" "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || rc=$?
  return $rc
}

kill_job() {
  MEMBERS="$MEMBERS $(tree_pids "$ROOT" | tr '\n' ' ')"
  # shellcheck disable=SC2086 # a list of PIDs
  kill_all_gone $MEMBERS || fail "processes of the job did not go away"
  { wait "$ROOT"; } 2>/dev/null || true
}
