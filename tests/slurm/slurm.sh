#!/usr/bin/env bash
# slurm.sh BUILD CASE: the SPANK plugin and cr_slurm under a real Slurm
# (Debian's slurmctld, slurmd and munged, started here: cluster.sh). Every
# case that runs the workload ends with its exact result (work.sh, compared
# with an uninterrupted run).
#   periodic     srun --ckpt-interval=1: several checkpoints committed per
#                task, a chain cr_info verifies; the task's program SIGKILLed
#                is restored in place by cr_slurm
#   before-end   sbatch --requeue -t 1 --ckpt-before-end=52 around an srun
#                step: 8 s after each start the step is checkpointed, stopped,
#                the job requeued, and restored from its checkpoint when it runs
#                again, until it finishes (Restarts >= 1)
#   extended     the same, but the job's time limit is extended while it
#                runs (scontrol update TimeLimit): no stop when the old limit
#                comes near, the job finishes in one run
#   signal       sbatch --ckpt-batch (the batch script is the checkpointed job)
#                and scancel --batch --signal=USR1: checkpoint, stop, requeue,
#                restore
#   tasks        srun -n 2 inside sbatch --ckpt-before-end: both tasks stopped,
#                task 0 requeues once both are, both restored with their own
#                results
#   requeue      scontrol requeue by hand while the step runs with periodic
#                checkpoints (Slurm ends the step with SIGTERM): the step is
#                not taken as finished; when the job runs again it is
#                restored from its newest checkpoint, not started afresh
#   nodes        three nodes (network namespaces on a bridge, a slurmd each):
#                a step of two tasks on two nodes stopped before its time
#                limit and requeued; the first node is drained meanwhile, so
#                the job runs again on the other pair of nodes, where both
#                tasks are restored
#   node-failure the same step with periodic checkpoints on two levels
#                (--ckpt-local per node, flushed to --ckpt-dir); one of its
#                nodes dies (its slurmd and every process on it killed):
#                Slurm requeues the job and it runs again on the surviving
#                node and the spare, the survivor's task restored from its
#                node's copy, the dead node's from the shared one; prints
#                the time from the failure to both running again
#   preempt      a job in a low-priority partition preempted by one in a
#                high-priority partition (PreemptMode=REQUEUE, GraceTime 20 s,
#                preempt_send_user_signal): its --signal=B:USR1 reaches the
#                checkpointed batch script, which checkpoints, stops and
#                requeues; the other job runs, then this one is restored
#   bad-options  a malformed or incomplete --ckpt-* option: srun fails at once,
#                naming it; nothing runs
#   unwritable   --ckpt-dir that cannot be created: the task runs to its exact
#                result without checkpoints, the user told once
set -euo pipefail
BUILD=$1
CASE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ $(id -u) != 0 ]]; then
  echo "slurm.$CASE: skipped: needs root (slurmd starts the jobs' processes as their users)"
  exit 77
fi
source "$HERE/cluster.sh"
WORK=$(mktemp -d /tmp/slurm.XXXXXX)
cleanup() {
  slurm_cluster_stop "$WORK/cluster"
  rm -rf "$WORK" 2>/dev/null || { sleep 1 && rm -rf "$WORK"; } || true
}
trap cleanup EXIT
die() {
  echo "slurm.$CASE: $*" >&2
  for f in "$WORK"/out.* "$WORK/cluster/log/slurmctld.log"; do
    [[ -f $f ]] || continue
    echo "---- $f" >&2
    tail -n 30 "$f" >&2
  done
  exit 1
}
case $CASE in
preempt)
  export SLURM_EXTRA_CONF=$'PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\nSlurmctldParameters=preempt_send_user_signal'
  export SLURM_PARTITIONS=$'PartitionName=low Nodes=@NODE@ Default=YES PriorityTier=1 GraceTime=20 State=UP\nPartitionName=high Nodes=@NODE@ PriorityTier=10 State=UP'
  slurm_cluster_start "$WORK/cluster" "$BUILD/lib/spank_libckpt.so" || die "no Slurm cluster"
  ;;
nodes | node-failure)
  # After a node failure the old batch script's srun waits KillWait + 2 s
  # for its step, then cancels it by ID: the same ID as the requeued job's
  # new step, which must not start before (Slurm's default is 120 s).
  [[ $CASE == node-failure ]] && export SLURM_CRED_EXPIRE=12
  slurm_cluster_start_nodes "$WORK/cluster" "$BUILD/lib/spank_libckpt.so" 3 || die "no Slurm cluster"
  ;;
