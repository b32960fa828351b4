#!/usr/bin/env bash
# restart_kill.sh BIN_DIR: kill -9 of cr_restart must never leave a process
# behind. A checkpoint of heap_pattern (256 MiB) is restored again and again,
# and cr_restart is killed right after it forked the process that takes the
# checkpoint's PID (at several delays), and while that process's address
# space is being rebuilt. After each kill nothing may hold the PID (the
# helper kill_at, a child subreaper, reaps whatever is re-parented to it);
# finally a plain cr_restart must work and the program must verify its
# memory and exit 0. With PRELOAD (kill_at_step.so): also killed right
# after every step that changes the child (below).
# Prints "PASS restart_kill" or "FAIL restart_kill: reason"; exit 0/1 (2: usage).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
(($# == 1 || $# == 2)) || {
  echo "usage: $0 BIN_DIR [PRELOAD]" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
PRELOAD=${2:-}
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}

fail() {
  echo "FAIL restart_kill: $*"
  show_logs
  exit 1
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-restart-kill.XXXXXX")
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err")

for x in cr_full cr_restart; do [[ -x $BIN_DIR/$x ]] || fail "$BIN_DIR/$x not built"; done
[[ -x $PROG_DIR/kill_at ]] || fail "$PROG_DIR/kill_at not built"

# checkpointed TAG MIB STEPS: heap_pattern of MIB MiB (files $WORK/*TAG),
# checkpointed into $WORK/ckTAG with --kill; its PID in TPID. The hold file
# keeps it from ending before the checkpoint on a loaded machine; restored
# copies find the file gone.
checkpointed() {
  local tag=$1 mib=$2 steps=$3
  touch "$WORK/hold$tag"
  (close_fds && E2E_HOLD_FILE=$WORK/hold$tag exec "$PROG_DIR/heap_pattern" "$WORK/ready$tag" "$mib" "$steps" </dev/null \
    >"$WORK/prog$tag.out" 2>"$WORK/prog$tag.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  wait_file "$WORK/ready$tag" "$TPID" 30 || fail "heap_pattern ($mib MiB) did not become ready"
  timeout 120 "$BIN_DIR/cr_full" --dir "$WORK/ck$tag" --kill "$TPID" >/dev/null 2>"$WORK/tool.err" ||
    fail "cr_full ($mib MiB): $(first_line "$WORK/tool.err")"
  wait_exit "$TPID" 10 || fail "the $mib MiB target did not end after cr_full --kill"
  rm -f "$WORK/hold$tag"
}
checkpointed "" 256 300

declare -A tested=()
for point in fork:0 fork:0 fork:0 fork:100 fork:1000 fork:5000 rebuild:0 rebuild:0 rebuild:2000 \
  rebuild:10000; do
  stage=${point%%:*}
  delay=${point#*:}
  rc=0
  (close_fds && exec timeout 60 "$PROG_DIR/kill_at" "$TPID" "$stage" "$delay" \
    "$BIN_DIR/cr_restart" --dir "$WORK/ck" </dev/null >/dev/null 2>"$WORK/tool.err") || rc=$?
  case $rc in
    0) tested[$stage]=$((${tested[$stage]:-0} + 1)) ;;
    3) echo "  note: $(first_line "$WORK/tool.err")" ;;
    *) fail "killed at $stage+${delay}us: $(first_line "$WORK/tool.err") (rc $rc)" ;;
  esac
done
echo "  kills that left nothing behind: fork ${tested[fork]:-0}, rebuild ${tested[rebuild]:-0}"
((${tested[fork]:-0} >= 3)) || fail "fewer than 3 kills right after the fork were tested"
((${tested[rebuild]:-0} >= 2)) || fail "fewer than 2 kills during the rebuild were tested"

# Every step: with PRELOAD (kill_at_step.so), a 32 MiB checkpoint is
# restored (--detach) by a cr_restart that kills itself right after each
# ptrace request or memory write that changes its child (every
# RESTART_KILL_STRIDE-th; all by default), counted in one normal run. After
# each, nothing may hold the PID, or the restore had completed (the process
# runs untraced: kill_at ends it).
if [[ -n $PRELOAD ]]; then
  T1=$TPID
  checkpointed 2 32 50
  T2=$TPID
  TPID=$T1
  rc=0
  (close_fds && LD_PRELOAD=$PRELOAD CKPT_STEP_COUNT_FILE=$WORK/steps exec timeout 60 \
    "$PROG_DIR/kill_at" "$T2" self 0 "$BIN_DIR/cr_restart" --dir "$WORK/ck2" --detach \
    </dev/null >/dev/null 2>"$WORK/tool.err") || rc=$?
  ((rc == 3)) || fail "a normal cr_restart --detach under kill_at: rc $rc $(first_line "$WORK/tool.err")"
  steps=$(cat "$WORK/steps" 2>/dev/null)
  ((${steps:-0} > 0)) || fail "the preload counted no step of cr_restart"
  stride=${RESTART_KILL_STRIDE:-1}
  freed=0 completed=0
  for ((n = 1; n <= steps; n++)); do
    ((n == 1 || n == steps || n % stride == 0)) || continue
    rc=0
    (close_fds && LD_PRELOAD=$PRELOAD CKPT_KILL_AT_STEP=$n exec timeout 60 \
      "$PROG_DIR/kill_at" "$T2" self 0 "$BIN_DIR/cr_restart" --dir "$WORK/ck2" --detach \
      </dev/null >/dev/null 2>"$WORK/tool.err") || rc=$?
    case $rc in
      0) freed=$((freed + 1)) ;;
      3) completed=$((completed + 1)) ;;
      *) fail "killed at step $n of $steps: $(first_line "$WORK/tool.err") (rc $rc)" ;;
    esac
  done
  echo "  step kills: $steps steps (stride $stride), $freed left nothing behind, $completed after the restore had completed"
  ((freed > 0)) || fail "no step kill landed before the restore completed"
  rc=0
  timeout 60 "$BIN_DIR/cr_restart" --dir "$WORK/ck2" </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
  ((rc == 0)) || fail "the 32 MiB restore after the step kills: $(describe_status "$rc") $(first_line "$WORK/tool.err")"
  [[ $(tail -n 1 "$WORK/prog2.out") == "done $(<"$WORK/ready2")" ]] ||
    fail "the 32 MiB program restored after the step kills did not print its done line"
fi

timeout 60 "$BIN_DIR/cr_restart" --dir "$WORK/ck" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err" ||
  fail "the restore after the kills: exit $? $(first_line "$WORK/prog.err")"
echo "PASS restart_kill"
