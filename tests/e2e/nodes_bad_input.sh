#!/usr/bin/env bash
# nodes_bad_input.sh BIN_DIR: cr_job and cr_noded refuse bad input with one
# line and exit 1, and a round that cannot go on leaves the target running:
#   - a node file with a word that is not a PID, or with too many words;
#   - checkpoint without a PID for a node;
#   - a node whose agent does not listen (named);
#   - a token the agent does not know (authentication fails, named);
#   - a node file naming a process that is gone, next to a good node: the
#     good node's process is released, untraced, no generation anywhere;
#   - cr_noded with a token file others can read.
# Then a good round on the same process commits generation 1 on both nodes.
# Exit 77 where network namespaces cannot be made.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"
BIN_DIR=$(cd "$1" && pwd)
NAME="nodes bad-input"
NS_A=crnA$$
NS_B=crnB$$
NET=10.248.$(($$ % 250))
PORT=$((22000 + $$ % 20000))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-nodesbad.XXXXXX")
install_traps
LOGS=("$WORK/job.err" "$WORK/nodedA.err" "$WORK/nodedB.err")
PIDS=()
fail() {
  echo "FAIL $NAME: $*"
  show_logs
  exit 1
}
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill_tree "$p"; done
  { wait; } 2>/dev/null || true
  netns_remove "$NS_A" "$NS_B"
  cleanup_common
}
trap cleanup EXIT
netns_pair "$NS_A" "$NS_B" "$NET" "crn$$" || { echo "SKIP $NAME: $NETNS_WHY"; exit 77; }
head -c 32 /dev/urandom >"$WORK/token"
head -c 32 /dev/urandom >"$WORK/other"
chmod 600 "$WORK/token" "$WORK/other"

# A process on each node (sleep: nothing to connect), and the agents.
for n in A B; do
  ns=NS_$n
  (close_fds && cd "$WORK" && exec ip netns exec "${!ns}" sleep 300 </dev/null >/dev/null 2>&1) &
  PIDS+=($!)
done
TA=${PIDS[0]} TB=${PIDS[1]}
for n in A B; do
  ns=NS_$n
  addr=$NET.1
  [[ $n == B ]] && addr=$NET.2
  start_noded "${!ns}" "$addr:$PORT" "$WORK/token" "$WORK/ck$n" "$WORK/noded$n.err" PIDS
done

expect_refusal() { # WHAT PATTERN ARGS...: cr_job ARGS fails with one line matching PATTERN
  local what=$1 pattern=$2 rc=0
  shift 2
  ip netns exec "$NS_A" timeout 60 "$BIN_DIR/cr_job" "$@" </dev/null >/dev/null 2>"$WORK/job.err" || rc=$?
  ((rc == 1)) || fail "$what: exit $rc, not 1"
  is_one_line "$WORK/job.err" || fail "$what: not one line: $(cat "$WORK/job.err")"
  grep -q -- "$pattern" "$WORK/job.err" || fail "$what: '$(cat "$WORK/job.err")' does not say '$pattern'"
}
untouched() { # PID: running, untraced
  [[ $(tracer_of "$1") == 0 && $(proc_state "$1") == S ]] || fail "process $1 is $(proc_state "$1"), traced by $(tracer_of "$1")"
}

printf '%s:%s 12x\n' "$NET.1" "$PORT" >"$WORK/n1"
expect_refusal "a word that is not a PID" "n1:1: not a PID: 12x" checkpoint --nodes "$WORK/n1" --token "$WORK/token"
printf '# comment\n%s:%s %s extra\n' "$NET.1" "$PORT" "$TA" >"$WORK/n2"
expect_refusal "too many words" "n2:2: expected HOST:PORT \[PID\]" checkpoint --nodes "$WORK/n2" --token "$WORK/token"
printf '%s:%s\n' "$NET.1" "$PORT" >"$WORK/n3"
expect_refusal "no PID" "node $NET.1:$PORT: no PID of its part given" checkpoint --nodes "$WORK/n3" --token "$WORK/token"
printf '%s:%s %s\n%s:%s %s\n' "$NET.1" "$PORT" "$TA" "$NET.2" "$((PORT + 1))" "$TB" >"$WORK/n4"
expect_refusal "an agent that does not listen" "node $NET.2:$((PORT + 1)): connecting" checkpoint --nodes "$WORK/n4" --token "$WORK/token"
printf '%s:%s %s\n%s:%s %s\n' "$NET.1" "$PORT" "$TA" "$NET.2" "$PORT" "$TB" >"$WORK/good"
expect_refusal "a wrong token" "node $NET.1:$PORT: .*authentication failed" checkpoint --nodes "$WORK/good" --token "$WORK/other"
true &
gone=$!
wait "$gone"
printf '%s:%s %s\n%s:%s %s\n' "$NET.1" "$PORT" "$TA" "$NET.2" "$PORT" "$gone" >"$WORK/n5"
expect_refusal "a node whose process is gone" "node $NET.2:$PORT: no process with PID $gone (round aborted on every node)" \
  checkpoint --nodes "$WORK/n5" --token "$WORK/token"
untouched "$TA"
untouched "$TB"
# A's agent was told why (ABORT), not merely left by a closed connection.
grep -q "session: aborted by cr_job: node $NET.2:$PORT: no process with PID $gone" "$WORK/nodedA.err" ||
  fail "A's agent was not told to abort: $(tail -n 1 "$WORK/nodedA.err")"
left=$(find "$WORK/ckA" "$WORK/ckB" -mindepth 1 2>/dev/null)
[[ -z $left ]] || fail "refused rounds left files: $left"
chmod 644 "$WORK/other"
rc=0
"$BIN_DIR/cr_noded" --listen "127.0.0.1:$PORT" --token "$WORK/other" --dir "$WORK/x" </dev/null >/dev/null 2>"$WORK/job.err" || rc=$?
((rc == 1)) && is_one_line "$WORK/job.err" || fail "cr_noded with a readable token: exit $rc: $(cat "$WORK/job.err")"

# The good round.
ip netns exec "$NS_A" timeout 60 "$BIN_DIR/cr_job" checkpoint --nodes "$WORK/good" --token "$WORK/token" --json \
  </dev/null >"$WORK/job.out" 2>"$WORK/job.err" || fail "cr_job checkpoint: $(first_line "$WORK/job.err")"
grep -q '"generation":1' "$WORK/job.out" || fail "no generation 1: $(cat "$WORK/job.out")"
[[ -d $WORK/ckA/gen-000001 && -d $WORK/ckB/gen-000001 ]] || fail "generation 1 is not on both nodes"
untouched "$TA"
untouched "$TB"
echo "PASS $NAME"
