#!/usr/bin/env bash
# npb_mpi.sh TOOLS_BIN NPB [KERNEL.CLASS...]: NPB 3.4's MPI kernels as the
# real-world check of checkpointing an MPI job by its launcher's PID (issue
# 11, item 7). By hand, not in CI: NPB's source is not the project's.
#   TOOLS_BIN  the project's build/bin (cr_full, cr_incr, cr_restart, ...)
#   NPB        an NPB3.4-MPI source tree (a missing binary is built there,
#              config/make.def made from make.def.template if there is
#              none) or a directory of built binaries (cg.B.x ...)
#   KERNEL.CLASS  default: cg.B mg.B ft.B lu.A (about 20-60 s each with 4
#              ranks on 2 cores)
# Each kernel runs with Open MPI's shared-memory transport (as mpi.sh's
# ompi-vader mode): mpirun --allow-run-as-root --oversubscribe -np 4. First
# uninterrupted (its time and result lines), then per action (NPB_ACTIONS,
# default "restart pause migrate-frozen migrate-live"):
#   restart         once it prints its first iteration: cr_full --tree of
#                   mpirun, NPB_INCR (default 2) cr_incr one second apart,
#                   SIGKILL to every process, the session directory and the
#                   job's /dev/shm files removed, cr_restart;
#   pause           cr_full --tree, then cr_pause of the running job;
#   migrate-frozen  the job in network namespace npbA<pid>, cr_migrate
#   migrate-live    --frozen|--live --tree to a cr_recv in npbB<pid>.
# Each must end with "Verification    =               SUCCESSFUL" and the
# uninterrupted run's result lines (everything up to "Benchmark Completed."
# but the initialisation time). Prints a table; exit 1 if any case failed.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E=$HERE/../tests/e2e
(($# >= 2)) || {
  echo "usage: $0 TOOLS_BIN NPB_DIR|NPB_BIN_DIR [cg.B mg.B ft.B lu.A ...]" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd) || exit 2
NPB=$(cd "$2" && pwd) || exit 2
shift 2
KERNELS=("$@")
((${#KERNELS[@]})) || KERNELS=(cg.B mg.B ft.B lu.A)
read -r -a ACTIONS <<<"${NPB_ACTIONS:-restart pause migrate-frozen migrate-live}"
NINCR=${NPB_INCR:-2}
TOOL_TIMEOUT=600 # mpi_job.sh's tool
export TOOL_TIMEOUT
for t in cr_full cr_incr cr_restart cr_pause cr_migrate cr_recv; do
  [[ -x $BIN_DIR/$t ]] || {
    echo "no $BIN_DIR/$t: build the tools first (README)" >&2
    exit 2
  }
done
LAUNCHER=$(command -v mpirun.openmpi) || {
  echo "no mpirun.openmpi (Debian's openmpi-bin)" >&2
  exit 2
}

# lib.sh's fail ends a case (each runs in a subshell) and records why.
fail() {
  echo "FAIL $E2E_CASE: $*" >&2
  show_logs
  echo "FAIL: $*" >"$ROW.why"
  exit 1
}
# shellcheck source=tests/e2e/lib.sh
source "$E2E/lib.sh"
# shellcheck source=tests/e2e/mpi_job.sh
source "$E2E/mpi_job.sh"
# shellcheck source=tests/e2e/netns.sh
source "$E2E/netns.sh"

# The binary for KERNEL.CLASS, built when NPB is a source tree.
npb_binary() {
  local k=${1%.*} c=${1#*.} x
  for x in "$NPB/$1.x" "$NPB/bin/$1.x"; do [[ -x $x ]] && echo "$x" && return 0; done
  [[ -f $NPB/config/make.def.template ]] || return 1
  if [[ ! -f $NPB/config/make.def ]]; then
    # gfortran >= 10 refuses the MPI calls' mismatched argument types.
    sed 's/^FFLAGS\t= -O3$/FFLAGS\t= -O3 -fallow-argument-mismatch/' \
      "$NPB/config/make.def.template" >"$NPB/config/make.def"
  fi
  mkdir -p "$NPB/bin"
  echo "building $1 in $NPB" >&2
  make -C "$NPB" "$k" CLASS="$c" >"$NPB/bin/$1.build.log" 2>&1 || {
    echo "make $k CLASS=$c failed: $NPB/bin/$1.build.log" >&2
    return 1
  }
  echo "$NPB/bin/$1.x"
}

# The line each kernel prints per iteration (or every few).
progress_re() {
  case $1 in
    cg) echo '^ +[0-9]+ +[0-9.]+E[-+][0-9]+ +[0-9.]+$' ;;
    mg) echo '^  iter +[0-9]+$' ;;
    ft) echo '^ T = +[0-9]+ +Checksum' ;;
    lu) echo '^ Time step +[0-9]+$' ;;
    *) echo '^ *(iter|Time step|T =|step)' ;;
  esac
}

