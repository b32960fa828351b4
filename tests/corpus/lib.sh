# shellcheck shell=bash disable=SC2034 # variables set here are read by the case scripts
# The corpus harness: what every case script (cases/NAME.sh BIN_DIR) shares.
# A case starts a real program from Debian's packages as a user would run
# it, in WORK (a directory in /tmp, which is on disk as Debian has it),
# checkpoints it while it works (cr_full, then cr_incr; --tree where it has
# children), SIGKILLs its whole tree, restores it (cr_restart, or --detach
# for a daemon) and checks the result by the program's own means.
#
#   corpus_begin NAME "$@"      WORK, CKPT, traps, the case's packages
#   start_bg LOG CMD...         CMD in the background in WORK: PID (and ROOT)
#   run_fg LOG CMD...           CMD in the foreground (a reference run)
#   wait_until SECS WHAT COND   until COND succeeds (fails if ROOT ended)
#   checkpoint full|incr        cr_full/cr_incr of ROOT (with --tree if TREE=1)
#   kill_tree                   SIGKILL to ROOT and every descendant
#   pace_on, pace_off           the case's own programs slowed while it checkpoints
#   restore_wait | restore_bg | restore_detach
#   corpus_pass NOTE            PASS with the time of each phase
# A refusal of a tool is a failure naming the tool and its one-line message.
# E2E_KEEP=1 keeps WORK. CORPUS_TOOL_TIMEOUT bounds each tool (s).
CORPUS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../e2e/lib.sh
source "$CORPUS_DIR/../e2e/lib.sh"
# tree_pids, record_job_files, remove_job_files, tool (its cleanup is
# replaced by corpus_cleanup below).
# shellcheck source=../e2e/mpi_job.sh
source "$CORPUS_DIR/../e2e/mpi_job.sh"

TOOL_TIMEOUT=${CORPUS_TOOL_TIMEOUT:-120}
TREE=0          # 1: the program has children: --tree
ROOT=""         # the PID checkpointed (the tree's root)
RESTORER=""     # a cr_restart running in the background
CLEANUP_CMDS=() # run (eval) on exit, once the program is gone: a case's own leftovers
TIMES=()        # "phase seconds" pairs for the PASS line
JOB_FILES=()    # /dev/shm files and SysV segments of the program (mpi_job.sh)
MEMBERS=""

# corpus_begin NAME BIN_DIR: the case's name, the tools' directory, WORK.
corpus_begin() {
  local name=$1
  shift
  (($# == 1)) || {
    echo "usage: $0 BIN_DIR" >&2
    exit 2
  }
  E2E_CASE="corpus $name"
  CASE=$name
  BIN_DIR=$(cd "$1" && pwd)
  [[ -x $BIN_DIR/cr_full && -x $BIN_DIR/cr_restart ]] || {
    echo "no cr_full/cr_restart in $BIN_DIR" >&2
    exit 2
  }
  CASE_START=$EPOCHREALTIME
  # Debian's programs, not others of the same name earlier in PATH (a
  # pyenv's python3, a /usr/local/bin/node).
  PATH=/usr/sbin:/usr/bin:/sbin:/bin
  # /tmp itself, not TMPDIR: the point is /tmp as Debian has it (on disk).
  WORK=$(mktemp -d "/tmp/ckpt-corpus-$name.XXXXXX")
  chmod 755 "$WORK"
  CKPT=$WORK/ckpt
  LOGS=("$WORK/tool.err" "$WORK/restart.err")
  trap corpus_cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  need_packages "$name"
}

# need_packages NAME: installs the Debian packages packages.txt lists for
# NAME that are missing (apt-get, as root); a skip naming them if that fails.
need_packages() {
  local line pkgs=() missing=() p
  line=$(grep -E "^$1:" "$CORPUS_DIR/packages.txt") || {
    echo "$1 is not in $CORPUS_DIR/packages.txt" >&2
    exit 2
  }
  read -r -a pkgs <<<"${line#*:}"
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  (($(id -u) == 0)) || skip "not installed: ${missing[*]} (apt-get needs root)"
  echo "corpus $1: installing ${missing[*]}"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$WORK/apt.log" 2>&1; then
    apt-get update -qq >>"$WORK/apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >>"$WORK/apt.log" 2>&1 ||
      skip "not installed and apt-get could not install ${missing[*]}: $(grep -m1 -E '^E:' "$WORK/apt.log" || tail -n 1 "$WORK/apt.log")"
  fi
}

# free_port: a TCP port nothing listens on.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    ss -Htan "( sport = :$p )" | grep -q . || break
  done
  echo "$p"
}

