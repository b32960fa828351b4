#!/usr/bin/env bash
# nodes_failure.sh BIN_DIR: a node that dies or a link that drops in the
# middle of a coordinated checkpoint (cr_job checkpoint) or of a move of one
# node's part (cr_job migrate) aborts the round: cr_job exits 1 with one
# line naming the node; every process on every surviving node runs on,
# neither stopped nor traced, and its connections to the other nodes are not
# left blackholed; no generation, no temporary directory and no lock is
# left on any node; a moved part runs exactly once, at its source.
#
# Three namespaces on a bridge: A (NET.1), B (NET.2), spare C (NET.3), a
# cr_noded agent in each. The job is one TCP stream (tcp_stream): its server
# is A's part, its client B's part; both check every byte, so a stream that
# lost or reordered data, or was reset, fails. The fault hits an exact step:
# the agent is preloaded with stop_at_frame.so, which stops the session
# (SIGSTOP) right before it sends the named frame; the test then kills it,
# or cuts its node's link and lets it go on. Cases:
#   kill-frozen    B's session killed before it reports FROZEN (B frozen)
#   kill-captured  ... before CAPTURED (state read, B still frozen)
#   kill-written   ... before WRITTEN (B released, its .tmp- generation there)
#   link-frozen    B's link down before FROZEN, the session let go on: both
#                  ends find out by themselves (keepalive, TCP_USER_TIMEOUT)
#   agent-captured B's whole agent (daemon and session) killed before
#                  CAPTURED: the processes are released by the kernel; B's
#                  locks stay until the agent starts again, which removes them
#   move-kill-src  cr_job migrate B -> C: B's session killed before SENT
#   move-kill-dst  C's session killed before it acknowledges a generation
#   move-link-dst  C's link down at that point, C let go on
#   move-kill-src-takeover  B's session killed while the takeover command
#                  moves the address to C: cr_job asks C (the part does not
#                  run there) and moves the address back
#   move-kill-src-committed B's session killed before it reports MOVED (the
#                  part runs at C): cr_job asks C, the move stands (exit 0,
#                  one line naming B); exactly one copy, at C
#   move-kill-src-committed-slow  the same while C's session, done, is
#                  slow to exit
#   move-kill-src-commit-sent  B's session killed once C holds the part,
#                  ready to run, before C says RUNNING (then lets it go): B's frozen copy dies with its
#                  session (PTRACE_O_EXITKILL past COMMIT), never two copies
# And move-garp: a move that succeeds with a takeover command that leaves
# A's neighbour entry alone: right after cr_job returns it names C's MAC
# (C's agent sent a gratuitous ARP).
# Prints how long each abort took from the fault until cr_job exited and
# every process ran again. Exit 77 where network namespaces cannot be made.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"
BIN_DIR=$(cd "$1" && pwd)
NAME="nodes failure"
STOP=$BIN_DIR/e2e/stop_at_frame.so
STREAM=$BIN_DIR/e2e/tcp_stream
NS_A=crnfA$$
NS_B=crnfB$$
NS_C=crnfC$$
NS_S=crnfS$$
LINK=cnf$$
NET=10.247.$(($$ % 250))  # the job's addresses (B's moves to C)
MNET=10.246.$(($$ % 250)) # the agents' (never move)
PORT=$((22000 + $$ % 20000))
BYTES=${NODES_FAILURE_BYTES:-300000} # ~6 s of streaming each way
# The agents' step timeout, also how long a destination keeps the locks of a
# move that ended before COMMIT (the address may be on its way).
AGENT_TIMEOUT=8
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-nodesfail.XXXXXX")
install_traps
LOGS=("$WORK/job.err" "$WORK/nodedA.err" "$WORK/nodedB.err" "$WORK/nodedC.err" "$WORK/s.err" "$WORK/c.err")
PIDS=()
fail() {
  echo "FAIL $NAME${CASE:+ [$CASE]}: $*"
  show_logs
  exit 1
}
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill_tree "$p"; done
  { wait; } 2>/dev/null || true
  netns_remove "$NS_A" "$NS_B" "$NS_C" "$NS_S"
  cleanup_common
}
trap cleanup EXIT
[[ -f $STOP && -x $STREAM ]] || fail "no $STOP or $STREAM"
netns_switch "$NS_S" "$NET" "$LINK" "$NS_A" "$NS_B" "$NS_C" || {
  echo "SKIP $NAME: $NETNS_WHY"
  exit 77
}
for n in 1 2 3; do
  ns=$NS_A
  ((n == 2)) && ns=$NS_B
  ((n == 3)) && ns=$NS_C
  ip -n "$ns" addr add "$MNET.$n/24" dev "$LINK$n-n"