# What a run computed: its output up to "Benchmark Completed." without the
# initialisation time (the rest is timing and build information).
results() {
  sed -n '/Benchmark Completed\./q; p' "$1" | grep -v 'Initialization time' | grep -v '^ *$'
}
verified() {
  grep -q '^ Verification    =               SUCCESSFUL$' "$1"
}

launch_cmd() {
  echo "$LAUNCHER" --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 --mca btl vader,self \
    --mca btl_vader_single_copy_mechanism none --mca oob_tcp_if_include lo "$PROG"
}

# Starts the job in the background ($1: a network namespace or nothing);
# ROOT is mpirun (or ip netns exec, which becomes it). Fortran's output is
# unbuffered so that its progress lines show while it computes.
start_job() {
  : >"$WORK/prog.out"
  (
    close_fds
    cd "$WORK" || exit 1
    local ns=()
    [[ -n ${1:-} ]] && ns=(ip netns exec "$1")
    # shellcheck disable=SC2046 # split on purpose (no spaces in its words)
    TMPDIR=$JOB_TMP GFORTRAN_UNBUFFERED_PRECONNECTED=y exec "${ns[@]}" $(launch_cmd) \
      </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err"
  ) &
  ROOT=$!
}

finished() { grep -q 'Benchmark Completed\.' "$WORK/prog.out"; }
progress() { grep -cE "$RE" "$WORK/prog.out"; }

# Waits for the first iteration line; MEMBERS = the job's PIDs.
wait_computing() { wait_job_computing "$RE" 300; }

json_field() { grep -o "\"$1\":[0-9.e+-]*" "$2" | tail -n 1 | cut -d: -f2; }
secs() { awk -v s="$(json_field "$1" "$2")" 'BEGIN { printf "%.2f", s }'; }
mib() { awk -v b="${1:-0}" 'BEGIN { printf "%.0f", b / 1048576 }'; }

expect_reference() {
  verified "$WORK/prog.out" || fail "$1: no 'Verification = SUCCESSFUL': $(grep -m1 -i 'verification' "$WORK/prog.out") $(first_line "$WORK/prog.err")"
  results "$WORK/prog.out" >"$WORK/got.res"
  diff -q "$REF" "$WORK/got.res" >/dev/null ||
    fail "$1: result lines differ from the uninterrupted run's: $(diff "$REF" "$WORK/got.res" | head -n 3 | tr '\n' ' ')"
}

# One case in a subshell: its own WORK and JOB_TMP, everything it started
# killed on exit (mpi_job.sh's cleanup). Writes its table cells to $ROW.
run_case() {
  local kc=$1 action=$2
  E2E_CASE="npb $kc $action"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-npb.XXXXXX")
  JOB_TMP=$(mktemp -d /dev/shm/ckpt-npb.XXXXXX)
  JOB_FILES=()
  CKPT=$WORK/ckpt
  LOGS=("$WORK/prog.err" "$WORK/tool.err" "$WORK/restart.err" "$WORK/recv.err" "$WORK/migrate.err" "$WORK/pause.err")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  case $action in
    restart) case_restart ;;
    pause) case_pause ;;
    migrate-*) case_migrate "--${action#migrate-}" ;;
  esac
}

