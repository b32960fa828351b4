#!/usr/bin/env bash
# mpi_nodes.sh BIN_DIR [WORKLOAD [ACTION]]: an Open MPI job across two "nodes"
# (network namespaces crnA<pid> and crnB<pid> joined by a veth pair, one IP
# address each), 2 ranks per node over TCP (--mca btl tcp,self), its remote
# daemon (orted) started on B by an rsh agent that enters B's namespace.
# First the job runs uninterrupted for its result line. Then, paced (mpi.sh's
# scheme: it cannot end while $WORK/pace exists): a cr_noded agent per node,
# cr_job checkpoint (full) and two cr_job checkpoint --incremental while it
# computes, SIGKILL to every process on both nodes, the session directory
# removed, cr_job restart: each node's part restored on its node (mpirun's
# tree on A, orted's on B), connections between nodes rebuilt in repair mode
# and released once both sides exist. The job must finish with exactly the
# uninterrupted result line. ACTION "replace": the nodes hang off a bridge
# (a third namespace), and after the kill node B is gone (its namespace
# deleted): a spare namespace crnC<pid> takes over B's address, its own
# cr_noded gets B's checkpoint set, and B's part restarts there. ACTION
# "move": no checkpoint and no kill; B's part is migrated to spare C while
# the job runs and back (cr_job migrate, mpi_nodes_move.sh). Prints
# PASS/FAIL with the measured times;
# exit 77 = skip (no Open MPI, no network namespaces).
# E2E_MPI_MIB (default 64), E2E_MPI_ITERS (300), E2E_MPI_MIN_MS (200): as mpi.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"
BIN_DIR=$(cd "$1" && pwd)
WORKLOAD=${2:-cg_mpi}
ACTION=${3:-restart}
NAME="nodes mpi $WORKLOAD${3:+ $ACTION}"
MIB=${E2E_MPI_MIB:-64}
ITERS=${E2E_MPI_ITERS:-300}
MIN_MS=${E2E_MPI_MIN_MS:-200}
NS_A=crnA$$
NS_B=crnB$$
NS_C=crnC$$
NS_S=crnS$$
NET=10.249.$(($$ % 250))
MNET=10.248.$(($$ % 250))
PORT=$((21000 + $$ % 20000))
pass() {
  echo "PASS $NAME${1:+ ($1)}"
  exit 0
}
fail() {
  echo "FAIL $NAME: $*"
  show_logs
  exit 1
}
skip() {
  echo "SKIP $NAME: $*"
  exit 77
}
LAUNCHER=$(command -v mpirun.openmpi) || skip "no mpirun.openmpi (Debian's openmpi-bin)"
PROG=$BIN_DIR/workloads/mpi/openmpi/$WORKLOAD
[[ -x $PROG ]] || skip "$PROG was not built (no Open MPI found at configure time)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-nodes.XXXXXX")
install_traps
JOB_TMP=$(mktemp -d /dev/shm/ckpt-e2e-nodes.XXXXXX)
PACE=$WORK/pace
LOGS=("$WORK/prog.err" "$WORK/job.err" "$WORK/nodedA.err" "$WORK/nodedB.err" "$WORK/agent.log")
ROOTS=()
DAEMONS=()
cleanup() {
  local p
  for p in "${ROOTS[@]}" $(cat "$WORK"/orted.*.pid 2>/dev/null); do
    [[ $(readlink "/proc/$p/cwd" 2>/dev/null) == "$WORK"* ]] && kill_tree "$p"
  done
  for p in "${DAEMONS[@]}"; do kill_tree "$p"; done
  { wait; } 2>/dev/null || true
  netns_remove "$NS_A" "$NS_B" "$NS_C" "$NS_S"
  rm -rf "$JOB_TMP"
  cleanup_common
}
trap cleanup EXIT
case $ACTION in
  restart) netns_pair "$NS_A" "$NS_B" "$NET" "crn$$" || skip "$NETNS_WHY" ;;
  replace) netns_switch "$NS_S" "$NET" "crn$$" "$NS_A" "$NS_B" || skip "$NETNS_WHY" ;;
  move)
    # The agents listen on addresses of their own (MNET, not the job's
    # subnet, so Open MPI never uses them) that stay when B's job address
    # moves to spare C and back.
    netns_switch "$NS_S" "$NET" "crn$$" "$NS_A" "$NS_B" || skip "$NETNS_WHY"
    ip -n "$NS_A" addr add "$MNET.1/24" dev "crn$$1-n"
    ip -n "$NS_B" addr add "$MNET.2/24" dev "crn$$2-n"
    ip netns add "$NS_C"
    netns_attach "$NS_S" "$NS_C" "$MNET.3" "crn$$"c || skip "$NETNS_WHY"
    ;;
  *)
    echo "unknown action $ACTION" >&2
    exit 2
    ;;