done
head -c 32 /dev/urandom >"$WORK/token"
chmod 600 "$WORK/token"
declare -A IDX=([A]=1 [B]=2 [C]=3)
ns_of() { local v=NS_$1; echo "${!v}"; }
agent_of() { echo "$MNET.${IDX[$1]}:$PORT"; }

# agent N FRAME [LINGER_MS]: (re)starts node N's agent; FRAME (TYPE[:STEP],
# or -) is where its sessions stop (stop_at_frame.so); LINGER_MS, how long
# each of its sessions stays alive once done (a loaded machine's delay).
# Sets AG_N to its PID.
agent() {
  local n=$1 frame=$2 env=() v=AG_$1 pre=()
  [[ -n ${!v:-} ]] && kill_tree "${!v}"
  [[ $frame != - || -n ${3:-} ]] && env=(LD_PRELOAD="$STOP")
  [[ $frame != - ]] && env+=(CKPT_STOP_FRAME="$frame" CKPT_STOP_PID_FILE="$WORK/stop$n")
  [[ -n ${3:-} ]] && env+=(CKPT_EXIT_LINGER_MS="$3")
  # The spare is another machine: its own PIDs (a part moved there keeps its
  # PIDs while the frozen original still holds them on B).
  [[ $n == C ]] && pre=(unshare --pid --fork --mount-proc)
  rm -f "$WORK/stop$n"
  (close_fds && exec ip netns exec "$(ns_of "$n")" "${pre[@]}" env "${env[@]}" "$BIN_DIR/cr_noded" \
    --listen "$(agent_of "$n")" --token "$WORK/token" --dir "$WORK/ck$n" --timeout "$AGENT_TIMEOUT" \
    </dev/null >/dev/null 2>>"$WORK/noded$n.err") &
  PIDS+=($!)
  printf -v "$v" %s "$!"
  wait_listening "$(ns_of "$n")" "$PORT" "$!" || fail "cr_noded in $(ns_of "$n") is not listening: $(tail -n 1 "$WORK/noded$n.err")"
}

descendants() { # PID: its descendants, children first
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}
# stopped_session N: waits until N's session stopped itself; SESSION is its PID.
stopped_session() {
  local v=AG_$1 i c
  for ((i = 0; i < 600; i++)); do
    if [[ -e $WORK/stop$1 ]]; then
      for c in $(descendants "${!v}"); do
        [[ $(proc_state "$c") == T ]] && { SESSION=$c; return; }
      done
    fi
    [[ $(proc_state "$JOB") != [Z-] ]] || fail "cr_job ended before node $1's agent reached its step: $(first_line "$WORK/job.err")"
    sleep 0.05
  done
  fail "node $1's agent never reached its step"
}

# The stream: server in A, client in B, each started fresh for a case.
stream_start() {
  SPORT=$((SPORT + 1))
  (close_fds && exec ip netns exec "$NS_A" "$STREAM" serve "$NET.1" "$SPORT" "$BYTES" </dev/null >"$WORK/s.out" 2>"$WORK/s.err") &
  SRV=$!
  PIDS+=($!)
  wait_listening "$NS_A" "$SPORT" "$SRV" || fail "the stream's server is not listening: $(first_line "$WORK/s.err")"
  (close_fds && exec ip netns exec "$NS_B" "$STREAM" connect "$NET.1" "$SPORT" "$BYTES" </dev/null >"$WORK/c.out" 2>"$WORK/c.err") &
  CLI=$!
  PIDS+=($!)
  local i
  for ((i = 0; i < 200; i++)); do
    grep -q '^got' "$WORK/s.out" && grep -q '^got' "$WORK/c.out" && break
    sleep 0.05
  done
  grep -q '^got' "$WORK/c.out" || fail "the stream does not flow: $(first_line "$WORK/c.err")"
  printf '%s %s\n%s %s\n' "$(agent_of A)" "$SRV" "$(agent_of B)" "$CLI" >"$WORK/nodes"
}
running() { # PID...: each alive, neither stopped nor traced
  local p
  for p in "$@"; do
    [[ $(tracer_of "$p") == 0 && $(proc_state "$p") == [RS] ]] || return 1
  done
}
# stream_finishes: both ends complete every byte and exit 0.
stream_finishes() {
  local p
  for p in "$SRV" "$CLI"; do
    wait_exit "$p" 60 || fail "the stream did not finish in 60 s after the abort (got $(tail -n 1 "$WORK/c.out")): a connection left blocked?"
    ((EXIT_STATUS == 0)) || fail "tcp_stream $p $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/s.err") $(first_line "$WORK/c.err")"
  done
  grep -q "^ok $BYTES $BYTES\$" "$WORK/s.out" && grep -q "^ok $BYTES $BYTES\$" "$WORK/c.out" ||
    fail "the stream did not end with every byte: $(tail -n 1 "$WORK/s.out") / $(tail -n 1 "$WORK/c.out")"
}
# nothing_left: no generation, no temporary, no journal on any node, no lock
# rule in any namespace (the dead session's are removed by its daemon; a
# destination's after AGENT_TIMEOUT: waits 20 s at most).
nothing_left() {
  local i left rules
  for ((i = 0; i < 400; i++)); do
    left=$(find "$WORK/ckA" "$WORK/ckB" "$WORK/ckC" -mindepth 1 -maxdepth 1 2>/dev/null || true)
    rules=$(for n in A B C; do ip -n "$(ns_of "$n")" rule show | grep blackhole || true; done)
    [[ -z $left && -z $rules ]] && return 0
    sleep 0.05
  done
  [[ -z $left ]] || fail "the aborted round left files: $left"
  fail "the aborted round left locks: $rules"
}

