#!/usr/bin/env bash
# sort -t ' ' -k5,5 -k1,1n FILE > OUT: 128 MiB of log-like lines sorted by
# their request, then number (GNU sort: its threads, its buffer),
# checkpointed while it reads and sorts, killed, restored: the output must
# be byte for byte an uninterrupted sort's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin sort "$@"

text_file "$WORK/big.txt" 128
t=$EPOCHREALTIME
run_fg ref sort -t " " -k5,5 -k1,1n big.txt
phase "uninterrupted" "$t"
start_bg run sort -t " " -k5,5 -k1,1n big.txt
sleep 0.3
checkpoint full
sleep 0.3
checkpoint incr
[[ $(size "$WORK/run.out") -lt $(size "$WORK/ref.out") ]] || fail "sort finished its output before it was killed: make the input larger"
kill_tree
restore_wait
cmp -s "$WORK/run.out" "$WORK/ref.out" || fail "the restored sort's output differs from an uninterrupted sort's ($(size "$WORK/run.out") and $(size "$WORK/ref.out") bytes)"
corpus_pass