esac

# The remote launch agent (mpirun's "ssh"): runs the command on the node of
# that address, detached (setsid), so that orted is not a descendant of
# mpirun and no pipe joins the two nodes. Open MPI hands it a shell command
# line (PATH and LD_LIBRARY_PATH set, then orted); the shell's PID is
# written for the test, orted is its child.
cat >"$WORK/agent" <<AGENT
#!/bin/bash
host=\$1
shift
case \$host in
  $NET.1) ns=$NS_A ;;
  $NET.2) ns=$NS_B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
echo "\$host: \$*" >>"$WORK/agent.log"
cd "$WORK"
setsid -f ip netns exec "\$ns" /bin/sh -c "echo \\\$\\\$ >'$WORK/orted.\$host.pid'; \$*" \\
  </dev/null >>"$WORK/orted.\$host.log" 2>&1
AGENT
chmod +x "$WORK/agent"
printf '%s slots=2\n%s slots=2\n' "$NET.1" "$NET.2" >"$WORK/hosts"

launch() { # $1: pacing ms (0: none)
  echo "$LAUNCHER" --allow-run-as-root --oversubscribe -np 4 --hostfile "$WORK/hosts" \
    --mca plm_rsh_agent "$WORK/agent" --mca pml ob1 --mca btl tcp,self \
    --mca oob_tcp_if_include "$NET.0/24" --mca btl_tcp_if_include "$NET.0/24" \
    "$PROG" "$MIB" "$ITERS" "$1" "$PACE"
}

# The uninterrupted run.
START=$EPOCHREALTIME
rc=0
# shellcheck disable=SC2046 # the command is split on purpose (no spaces in its words)
(close_fds && cd "$WORK" && TMPDIR=$JOB_TMP exec ip netns exec "$NS_A" $(launch 0) \
  </dev/null >"$WORK/ref.out" 2>"$WORK/ref.err") || rc=$?
((rc == 0)) || fail "the uninterrupted run failed ($(describe_status $rc)): $(first_line "$WORK/ref.err")"
REF=$(grep '^result: ' "$WORK/ref.out") || fail "the uninterrupted run printed no result"
grep -qx 'check: ok' "$WORK/ref.out" || fail "the uninterrupted run's self-check failed"
REF_TIME=$(elapsed "$START")
grep -q "^$NET.2: .*/orted " "$WORK/agent.log" || fail "mpirun did not start orted on node B through the agent"
rm -f "$WORK"/orted.*.pid
empty_dir "$JOB_TMP"

# The agents, one per node.
head -c 32 /dev/urandom >"$WORK/token"
chmod 600 "$WORK/token"
AGENT_NET=$NET
[[ $ACTION == move ]] && AGENT_NET=$MNET
for n in A B; do
  ns=NS_$n
  addr=$AGENT_NET.1
  [[ $n == B ]] && addr=$AGENT_NET.2
  start_noded "${!ns}" "$addr:$PORT" "$WORK/token" "$WORK/ck$n" "$WORK/noded$n.err" DAEMONS
done

