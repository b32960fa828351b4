#!/bin/bash
# The tests' workload: a sum over N steps (10 per second) kept only in the
# shell's memory, each step in a child process (sleep), so the task is a
# tree whose output pipe its members share. Task T of a step sums N+T steps.
n=$(($1 + ${SLURM_PROCID:-0}))
i=0
s=0
while [ $i -lt "$n" ]; do
  i=$((i + 1))
  s=$(((s * 31 + i * i) % 1000000007))
  sleep "${WORK_STEP:-0.1}"
done
echo "task ${SLURM_PROCID:-0} sum $s"
