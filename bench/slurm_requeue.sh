#!/usr/bin/env bash
# slurm_requeue.sh BUILD [MIB] [TASKS]: what a Slurm job pays to be stopped
# before its time limit and brought back, under a private Slurm cluster
# (tests/slurm/cluster.sh). The job: sbatch --requeue -t 1
# --ckpt-before-end=45 around `srun -n TASKS cr_work` with MIB MiB per task
# (tests/e2e/programs/cr_work.c: fills its memory, rewrites 1 MiB per 10 ms,
# prints a digest of all of it). Prints, from the job's output and
# slurmctld's log: the stop checkpoint's frozen time and size, the time from
# the stop to the requeue, from the requeue to the tasks running again
# (Slurm's own delay included), the restore's time, and whether the result
# equals an uninterrupted run's. Needs root.
set -euo pipefail
BUILD=$(realpath "$1")
MIB=${2:-256}
TASKS=${3:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../tests/slurm/cluster.sh"
WORK=$(mktemp -d /var/tmp/slurm-bench.XXXXXX)
trap 'slurm_cluster_stop "$WORK/cluster"; rm -rf "$WORK"' EXIT
slurm_cluster_start "$WORK/cluster" "$BUILD/lib/spank_libckpt.so"
ROUNDS=2500  # 25 s of work: one stop 15 s in, then the rest
expected=$("$BUILD/bin/e2e/cr_work" "$ROUNDS" 0 "$MIB" </dev/null)
cat >"$WORK/job.sh" <<JOB
#!/bin/bash
srun -n $TASKS $BUILD/bin/e2e/cr_work $ROUNDS 0 $MIB
JOB
job=$(sbatch --parsable --requeue --open-mode=append -o "$WORK/out" -n "$TASKS" -t 1 \
  --ckpt-dir="$WORK/ck" --ckpt-interval=0 --ckpt-before-end=45 "$WORK/job.sh")
python3 - "$WORK/out" "$job" "$WORK/cluster/log/slurmctld.log" "$expected" "$TASKS" <<'PY'
import re, subprocess, sys, time
out, job, ctld, expected, tasks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
seen, t0 = {}, time.time()
def state():
    s = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
    m = re.search(r"JobState=(\S+)", s)
    return m.group(1) if m else "?"
while time.time() - t0 < 300:
    try:
        lines = open(out).read().splitlines()
    except FileNotFoundError:
        lines = []
    for l in lines:
        seen.setdefault(l, time.time())
    if state() in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
        break
    time.sleep(0.02)
def first(pattern):
    hits = [(t, l) for l, t in seen.items() if re.search(pattern, l)]
    return min(hits) if hits else (None, None)
t_stop_ckpt, l_ckpt = first(r"checkpoint \(the stop time came\)")
t_stopped, _ = first(r"stopped the job")
t_requeue, _ = first(r"requeued job")
t_restored, l_restored = first(r"restored chain")
results = [l for l in lines if l.startswith("result ")]
frozen = re.search(r"frozen ([0-9.]+) s", l_ckpt or "")
size = re.search(r", ([0-9.]+ MiB),", l_ckpt or "")
restore = re.search(r"restore ([0-9.]+) s", l_restored or "")
print(f"job {job}: {state()}, {tasks} task(s)")
print(f"stop checkpoint: {size.group(1) if size else '?'}, frozen {frozen.group(1) if frozen else '?'} s")
if t_stopped and t_requeue:
    print(f"stop line to requeue line: {t_requeue - t_stopped:.2f} s")
if t_requeue and t_restored:
    print(f"requeue to restored (Slurm's requeue delay included): {t_restored - t_requeue:.2f} s")
print(f"restore: {restore.group(1) if restore else '?'} s")
print("result exact:", bool(results) and all(r == expected for r in results), len(results), "of", tasks)
PY
grep -E "Requeuing|Allocate" "$WORK/cluster/log/slurmctld.log" | sed 's/^/slurmctld: /'