# phase NAME SINCE: records the time since SINCE ($EPOCHREALTIME) as NAME.
phase() { TIMES+=("$1 $(elapsed "$2")s"); }

# start_bg LOG CMD...: runs CMD in the background in WORK, stdin IN (default
# /dev/null), stdout and stderr in WORK/LOG.out and WORK/LOG.err; PID and
# ROOT are its PID. (A shell script's background command: SIGINT and
# SIGQUIT ignored.)
start_bg() {
  local log=$1
  shift
  (
    close_fds
    cd "$WORK" || exit
    exec "$@" <"${IN:-/dev/null}" >"$WORK/$log.out" 2>"$WORK/$log.err"
  ) &
  PID=$!
  ROOT=$PID
  OWN_PIDS+=("$PID")
  LOGS+=("$WORK/$log.err")
}

# run_fg LOG CMD...: runs CMD in WORK to its end (a reference run, a
# client), stdin IN if set; fails naming LOG unless it exits 0.
run_fg() {
  local log=$1 rc=0
  shift
  (
    close_fds
    cd "$WORK" || exit
    exec "$@" <"${IN:-/dev/null}" >"$WORK/$log.out" 2>"$WORK/$log.err"
  ) || rc=$?
  ((rc == 0)) || fail "$log ($*): $(describe_status $rc): $(first_line "$WORK/$log.err")"
}

# alive PID: PID exists and is not a zombie.
alive() { [[ $(proc_state "$1") != [Z-] ]]; }

# wait_until SECONDS WHAT CONDITION: evaluates CONDITION (a shell command
# line) until it succeeds; fails after SECONDS, or at once if ROOT (when
# set) ended, naming WHAT.
wait_until() {
  local deadline=$((SECONDS + $1)) what=$2 cond=$3
  until eval "$cond"; do
    if [[ -n $ROOT ]] && ! alive "$ROOT"; then
      fail "the program ended before $what ($(root_status)): $(last_err)"
    fi
    ((SECONDS < deadline)) || fail "no $what after $1 s"
    sleep 0.1
  done
}

# The status of ROOT once it ended ("gone" when it is not our child: a daemon).
root_status() {
  local rc=0
  { wait "$ROOT"; } 2>/dev/null || rc=$?
  if ((rc == 127)); then echo gone; else describe_status "$rc"; fi
}

# The first line of the newest program log with something in it.
last_err() {
  local f
  # shellcheck disable=SC2045 # names made here, without spaces
  for f in $(ls -t "$WORK"/*.err 2>/dev/null); do
    [[ -s $f && $f != */tool.err && $f != */restart.err ]] && { first_line "$f"; return; }
  done
  echo "(no message)"
}

