# A private Slurm cluster for the tests, from Debian's packages: munged,
# slurmctld and one slurmd, all in a temporary directory with their own
# socket, ports and state, so that several test cases can run at once.
# Sourced by the Slurm test cases:
#   slurm_cluster_start DIR PLUGIN_SO   exports SLURM_CONF, prints nothing
#   slurm_cluster_stop DIR
# Needs root (slurmd starts job steps as other users' processes).

slurm_free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

slurm_cluster_start() {
  local dir=$1 plugin=$2 node
  node=$(hostname -s)
  mkdir -p "$dir"/{munge,state,log} "$dir/spool/$node"
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
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock,cred_expire=5
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
InactiveLimit=0
PlugStackConfig=$dir/plugstack.conf
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" -i || return 1
  slurmd -f "$SLURM_CONF" || return 1
  local i
  for i in $(seq 1 100); do
    if sinfo -h -o %t 2>/dev/null | grep -q '^idle'; then return 0; fi
    sleep 0.2
  done
  echo "slurm cluster in $dir did not come up:" >&2
  tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd-$node.log" >&2
  return 1
}

slurm_cluster_stop() {
  local dir=$1 f
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  return 0
}