full_checkpoint() {
  tool "$BIN_DIR/cr_full" --tree --dir "$CKPT" --json "$ROOT" && return 0
  finished && fail "the job finished before cr_full was done: a larger class leaves more room"
  fail "cr_full --tree: $(first_line "$WORK/tool.err")"
}

case_restart() {
  local t at_full at_incr i full incr=()
  start_job
  wait_computing
  record_job_files
  full_checkpoint
  full="$(mib "$(json_field bytes_written "$WORK/tool.out")") MiB / $(secs frozen_seconds "$WORK/tool.out") s"
  at_full=$(progress)
  for ((i = 1; i <= NINCR; i++)); do
    sleep 1
    finished && break
    tool "$BIN_DIR/cr_incr" --dir "$CKPT" --json "$ROOT" || {
      finished && break
      fail "cr_incr $i: $(first_line "$WORK/tool.err")"
    }
    incr+=("$(mib "$(json_field bytes_written "$WORK/tool.out")")/$(secs frozen_seconds "$WORK/tool.out")")
  done
  at_incr=$(progress)
  finished && echo "note: the job finished before it was killed (after $((i - 1)) cr_incr); a larger class leaves more room" >"$ROW.why"
  record_job_files
  kill_job
  remove_session
  t=$EPOCHREALTIME
  timeout 900 "$BIN_DIR/cr_restart" --dir "$CKPT" --json </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err" ||
    fail "cr_restart: the restored job $(describe_status $?): $(first_line "$WORK/restart.err")"
  local to_end
  to_end=$(elapsed "$t")
  expect_reference "after cr_restart"
  printf '%s|%s|%s|%s s (to end %s s)|SUCCESSFUL (iteration lines %s..%s at the checkpoints)\n' \
    "$full" "${incr[*]:-none}" "" "$(secs restore_seconds "$WORK/restart.out")" "$to_end" "$at_full" "$at_incr" >"$ROW"
}

case_pause() {
  local rc=0 at_full
  start_job
  wait_computing
  record_job_files
  full_checkpoint
  at_full=$(progress)
  sleep 1
  finished && fail "the job finished before cr_pause: a larger class leaves more room"
  timeout 900 "$BIN_DIR/cr_pause" --dir "$CKPT" --json "$ROOT" </dev/null >"$WORK/pause.out" 2>"$WORK/pause.err" || rc=$?
  ((rc == 0)) || fail "cr_pause (waiting for the job) $(describe_status "$rc"): $(grep -v 'rolled back by' "$WORK/pause.err" | head -n 1)"
  expect_reference "after cr_pause"
  printf '%s|%s|%s|%s|SUCCESSFUL (paused after iteration line %s, %s)\n' \
    "$(mib "$(json_field bytes_written "$WORK/tool.out")") MiB / $(secs frozen_seconds "$WORK/tool.out") s" "" \
    "cr_pause frozen $(secs frozen_seconds "$WORK/pause.out") s" "" "$at_full" \
    "$(grep -o '"how":"[a-z]*"' "$WORK/pause.out")" >"$ROW"
}

