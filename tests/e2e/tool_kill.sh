#!/usr/bin/env bash
# tool_kill.sh BIN_DIR TOOL TRIALS PRELOAD: a checkpoint tool killed with
# SIGKILL at any instant never harms its target. TOOL is cr_full (its runs
# include arming the tracker) or cr_incr (after one cr_full). The target is
# heap_pattern started the way a shell script's "prog &" starts it: SIGINT
# and SIGQUIT ignored, which makes the tools inject calls into it.
#  - step kills: PRELOAD (kill_at_step.so) counts the requests that change
#    the target in one normal run, then the tool is killed right after each
#    of them in turn (CKPT_KILL_AT_STEP=N);
#  - TRIALS random kills: after a random delay within a normal run's time
#    (cr_full: every other one the moment the tracker's userfaultfd appears
#    in the target instead). A cr_full trial that left the target tracked
#    ends its target's turn: the next cr_full would not arm it again.
# After every kill the target must be alive, untraced, with its own signal
# mask; every target must then finish by itself, exit 0 and print its
# "done" line (it verifies all its memory). Prints the counts; exit 1 if any
# target was harmed, 77 if the kernel lacks the tracker cr_full would use.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# == 4)) || {
  echo "usage: $0 BIN_DIR cr_full|cr_incr TRIALS PRELOAD" >&2
  exit 2
}
BIN_DIR=$1
TOOL=$2
TRIALS=$3
PRELOAD=$4
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
# TOOL_KILL_TARGET=fpu_vector: a target that keeps values live in its
# x87/SSE/AVX registers (what the return frame's xstate must give back).
TARGET=${TOOL_KILL_TARGET:-heap_pattern}
TARGET_ARGS=()
[[ $TARGET == heap_pattern ]] && TARGET_ARGS=(32 250)
TARGET_SECONDS=2 # a target takes kills for this long, then must finish
[[ $TOOL == cr_full || $TOOL == cr_incr ]] || exit 2
[[ -f $PRELOAD ]] || {
  echo "FAIL tool_kill $TOOL: no $PRELOAD"
  exit 1
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-tool-kill.XXXXXX")
install_traps

harmed=0 finished=0 targets=0 kills=0 tries=0
problems=()
note() {
  harmed=$((harmed + 1))
  problems+=("$*")
  echo "HARMED: $*" >&2
}

has_uffd() { ls -l "/proc/$PID/fd" 2>/dev/null | grep -q userfaultfd; }
sigblk() { awk '/^SigBlk:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# Starts a target (PID, T_DIR, T_END), with SIGINT and SIGQUIT ignored.
start_target() {
  targets=$((targets + 1))
  T_DONE=0
  T_DIR=$WORK/t$targets
  mkdir "$T_DIR"
  (close_fds && trap '' INT QUIT && exec "$PROG_DIR/$TARGET" "$T_DIR/ready" "${TARGET_ARGS[@]}" \
    </dev/null >"$T_DIR/out" 2>"$T_DIR/err") &
  PID=$!
  OWN_PIDS+=("$PID")
  wait_file "$T_DIR/ready" "$PID" 30 || {
    note "target $targets never became ready"
    return 1
  }
  T_BLK=$(sigblk "$PID")
  T_END=$((SECONDS + TARGET_SECONDS))
  if [[ $TOOL == cr_incr ]]; then
    "$BIN_DIR/cr_full" --dir "$T_DIR/ck" "$PID" </dev/null >/dev/null 2>"$T_DIR/full.err" || {
      note "target $targets: cr_full before the kills failed: $(first_line "$T_DIR/full.err")"
      return 1
    }
  fi
}

# Waits for target $1 (PID $2, directory $3) to end by itself and checks
# its result.
finish_target() {
  local n=$1 pid=$2 dir=$3
  if ! { wait_exit "$pid" 60; } 2>/dev/null; then
    note "target $n still running 60s after its kills"
    kill -9 "$pid" 2>/dev/null
    return
  fi
  local ready
  ready=$(<"$dir/ready")
  if ((EXIT_STATUS != 0)); then
    note "target $n: $(describe_status "$EXIT_STATUS"): $(first_line "$dir/err")"
  elif [[ $(tail -n 1 "$dir/out") != "done $ready" ]]; then
    note "target $n: no \"done $ready\" line"
  else
    finished=$((finished + 1))
  fi
}

# Targets done with their kills that still run to their end: checked later,
# so that the next target's kills need not wait for them (a cr_full target
# takes one kill, then runs two more seconds).
PENDING=()
defer_target() {
  T_DONE=1
  PENDING+=("$targets $PID $T_DIR")
  finish_pending 8
}
# Checks the oldest pending targets until at most $1 are left.
finish_pending() {
  while ((${#PENDING[@]} > $1)); do
    # shellcheck disable=SC2086 # three words
    finish_target ${PENDING[0]}
    PENDING=("${PENDING[@]:1}")
  done
}

# One run of the tool against the current target, killed by `how`
# ("step N" or "delay SECONDS"); checks the target right after.
trial() {
  local how=$1 arg=$2 rc=0 st
  tries=$((tries + 1))
  local dir=$T_DIR/ck
  [[ $TOOL == cr_full ]] && dir=$T_DIR/ck-$tries
  if [[ $how == step ]]; then
    { LD_PRELOAD=$PRELOAD CKPT_KILL_AT_STEP=$arg "$BIN_DIR/$TOOL" --dir "$dir" "$PID" \
      </dev/null >/dev/null 2>"$WORK/tool.err"; } 2>/dev/null || rc=$?
  else
    "$BIN_DIR/$TOOL" --dir "$dir" "$PID" </dev/null >/dev/null 2>"$WORK/tool.err" &
    local tool=$!
    if [[ $how == marker ]]; then
      # The moment the tracker's userfaultfd appears (created at the lowest
      # free number, 3 here, then moved to 1000).
      while [[ ! -e /proc/$PID/fd/3 && ! -e /proc/$PID/fd/1000 && -e /proc/$tool ]]; do :; done
    else
      sleep "$arg"
    fi
    kill -9 "$tool" 2>/dev/null
    { wait "$tool"; } 2>/dev/null || rc=$?
  fi
  ((rc == 137)) && kills=$((kills + 1))
  st=$(proc_state "$PID")
  [[ -z ${TOOL_KILL_VERBOSE:-} ]] || echo "target $targets: $TOOL $how $arg: tool $(describe_status "$rc"), target state $st" >&2
  if [[ $st == - || $st == Z ]]; then
    # Ended: by itself and correctly (its run was over), or harmed.
    { wait_exit "$PID" 5; } 2>/dev/null
    T_DONE=1
    if ((EXIT_STATUS == 0)) && [[ $(tail -n 1 "$T_DIR/out") == "done $(<"$T_DIR/ready")" ]]; then
      finished=$((finished + 1))
    else
      note "target $targets gone after $TOOL killed at $how $arg ($(describe_status "$EXIT_STATUS"))"
    fi
    return 1
  fi
  [[ $(tracer_of "$PID") == 0 ]] || note "target $targets still traced after a kill at $how $arg"
  [[ $(sigblk "$PID") == "$T_BLK" ]] ||
    note "target $targets: signal mask $(sigblk "$PID") instead of $T_BLK after a kill at $how $arg"
  [[ $st != T && $st != t ]] || note "target $targets left stopped after a kill at $how $arg"
  return 0
}

# Runs trials (a list of "how arg" words) across as many targets as needed.
run_trials() {
  local -a list=("$@")
  local i=0
  while ((i < ${#list[@]})); do
    start_target || {
      [[ -e /proc/$PID ]] && kill -9 "$PID" 2>/dev/null
      ((harmed < 5)) || break  # targets cannot even start: stop here
      continue
    }
    while ((i < ${#list[@]} && SECONDS < T_END)); do
      local ok=0
      trial ${list[i]} || ok=$?
      i=$((i + 1))
      ((ok == 0)) || break
      # A tracked target's next cr_full injects nothing to arm: a new one.
      [[ $TOOL == cr_full ]] && has_uffd && break
    done
    ((T_DONE)) || defer_target
  done
}

if [[ $TOOL == cr_full ]]; then
  "$BIN_DIR/cr_check" --json | grep -q '"pagemap-scan":{"detail":"[^"]*","ok":true' || {
    echo "SKIP tool_kill $TOOL: no pagemap-scan tracker here (nothing is injected to arm it)"
    exit 77
  }
fi

# A normal run: how many steps, how long.
start_target || exit 1
t0=$EPOCHREALTIME
LD_PRELOAD=$PRELOAD CKPT_STEP_COUNT_FILE=$WORK/steps "$BIN_DIR/$TOOL" --dir "$T_DIR/ck" "$PID" \
  </dev/null >/dev/null 2>"$WORK/tool.err" || {
  echo "FAIL tool_kill $TOOL: a normal run failed: $(first_line "$WORK/tool.err")"
  exit 1
}
duration=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }')
defer_target
steps=$(<"$WORK/steps")
((steps > 0)) || {
  echo "FAIL tool_kill $TOOL: the preload counted no step"
  exit 1
}

plan=()
for ((n = 1; n <= steps; n++)); do plan+=("step $n"); done
run_trials "${plan[@]}"
step_kills=$kills step_tries=$tries
plan=()
for ((n = 0; n < TRIALS; n++)); do
  if [[ $TOOL == cr_full ]] && ((n % 2)); then
    plan+=("marker uffd")
    continue
  fi
  # Uniform within 1.3 times a normal run (startup included), 0.1 ms grain.
  plan+=("delay $(awk -v d="$duration" -v r="$RANDOM" 'BEGIN { printf "%.4f", r / 32767 * d * 1.3 }')")
done
run_trials "${plan[@]}"
finish_pending 0
summary="$TOOL: $step_tries step kills ($step_kills landed, of $steps steps), $((tries - step_tries)) random kills ($((kills - step_kills)) landed, run ${duration}s); $targets targets, $finished finished correctly, $harmed harmed"
if ((harmed > 0)); then
  echo "FAIL tool_kill $summary: ${problems[0]}"
  exit 1
fi
echo "PASS tool_kill $summary"