# run_job ARGS...: cr_job (in A) in the background; JOB is its PID.
run_job() {
  rm -f "$WORK/job.err"
  (close_fds && exec ip netns exec "$NS_A" timeout 60 "$BIN_DIR/cr_job" "$@" --nodes "$WORK/nodes" \
    --token "$WORK/token" </dev/null >/dev/null 2>"$WORK/job.err") &
  JOB=$!
  PIDS+=($!)
}
# aborted T0 NODE: cr_job exits 1 with one line naming NODE's agent; every
# process runs again. Sets TOOK to the seconds from T0 until both held.
aborted() {
  local t0=$1 node=$2
  wait_exit "$JOB" 60 || fail "cr_job still runs 60 s after the fault"
  ((EXIT_STATUS == 1)) || fail "cr_job exit $EXIT_STATUS, not 1: $(first_line "$WORK/job.err")"
  is_one_line "$WORK/job.err" || fail "cr_job did not say one line: $(cat "$WORK/job.err")"
  grep -q -- "$node" "$WORK/job.err" || fail "cr_job's line does not name $node: $(cat "$WORK/job.err")"
  local i
  for ((i = 0; i < 600; i++)); do
    running "$SRV" "$CLI" && break
    sleep 0.02
  done
  running "$SRV" "$CLI" || fail "a process is not running after the abort: server $(proc_state "$SRV")/traced by $(tracer_of "$SRV"), client $(proc_state "$CLI")/traced by $(tracer_of "$CLI")"
  TOOK=$(elapsed "$t0")
  RESULTS+=("$CASE ${TOOK}s")
}
RESULTS=()
SPORT=$((PORT + 10))
agent A -
agent C -

# Coordinated checkpoint, B fails at a step.
# NODES_FAILURE_CASES=REGEX: only the cases whose name matches (debugging).
wanted() { [[ $1 =~ ${NODES_FAILURE_CASES:-.} ]]; }
ckpt_case() { # CASE STEP FAULT
  CASE=$1
  wanted "$CASE" || return 0
  agent B "16:$2"
  stream_start
  run_job checkpoint
  local s t0
  stopped_session B
  s=$SESSION
  # The step is where we wanted it: B frozen up to CAPTURED, released after.
  if (($2 <= 11)); then
    [[ $(tracer_of "$CLI") != 0 ]] || fail "B's process is not frozen at step $2"
  else
    running "$CLI" || fail "B's process is not released before WRITTEN"
  fi
  t0=$EPOCHREALTIME
  case $3 in
    kill) kill -9 "$s" ;;
    link) ip -n "$NS_B" link set "${LINK}2-n" down && kill -CONT "$s" ;;
    agent) kill_tree "$AG_B" ;;
  esac
  aborted "$t0" "node $(agent_of B)"
  if [[ $3 == link ]]; then
    ip -n "$NS_B" link set "${LINK}2-n" up
    # B's agent found out by itself and released its part.
    for ((i = 0; i < 200; i++)); do grep -q "session: " "$WORK/nodedB.err" && break; sleep 0.05; done
  fi
  if [[ $3 == agent ]]; then
    # The kernel released B's process; its lock stays until an agent runs.
    [[ -n $(ip -n "$NS_B" rule show | grep blackhole) ]] || fail "no lock left on B by the killed agent (the case tests nothing)"
    AG_B=
    agent B -
  fi
  [[ -z $(find "$WORK/ckA" "$WORK/ckB" -name 'gen-*') ]] || fail "a generation became visible"
  nothing_left
  stream_finishes
}
ckpt_case kill-frozen 10 kill
ckpt_case kill-captured 11 kill
ckpt_case kill-written 12 kill
ckpt_case link-frozen 10 link
ckpt_case agent-captured 11 agent

