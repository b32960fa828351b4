#!/usr/bin/env bash
# sort -t ' ' -k5,5 -k1,1n FILE - > OUT: 128 MiB of log-like lines from a
# file and 8 MiB more from a pipe, sorted by their request, then number (GNU
# sort: its threads, its buffer), checkpointed as a tree (bash, the feeder
# and sort) while sort holds the file's lines and reads the pipe, killed,
# restored: the output must be byte for byte an uninterrupted sort's of both.
# The feeder sends its eight pieces one a second while WORK/pace exists, so
# sort cannot finish before its checkpoints however fast it sorts; the
# restored job runs unpaced.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin sort "$@"

text_file "$WORK/big.txt" 128
text_file "$WORK/tail.txt" 8
(cd "$WORK" && split -n l/8 tail.txt piece.)
SORT=(sort -t " " -k5,5 -k1,1n)
t=$EPOCHREALTIME
run_fg ref "${SORT[@]}" big.txt tail.txt
phase "uninterrupted" "$t"
pace_on
TREE=1
start_bg run bash -c 'for f in piece.*; do cat "$f"; [[ ! -e pace ]] || sleep 1; done | '"${SORT[*]@Q}"' big.txt -'
wait_until 30 "sort reading the pipe" '(($(tree_pids "$ROOT" | wc -l) >= 3))'
sleep 0.5
checkpoint full
sleep 0.3
checkpoint incr
[[ $(size "$WORK/run.out") == 0 ]] || fail "sort wrote output before its input ended (the feeder was not paced)"
kill_tree
pace_off
restore_wait
cmp -s "$WORK/run.out" "$WORK/ref.out" || fail "the restored sort's output differs from an uninterrupted sort's ($(size "$WORK/run.out") and $(size "$WORK/ref.out") bytes)"
corpus_pass
