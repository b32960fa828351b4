#!/usr/bin/env bash
# jobgen.sh BIN_DIR [-j JOBS] SEED... : generated jobs (jobgen/, one job per
# seed: a random process tree with pipes, FIFOs, UNIX, TCP and UDP sockets,
# eventfds, ptys, epoll, timerfd, signalfd, interval timers ticking at
# any instant, shared and private memory
# written in patterns, descriptors at random numbers) run twice, each time in
# PID and network namespaces of its own:
#   1. uninterrupted, for its result;
#   2. under checkpoint (`cr_full --tree`, then the seed's incrementals, at
#      the seed's instants, with a tracker this kernel has), killed whole,
#      restored with `cr_restart`, finished: its result must be the same, and
#      every member checks its own memory, messages and descriptors itself.
# A job drawn with a resource the toolkit must refuse (a descriptor in
# flight, a peer outside the job) must be refused in one line per
# checkpoint and keep running to the same result; the last good checkpoint
# must still restore.
# SEED may be A-B (a range); --fresh N adds N seeds drawn from the clock;
# -r FILE adds the seeds of a regressions file
# (jobgen/regressions.txt). Prints one line per seed (PASS/FAIL seed N:
# what happened) and a summary; on a failure, the job's description and
# logs. Exit 0 only if no seed failed. JOBGEN_KEEP=1 keeps the work
# directories.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

