#!/usr/bin/env bash
# restart_kill.sh BIN_DIR: kill -9 of cr_restart must never leave a process
# behind. A checkpoint of heap_pattern (256 MiB) is restored again and again,
# and cr_restart is killed right after it forked the process that takes the
# checkpoint's PID (at several delays), and while that process's address
# space is being rebuilt. After each kill nothing may hold the PID (the
# helper kill_at, a child subreaper, reaps whatever is re-parented to it);
# finally a plain cr_restart must work and the program must verify its
# memory and exit 0.
# Prints "PASS restart_kill" or "FAIL restart_kill: reason"; exit 0/1 (2: usage).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
(($# == 1)) || {
  echo "usage: $0 BIN_DIR" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
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

(close_fds && exec "$PROG_DIR/heap_pattern" "$WORK/ready" 256 300 </dev/null \
  >"$WORK/prog.out" 2>"$WORK/prog.err") &
TPID=$!
OWN_PIDS+=("$TPID")
wait_file "$WORK/ready" "$TPID" 30 || fail "heap_pattern did not become ready"
timeout 120 "$BIN_DIR/cr_full" --dir "$WORK/ck" --kill "$TPID" >/dev/null 2>"$WORK/tool.err" ||
  fail "cr_full: $(first_line "$WORK/tool.err")"
wait_exit "$TPID" 10 || fail "the target did not end after cr_full --kill"

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

timeout 60 "$BIN_DIR/cr_restart" --dir "$WORK/ck" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err" ||
  fail "the restore after the kills: exit $? $(first_line "$WORK/prog.err")"
echo "PASS restart_kill"