# checkpoint full|incr: cr_full (or cr_incr) of ROOT into CKPT, --tree if
# TREE=1. A refusal fails the case with the tool's one line, and says
# whether the program runs on untraced (a refusal must lose nothing).
checkpoint() {
  local kind=$1 t=$EPOCHREALTIME args=(--dir "$CKPT" --json) name flag=""
  ((TREE)) && args+=(--tree) && flag=" --tree"
  case $kind in
    full) name=cr_full ;;
    incr) name=cr_incr ;;
  esac
  record_members
  if ! tool "$BIN_DIR/$name" "${args[@]}" "$ROOT"; then
    local msg how=""
    msg=$(first_line "$WORK/tool.err")
    msg=${msg#"$name: "}
    sleep 0.2
    if ! alive "$ROOT"; then
      how=" (the program is gone: $(root_status))"
    elif [[ $(proc_state "$ROOT") == [Tt] || $(tracer_of "$ROOT") != 0 ]]; then
      how=" (the program is left stopped or traced)"
    fi
    fail "$name$flag refused: ${msg//$WORK/\$WORK}$how"
  fi
  phase "$name" "$t"
  record_job_files
}

# record_members: the tree's PIDs now, added to MEMBERS (for the kill and
# the cleanup); skips the tree walk when there is no ROOT.
record_members() {
  [[ -n $ROOT ]] || return 0
  MEMBERS="$MEMBERS $(tree_pids "$ROOT" | tr '\n' ' ')"
}

# kill_tree: stops ROOT and its descendants until no new one appears (so
# none forks meanwhile), then SIGKILL to all, and waits until their PIDs are
# free (the orphans are reaped by init).
kill_tree() {
  local pids="" now p i
  for ((i = 0; i < 50; i++)); do
    now=$(tree_pids "$ROOT" | sort -n | tr '\n' ' ')
    for p in $now; do kill -STOP "$p" 2>/dev/null || true; done
    [[ $now == "$pids" ]] && break
    pids=$now
  done
  MEMBERS="$MEMBERS $pids"
  record_job_files
  # shellcheck disable=SC2086 # a list of PIDs
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  { wait "$ROOT"; } 2>/dev/null || true
  for ((i = 0; i < 400; i++)); do
    now=""
    for p in $pids; do [[ -e /proc/$p ]] && now+="$p "; done
    [[ -z $now ]] && return 0
    sleep 0.05
  done
  fail "PIDs of the killed program still taken after 20 s: $now"
}

# pace_on, pace_off: the file WORK/pace, which the case's own programs (the
# computations written for a runtime: Python, Java, node, OpenMP) look for
# in their working directory after each step of work: while it exists, each
# step also sleeps a little. So a program cannot finish before its
# checkpoints however slow the tools are here, and its results do not
# depend on it (the uninterrupted run and the restored one run unpaced).
pace_on() { : >"$WORK/pace"; }
pace_off() { rm -f "$WORK/pace"; }

# restore_wait: cr_restart of CKPT to the program's end (RESTORE_TIMEOUT
# seconds at most, default 240); fails unless it exits 0.
restore_wait() {
  local rc=0 t=$EPOCHREALTIME
  timeout "${RESTORE_TIMEOUT:-240}" "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err" || rc=$?
  if ((rc != 0)); then
    local err
    err=$(last_err)
    [[ $err == "(no message)" ]] && err="" || err=" (the program: $err)"
    fail "restored program $(describe_status "$rc"): $(first_line "$WORK/restart.err" | sed "s|$WORK|\$WORK|g")$err"
  fi
  phase "restore to end" "$t"
}

# restore_bg: cr_restart of CKPT in the background (it waits for the
# program); then wait_restored, and finish_restored once the program ends.
restore_bg() {
  RESTORE_T=$EPOCHREALTIME
  (
    close_fds
    exec "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err"
  ) &
  RESTORER=$!
  OWN_PIDS+=("$RESTORER")
}

# wait_restored: until ROOT runs again, restored by the background cr_restart.
wait_restored() {
  local deadline=$((SECONDS + 120))
  until [[ $(proc_state "$ROOT") == [RSD] && $(tracer_of "$ROOT") == 0 ]] && grep -q . /proc/"$ROOT"/cmdline 2>/dev/null &&
    [[ $(awk '{print $4}' /proc/"$ROOT"/stat) == "$RESTORER" ]]; do
    if ! alive "$RESTORER"; then
      local rc=0
      { wait "$RESTORER"; } 2>/dev/null || rc=$?
      fail "cr_restart $(describe_status "$rc"): $(first_line "$WORK/restart.err" | sed "s|$WORK|\$WORK|g")"
    fi
    ((SECONDS < deadline)) || fail "the program not restored after 120 s"
    sleep 0.05
  done
  phase restore "$RESTORE_T"
}

