#!/usr/bin/env bash
# incr_crash.sh BIN_DIR TRACKER: cr_incr killed with SIGKILL at several points
# never damages the committed chain. A heap_pattern target keeps rewriting its
# memory; after cr_full, cr_incr is started and killed after increasing delays.
# After every kill: every visible generation verifies, none is half written.
# Then a normal cr_incr still works, the target is killed, and the newest
# generation restores and passes the program's own byte-for-byte check.
# (TRACKER hash makes cr_incr read all memory: a wide window to kill in;
# pagemap-scan is milliseconds, so its kills land earlier in its run.)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

BIN_DIR=$1
TRACKER=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
OWN_PIDS=()
MOUNTS=()
E2E_CASE="incr_crash $TRACKER" # for pass, fail and skip (lib.sh)
if [[ $TRACKER != hash ]] &&
  ! "$BIN_DIR/cr_check" --json | grep -q "\"$TRACKER\":{\"detail\":\"[^\"]*\",\"ok\":true"; then
  echo "SKIP incr_crash $TRACKER: this kernel cannot run the $TRACKER tracker (see cr_check)"
  exit 77
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-incr-crash.XXXXXX")
install_traps
CKPT=$WORK/ckpt

(close_fds && exec "$PROG_DIR/heap_pattern" "$WORK/ready" 96 1500 </dev/null >"$WORK/prog.out" \
  2>"$WORK/prog.err") &
PID=$!
OWN_PIDS+=("$PID")
wait_file "$WORK/ready" "$PID" 30 || fail "target did not become ready"

"$BIN_DIR/cr_full" --dir "$CKPT" --tracker "$TRACKER" "$PID" >/dev/null 2>"$WORK/tool.err" ||
  fail "cr_full: $(first_line "$WORK/tool.err")"

# Lists the committed generations, one per line.
gens() { ls "$CKPT" | grep '^gen-' || true; }

kills=0
for delay in 0 0.001 0.003 0.01 0.03 0.06 0.1 0.15; do
  before=$(gens)
  "$BIN_DIR/cr_incr" --dir "$CKPT" "$PID" >/dev/null 2>&1 &
  tool=$!
  sleep "$delay"
  if kill -9 "$tool" 2>/dev/null; then kills=$((kills + 1)); fi
  { wait "$tool"; } 2>/dev/null || true
  # The target must still be there, not stopped, not traced.
  st=$(proc_state "$PID")
  [[ $st != - && $st != Z ]] || fail "target gone after killing cr_incr at ${delay}s"
  [[ $(tracer_of "$PID") == 0 ]] || fail "target still traced after killing cr_incr at ${delay}s"
  # Whatever became visible is whole.
  "$BIN_DIR/cr_info" --dir "$CKPT" --verify >/dev/null 2>"$WORK/info.err" ||
    fail "after a kill at ${delay}s: $(first_line "$WORK/info.err")"
  after=$(gens)
  [[ $after == "$before" || $(comm -13 <(echo "$before") <(echo "$after") | wc -l) == 1 ]] ||
    fail "unexpected generations after a kill at ${delay}s: $after"
done
((kills > 0)) || fail "cr_incr always finished before it could be killed"

"$BIN_DIR/cr_incr" --dir "$CKPT" "$PID" >/dev/null 2>"$WORK/tool.err" ||
  fail "cr_incr after the kills: $(first_line "$WORK/tool.err")"
{ kill -9 "$PID" && wait "$PID"; } 2>/dev/null || true
rc=0
timeout 120 "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >/dev/null 2>"$WORK/restart.err" || rc=$?
((rc == 0)) ||
  fail "restore of the newest generation: $(describe_status "$rc") $(first_line "$WORK/prog.err") $(first_line "$WORK/restart.err")"
echo "PASS incr_crash $TRACKER ($kills kills, $(gens | wc -l) generations)"