usage() {
  echo "usage: $0 BIN_DIR [-j JOBS] [--fresh N] [-r REGRESSIONS] [SEED|A-B...]" >&2
  exit 2
}
(($# >= 2)) || usage
BIN_DIR=$(cd "$1" && pwd)
shift
JOBGEN=${E2E_PROG_DIR:-$BIN_DIR/e2e}/jobgen
TOOL_TIMEOUT=${JOBGEN_TOOL_TIMEOUT:-60}
JOB_TIMEOUT=${JOBGEN_JOB_TIMEOUT:-60}

# ---- inside the namespaces of one run (PID 1 there) ----

ms_sleep() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }

tree_pids() {
  local p=$1 c
  echo "$p"
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# start_job SEED RUN: the job in the background; sets ROOT, waits for ready.
start_job() {
  (close_fds && exec "$JOBGEN" run "$1" "$2" "$2/ready" </dev/null >>"$2/job.out" 2>>"$2/job.err") &
  ROOT=$!
  local rc=0
  wait_file "$2/ready" "$ROOT" 30 || rc=$?
  ((rc == 0)) || { echo "not ready ($rc): $(first_line "$2/job.err")"; return 1; }
}

# finish_job RUN: lets the job end and waits for it (our child).
finish_job() {
  touch "$1/finish"
  wait_exit "$ROOT" "$JOB_TIMEOUT" || { echo "did not finish in ${JOB_TIMEOUT} s: $(first_line "$1/job.err")"; return 1; }
  ((EXIT_STATUS == 0)) || { echo "$(describe_status "$EXIT_STATUS"): $(first_line "$1/job.err")"; return 1; }
}

# all_running PIDS: every member still there and not stopped or traced
# (zombies of the job stay zombies).
all_running() {
  local p st
  for p in $1; do
    st=$(proc_state "$p")
    [[ $st == Z && " $ZOMBIES " == *" $p "* ]] && continue
    [[ $st == [RSD] ]] || { echo "member $p is in state $st"; return 1; }
    [[ $(tracer_of "$p") == 0 ]] || { echo "member $p is still traced"; return 1; }
  done
}

# diagnose: what every process of this namespace waits in (a hung job):
# PID, name, state, kernel wait channel, system call and what its first
# argument names when it is a descriptor.
diagnose() {
  local p nr a0 link
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    read -r nr a0 _ <"/proc/$p/syscall" 2>/dev/null || continue
    link=""
    [[ $a0 == 0x* ]] && link=$(readlink "/proc/$p/fd/$((a0))" 2>/dev/null || true)
    # poll(2): the first descriptor it waits for.
    if [[ $nr == 7 ]]; then
      a0=$(dd if="/proc/$p/mem" bs=1 skip=$((a0)) count=4 2>/dev/null | od -An -td4 | tr -d ' ')
      link="fd $a0: $(readlink "/proc/$p/fd/$a0" 2>/dev/null || true)"
    fi
    echo "PID $p $(cat "/proc/$p/comm" 2>/dev/null) $(proc_state "$p") $(cat "/proc/$p/wchan" 2>/dev/null) syscall $nr $a0 ${link:+($link)}"
  done
  # Sockets with data waiting (queues, timers).
  ss -tanpoi 2>/dev/null | awk 'NR == 1 || $2 != 0 || $3 != 0 { print; getline; print }' | head -40
  # This namespace's TCP and UDP counters that moved (drops say why).
  nstat -az 2>/dev/null | awk '$2 != 0' | grep -E "Tcp|Udp" | head -40
}

inside_plain() {
  local seed=$1 run=$2
  ip link set lo up
  touch "$run/finish"
  start_job "$seed" "$run" && finish_job "$run"
}

# One checkpoint; REFUSED lines collect the refusals, GOOD counts successes.
GOOD=0
REFUSED=()
checkpoint() {
  local tool=$1 name=$2 rc=0 members
  shift 2
  members=$(tree_pids "$ROOT" | tr '\n' ' ')
  ZOMBIES=$(for p in $members; do [[ $(proc_state "$p") == Z ]] && echo "$p"; done | tr '\n' ' ')
  timeout "$TOOL_TIMEOUT" "$BIN_DIR/$tool" --tree --dir "$CK" "$@" "$ROOT" </dev/null \
    >"$RUN/$name.out" 2>"$RUN/$name.err" || rc=$?
  if ((rc == 0)); then
    GOOD=$((GOOD + 1))
    return 0
  fi
  ((rc != 124)) || { echo "$name: $tool timed out"; return 1; }
  ((rc < 128)) || { echo "$name: $tool $(describe_status "$rc"): $(first_line "$RUN/$name.err")"; return 1; }
  ((REFUSAL)) && grep -qE "$REFUSAL_MATCH" "$RUN/$name.err" ||
    { echo "$name: $tool failed: $(first_line "$RUN/$name.err")"; return 1; }
  is_one_line "$RUN/$name.err" || { echo "$name: refusal is not one line: $(head -c 300 "$RUN/$name.err")"; return 1; }
  REFUSED+=("$(first_line "$RUN/$name.err")")
  [[ " $* " == *" --kill "* ]] && return 0
  all_running "$members" || { echo "$name: refused, but $(all_running "$members")"; return 1; }
}

inside_checkpointed() {
  local seed=$1
  RUN=$2
  CK=$RUN/ck
  ip link set lo up
  eval "$("$JOBGEN" plan "$seed")"
  local trackers tracker
  mapfile -t trackers < <("$BIN_DIR/cr_check" --json | jq -r '.trackers[] as $t | select(.[$t].ok) | $t')
  tracker=${trackers[TRACKER_PICK % ${#trackers[@]}]}
  start_job "$seed" "$RUN" || return 1
  local common=(--tracker="$tracker") incr_opts=() n=${#INCR_DELAYS_MS[@]} i
  ((COMPRESS)) && incr_opts+=(--compress)
  ms_sleep "$FULL_DELAY_MS"
  local opts=("${common[@]}" "${incr_opts[@]}")
  ((FULL_LIVE)) && opts+=(--live)
  ((KILL_BY_TOOL && n == 0)) && opts+=(--kill)
  checkpoint cr_full full "${opts[@]}" || return 1
  for ((i = 0; i < n; i++)); do
    ms_sleep "${INCR_DELAYS_MS[i]}"
    opts=("${incr_opts[@]}")
    ((INCR_LIVE[i])) && opts+=(--live)
    ((KILL_BY_TOOL && i == n - 1)) && opts+=(--kill)
    # A refused full leaves no chain: the next try is a full again.
    if ((GOOD)); then checkpoint cr_incr "incr$i" "${opts[@]}" || return 1
    else checkpoint cr_full "full$i" "${common[@]}" "${opts[@]}" || return 1; fi
  done
  if ((GOOD == 0)); then
    finish_job "$RUN" || return 1
    echo "refused cleanly: ${REFUSED[0]}"
    return 0
  fi
  ms_sleep "$KILL_DELAY_MS"
  kill_all_gone $(tree_pids "$ROOT") || { echo "the job did not die"; return 1; }
  { wait "$ROOT"; } 2>/dev/null || true
  local gen=() rc=0
  if ((RESTORE_GENERATION >= 0 && RESTORE_GENERATION < GOOD - 1)); then
    gen=(--generation "$RESTORE_GENERATION")
  fi
  touch "$RUN/finish"
  "$BIN_DIR/cr_restart" --dir "$CK" "${gen[@]}" </dev/null >>"$RUN/job.out" 2>>"$RUN/restart.err" &
  local restorer=$!
  if ! wait_exit "$restorer" "$JOB_TIMEOUT"; then
    diagnose >"$RUN/hung.err"
    kill -9 "$restorer"
    wait_exit "$restorer" 10 || true
    rc=124
  else
    rc=$EXIT_STATUS
  fi
  ((rc == 0)) || {
    echo "restored job: $(describe_status "$rc"): $(first_line "$RUN/restart.err") $(first_line "$RUN/job.err")"
    return 1
  }
  local what="restored $GOOD generation(s) with $tracker"
  ((${#gen[@]})) && what+=", generation $RESTORE_GENERATION"
  ((${#REFUSED[@]})) && what+=", ${#REFUSED[@]} refused: ${REFUSED[0]}"
  echo "$what"
}

if [[ $1 == --inside ]]; then
  "inside_$2" "$3" "$4"
  exit
fi

JOBS=1
SEEDS=()
while (($#)); do
  case $1 in
    -j) JOBS=$2; shift 2 ;;
    --fresh)
      # N seeds no run drew before (from the clock), above the fixed set.
      base=$(( $(date +%s%N) / 1000 % 1000000000 + 1000000 ))
      for ((s = 0; s < $2; s++)); do SEEDS+=($((base + s * 7919))); done
      shift 2 ;;
    -r)
      # A regressions file: SEED|a line of its description|what it caught.
      while IFS='|' read -r seed line why; do
        [[ -z $seed || $seed == \#* ]] && continue
        "$JOBGEN" describe "$seed" | grep -qF -- "$line" ||
          { echo "FAIL regression seed $seed ($why): it no longer draws '$line': pin it again"; exit 1; }
        SEEDS+=("$seed")
      done <"$2"
      shift 2 ;;
    *-*) for ((s = ${1%-*}; s <= ${1#*-}; s++)); do SEEDS+=("$s"); done; shift ;;
    *) SEEDS+=("$1"); shift ;;
  esac
done
((${#SEEDS[@]})) || usage

# ---- one seed: both runs, each in namespaces of its own ----

# in_namespaces KIND SEED RUN: prints the run's verdict (its stderr, such
# as bash's notes on the processes it killed, goes to RUN/inside.err).
in_namespaces() {
  (close_fds && exec unshare --pid --net --fork --mount-proc --kill-child \
    bash "$HERE/jobgen.sh" "$BIN_DIR" --inside "$@" 2>>"$3/inside.err")
}

one_seed() {
  local seed=$1 dir verdict rc=0
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-jobgen-$seed.XXXXXX")
  mkdir "$dir/plain" "$dir/ck"
  verdict=$(in_namespaces plain "$seed" "$dir/plain") || rc=$?
  if ((rc == 0)); then
    verdict=$(in_namespaces checkpointed "$seed" "$dir/ck") || rc=$?
    if ((rc == 0)) && ! cmp -s "$dir/plain/result" "$dir/ck/result"; then
      verdict="the result differs from the uninterrupted run's: $(diff "$dir/plain/result" "$dir/ck/result" | head -3 | tr '\n' ' ')"
      rc=1
    fi
  else
    verdict="uninterrupted run: $verdict"
  fi
  if ((rc == 0)); then
    echo "PASS seed $seed: $verdict"
  else
    {
      echo "FAIL seed $seed: $verdict"
      "$JOBGEN" describe "$seed" | sed 's/^/  /'
      local f
      for f in "$dir"/ck/*.err "$dir"/plain/*.err; do
        [[ -s $f ]] && { echo "  --- ${f#"$dir"/} ---"; head -n 8 "$f" | sed 's/^/  /'; }
      done
    } >&2
  fi
  if [[ ${JOBGEN_KEEP:-0} == 1 ]]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
  return $rc
}

[[ -x $JOBGEN ]] || { echo "no $JOBGEN" >&2; exit 2; }
unshare --pid --net --fork --mount-proc true 2>/dev/null ||
  { echo "SKIP jobgen: cannot create PID and network namespaces"; exit 77; }

RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-jobgen-results.XXXXXX")
trap 'rm -rf "$RESULTS"' EXIT
running=0
for seed in "${SEEDS[@]}"; do
  (if one_seed "$seed"; then touch "$RESULTS/pass.$seed"; fi) >>"$RESULTS/out.$seed" 2>&1 &
  running=$((running + 1))
  if ((running >= JOBS)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
failed=0 refused=0
for seed in "${SEEDS[@]}"; do
  cat "$RESULTS/out.$seed"
  [[ -e $RESULTS/pass.$seed ]] || failed=$((failed + 1))
  grep -q "^PASS seed $seed: refused cleanly" "$RESULTS/out.$seed" && refused=$((refused + 1))
done
total=${#SEEDS[@]}
echo "jobgen: $total seeds: $((total - failed - refused)) restored exactly, $refused refused cleanly, $failed failed"
((failed == 0))
