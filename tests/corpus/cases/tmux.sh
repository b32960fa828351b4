#!/usr/bin/env bash
# A detached tmux session (the server daemonized, a pane running a shell
# loop that counts into a file), the server and its pane checkpointed as a
# tree, killed, restored detached: the loop must count on, and
# `tmux send-keys C-c` must reach the pane and stop it (SIGINT from the
# pane's terminal to its foreground process group), which ends the session
# and the server.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin tmux "$@"

SOCK=$WORK/tmux.sock
tm() { tmux -S "$SOCK" "$@"; }
count() { # the counter (0 while the loop rewrites its file)
  local c
  c=$(cat "$WORK/count" 2>/dev/null) || true
  echo "${c:-0}"
}
counting() { # counting SECONDS: the counter moved within SECONDS
  local c0
  c0=$(count)
  sleep "$1"
  (($(count) > c0))
}
run_fg new tmux -S "$SOCK" new-session -d -s corpus "i=0; while :; do i=\$((i + 1)); echo \$i >$WORK/count; sleep 0.1; done"
ROOT=$(tm display-message -p '#{pid}')
TREE=1
wait_until 30 "counting" '(($(count) >= 5))'
sleep 0.3 # the display-message client's connection is gone from the server
checkpoint full
sleep 0.5
checkpoint incr
kill_tree
restore_detach
counting 1 || fail "the restored pane's loop does not count (at $(count))"
tm send-keys -t corpus C-c || fail "tmux send-keys after the restore: $(last_err)"
deadline=$((SECONDS + 10))
while alive "$ROOT"; do
  ((SECONDS < deadline)) || fail "C-c did not stop the pane's loop (the counter $(counting 1 && echo moves || echo stopped) at $(count), the server runs on)"
  sleep 0.1
done
counting 0.5 && fail "the loop counts on after C-c and the server's end"
corpus_pass "tmux $(tmux -V | awk '{ print $2 }')"
