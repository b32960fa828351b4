#!/usr/bin/env bash
# A shell pipeline, as a script runs one:
#   bash -c 'seq 1 N | awk ... | sort -n | sha256sum' > OUT
# (bash and its four children, pipes between them), checkpointed as a tree
# while the data flows, killed, restored: the digest must be an
# uninterrupted run's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin pipeline "$@"

PIPE='seq 1 4000000 | awk '\''{ print ($1 * 7919) % 1000003, $1 }'\'' | sort -n | sha256sum'
t=$EPOCHREALTIME
run_fg ref bash -c "$PIPE"
phase "uninterrupted" "$t"
TREE=1
start_bg run bash -c "$PIPE"
# At once when all five run: seq and awk are still writing.
wait_until 30 "the whole pipeline" '(($(tree_pids "$ROOT" | wc -l) >= 5))'
checkpoint full
grep -q '"processes":5[,}]' "$WORK/tool.out" || fail "cr_full saved not bash and its 4: $(cat "$WORK/tool.out")"
sleep 0.5
checkpoint incr
kill_tree
restore_wait
[[ $(<"$WORK/run.out") == "$(<"$WORK/ref.out")" ]] || fail "the restored pipeline printed '$(<"$WORK/run.out")', an uninterrupted one '$(<"$WORK/ref.out")'"
corpus_pass