*) slurm_cluster_start "$WORK/cluster" "$BUILD/lib/spank_libckpt.so" || die "no Slurm cluster" ;;
esac
CK=$WORK/ck
cp "$HERE/work.sh" "$WORK/work.sh"

expected() {  # expected N TASK: the uninterrupted result of task TASK
  SLURM_PROCID=$2 WORK_STEP=0 bash "$WORK/work.sh" "$1"
}
job_field() {  # job_field JOB FIELD
  slurm_client scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}
wait_done() {  # wait_done JOB SECONDS: until the job has ended
  local deadline=$((SECONDS + $2)) st
  while :; do
    st=$(job_field "$1" JobState)
    case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;; esac
    ((SECONDS < deadline)) || die "job $1 still $st after $2 s"
    sleep 0.5
  done
}
wait_line() {  # wait_line FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  until grep -q -- "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || die "no '$2' in $1 within $3 s"
    sleep 0.2
  done
}
submit() {  # submit ARGS...: sbatch, prints the job ID
  slurm_client sbatch --parsable --requeue --open-mode=append -o "$WORK/out.%j" "$@"
}
task_dirs() { find "$CK" -mindepth 3 -maxdepth 3 -type d -name 'task-*' | sort; }

case $CASE in
periodic)
  srun --ckpt-dir="$CK" --ckpt-interval=1 --ckpt-incrementals=2 \
    bash "$WORK/work.sh" 60 >"$WORK/out.srun" 2>&1 &
  SRUN=$!
  wait_line "$WORK/out.srun" "checkpoint (scheduled): chain 1 generation 2" 30
  dir=$(task_dirs)
  [[ -n $dir ]] || die "no task directory under $CK"
  root=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["root_pid"])' "$dir/cr_run.json")
  kill -9 "$root"
  wait_line "$WORK/out.srun" "restored chain" 30
  wait "$SRUN" || die "srun exited $?"
  grep -qx "$(expected 60 0)" "$WORK/out.srun" || die "result differs from $(expected 60 0)"
  "$BUILD/bin/cr_info" --dir "$dir" --verify >/dev/null || die "cr_info --verify $dir failed"
  ;;
before-end | tasks)
  ntasks=1
  [[ $CASE == tasks ]] && ntasks=2
  cat >"$WORK/job.sh" <<JOB
#!/bin/bash
echo "start \${SLURM_RESTART_COUNT:-0}"
srun -n $ntasks bash $WORK/work.sh 130
JOB
  job=$(submit -n "$ntasks" -t 1 --ckpt-dir="$CK" --ckpt-interval=0 --ckpt-before-end=52 \
    "$WORK/job.sh")
  wait_done "$job" 150
  [[ $(job_field "$job" JobState) == COMPLETED ]] || die "job $job ended $(job_field "$job" JobState)"
  restarts=$(job_field "$job" Restarts)
  ((restarts >= 1)) || die "job $job was never requeued"
  grep -q "requeued job $job" "$WORK/out.$job" || die "no requeue line"
  for t in $(seq 0 $((ntasks - 1))); do
    grep -qx "$(expected 130 "$t")" "$WORK/out.$job" || die "task $t: result differs from $(expected 130 "$t")"
    grep -q "restored chain .* (resume after a stop)" "$WORK/out.$job" || die "no restore after a stop"
  done
  echo "slurm.$CASE: job $job finished after $restarts requeues"
  ;;
extended)
  cat >"$WORK/job.sh" <<JOB
#!/bin/bash
srun bash $WORK/work.sh 200
JOB
  job=$(submit -t 1 --ckpt-dir="$CK" --ckpt-interval=0 --ckpt-before-end=50 "$WORK/job.sh")
  wait_line "$WORK/out.$job" "started job" 30
  slurm_client scontrol update jobid="$job" TimeLimit=3
  wait_done "$job" 90
  [[ $(job_field "$job" JobState) == COMPLETED ]] || die "job $job ended $(job_field "$job" JobState)"
  [[ $(job_field "$job" Restarts) == 0 ]] || die "job $job was requeued"
  grep -q "the stop time moved" "$WORK/out.$job" || die "no line about the moved stop"
  ! grep -q "stopped the job" "$WORK/out.$job" || die "stopped at the old time limit"
  grep -qx "$(expected 200 0)" "$WORK/out.$job" || die "result differs from $(expected 200 0)"
  ;;
