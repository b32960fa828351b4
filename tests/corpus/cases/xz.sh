#!/usr/bin/env bash
# xz -c FILE > FILE.xz (default level, as xz-utils sets its threads) of a
# 3 MiB log-like text file, checkpointed while it compresses, killed, restored: the
# output must be byte for byte an uninterrupted xz's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin xz "$@"

text_file "$WORK/big.txt" 3
t=$EPOCHREALTIME
run_fg ref xz -c big.txt
phase "uninterrupted" "$t"
start_bg run xz -c big.txt
wait_until 30 "output" '(($(size "$WORK/run.out") > 0))'
checkpoint full
sleep 0.5
checkpoint incr
kill_tree
restore_wait
cmp -s "$WORK/run.out" "$WORK/ref.out" || fail "the restored xz's output differs from an uninterrupted xz's ($(size "$WORK/run.out") and $(size "$WORK/ref.out") bytes)"
corpus_pass
