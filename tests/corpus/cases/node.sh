#!/usr/bin/env bash
# node running a computation (`node prog.js`: V8 and its platform threads,
# libuv's loop, timers between batches of work, crypto), checkpointed while
# it computes, killed, restored: its digest must be an uninterrupted run's.
# (Each step sleeps a little while WORK/pace exists: lib.sh, pace_on.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin node "$@"

cat >"$WORK/prog.js" <<'JS'
const crypto = require("crypto");
const fs = require("fs");
const n = 2000000;
const sieve = new Uint8Array(n + 1);
let primes = [];
let h = crypto.createHash("sha256");
let batch = 0;
function step() {
  // one batch of work per timer tick: the event loop runs between them
  for (let k = 0; k < 500; k++) {
    let x = Buffer.from(String(batch * 500 + k));
    for (let r = 0; r < 10; r++) x = crypto.createHash("sha256").update(x).digest();
    h.update(x);
  }
  for (let i = 2 + batch * 20000; i < 2 + (batch + 1) * 20000 && i <= n; i++) {
    if (sieve[i]) continue;
    primes.push(i);
    for (let j = i * i; j <= n; j += i) sieve[j] = 1;
  }
  batch++;
  if (batch % 10 === 0) console.log("batch " + batch);
  if (batch < 100) setTimeout(step, fs.existsSync("pace") ? 200 : 1);
  else console.log("result " + h.update(String(primes.length)).digest("hex") + " " + primes.length);
}
step();
JS
t=$EPOCHREALTIME
run_fg ref node prog.js
phase "uninterrupted" "$t"
pace_on
start_bg run node prog.js
wait_until 60 "first batches" 'grep -q "^batch 10$" "$WORK/run.out"'
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
corpus_pass "node $(node --version)"