signal)
  cat >"$WORK/job.sh" <<JOB
#!/bin/bash
WORK_STEP=0.1 bash $WORK/work.sh 100
JOB
  job=$(submit --ckpt-dir="$CK" --ckpt-batch --ckpt-interval=0 "$WORK/job.sh")
  wait_line "$WORK/out.$job" "started job" 30
  sleep 3
  scancel --batch --signal=USR1 "$job"
  wait_line "$WORK/out.$job" "requeued job $job" 30
  wait_done "$job" 90
  [[ $(job_field "$job" JobState) == COMPLETED ]] || die "job $job ended $(job_field "$job" JobState)"
  grep -q "checkpoint (SIGUSR1)" "$WORK/out.$job" || die "no checkpoint on the signal"
  grep -q "restored chain .* (resume after a stop)" "$WORK/out.$job" || die "no restore"
  grep -qx "$(expected 100 0)" "$WORK/out.$job" || die "result differs from $(expected 100 0)"
  [[ -d $CK/job-$job/step-batch/task-0 ]] || die "no checkpoint of the batch script"
  ;;
requeue)
  cat >"$WORK/job.sh" <<JOB
#!/bin/bash
srun bash $WORK/work.sh 120
JOB
  job=$(submit --ckpt-dir="$CK" --ckpt-interval=1 "$WORK/job.sh")
  wait_line "$WORK/out.$job" "checkpoint (scheduled): chain 1 generation 3" 30
  scontrol requeue "$job"
  wait_done "$job" 90
  [[ $(job_field "$job" JobState) == COMPLETED ]] || die "job $job ended $(job_field "$job" JobState)"
  grep -q "after the termination signal; not finished" "$WORK/out.$job" || die "no interrupted line"
  grep -q "restored chain .* (resume after a stop)" "$WORK/out.$job" || die "not restored"
  [[ $(grep -c "started job" "$WORK/out.$job") == 1 ]] || die "the program was started afresh"
  grep -qx "$(expected 120 0)" "$WORK/out.$job" || die "result differs from $(expected 120 0)"
  ;;
nodes | node-failure)
  # Long enough for Slurm to notice a dead node (SlurmdTimeout=6) before
  # the surviving task finishes.
  STEPS=140
  [[ $CASE == node-failure ]] && STEPS=400
  cat >"$WORK/job.sh" <<JOB
#!/bin/bash
srun -N 2 -n 2 bash $WORK/work.sh $STEPS
JOB
  if [[ $CASE == nodes ]]; then
    job=$(submit -N 2 -n 2 -t 1 --ckpt-dir="$CK" --ckpt-interval=0 --ckpt-before-end=52 "$WORK/job.sh")
    wait_line "$WORK/out.$job" "requeued job $job" 60
    slurm_client scontrol update nodename=node1 state=drain reason=maintenance
  else
    job=$(submit -N 2 -n 2 --ckpt-dir="$CK" --ckpt-local="$WORK/local/%n" --ckpt-interval=1 \
      "$WORK/job.sh")
    wait_line "$WORK/out.$job" "flushed chain 1 generation 2 to the shared level" 30
    [[ $(job_field "$job" NodeList) == "node[1-2]" ]] || die "job $job runs on $(job_field "$job" NodeList)"
    sleep 2
    failed_at=$EPOCHREALTIME
    slurm_kill_node 2
    deadline=$((SECONDS + 120))
    until (($(grep -c "restored chain" "$WORK/out.$job") >= 2)); do
      ((SECONDS < deadline)) || die "the tasks were not restored within 120 s of the failure"
      sleep 0.1
    done
    RESTORED_AFTER=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
      "$failed_at" "$EPOCHREALTIME")
  fi
  wait_done "$job" 150
  [[ $(job_field "$job" JobState) == COMPLETED ]] || die "job $job ended $(job_field "$job" JobState)"
  [[ $(job_field "$job" NodeList) == "node[1,3]" || $(job_field "$job" NodeList) == "node[2-3]" ]] ||
    die "job $job ran again on $(job_field "$job" NodeList)"
  [[ $CASE == node-failure ]] || [[ $(job_field "$job" NodeList) == "node[2-3]" ]] ||
    die "job $job ran on the drained node"
  # The manifest says where each task ran, run by run: first on node1 and
  # node2; last, after the drain, on node2 and node3, or after node2's
  # death on node1 (the survivor) and node3.
  want0="node1 node2" want1="node2 node3"
  [[ $CASE == node-failure ]] && want0="node1 node1"
  for t in 0 1; do
    want=want$t
    runs=$(jq -r '[.runs[0].node, .runs[-1].node] | join(" ")' "$CK/job-$job/step-0/task-$t/slurm.json")
    [[ $runs == "${!want}" ]] || die "task $t's manifest says it ran on '$runs', not '${!want}'"
  done
  [[ $(grep -c "restored chain" "$WORK/out.$job") -ge 2 ]] || die "not both tasks restored"
  for t in 0 1; do
    grep -qx "$(expected "$STEPS" "$t")" "$WORK/out.$job" ||
      die "task $t: result differs from $(expected "$STEPS" "$t")"
  done
  if [[ $CASE == node-failure ]]; then
    # Two levels: the survivor's task from its node's own copy, the dead
    # node's task from the shared one.
    grep -q "from the local level (resume" "$WORK/out.$job" || die "no task restored from its node"
    grep -q "from the shared level (resume" "$WORK/out.$job" || die "no task restored from the shared level"
    [[ -d $WORK/local/node2/job-$job ]] || die "no local level on node2"
    echo "slurm.$CASE: job $job ran again on $(job_field "$job" NodeList), both tasks restored" \
      "$RESTORED_AFTER s after node2 died"
  fi
  ;;
