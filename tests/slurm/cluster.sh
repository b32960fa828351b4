# A private Slurm cluster for the tests, from Debian's packages: munged,
# slurmctld and one slurmd, all in a temporary directory with their own
# socket, ports and state, so that several test cases can run at once.
# Sourced by the Slurm test cases:
#   slurm_cluster_start DIR PLUGIN_SO   one node (this host); exports SLURM_CONF;
#                                       SLURM_PARTITIONS, SLURM_EXTRA_CONF: the
#                                       caller's partitions and settings
#   slurm_cluster_start_nodes DIR PLUGIN_SO N
#                                       N nodes node1..nodeN, each a network
#                                       namespace of its own (address NET.i) on
#                                       a bridge, the controller in another;
#                                       run clients with slurm_client CMD...
#   slurm_cluster_stop DIR
# Needs root (slurmd starts job steps as other users' processes).

SLURM_NS=() # the nodes' network namespaces (slurm_cluster_start_nodes)

slurm_free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# slurm_conf DIR PLUGIN_SO CTL_NAME CTL_ADDR: writes DIR/slurm.conf without
# its nodes and partition (the caller appends them) and starts munged.
slurm_conf() {
  local dir=$1 plugin=$2 ctl=$3 ctl_addr=$4
  mkdir -p "$dir"/{munge,state,log,spool}
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/key"
  munged --force --key-file="$dir/munge/key" --socket="$dir/munge/sock" \
    --pid-file="$dir/munge/pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/seed" || return 1
  local ctld_port slurmd_port
  ctld_port=$(slurm_free_port)
  slurmd_port=$(slurm_free_port)
  cat >"$dir/plugstack.conf" <<PLUG
required $plugin cr_slurm=$(dirname "$plugin")/../bin/cr_slurm
PLUG
  cat >"$dir/slurm.conf" <<CONF
ClusterName=ckpt$$
SlurmctldHost=$ctl($ctl_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock,cred_expire=${SLURM_CRED_EXPIRE:-5}
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
ReturnToService=2
JobRequeue=1
MinJobAge=300
KillWait=5
SlurmdTimeout=6
InactiveLimit=0
PlugStackConfig=$dir/plugstack.conf
${SLURM_EXTRA_CONF:-}
CONF
  export SLURM_CONF=$dir/slurm.conf
}

# slurm_wait_idle N: until N nodes are idle (20 s at most).
slurm_wait_idle() {
  local i
  for i in $(seq 1 100); do
    (($(slurm_client sinfo -h -N -o %t 2>/dev/null | grep -c '^idle') >= $1)) && return 0
    sleep 0.2
  done
  echo "slurm cluster in $SLURM_DIR did not come up:" >&2
  tail -5 "$SLURM_DIR"/log/*.log >&2
  return 1
}

# slurm_client CMD...: a Slurm command where the controller is reachable.
# nsenter, not `ip netns exec`: that mounts a /sys of its own, without the
# cgroup file systems slurmd looks for.
slurm_client() {
  if [[ -n ${SLURM_CTL_NS:-} ]]; then
    nsenter --net=/run/netns/"$SLURM_CTL_NS" "$@"
  else
    "$@"
  fi
}

slurm_cluster_start() {
  local dir=$1 plugin=$2 node
  node=$(hostname -s)
  SLURM_DIR=$dir
  slurm_conf "$dir" "$plugin" "$node" 127.0.0.1 || return 1
  mkdir -p "$dir/spool/$node"
  echo "NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN" >>"$dir/slurm.conf"
  if [[ -n ${SLURM_PARTITIONS:-} ]]; then  # the caller's, @NODE@ for the node
    echo "${SLURM_PARTITIONS//@NODE@/$node}" >>"$dir/slurm.conf"
  else
    echo "PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" \
      >>"$dir/slurm.conf"
  fi
  slurmctld -f "$SLURM_CONF" -i || return 1
  slurmd -f "$SLURM_CONF" || return 1
  slurm_wait_idle 1
}

slurm_cluster_start_nodes() {
  local dir=$1 plugin=$2 n=$3 i tag net
  SLURM_DIR=$dir
  tag=sl$$
  net=10.251.$((RANDOM % 250))
  for i in $(seq 1 "$n"); do SLURM_NS+=("${tag}n$i"); done
  SLURM_CTL_NS=${tag}c
  SLURM_SW_NS=${tag}s
  SLURM_NET=$net
  source "$(dirname "${BASH_SOURCE[0]}")/../e2e/netns.sh"
  netns_switch "$SLURM_SW_NS" "$net" "${tag}l" "${SLURM_NS[@]}" "$SLURM_CTL_NS" || {
    echo "cannot make the nodes' namespaces: $NETNS_WHY" >&2
    return 1
  }
  slurm_conf "$dir" "$plugin" "$(hostname -s)" "$net.$((n + 1))" || return 1
  for i in $(seq 1 "$n"); do
    mkdir -p "$dir/spool/node$i"
    echo "NodeName=node$i NodeAddr=$net.$i CPUs=$(nproc) State=UNKNOWN" >>"$dir/slurm.conf"
  done
  echo "PartitionName=test Nodes=node[1-$n] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" \
    >>"$dir/slurm.conf"
  nsenter --net=/run/netns/"$SLURM_CTL_NS" slurmctld -f "$SLURM_CONF" -i || return 1
  for i in $(seq 1 "$n"); do
    nsenter --net=/run/netns/"${SLURM_NS[$((i - 1))]}" slurmd -f "$SLURM_CONF" -N "node$i" || return 1
  done
  slurm_wait_idle "$n"
}

# slurm_kill_node I: node I fails: its slurmd and every process in its
# namespace (the job's slurmstepd and tasks) killed at once.
slurm_kill_node() {
  local ns=${SLURM_NS[$(($1 - 1))]} p
  for p in $(ip netns pids "$ns"); do kill -9 "$p" 2>/dev/null || true; done
  return 0
}

# Never fails (it runs from the tests' EXIT traps, under set -e).
slurm_cluster_stop() {
  local dir=$1 f ns pids=() i
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [[ -f $f ]] && pids+=("$(cat "$f")")
  done
  for ns in "${SLURM_NS[@]}" ${SLURM_CTL_NS:-} ${SLURM_SW_NS:-}; do
    for f in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$f"); done
  done
  ((${#pids[@]})) || return 0
  kill "${pids[@]}" 2>/dev/null || true
  # The daemons save their state on SIGTERM: let them, then make sure.
  for i in $(seq 1 50); do
    kill -0 "${pids[@]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
  for ns in "${SLURM_NS[@]}" ${SLURM_CTL_NS:-} ${SLURM_SW_NS:-}; do
    ip netns del "$ns" 2>/dev/null || true
  done
  return 0
}
