#!/usr/bin/env bash
# move_kill.sh BIN_DIR MODE TRIALS PRELOAD: cr_pause, cr_migrate and cr_recv
# killed with SIGKILL at every step and at TRIALS random instants never harm
# the process they move, and never leave a process behind (issue 13).
# MODE:
#   cr_pause          heap_pattern checkpointed once (cr_full), then rolled
#                     back in place again and again by a cr_pause that is
#                     killed. After each kill the process is either running
#                     (untouched, or rolled back: both are correct states of
#                     it), untraced, unstopped, with its own signal mask; or,
#                     killed past the point of no return, dead by SIGKILL
#                     (it died with the tool rather than run half rolled
#                     back): then cr_restart of its chain must bring it back
#                     and it must finish correctly (docs/security.md).
#   cr_migrate-frozen cr_migrate --frozen / --live to a cr_recv on loopback
#   cr_migrate-live   (in its own PID namespace, serving migration after
#                     migration), killed. Afterwards exactly one copy of the
#                     process runs: the source, untouched (untraced,
#                     unstopped, own mask), or the migrated one with the
#                     source gone; never both, never none. The next
#                     migration to the same receiver works.
#   cr_recv           a fresh cr_recv --once per trial receives a live
#                     migration and is killed (steps: during the warm
#                     restore while generations arrive, the finish, the
#                     fallback); the same rule: one copy runs, and nothing
#                     is left in the receiver's PID namespace but that copy.
#   cr_recv-frozen    the same with a frozen migration: the receiver is killed
#                     while it builds the process from the layout and writes
#                     its memory as it arrives (metadata first)
# The steps include PTRACE_SETOPTIONS and PTRACE_DETACH (CKPT_STEP_HANDOVER):
# a sender killed right after setting EXITKILL leaves COMMIT to its witness;
# a receiver killed right after its last detach leaves RUNNING to its handler.
# A moved target cannot end by itself while the test looks at it (on a slow
# or loaded machine too): it keeps working while its pace file exists and
# does not end while its hold file exists (E2E_PACE_FILE, E2E_HOLD_FILE);
# the test removes both (release) when it waits for the process to finish.
# Steps come from PRELOAD (kill_at_step.so: ptrace requests and memory writes
# that change a process), counted in one normal run; random instants are
# uniform within 1.3 times a normal run. Every process must finish by itself
# with exit 0 and its "done" line (it verifies all its memory). Prints the
# counts; exit 1 if any process was harmed or left behind.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"

