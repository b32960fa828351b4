#!/usr/bin/env bash
# python3 with numpy: a heat-diffusion stencil on a 1000x1000 grid with a
# matrix product every few steps (BLAS), run as `python3 heat.py`,
# checkpointed while it computes, killed, restored: its result (a digest of
# the final grid) must be an uninterrupted run's.
# (Each step sleeps a little while WORK/pace exists: lib.sh, pace_on.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin numpy "$@"

cat >"$WORK/heat.py" <<'PY'
import hashlib
import os
import time

import numpy as np

rng = np.random.default_rng(12345)
n = 1000
u = rng.random((n, n))
m = rng.random((300, 300)) / 300
v = rng.random(300)
for step in range(120):
    u[1:-1, 1:-1] += 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
    if step % 4 == 0:
        v = m @ v
        v /= np.linalg.norm(v)
        u[0, :300] = v
    if step % 10 == 0:
        print("step", step, flush=True)
    if os.path.exists("pace"):
        time.sleep(0.2)
print("result", hashlib.sha256(u.tobytes() + v.tobytes()).hexdigest(), flush=True)
PY
t=$EPOCHREALTIME
run_fg ref python3 heat.py
phase "uninterrupted" "$t"
pace_on
start_bg run python3 heat.py
wait_until 60 "first step" 'grep -q "^step 10$" "$WORK/run.out"'
checkpoint full
sleep 0.5
checkpoint incr
! grep -q '^result' "$WORK/run.out" || fail "the program finished before it was killed"
kill_tree
pace_off
restore_wait
ref=$(grep '^result' "$WORK/ref.out")
got=$(grep '^result' "$WORK/run.out") || fail "the restored program printed no result"
[[ $got == "$ref" ]] || fail "the restored program's $got differs from an uninterrupted run's $ref"
corpus_pass "numpy $(python3 -c 'import numpy; print(numpy.__version__)')"