preempt)
  cat >"$WORK/job.sh" <<JOB
#!/bin/bash
WORK_STEP=0.1 bash $WORK/work.sh 150
JOB
  job=$(submit -p low -n "$(nproc)" --signal=B:USR1@5 --ckpt-dir="$CK" --ckpt-batch \
    --ckpt-interval=0 "$WORK/job.sh")
  wait_line "$WORK/out.$job" "started job" 30
  sleep 2
  high=$(slurm_client sbatch --parsable -p high -n "$(nproc)" -o "$WORK/high.out" \
    --wrap "echo high ran")
  wait_done "$high" 60
  wait_done "$job" 90
  [[ $(job_field "$job" JobState) == COMPLETED ]] || die "job $job ended $(job_field "$job" JobState)"
  grep -q "high ran" "$WORK/high.out" || die "the preempting job did not run"
  grep -q "checkpoint (SIGUSR1)" "$WORK/out.$job" || die "no checkpoint at the preemption"
  grep -q "restored chain .* (resume after a stop)" "$WORK/out.$job" || die "not restored"
  grep -qx "$(expected 150 0)" "$WORK/out.$job" || die "result differs from $(expected 150 0)"
  ;;
bad-options)
  for bad in --ckpt-interval=soon --ckpt-keep=0 --ckpt-signal=KILL --ckpt-incrementals=-1 \
    --ckpt-dir=relative --ckpt-local=relative "--ckpt-interval=5" "--ckpt-before-end=30"; do
    dir=(--ckpt-dir="$CK")
    [[ $bad == --ckpt-dir=* || $bad == --ckpt-interval=5 || $bad == --ckpt-before-end=30 ]] && dir=()
    rc=0
    srun "${dir[@]}" "$bad" touch "$WORK/ran" >"$WORK/out.bad" 2>&1 || rc=$?
    ((rc != 0)) || die "srun $bad exited 0"
    [[ ! -e $WORK/ran ]] || die "srun $bad ran the task"
    name=${bad%%=*}
    grep -q "libckpt: $name" "$WORK/out.bad" || die "srun $bad: no line naming $name: $(cat "$WORK/out.bad")"
  done
  ;;
unwritable)
  touch "$WORK/file"
  srun --ckpt-dir="$WORK/file/ck" bash "$WORK/work.sh" 20 >"$WORK/out.srun" 2>&1 ||
    die "srun exited $?"
  grep -qx "$(expected 20 0)" "$WORK/out.srun" || die "result differs"
  [[ $(grep -c "runs without checkpoints" "$WORK/out.srun") == 1 ]] ||
    die "not told once: $(cat "$WORK/out.srun")"
  ;;
*)
  die "unknown case"
  ;;
esac
echo "slurm.$CASE: passed"