case_migrate() {
  local mode=$1 RPID p i at n
  local ns_a=npbA$$ ns_b=npbB$$ net=10.247.$(($$ % 250)) port=$((20000 + ($$ + 17) % 20000))
  NETNS=("$ns_a" "$ns_b")
  trap 'for p in "${RPIDS[@]}"; do kill_tree "$p"; done; netns_remove "${NETNS[@]}"; cleanup' EXIT
  RPIDS=()
  netns_pair "$ns_a" "$ns_b" "$net" "np$$" || fail "$NETNS_WHY"
  head -c 32 /dev/urandom >"$WORK/token"
  chmod 600 "$WORK/token"
  start_ns_receiver "$ns_b" "$net.2:$port"
  start_job "$ns_a"
  wait_computing
  record_job_files
  at=$(progress)
  (close_fds && exec timeout 900 ip netns exec "$ns_a" "$BIN_DIR/cr_migrate" --to "$net.2:$port" \
    --token "$WORK/token" "$mode" --tree --json "$ROOT" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") ||
    fail "cr_migrate $mode --tree $(describe_status $?): $(first_line "$WORK/migrate.err")"
  n=$(wc -w <<<"$MEMBERS")
  grep -q "\"processes\":${n}[,}]" "$WORK/migrate.out" || fail "cr_migrate did not move the job's $n processes: $(cat "$WORK/migrate.out")"
  for p in $MEMBERS; do
    for ((i = 0; i < 100; i++)); do
      [[ $(proc_state "$p") == [Z-] ]] && break
      sleep 0.05
    done
    [[ $(proc_state "$p") == [Z-] ]] || fail "process $p of the source job still runs"
  done
  { wait "$ROOT"; } 2>/dev/null || true
  wait_exit "$RPID" 900 || fail "the job on B still runs 900 s later"
  ((EXIT_STATUS == 0)) || fail "the migrated job $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/recv.err")"
  expect_reference "after cr_migrate $mode"
  printf '%s|%s|%s|%s|SUCCESSFUL (moved after iteration line %s)\n' \
    "$(mib "$(json_field bytes_total "$WORK/migrate.out")") MiB sent, $(json_field rounds "$WORK/migrate.out") rounds" "" \
    "downtime $(secs downtime_seconds "$WORK/migrate.out") s" "" "$at" >"$ROW"
}

OUT=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-npb-table.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
TABLE=("| kernel | class | uninterrupted | action | full: size / frozen | incr: MiB/frozen s | frozen (pause, migration) | restore | verification after restart |"
  "|---|---|---|---|---|---|---|---|---|")
status=0
for kc in "${KERNELS[@]}"; do
  PROG=$(npb_binary "$kc") || {
    TABLE+=("| ${kc%.*} | ${kc#*.} | no binary | | | | | | |")
    status=1
    continue
  }
  RE=$(progress_re "${kc%.*}")
  # The uninterrupted run, in a case directory of its own.
  ROW=$OUT/$kc.ref
  (
    E2E_CASE="npb $kc uninterrupted"
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-npb.XXXXXX")
    JOB_TMP=$(mktemp -d /dev/shm/ckpt-npb.XXXXXX)
    JOB_FILES=()
    LOGS=("$WORK/prog.err")
    trap cleanup EXIT
    t=$EPOCHREALTIME
    start_job
    wait "$ROOT" || fail "the uninterrupted run $(describe_status $?): $(first_line "$WORK/prog.err")"
    ROOT=
    elapsed "$t" >"$ROW"
    verified "$WORK/prog.out" || fail "the uninterrupted run did not verify: $(grep -m1 -i verification "$WORK/prog.out")"
    results "$WORK/prog.out" >"$OUT/$kc.res"
  )
  if [[ ! -s $OUT/$kc.res ]]; then
    TABLE+=("| ${kc%.*} | ${kc#*.} | $(cat "$ROW.why" 2>/dev/null) | | | | | | |")
    status=1
    continue
  fi
  REF=$OUT/$kc.res
  ref_time="$(cat "$ROW") s"
  echo "$kc uninterrupted: $ref_time" >&2
  for action in "${ACTIONS[@]}"; do
    ROW=$OUT/$kc.$action
    (run_case "$kc" "$action")
    if [[ -s $ROW ]]; then
      IFS='|' read -r c1 c2 c3 c4 c5 <"$ROW"
      note=$(cat "$ROW.why" 2>/dev/null)
      TABLE+=("| ${kc%.*} | ${kc#*.} | $ref_time | $action | $c1 | $c2 | $c3 | $c4 | $c5${note:+; $note} |")
    else
      TABLE+=("| ${kc%.*} | ${kc#*.} | $ref_time | $action | | | | | $(cat "$ROW.why" 2>/dev/null || echo FAIL) |")
      status=1
    fi
    echo "${TABLE[-1]}" >&2
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${TABLE[@]}"
exit $status