(($# == 4)) || {
  echo "usage: $0 BIN_DIR cr_pause|cr_migrate-frozen|cr_migrate-live|cr_recv|cr_recv-frozen TRIALS PRELOAD" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
MODE=$2
TRIALS=$3
PRELOAD=$(realpath "$4")
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
[[ $MODE == cr_pause || $MODE == cr_migrate-frozen || $MODE == cr_migrate-live || $MODE == cr_recv || $MODE == cr_recv-frozen ]] || exit 2
[[ -f $PRELOAD ]] || {
  echo "FAIL move_kill $MODE: no $PRELOAD"
  exit 1
}
# Step kills: all of them, or every STRIDE-th (CI budget; the first and the
# last are always tried).
STRIDE=${MOVE_KILL_STRIDE:-1}
((EUID == 0)) || {
  echo "SKIP move_kill $MODE: needs root"
  exit 77
}
if [[ $MODE != cr_pause ]] && ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  echo "SKIP move_kill $MODE: cannot make a PID namespace for the receiver"
  exit 77
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-move-kill.XXXXXX")
chmod 755 "$WORK"
PORT=$((21000 + $$ % 20000))
T_MIB=32
T_MIB=8 # the steps (injected calls) barely depend on the size; the time does
RECVS=()
cleanup() {
  local p
  for p in "${RECVS[@]}"; do kill_tree "$p"; done
  cleanup_common
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
head -c 32 /dev/urandom >"$WORK/token"
chmod 600 "$WORK/token"

harmed=0 targets=0 tries=0 kills=0 finished=0
declare -A outcome=()
problems=()
note() {
  harmed=$((harmed + 1))
  problems+=("$*")
  echo "HARMED: $*" >&2
}
sigblk() { awk '/^SigBlk:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# Whether $1 has a SIGKILL pending: a sender killed past COMMIT had set
# PTRACE_O_EXITKILL, so its death sent one, which the source acts on only
# once it is scheduled (on a loaded machine, a while later): it is dying.
kill_pending() {
  local m
  for m in $(awk '/^(SigPnd|ShdPnd):/ { print $2 }' "/proc/$1/status" 2>/dev/null); do
    (((16#$m >> 8) & 1)) && return 0
  done
  return 1
}

# Starts a target (PID, T_DIR, T_BLK, T_ID); cr_pause: and its checkpoint.
# A moved one is paced and held (1000 steps of 10 ms at most, then it
# waits) until release.
start_target() {
  targets=$((targets + 1))
  T_DIR=$WORK/t$targets
  mkdir "$T_DIR"
  local env=() steps=300
  if [[ $MODE != cr_pause ]]; then
    : >"$T_DIR/pace"
    : >"$T_DIR/hold"
    env=("E2E_PACE_FILE=$T_DIR/pace" "E2E_HOLD_FILE=$T_DIR/hold")
    steps=1000
  fi
  (close_fds && trap '' INT QUIT && exec env "${env[@]}" "$PROG_DIR/heap_pattern" "$T_DIR/ready" \
    "$T_MIB" "$steps" </dev/null >"$T_DIR/out" 2>"$T_DIR/err") &
  PID=$!
  HOLDER=$PID # whom to wait for: the process, or the cr_restart that brought it back
  OWN_PIDS+=("$PID")
  wait_file "$T_DIR/ready" "$PID" 30 || {
    note "target $targets never became ready"
    return 1
  }
  T_ID=$(<"$T_DIR/ready")
  T_BLK=$(sigblk "$PID")
  if [[ $MODE == cr_pause ]]; then
    "$BIN_DIR/cr_full" --dir "$T_DIR/ck" "$PID" </dev/null >/dev/null 2>"$T_DIR/full.err" || {
      note "target $targets: cr_full failed: $(first_line "$T_DIR/full.err")"
      return 1
    }
    sleep 0.1 # it moves on from its checkpoint: a rollback has work to do
  fi
}

# Lets the current target (or its copy) run its last steps at full speed
# and finish.
release() { rm -f "$T_DIR/pace" "$T_DIR/hold"; }

# The done line of the current target, after it ended with status $1.
check_done() {
  if (($1 != 0)); then
    note "target $targets ($2): $(describe_status "$1"): $(first_line "$T_DIR/err")"
  elif [[ $(tail -n 1 "$T_DIR/out") != "done $T_ID" ]]; then
    note "target $targets ($2): no \"done $T_ID\" line"
  else
    finished=$((finished + 1))
  fi
}

# Copies of the current target (by its ready file on their command line,
# which a restore brings back with the memory) other than the source.
copies() {
  local p
  for p in $(pgrep -f -- "$T_DIR/ready"); do
    [[ $p == "$PID" || $(proc_state "$p") == [Z-] ]] && continue
    [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == *heap_pattern* ]] && echo "$p"
  done
}

# Waits (10 s) until no copy is stopped or traced (a receiver aborting a
# half-built one) and prints the copies left.
settled_copies() {
  local i c busy
  for ((i = 0; i < 200; i++)); do
    busy=0
    for c in $(copies); do
      [[ $(proc_state "$c") == [tT] || $(tracer_of "$c") != 0 ]] && busy=1
    done
    ((busy)) || break
    sleep 0.05
  done
  copies
}

# Waits for a copy (not our child) to end, 60 s at most.
wait_gone() {
  local i
  for ((i = 0; i < 1200; i++)); do
    [[ $(proc_state "$1") == [Z-] ]] && return 0
    sleep 0.05
  done
  return 1
}

# Whether $1 is still the current target (its ready file is on its command
# line, a restored copy's too), not another process that took the PID of
# one that ended: a restored source that dies is reaped at once by its
# cr_restart, and on a busy machine (CI's stages run side by side, their
# tools tracing and stopping their own targets) its PID can be reused
# within moments.
is_source() { [[ $(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) == *"$T_DIR/ready"* ]]; }

# The source is running, untouched by the killed tool.
source_ok() {
  local st
  st=$(proc_state "$PID")
  [[ $(tracer_of "$PID") == 0 ]] || note "target $targets still traced after $1"
  [[ $st != T && $st != t ]] || note "target $targets left stopped after $1"
  [[ $(sigblk "$PID") == "$T_BLK" ]] || note "target $targets: mask $(sigblk "$PID") instead of $T_BLK after $1"
}

# start_receiver [--once] [ENV...]: cr_recv on loopback in its own PID
# namespace, whose init (bash) outlives it and reaps what it leaves.
start_receiver() {
  local once=$1
  shift
  # The receiver of the trial before must be gone, and its port free (a
  # SIGKILL takes effect asynchronously: on a loaded machine the next
  # receiver could find the port still taken).
  [[ -z ${RNS:-} ]] || kill_tree "$RNS"
  local deadline=$((SECONDS + 30))
  while [[ -n $(ss -Hltn "sport = :$PORT" 2>/dev/null) ]] && ((SECONDS < deadline)); do
    sleep 0.05
  done
  rm -f "$WORK/recv.pid"
  (close_fds && exec unshare --pid --fork --mount-proc --kill-child bash -c '
     cd /
     env "$@" &
     echo $! >"'"$WORK"'/recv.pid"
     while :; do sleep 0.05; done' _ "$@" "$BIN_DIR/cr_recv" --listen "127.0.0.1:$PORT" \
    --token "$WORK/token" $once </dev/null >"$WORK/recv.out" 2>"$WORK/recv.err") &
  RNS=$!
  disown "$RNS" # (bash would report its death on stderr)
  RECVS+=("$RNS")
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -n $(ss -Hltn "sport = :$PORT" 2>/dev/null) ]] && break
    sleep 0.05
  done
  ((i < 200)) || {
    note "cr_recv not listening: $(first_line "$WORK/recv.err")"
    return 1
  }
  RPID=$(pgrep -f -- "cr_recv --listen 127.0.0.1:$PORT" | while read -r p; do
    [[ $(readlink "/proc/$p/exe") == "$BIN_DIR/cr_recv" ]] && echo "$p"
  done | head -n 1)
}

# What is left in the receiver's namespace besides its init and cr_recv
# (and the copy $1, if any; "copies": any copy of the target).
ns_leftovers() {
  local init p
  read -r init _ < <(cat /proc/"$RNS"/task/*/children 2>/dev/null) # ("PID ")
  [[ -n $init ]] || return 0
  local init_cmd
  init_cmd=$({ tr '\0' ' ' <"/proc/$init/cmdline"; } 2>/dev/null)
  for p in $(cat /proc/"$init"/task/*/children 2>/dev/null); do
    [[ $p == "${RPID:-}" || $p == "${1:-}" ]] && continue
    local cmd
    cmd=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue # (ended meanwhile)
    # The init's own fork on its way to exec its next sleep (seen under
    # load): it still carries the init's command line.
    [[ $cmd == "$init_cmd" ]] && continue
    [[ ${1:-} == copies && $cmd == *"$T_DIR/ready"* ]] && continue
    [[ $cmd == sleep* ]] && continue
    [[ $(proc_state "$p") == [Z-] ]] && continue
    echo "$p:$(proc_state "$p"):${cmd:0:60}"
  done
}

# The tool's command for the current target.
tool_cmd() {
  case $MODE in
    cr_pause) CMD=("$BIN_DIR/cr_pause" --dir "$T_DIR/ck" "$PID") ;;
    cr_migrate-*) CMD=("$BIN_DIR/cr_migrate" --to "127.0.0.1:$PORT" --token "$WORK/token" "--${MODE#cr_migrate-}" "$PID") ;;
    cr_recv) CMD=("$BIN_DIR/cr_migrate" --to "127.0.0.1:$PORT" --token "$WORK/token" --live "$PID") ;;
    cr_recv-frozen) CMD=("$BIN_DIR/cr_migrate" --to "127.0.0.1:$PORT" --token "$WORK/token" --frozen "$PID") ;;
  esac
}

# One trial ("step N" or "delay S"); returns 1 when the target's turn is over.
trial() {
  local how=$1 arg=$2 rc=0 env=() tool
  tries=$((tries + 1))
  tool_cmd
  [[ $how == step ]] && env=(LD_PRELOAD="$PRELOAD" CKPT_KILL_AT_STEP="$arg" CKPT_STEP_HANDOVER=1)
  if [[ $MODE == cr_recv* ]]; then
    start_receiver --once "${env[@]}" || {
      release
      return 1
    }
    (close_fds && exec timeout 60 "${CMD[@]}" </dev/null >/dev/null 2>"$WORK/tool.err") &
    tool=$!
    if [[ $how == delay ]]; then
      sleep "$arg"
      kill -9 "$RPID" 2>/dev/null
    fi
    # Once cr_recv is dead, its handler and gatekeepers follow it (they are
    # not left to wait for the sender's timeouts): within 10 s nothing but
    # copies of the target (judged below) is left of it.
    while [[ $(proc_state "$RPID") != [Z-] && $(proc_state "$tool") != [Z-] ]]; do sleep 0.02; done
    if [[ $(proc_state "$RPID") == [Z-] ]]; then
      local left deadline=$((SECONDS + 10))
      while left=$(ns_leftovers copies) && [[ -n $left ]] && ((SECONDS < deadline)); do
        sleep 0.02
      done
      [[ -z $left ]] || note "10 s after cr_recv died ($how $arg), its namespace still holds $left"
    fi
    { wait "$tool"; } 2>/dev/null || rc=$?
    [[ -e /proc/$RPID ]] && kill -0 "$RPID" 2>/dev/null && [[ $(proc_state "$RPID") != Z ]] ||
      kills=$((kills + 1))
  elif [[ $how == step ]]; then
    { env "${env[@]}" "${CMD[@]}" </dev/null >/dev/null 2>"$WORK/tool.err"; } 2>/dev/null || rc=$?
  else
    "${CMD[@]}" </dev/null >/dev/null 2>"$WORK/tool.err" &
    tool=$!
    sleep "$arg"
    kill -9 "$tool" 2>/dev/null
    { wait "$tool"; } 2>/dev/null || rc=$?
  fi
  [[ $MODE != cr_recv* ]] && ((rc == 137)) && kills=$((kills + 1))
  local what="$MODE killed at $how $arg" st i
  for ((i = 0; i < 400; i++)); do # a dying source is not a running one
    is_source "$PID" && kill_pending "$PID" || break
    sleep 0.05
  done
  ((i == 0)) || [[ -z ${MOVE_KILL_VERBOSE:-} ]] || echo "target $targets: $what: the source had a SIGKILL pending for $((i * 50)) ms" >&2
  # A tool's death takes effect asynchronously: its tracees are let go as
  # its last thread exits, and a source it leaves is judged once settled
  # (10 s at most): untraced and not stopped, or gone. Still traced or
  # stopped after that is harm (source_ok). A wait is reported with whoever
  # traced the source (CI of 5372fee once found it traced and stopped right
  # after cr_pause died at a step: most likely its PID taken by another
  # process, which is_source now tells apart).
  local first_tracer
  first_tracer=$(tracer_of "$PID")
  for ((i = 0; i < 200; i++)); do
    st=$(proc_state "$PID")
    [[ $st == [Z-] ]] || ! is_source "$PID" && break
    [[ $(tracer_of "$PID") == 0 && $st != [tT] ]] && break
    sleep 0.05
  done
  ((i == 0)) || echo "target $targets: $what: the source settled after $((i * 50)) ms" \
    "(traced at first by ${first_tracer:-?}: $(tr '\0' ' ' <"/proc/${first_tracer:-0}/cmdline" 2>/dev/null))" >&2
  st=$(proc_state "$PID")
  # (A source that ends by itself right now has no mask to read: ended.)
  [[ -n $(sigblk "$PID") ]] && is_source "$PID" || st=-
  local -a cps
  if [[ $MODE == cr_pause ]]; then
    cps=()
  else
    mapfile -t cps < <(settled_copies)
  fi
  [[ -z ${MOVE_KILL_VERBOSE:-} ]] || echo "target $targets: $what: tool $(describe_status "$rc"), source $st, copies ${cps[*]:-none}" >&2
  if [[ $st != - && $st != Z ]]; then
    source_ok "$what"
    if ((${#cps[@]})); then
      note "target $targets runs twice after $what (source $PID, copy ${cps[*]})"
      kill -9 "${cps[@]}" 2>/dev/null
    fi
    if [[ $MODE == cr_recv* ]]; then
      local left
      left=$(ns_leftovers)
      [[ -z $left ]] || note "after $what the receiver left $left"
      kill_tree "$RNS"
    fi
    outcome[source-runs]=$((${outcome[source-runs]:-0} + 1))
    return 0
  fi
  # The source ended.
  { wait_exit "$HOLDER" 5; } 2>/dev/null
  local src=$EXIT_STATUS
  # Killed with its sender past COMMIT: the receiver restores the copy,
  # which may not exist yet (30 s at most).
  if [[ $MODE != cr_pause ]] && ((src == 137 && ${#cps[@]} == 0)); then
    for ((i = 0; i < 300 && ${#cps[@]} == 0; i++)); do
      sleep 0.1
      mapfile -t cps < <(settled_copies)
    done
  fi
  if [[ $MODE == cr_pause ]]; then
    if ((src == 0)); then # its run was over
      check_done 0 "ended during $what"
      outcome[ended]=$((${outcome[ended]:-0} + 1))
      return 1
    fi
    ((src == 137)) || {
      note "target $targets $(describe_status "$src") after $what: $(first_line "$T_DIR/err")"
      return 1
    }
    # Died with the tool past the point of no return: the chain brings it
    # back (same PID), and the kills go on against the restored process.
    (close_fds && exec timeout 120 "$BIN_DIR/cr_restart" --dir "$T_DIR/ck" </dev/null \
      >/dev/null 2>"$WORK/restart.err") &
    HOLDER=$!
    OWN_PIDS+=("$HOLDER")
    local i tracer=- why=timeout t_r=$SECONDS
    # Up to 60 s: on a loaded machine the dead process's PID may be freed
    # late (cr_restart waits up to 5 s for a zombie holding it).
    for ((i = 0; i < 3000; i++)); do
      st=$(proc_state "$PID")
      tracer=$(tracer_of "$PID")
      [[ $st == [RSD] && $tracer == 0 && $(readlink "/proc/$PID/exe") == */heap_pattern ]] && {
        why=up
        break
      }
      [[ -e /proc/$HOLDER && $(proc_state "$HOLDER") != Z ]] || {
        why=ended
        break
      }
      sleep 0.02
    done
    if [[ $why != up ]]; then
      local how="still running"
      if [[ $(proc_state "$HOLDER") == [Z-] ]]; then
        wait "$HOLDER" 2>/dev/null
        how="ended with status $?"
      fi
      # Where each side waits (a failure can leave the process sleeping,
      # traced or not, with cr_restart running).
      local where
      tracer=$(tracer_of "$PID")
      where="tracer $tracer ($({ tr '\0' ' ' <"/proc/$tracer/cmdline"; } 2>/dev/null | cut -c1-80))"
      where+=", exe $(readlink "/proc/$PID/exe" 2>/dev/null), wchan $(cat "/proc/$PID/wchan" 2>/dev/null)"
      where+=", threads $(ls "/proc/$PID/task" 2>/dev/null | wc -l), after $((SECONDS - t_r)) s ($why)"
      where+=", stack $(head -n 3 "/proc/$PID/stack" 2>/dev/null | tr '\n' ' ')"
      note "target $targets: cr_restart after $what did not bring it back (cr_restart $how, the process $st; $where): $(first_line "$WORK/restart.err")"
      return 1
    fi
    outcome[died-restarted]=$((${outcome[died-restarted]:-0} + 1))
    return 0
  fi
  if ((${#cps[@]} != 1)); then
    if ((src == 0)) && [[ $(tail -n 1 "$T_DIR/out") == "done $T_ID" ]] && ((${#cps[@]} == 0)); then
      finished=$((finished + 1)) # its run was over before the migration
      outcome[ended]=$((${outcome[ended]:-0} + 1))
      return 1
    fi
    note "target $targets: source $(describe_status "$src") and ${#cps[@]} copies after $what"
    kill -9 "${cps[@]}" 2>/dev/null
    return 1
  fi
  local copy=${cps[0]}
  [[ $(tracer_of "$copy") == 0 ]] || note "the migrated copy of target $targets is traced after $what"
  if [[ $MODE == cr_recv* ]]; then
    local left
    left=$(ns_leftovers "$copy")
    [[ -z $left ]] || note "after $what the receiver left $left"
  fi
  release
  wait_gone "$copy" || {
    note "the migrated copy of target $targets still runs 60 s later"
    kill -9 "$copy"
  }
  check_done 0 "migrated, $what"
  outcome[migrated]=$((${outcome[migrated]:-0} + 1))
  [[ $MODE == cr_recv* ]] && kill_tree "$RNS"
  return 1
}

run_trials() {
  local -a list=("$@")
  local i=0 ok
  while ((i < ${#list[@]})); do
    start_target || {
      ((harmed < 5)) || break
      continue
    }
    # cr_pause rolls its target back again and again: one target takes
    # kills as long as it runs; a migrated one is checked 2 s after its start.
    local t_end=$((SECONDS + 2))
    [[ $MODE == cr_pause ]] && t_end=$((SECONDS + 100000))
    ok=0
    while ((i < ${#list[@]} && SECONDS < t_end)); do
      ok=0
      trial ${list[i]} || ok=$?
      i=$((i + 1))
      ((ok == 0)) || break
    done
    ((harmed < 5)) || break # something is broken: the rest would only repeat it
    if ((ok == 0)); then # the source still runs: it must finish by itself
      release
      wait_exit "$HOLDER" 60 || {
        note "target $targets still runs 60 s after its kills"
        kill -9 "$PID"
        continue
      }
      check_done "$EXIT_STATUS" "after its kills"
    fi
  done
}

# A normal run: how many steps, how long.
[[ $MODE == cr_migrate-* ]] && { start_receiver "" || exit 1; }
start_target || exit 1
tool_cmd
t0=$EPOCHREALTIME
if [[ $MODE == cr_recv* ]]; then
  start_receiver --once LD_PRELOAD="$PRELOAD" CKPT_STEP_COUNT_FILE="$WORK/steps" CKPT_STEP_HANDOVER=1 || exit 1
  "${CMD[@]}" </dev/null >/dev/null 2>"$WORK/tool.err" || {
    echo "FAIL move_kill $MODE: a normal migration failed: $(first_line "$WORK/tool.err")"
    exit 1
  }
  duration=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }')
else
  LD_PRELOAD=$PRELOAD CKPT_STEP_COUNT_FILE=$WORK/steps CKPT_STEP_HANDOVER=1 "${CMD[@]}" </dev/null >/dev/null 2>"$WORK/tool.err" || {
    echo "FAIL move_kill $MODE: a normal run failed: $(first_line "$WORK/tool.err")"
    exit 1
  }
  duration=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }')
fi
if [[ $MODE == cr_pause ]]; then
  wait_exit "$PID" 60 && check_done "$EXIT_STATUS" "after a normal cr_pause"
else
  # The sender ended the source; the copy holds until release.
  { wait_exit "$PID" 10; } 2>/dev/null
  mapfile -t cps < <(settled_copies)
  release
  ((${#cps[@]} == 1)) && wait_gone "${cps[0]}" && check_done 0 "after a normal migration" ||
    note "a normal migration left ${#cps[@]} copies"
  if [[ $MODE == cr_recv* ]]; then
    # cr_recv --once ends after its copy, writing the step count as it exits.
    for ((i = 0; i < 1200; i++)); do
      [[ $(proc_state "$RPID") == [Z-] ]] && break
      sleep 0.05
    done
    kill_tree "$RNS"
  fi
fi
steps=$(cat "$WORK/steps" 2>/dev/null)
((${steps:-0} > 0)) || {
  echo "FAIL move_kill $MODE: the preload counted no step"
  exit 1
}

plan=()
for ((n = 1; n <= steps; n++)); do
  ((n == 1 || n == steps || n % STRIDE == 0)) && plan+=("step $n")
done
run_trials "${plan[@]}"
step_tries=$tries step_kills=$kills
plan=()
for ((n = 0; n < TRIALS; n++)); do
  plan+=("delay $(awk -v d="$duration" -v r="$RANDOM" 'BEGIN { printf "%.4f", r / 32767 * d * 1.3 }')")
done
run_trials "${plan[@]}"
outs=""
for k in "${!outcome[@]}"; do outs+=" $k ${outcome[$k]},"; done
summary="$MODE: $step_tries step kills (of $steps steps, stride $STRIDE; $step_kills landed), $((tries - step_tries)) random kills ($((kills - step_kills)) landed, run ${duration}s); afterwards:${outs%,}; $targets targets, $finished finished correctly, $harmed harmed"
if ((harmed > 0)); then
  echo "FAIL move_kill $summary: ${problems[0]}"
  exit 1
fi
echo "PASS move_kill $summary"
