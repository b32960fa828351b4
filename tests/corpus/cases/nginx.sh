#!/usr/bin/env bash
# nginx with Debian's /etc/nginx/nginx.conf (a master, `worker_processes
# auto` workers as www-data, daemonized) serving a directory on a free port
# instead of the default site, its pid file and logs in WORK; a file fetched
# with curl, the master and its workers checkpointed as a tree (cr_full,
# cr_incr between fetches), killed, restored detached: curl must fetch the
# same bytes, then `nginx -s quit` ends it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin nginx "$@"

PORT=$(free_port)
mkdir "$WORK/html"
head -c 3000000 /dev/urandom >"$WORK/html/blob.bin"
# Debian's configuration, but for the site, the pid file and the logs.
sed -e "s|^pid .*|pid $WORK/nginx.pid;|" \
  -e "s|access_log .*|access_log $WORK/access.log;|" \
  -e "s|error_log .*|error_log $WORK/error.log;|" \
  -e "s|include /etc/nginx/sites-enabled/\*;|server { listen $PORT; root $WORK/html; }|" \
  /etc/nginx/nginx.conf >"$WORK/nginx.conf"
grep -q "listen $PORT" "$WORK/nginx.conf" || fail "/etc/nginx/nginx.conf does not include sites-enabled as expected"
chmod 644 "$WORK/html/blob.bin"
fetch() { curl -sf -o "$WORK/$1" "http://127.0.0.1:$PORT/blob.bin"; }

run_fg start nginx -c "$WORK/nginx.conf" -e "$WORK/error.log"
ROOT=$(cat "$WORK/nginx.pid")
TREE=1
wait_until 30 "first fetch" 'fetch got0'
cmp -s "$WORK/got0" "$WORK/html/blob.bin" || fail "nginx served other bytes before any checkpoint"
workers=$(($(tree_pids "$ROOT" | wc -l) - 1))
((workers >= 1)) || fail "nginx has no worker"
checkpoint full
fetch got1 || fail "curl after cr_full failed"
checkpoint incr
kill_tree
restore_detach
wait_until 30 "fetch after the restore" 'fetch got2'
cmp -s "$WORK/got2" "$WORK/html/blob.bin" || fail "the restored nginx served other bytes"
n=$(($(tree_pids "$ROOT" | wc -l) - 1))
((n == workers)) || fail "the restored master has $n workers, not $workers"
run_fg quit nginx -c "$WORK/nginx.conf" -s quit
deadline=$((SECONDS + 30))
while alive "$ROOT"; do
  ((SECONDS < deadline)) || fail "the restored master did not quit after nginx -s quit"
  sleep 0.1
done
corpus_pass "$workers workers"
