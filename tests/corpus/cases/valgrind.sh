#!/usr/bin/env bash
# valgrind's memcheck running gzip -c FILE, checkpointed while it compresses
# (cr_full, then cr_incr), killed, restored: the output must be byte for
# byte an uninterrupted gzip's and memcheck must report no error. Under
# valgrind a program has no vdso (valgrind unmaps it) and valgrind keeps
# its own descriptors just below the limit of open files.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin valgrind "$@"

text_file "$WORK/big.txt" 16
t=$EPOCHREALTIME
run_fg ref gzip -c big.txt
phase "uninterrupted" "$t"
start_bg run valgrind --tool=memcheck --log-file="$WORK/memcheck.log" gzip -c big.txt
wait_until 120 "output" '(($(size "$WORK/run.out") > 100000))'
checkpoint full
sleep 0.2
checkpoint incr
at=$(size "$WORK/run.out")
kill_tree
restore_wait
cmp -s "$WORK/run.out" "$WORK/ref.out" || fail "the restored gzip's output differs from an uninterrupted gzip's ($(size "$WORK/run.out") and $(size "$WORK/ref.out") bytes)"
grep -q 'ERROR SUMMARY: 0 errors' "$WORK/memcheck.log" || fail "memcheck: $(grep 'ERROR SUMMARY' "$WORK/memcheck.log" || echo 'no summary in its log')"
corpus_pass "checkpointed at $((at * 100 / $(size "$WORK/ref.out")))% of the output"