# finish_restored SECONDS: waits for the background cr_restart, which must
# exit 0 (the program's own status).
finish_restored() {
  wait_exit "$RESTORER" "$1" || fail "the restored program did not end within $1 s"
  ((EXIT_STATUS == 0)) || fail "restored program $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/restart.err" | sed "s|$WORK|\$WORK|g")"
}

# restore_detach: cr_restart --detach; the restored root's PID must be ROOT's.
restore_detach() {
  local t=$EPOCHREALTIME
  tool "$BIN_DIR/cr_restart" --dir "$CKPT" --detach ||
    fail "cr_restart --detach: $(first_line "$WORK/tool.err" | sed "s|$WORK|\$WORK|g")"
  [[ $(<"$WORK/tool.out") == "$ROOT" ]] || fail "cr_restart --detach printed $(<"$WORK/tool.out"), not $ROOT"
  phase restore "$t"
}

# corpus_pass [NOTE]: PASS with the phases' times and the whole case's.
# shellcheck disable=SC2120 # NOTE is optional
corpus_pass() {
  local times
  times=$(printf '%s, ' "${TIMES[@]}")
  pass "${1:+$1; }${times}case $(elapsed "$CASE_START")s"
}

# Every process that is the program's: any process whose cwd or command
# line is in WORK (the cases start everything in WORK; daemons that left our
# tree and restored processes keep it). Two commands, not one per process:
# the scan runs while a program may still fork. (grep and find find
# themselves too: gone by the time the list is used.)
our_processes() {
  {
    find /proc -mindepth 2 -maxdepth 2 -name cwd \( -lname "$WORK" -o -lname "$WORK/*" \) 2>/dev/null
    grep -laF "$WORK" /proc/[0-9]*/cmdline 2>/dev/null
  } | cut -d/ -f3 | sort -un | grep -vx -e "$$" -e "$BASHPID" || true
}

# kill_ours: every process of the program stopped, its /dev/shm files and
# SysV segments recorded, then SIGKILLed, until none is left (10 s at most).
kill_ours() {
  local i ps
  for ((i = 0; i < 100; i++)); do
    ps=$(our_processes | tr '\n' ' ')
    [[ -z ${ps// /} ]] && break
    MEMBERS="$MEMBERS $ps"
    # shellcheck disable=SC2086 # a list of PIDs
    kill -STOP $ps || true
    record_job_files || true
    # shellcheck disable=SC2086
    kill -9 $ps || true
    sleep 0.1
  done
  wait || true
}

# On exit: the program's processes and files (kill_ours; its stderr, where
# bash reports killed jobs, silenced), the case's own commands, then WORK.
corpus_cleanup() {
  local rc=$? c
  trap - EXIT
  kill_ours 2>/dev/null
  remove_job_files
  for c in "${CLEANUP_CMDS[@]}"; do eval "$c" >/dev/null 2>&1 || true; done
  cleanup_common
  exit "$rc"
}

# text_file PATH MIB: about MIB MiB of log-like text (the same for a
# given MIB).
text_file() {
  awk -v n=$(($2 * 12700)) 'BEGIN {
    srand(7)
    for (i = 0; i < n; i++)
      printf "%08d host%d app[%d]: GET /api/v1/item/%d?q=%x status %d bytes %d\n", i, int(rand() * 16),
        1000 + int(rand() * 50), int(rand() * 100000), int(rand() * 1e9), (rand() < 0.9 ? 200 : 404), int(rand() * 65536)
  }' >"$1"
}

# size FILE: its size in bytes (0 if it does not exist).
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
