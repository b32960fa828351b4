# shellcheck shell=bash disable=SC2034 # variables set here are read by the sourcing scripts
# Helpers shared by run_case.sh and bad_input.sh (sourced, not run).
# The sourcing script sets WORK (its temporary directory) and then calls
# install_traps; cleanup_common runs on exit, also on SIGINT/SIGTERM/SIGHUP.

OWN_PIDS=()   # processes we started: killed on exit if still there
MOUNTS=()     # mounts we made: unmounted on exit, newest first
LOGS=()       # files shown when a test fails
EXTRA_DIRS=() # directories outside WORK we made (ondisk_dir): removed on exit
EXIT_STATUS=-1 # set by wait_exit

# Closes every fd >= 3 of the current shell. Used in a subshell right before
# exec'ing a test program: the tools refuse pipes and sockets on fds >= 3, and
# harnesses (ctest, CI runners) leak such fds into their children.
close_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    if ((fd >= 3)); then eval "exec $fd>&-"; fi
  done
}

# proc_state PID: the one-letter state of PID (R, S, T, t, Z, ...) or "-" if
# there is no such process.
proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || {
    echo -
    return
  }
  stat=${stat##*) }
  echo "${stat%% *}"
}

# kill_all_gone PID...: SIGKILL to each, then wait (up to 10 s) until none is
# left but zombies; returns 1 if some still run.
# empty_dir DIR: deletes what DIR holds. Open MPI's daemons may still be
# removing their session files when their job's launcher has returned: an
# entry that vanishes meanwhile is not an error; a directory still not
# empty after 10 s is.
empty_dir() {
  local deadline=$((SECONDS + 10))
  until find "$1" -mindepth 1 -delete 2>/dev/null; do
    ((SECONDS < deadline)) || { find "$1" -mindepth 1 -delete; return; }
    sleep 0.1
  done
}

kill_all_gone() {
  local p i alive=0
  for p in "$@"; do kill -9 "$p" 2>/dev/null || true; done
  for ((i = 0; i < 200; i++)); do
    alive=0
    for p in "$@"; do [[ $(proc_state "$p") != [Z-] ]] && alive=1; done
    ((alive)) || return 0
    sleep 0.05
  done
  return 1
}

# tracer_of PID: the PID tracing PID (0 if none).
tracer_of() {
  awk '/^TracerPid:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# wait_exit PID SECONDS: waits at most SECONDS for our child PID to end and
# sets EXIT_STATUS to its status; returns 1 if it is still running.
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2)) st
  while st=$(proc_state "$pid") && [[ $st != Z && $st != - ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
  # (Braces: bash would report a killed job on stderr.)
  EXIT_STATUS=0
  { wait "$pid"; } 2>/dev/null || EXIT_STATUS=$?
}

# wait_file FILE PID SECONDS: waits for FILE to appear while PID is alive.
# Returns 0 when it appears, 1 on timeout, 2 if PID ended first.
wait_file() {
  local file=$1 pid=$2 deadline=$((SECONDS + $3)) st
  until [[ -e $file ]]; do
    st=$(proc_state "$pid")
    [[ $st != Z && $st != - ]] || return 2
    ((SECONDS < deadline)) || return 1
    sleep 0.02
  done
}

# describe_status STATUS: "exit N" or "killed by signal N" (shell convention).
describe_status() {
  if (($1 > 128 && $1 < 160)); then echo "killed by signal $(($1 - 128))"; else echo "exit $1"; fi
}

# first_line FILE: the first line of FILE, or "(no message)".
first_line() {
  local line=""
  [[ -s $1 ]] && IFS= read -r line <"$1"
  echo "${line:-(no message)}"
}

# is_one_line FILE: true if FILE holds exactly one non-empty line.
is_one_line() {
  [[ -s $1 ]] && (($(wc -l <"$1") == 1)) && [[ -n $(head -c 1 "$1" | tr -d '\n') ]]
}

# show_logs: prints the non-empty files in LOGS to stderr, indented.
# The verdicts of a case; the script sets E2E_CASE, its name in the output
# ("bad_input disk-full"). pass [NOTE]; fail CAUSE (shows LOGS); skip REASON
# (exit 77: only where the kernel or the machine lacks something). A script
# that defined its own before sourcing this file keeps them.
if ! declare -F pass >/dev/null; then
  pass() {
    echo "PASS $E2E_CASE${1:+ ($1)}"
    exit 0
  }
fi
if ! declare -F fail >/dev/null; then
  fail() {
    echo "FAIL $E2E_CASE: $*"
    show_logs
    exit 1
  }
fi
if ! declare -F skip >/dev/null; then
  skip() {
    echo "SKIP $E2E_CASE: $*"
    exit 77
  }
fi

show_logs() {
  local f
  for f in "${LOGS[@]}"; do
    [[ -s $f ]] || continue
    echo "  --- ${f#"$WORK"/} ---" >&2
    head -n 20 "$f" | sed 's/^/  /' >&2
  done
}

# kill_own PID: kills PID if it is one of our processes. Our programs all have
# a path inside WORK on their command line: a PID reused by an unrelated
# process in the meantime is left alone. Also covers a restored process that
# outlived a cr_restart killed by timeout (it has the original's PID).
kill_own() {
  local cmdline
  cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 0
  [[ $cmdline == *"$WORK"* ]] || return 0
  # Braces: bash would report the killed job on stderr.
  { kill -9 "$1" && wait "$1"; } 2>/dev/null || true
}

# cleanup_common: kills our processes, unmounts our mounts, removes WORK
# (kept when E2E_KEEP=1, for debugging).
cleanup_common() {
  local pid i
  for pid in "${OWN_PIDS[@]}"; do kill_own "$pid"; done
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" 2>/dev/null || true
  done
  if [[ -n ${WORK:-} && -d $WORK ]]; then
    if [[ ${E2E_KEEP:-0} == 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
  fi
  for i in "${EXTRA_DIRS[@]}"; do [[ ${E2E_KEEP:-0} == 1 ]] || rm -rf "$i"; done
}

# in_temp_dir PATH: whether PATH is below one of the directories whose files
# a checkpoint saves whole (docs/state.md, "Files that vanish with the job").
in_temp_dir() {
  local d real
  for d in /tmp /var/tmp /dev/shm /run/user ${TMPDIR:+"$TMPDIR"}; do
    real=$(realpath -m "$d")
    [[ $1 == "$real"/* ]] && return 0
  done
  return 1
}

# ondisk_dir: sets ONDISK to a new directory that is not on tmpfs nor below a
# temporary directory, so that a checkpoint refers to its files by path: in
# the build tree, else in /var/lib. Removed on exit.
ondisk_dir() {
  local base d
  for base in "$BIN_DIR/.." /var/lib; do
    base=$(realpath -m "$base")
    in_temp_dir "$base/x" && continue
    [[ $(stat -f -c %T "$base" 2>/dev/null) == tmpfs ]] && continue
    d=$(mktemp -d "$base/ckpt-e2e-ondisk.XXXXXX" 2>/dev/null) || continue
    EXTRA_DIRS+=("$d")
    ONDISK=$d
    return 0
  done
  fail "no directory outside the temporary directories to write into"
}

# elapsed SINCE: seconds since SINCE (an $EPOCHREALTIME value), one decimal.
elapsed() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# install_traps: cleanup_common on exit; the signals turn into an exit so
# the EXIT trap runs for them too.
install_traps() {
  trap cleanup_common EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
