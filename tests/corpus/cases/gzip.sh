#!/usr/bin/env bash
# gzip -c FILE > FILE.gz of a 96 MiB log-like text file, checkpointed while it
# compresses (cr_full, then cr_incr), killed, restored: the output must be
# byte for byte an uninterrupted gzip's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin gzip "$@"

text_file "$WORK/big.txt" 96
t=$EPOCHREALTIME
run_fg ref gzip -c big.txt
phase "uninterrupted" "$t"
start_bg run gzip -c big.txt
wait_until 30 "output" '(($(size "$WORK/run.out") > 1000000))'
checkpoint full
sleep 0.2
checkpoint incr
at=$(size "$WORK/run.out")
kill_tree
restore_wait
cmp -s "$WORK/run.out" "$WORK/ref.out" || fail "the restored gzip's output differs from an uninterrupted gzip's ($(size "$WORK/run.out") and $(size "$WORK/ref.out") bytes)"
corpus_pass "checkpointed at $((at * 100 / $(size "$WORK/ref.out")))% of the output"