# The paced job.
: >"$PACE"
# shellcheck disable=SC2046
(close_fds && cd "$WORK" && TMPDIR=$JOB_TMP exec ip netns exec "$NS_A" $(launch "$MIN_MS") \
  </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
MPIRUN=$!
ROOTS+=("$MPIRUN")
deadline=$((SECONDS + 120))
until grep -q '^iter ' "$WORK/prog.out" 2>/dev/null; do
  [[ $(proc_state "$MPIRUN") != [Z-] ]] || fail "the job ended before computing: $(first_line "$WORK/prog.err")"
  ((SECONDS < deadline)) || fail "no progress line after 120 s"
  sleep 0.1
done
SHELL_B=$(cat "$WORK/orted.$NET.2.pid")
ORTED=$(cat /proc/"$SHELL_B"/task/*/children | tr -d " ")
ROOTS+=("$SHELL_B" "$ORTED")
[[ $(cat /proc/"$ORTED"/comm) == orted ]] || fail "no orted under the agent's shell on B ($ORTED)"
[[ $(ip netns identify "$ORTED") == "$NS_B" ]] || fail "orted $ORTED is not in $NS_B"
nb=$(($(wc -w <<<"$(cat /proc/"$ORTED"/task/*/children)")))
((nb == 2)) || fail "orted on B has $nb children, not 2 ranks"
printf '%s:%s %s\n%s:%s %s\n' "$AGENT_NET.1" "$PORT" "$MPIRUN" "$AGENT_NET.2" "$PORT" "$ORTED" >"$WORK/nodes"
last_iter() { grep '^iter ' "$WORK/prog.out" | tail -n 1 | awk '{ print $2 }'; }
tree_pids() {
  local c
  echo "$1"
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

job() { # cr_job ARGS, run on node A (the launch node): its JSON in $WORK/job.out
  timeout 300 ip netns exec "$NS_A" "$BIN_DIR/cr_job" "$@" --nodes "$WORK/nodes" --token "$WORK/token" --json \
    </dev/null >"$WORK/job.out" 2>"$WORK/job.err"
}
if [[ $ACTION == move ]]; then
  # shellcheck source=mpi_nodes_move.sh
  source "$HERE/mpi_nodes_move.sh"
fi
# A round that a node fails (B's PID is a process that is gone) is aborted
# on every node: A's part runs on, untraced, and no generation appears.
true &
gone=$!
wait "$gone"
cp "$WORK/nodes" "$WORK/nodes.good"
printf '%s:%s %s\n%s:%s %s\n' "$NET.1" "$PORT" "$MPIRUN" "$NET.2" "$PORT" "$gone" >"$WORK/nodes"
at_bad=$(last_iter)
rc=0
job checkpoint || rc=$?
((rc != 0)) || fail "cr_job checkpoint succeeded with a node whose process is gone"
grep -q "node $NET.2:$PORT: .*round aborted on every node" "$WORK/job.err" || fail "cr_job did not name node B: $(first_line "$WORK/job.err")"
left=$(find "$WORK/ckA" "$WORK/ckB" -mindepth 1 2>/dev/null)
[[ -z $left ]] || fail "the aborted round left files: $left"
for p in $(tree_pids "$MPIRUN"); do
  [[ $(tracer_of "$p") == 0 && $(proc_state "$p") != [tT] ]] || fail "process $p of A's part is still stopped or traced after the abort"
done
n=0
until (($(last_iter) > at_bad)); do
  ((++n < 300)) || fail "the job stopped computing after the aborted round"
  sleep 0.1
done
cp "$WORK/nodes.good" "$WORK/nodes"

FROZEN=() TOTAL=() NODE_FROZEN=()
record() { # the coordinator's frozen and total time, and each agent's own frozen time
  FROZEN+=("$(grep -o '"frozen_seconds":[0-9.e-]*' "$WORK/job.out" | head -n 1 | cut -d: -f2 | xargs printf '%.2f')")
  TOTAL+=("$(grep -o '"total_seconds":[0-9.e-]*' "$WORK/job.out" | cut -d: -f2 | xargs printf '%.2f')")
  NODE_FROZEN+=("$(grep -o '"frozen_seconds":[0-9.e-]*' "$WORK/job.out" | sed -n 2,3p | cut -d: -f2 | xargs printf '%.2f/' | sed 's|/$||')")
}
at_full=$(last_iter)
job checkpoint || fail "cr_job checkpoint: $(first_line "$WORK/job.err")"
record
grep -q '"generation":1' "$WORK/job.out" || fail "the full checkpoint is not generation 1: $(cat "$WORK/job.out")"
for i in 1 2; do
  sleep 1
  job checkpoint --incremental || fail "cr_job checkpoint --incremental ($i): $(first_line "$WORK/job.err")"
  record
done
grep -q "\"generation\":3" "$WORK/job.out" || fail "the second incremental is not generation 3: $(cat "$WORK/job.out")"
at_incr=$(last_iter)
((at_incr > at_full)) || fail "the job did not compute between the checkpoints (iter $at_full, then $at_incr)"
grep -q '^result: ' "$WORK/prog.out" && fail "the job finished before it was killed"
for n in A B; do
  "$BIN_DIR/cr_info" --dir "$WORK/ck$n" --verify >/dev/null 2>"$WORK/job.err" || fail "cr_info --verify on $n: $(first_line "$WORK/job.err")"
done

# Everything on both nodes killed; the session directory goes.
MEMBERS="$(tree_pids "$MPIRUN") $(tree_pids "$SHELL_B")"
# shellcheck disable=SC2086 # a list of PIDs
kill_all_gone $MEMBERS || fail "processes of the job did not go away"
{ wait "$MPIRUN"; } 2>/dev/null || true
empty_dir "$JOB_TMP"
rm -f "$PACE"
if [[ $ACTION == replace ]]; then
  # Node B is gone; spare C takes over its address (a real takeover would
  # announce it by gratuitous ARP: here A's neighbour entry is flushed) and
  # gets B's checkpoint set.
  kill_tree "${DAEMONS[1]}"
  ip netns del "$NS_B"
  ip netns add "$NS_C"
  netns_attach "$NS_S" "$NS_C" "$NET.2" "crn$$"c || fail "cannot attach the spare: $NETNS_WHY"
  ip -n "$NS_A" neigh flush to "$NET.2" 2>/dev/null || true
  LOGS+=("$WORK/nodedC.err")
  start_noded "$NS_C" "$NET.2:$PORT" "$WORK/token" "$WORK/ckB" "$WORK/nodedC.err" DAEMONS
fi

T=$EPOCHREALTIME
job restart || fail "cr_job restart: $(first_line "$WORK/job.err")"
T_RESTART=$(elapsed "$T")
grep -q '"generation":3' "$WORK/job.out" || fail "cr_job restart did not restore generation 3: $(cat "$WORK/job.out")"
deadline=$((SECONDS + 600))
until grep -q '^result: ' "$WORK/prog.out"; do
  [[ $(proc_state "$MPIRUN") != [Z-] ]] || fail "the restored job ended without a result: $(tail -n 3 "$WORK/prog.err" | tr '\n' ' ')"
  ((SECONDS < deadline)) || fail "the restored job did not finish in 600 s"
  sleep 0.2
done
for ((i = 0; i < 200; i++)); do [[ $(proc_state "$MPIRUN") == [Z-] ]] && break; sleep 0.05; done
got=$(grep '^result: ' "$WORK/prog.out")
[[ $got == "$REF" ]] || fail "the restored job's result differs: '$got', uninterrupted: '$REF'"
grep -qx 'check: ok' "$WORK/prog.out" || fail "the restored job's self-check failed"
for ((i = 0; i < 40; i++)); do grep -q "process $MPIRUN exited" "$WORK/nodedA.err" && break; sleep 0.05; done
grep -q "process $MPIRUN exited with 0" "$WORK/nodedA.err" || fail "mpirun did not exit with 0 on A: $(grep "process $MPIRUN" "$WORK/nodedA.err")"
if [[ $ACTION == replace ]]; then
  part_b=$(grep -o '"node":"'"$NET.2:$PORT"'","pid":[0-9]*' "$WORK/job.out" | grep -o '[0-9]*$')
  grep -q "process $part_b exited with 0" "$WORK/nodedC.err" || fail "B's part ($part_b) did not end well on C: $(grep "process $part_b" "$WORK/nodedC.err")"
fi
pass "checkpointed at iter $at_full..$at_incr of $ITERS; job frozen (full, incr, incr) ${FROZEN[*]} s, per node A/B ${NODE_FROZEN[*]} s, cr_job total ${TOTAL[*]} s; restart to running ${T_RESTART}s; reference run ${REF_TIME}s"
