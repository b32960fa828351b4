#!/usr/bin/env bash
# tail -q -F a.log b.log --pid=P (GNU tail: inotify watches on both files
# and their directory), following two logs while lines are appended to
# them; checkpointed (cr_full, then cr_incr), killed, restored: the
# restored tail must print every line appended afterwards, also after
# a.log is rotated (renamed away and made anew, which only the watch on the
# directory sees), and end with status 0 once P is gone. Its output must be
# exactly every line in the order they were appended.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin tail "$@"

EXPECTED=$WORK/expected
: >"$EXPECTED"
: >"$WORK/a.log"
: >"$WORK/b.log"
# append FILE LINE: the line is appended, and tail prints it before the next.
append() {
  LINE=$2
  echo "$LINE" >>"$WORK/$1"
  echo "$LINE" >>"$EXPECTED"
  wait_until 30 "tail printing '$LINE'" 'grep -qxF -- "$LINE" "$WORK/tail.out"'
}

# In WORK, so that a failed case's clean-up finds it and ends it.
(cd "$WORK" && exec sleep 1000) </dev/null >/dev/null 2>&1 &
WATCHED=$!
OWN_PIDS+=("$WATCHED")
start_bg tail tail -q -F -s 0.2 --pid="$WATCHED" a.log b.log
wait_until 30 "tail watching both logs" \
  '(($(grep -c "^inotify" /proc/"$ROOT"/fdinfo/* 2>/dev/null | awk -F: "{ s += \$2 } END { print s }") >= 3))'
for i in 1 2 3; do append a.log "a before $i"; done
append b.log "b before 1"
checkpoint full
append b.log "b between 1"
append a.log "a between 1"
checkpoint incr
kill_tree
restore_bg
wait_restored
for i in 1 2; do
  append a.log "a after $i"
  append b.log "b after $i"
done
mv "$WORK/a.log" "$WORK/a.log.1"
append a.log "a rotated 1"
append b.log "b after rotation"
append a.log "a rotated 2"
cmp -s "$WORK/tail.out" "$EXPECTED" ||
  fail "the restored tail's output differs from the lines appended: $(diff "$EXPECTED" "$WORK/tail.out" | head -3 | tr '\n' ' ')"
kill "$WATCHED"
finish_restored 30
corpus_pass "$(tail --version | head -1)"
