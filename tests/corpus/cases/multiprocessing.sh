#!/usr/bin/env bash
# python3 multiprocessing: a Pool of 4 workers (fork, pipes, a lock on a
# POSIX semaphore, the pool's own threads) mapping a CPU-bound function,
# checkpointed as a tree while the workers compute, killed, restored: the
# combined result must be an uninterrupted run's.
# (Each step sleeps a little while WORK/pace exists: lib.sh, pace_on.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin multiprocessing "$@"

cat >"$WORK/pool.py" <<'PY'
import hashlib
import os
import time
from multiprocessing import Pool


def work(i):
    h = hashlib.sha256(str(i).encode()).digest()
    for _ in range(20000):
        h = hashlib.sha256(h).digest()
    if os.path.exists("pace"):
        time.sleep(0.3)
    return h.hex()


if __name__ == "__main__":
    total = hashlib.sha256()
    with Pool(4) as pool:
        for k, h in enumerate(pool.imap(work, range(240))):
            total.update(h.encode())
            if k % 8 == 0:
                print("done", k, flush=True)
    print("result", total.hexdigest(), flush=True)
PY
t=$EPOCHREALTIME
run_fg ref python3 pool.py
phase "uninterrupted" "$t"
TREE=1
pace_on
start_bg run python3 pool.py
wait_until 60 "first results" 'grep -q "^done 8$" "$WORK/run.out"'
checkpoint full
sleep 0.5
checkpoint incr
n=$(tree_pids "$ROOT" | wc -l)
((n == 5)) || fail "the pool had $n processes, not the parent and 4 workers"
! grep -q '^result' "$WORK/run.out" || fail "the program finished before it was killed"
kill_tree
pace_off
restore_wait
ref=$(grep '^result' "$WORK/ref.out")
got=$(grep '^result' "$WORK/run.out") || fail "the restored program printed no result"
[[ $got == "$ref" ]] || fail "the restored program's $got differs from an uninterrupted run's $ref"
corpus_pass