# cr_job migrate B -> C, frozen. The takeover command moves B's job address
# to C (or back) and flushes A's neighbour entry; with $WORK/kill-src it
# then kills B's session (the source lost while the address moved).
cat >"$WORK/takeover" <<TAKEOVER
#!/bin/bash
set -e
where() {
  case \$1 in
    $MNET.2:*) echo "$NS_B ${LINK}2-n" ;;
    $MNET.3:*) echo "$NS_C ${LINK}3-n" ;;
    *) echo "takeover: unknown agent \$1" >&2; exit 1 ;;
  esac
}
read -r fns fdev <<<"\$(where "\$CKPT_FROM")"
read -r tns tdev <<<"\$(where "\$CKPT_TO")"
ip -n "\$fns" addr del "$NET.2/24" dev "\$fdev" 2>/dev/null || true
ip -n "\$tns" addr replace "$NET.2/24" dev "\$tdev"
[[ -e $WORK/no-flush ]] || ip -n "$NS_A" neigh flush to "$NET.2" 2>/dev/null || true
echo "\$CKPT_FROM -> \$CKPT_TO" >>"$WORK/takeover.log"
if [[ -e $WORK/kill-src ]]; then
  rm -f "$WORK/kill-src"
  for c in \$(cat /proc/\$(cat "$WORK/agB")/task/*/children); do kill -9 "\$c"; done
fi
TAKEOVER
chmod +x "$WORK/takeover"
copies() { # NS: how many tcp_stream processes run in NS
  local p n=0
  for p in $(ip netns pids "$1"); do
    [[ $(cat /proc/"$p"/comm 2>/dev/null) == tcp_stream ]] && n=$((n + 1))
  done
  echo "$n"
}
move_case() { # CASE NODE FRAME FAULT [LINGER_MS of the other node's sessions]
  CASE=$1
  wanted "$CASE" || return 0
  local n=$2 other s t0 i
  other=B
  [[ $n == B ]] && other=C
  agent "$n" "$3"
  agent "$other" - "${5:-}"
  echo "$AG_B" >"$WORK/agB"
  rm -f "$WORK/takeover.log"
  stream_start
  [[ $4 == takeover-kill ]] && touch "$WORK/kill-src"
  if [[ $4 == garp ]]; then
    touch "$WORK/no-flush"
    [[ $(ip -n "$NS_A" neigh show "$NET.2") == *"lladdr "* ]] || fail "A has no neighbour entry for $NET.2"
    # C must not ask for A's address either (A would learn C's from the
    # request): it knows it already, as a node that talked to A would.
    ip -n "$NS_C" neigh replace "$NET.1" dev "${LINK}3-n" nud permanent \
      lladdr "$(ip -n "$NS_A" -o link show "${LINK}1-n" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)"
  fi
  run_job migrate --node "$(agent_of B)" --to "$(agent_of C)" --takeover "$WORK/takeover"
  t0=$EPOCHREALTIME
  if [[ $3 != - ]]; then
    stopped_session "$n"
    s=$SESSION
    [[ $4 == committed ]] || [[ $(tracer_of "$CLI") != 0 ]] || fail "B's process is not frozen when the fault comes"
    t0=$EPOCHREALTIME
    case $4 in
      kill | committed) kill -9 "$s" ;;
      commit-sent) # C holds the part, about to say RUNNING and let it go; B's session dies
        kill -9 $(cat /proc/"$AG_B"/task/*/children)
        kill -CONT "$s" ;;
      link) ip -n "$NS_C" link set "${LINK}3-n" down && kill -CONT "$s" ;;
    esac
  fi
  if [[ $4 == committed || $4 == commit-sent || $4 == garp ]]; then
    wait_exit "$JOB" 60 || fail "cr_job still runs 60 s after the fault"
    ((EXIT_STATUS == 0)) || fail "cr_job exit $EXIT_STATUS after a committed move: $(first_line "$WORK/job.err")"
    if [[ $4 == garp ]]; then
      # No fault, and A's neighbour entry was not flushed: C's gratuitous
      # ARP must have pointed it at C already.
      local mac_c neigh
      mac_c=$(ip -n "$NS_C" -o link show "${LINK}3-n" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
      neigh=$(ip -n "$NS_A" neigh show "$NET.2")
      [[ $neigh == *"lladdr $mac_c "* ]] || fail "A's neighbour entry for $NET.2 does not name C ($mac_c) after the move: $neigh"
      grep -q "address(es) announced" "$WORK/nodedC.err" || fail "C announced nothing"
      rm -f "$WORK/no-flush"
    else
      # B's agent was lost after the part ran at C: cr_job asks C, which has
      # it; the move stands (exit 0), with one line naming B.
      is_one_line "$WORK/job.err" && grep -q "node $(agent_of B): .*the part runs at $(agent_of C)" "$WORK/job.err" ||
        fail "cr_job did not say that B was lost and the part runs at C: $(cat "$WORK/job.err")"
    fi
    [[ $4 == garp ]] || RESULTS+=("$CASE $(elapsed "$t0")s")
    grep -q "^$(agent_of C) [0-9]" "$WORK/nodes" || fail "the node file does not name C: $(cat "$WORK/nodes")"
    [[ $(copies "$NS_B") == 0 && $(copies "$NS_C") == 1 ]] || fail "copies of B's part: $(copies "$NS_B") on B, $(copies "$NS_C") on C"
    wait_exit "$SRV" 60 || fail "the stream's server did not finish after the move"
    ((EXIT_STATUS == 0)) || fail "the server $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/s.err")"
    for ((i = 0; i < 600; i++)); do grep -q '^ok ' "$WORK/c.out" && break; sleep 0.1; done
    grep -q "^ok $BYTES $BYTES\$" "$WORK/s.out" && grep -q "^ok $BYTES $BYTES\$" "$WORK/c.out" ||
      fail "the moved stream did not end with every byte: $(tail -n 1 "$WORK/s.out") / $(tail -n 1 "$WORK/c.out") $(first_line "$WORK/c.err")"
    # Back to the start for the next case: C's part ended, B gets its address.
    ip -n "$NS_C" addr del "$NET.2/24" dev "${LINK}3-n"
    ip -n "$NS_B" addr add "$NET.2/24" dev "${LINK}2-n"
    ip -n "$NS_A" neigh flush to "$NET.2"
    nothing_left
    return
  fi
  # Whichever failed, the line names the node that failed.
  aborted "$t0" "$(agent_of "$n")"
  [[ $4 == link ]] && ip -n "$NS_C" link set "${LINK}3-n" up
  if [[ $4 == takeover-kill ]]; then
    [[ $(cat "$WORK/takeover.log") == "$(agent_of B) -> $(agent_of C)"$'\n'"$(agent_of C) -> $(agent_of B)" ]] ||
      fail "the address did not go to C and back: $(cat "$WORK/takeover.log")"
    grep -q "(the address moved back; $(agent_of C): no part with root PID $CLI runs here)" "$WORK/job.err" ||
      fail "cr_job did not say that the address moved back: $(cat "$WORK/job.err")"
  else
    [[ ! -e $WORK/takeover.log ]] || fail "the address moved for a migration that failed"
  fi
  [[ $(ip -n "$NS_B" addr show) == *"inet $NET.2/"* ]] || fail "B lost its address"
  [[ $(ip netns identify "$CLI") == "$NS_B" ]] || fail "B's part left B"
  [[ $(copies "$NS_C") == 0 ]] || fail "a copy of B's part runs on C"
  grep -q "^$(agent_of B) $CLI\$" "$WORK/nodes" || fail "the node file changed: $(cat "$WORK/nodes")"
  nothing_left
  stream_finishes
}
move_case move-kill-src B 16:17 kill
move_case move-kill-dst C 12 kill
move_case move-link-dst C 12 link
move_case move-kill-src-takeover B - takeover-kill
move_case move-kill-src-committed B 16:18 committed
# The same, with C's session alive 1.5 s after it has let the part go (its
# lock released): asked where the part runs, C waits for it (not "no part
# with root PID ... runs here").
move_case move-kill-src-committed-slow B 16:18 committed 1500
move_case move-kill-src-commit-sent C 9 commit-sent
# Not a failure: a move that succeeds, whose takeover does not flush A's
# neighbour entry (C announces the address itself).
move_case move-garp B - garp

CASE=
echo "PASS $NAME: released after: ${RESULTS[*]}"
