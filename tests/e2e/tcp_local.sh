#!/usr/bin/env bash
# tcp_local.sh BIN_DIR stream|redis: --tcp-established with the peer on the
# same node (both ends on 127.0.0.1 in a network namespace made for the test,
# whose rules the lock changes). The server is checkpointed with
# `cr_full --tree --tcp-established --kill` and restored; the client, outside
# the job, must see no reset and get correct answers afterwards:
#   stream: programs/tcp_stream.c both ways (every byte checked by both ends);
#   redis:  redis-server, and one redis-cli connection sending INCR every
#           50 ms: its answers must be 1, 2, 3, ... with no error line, over
#           that one connection (redis-cli would connect again after a reset).
# Both: while the server is gone a rule of priority 0 comes before the
# kernel's "lookup local" rule, and after the restore only that local rule
# is left. Exit 77 (skip) where network namespaces cannot be made, or
# (redis) where redis is not installed.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"
BIN_DIR=$(cd "$1" && pwd)
MODE=$2
E2E_CASE="tcp_local $MODE"
NS=crl$$
PORT=$((20000 + $$ % 20000))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-tcplocal.XXXXXX")
install_traps
LOGS=("$WORK/server.err" "$WORK/client.err" "$WORK/client.out" "$WORK/tool.err" "$WORK/restart.err")
cleanup() {
  local p
  for p in ${CLIENT:-} ${SERVER:-} ${RESTART:-}; do kill_tree "$p"; done
  netns_remove "$NS"
  cleanup_common
}
trap cleanup EXIT
in_ns() { ip netns exec "$NS" "$@"; }

case $MODE in
  stream) [[ -x $BIN_DIR/e2e/tcp_stream ]] || fail "tcp_stream was not built" ;;
  redis) command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
    skip "redis-server or redis-cli is not installed (scripts/setup.sh installs them)" ;;
  *) fail "unknown mode $MODE" ;;
esac
command -v ip >/dev/null || skip "no ip command (iproute2)"
ip netns add "$NS" 2>/dev/null || skip "cannot create network namespaces"
ip -n "$NS" link set lo up

# Progress of the client: stream: bytes received; redis: answers.
progress() {
  if [[ $MODE == stream ]]; then
    awk '$1 == "got" { n = $2 } END { print n + 0 }' "$WORK/client.out"
  else
    grep -c . "$WORK/client.out" || true
  fi
}
wait_progress() { # N: until the client is at N (20 s)
  local deadline=$((SECONDS + 20))
  while (($(progress) < $1)); do
    [[ $(proc_state "$CLIENT") != [Z-] ]] || fail "the client ended early: $(first_line "$WORK/client.err")"
    ((SECONDS < deadline)) || fail "the client makes no progress (at $(progress))"
    sleep 0.05
  done
}

if [[ $MODE == stream ]]; then
  BYTES=200000 # ~4 s at 51 KB/s each way
  (close_fds && cd "$WORK" && exec ip netns exec "$NS" "$BIN_DIR/e2e/tcp_stream" serve 127.0.0.1 "$PORT" "$BYTES" \
    </dev/null >"$WORK/server.out" 2>"$WORK/server.err") &
  SERVER=$!
  wait_listening "$NS" "$PORT" "$SERVER" || fail "the server does not listen: $(first_line "$WORK/server.err")"
  (close_fds && exec ip netns exec "$NS" "$BIN_DIR/e2e/tcp_stream" connect 127.0.0.1 "$PORT" "$BYTES" \
    </dev/null >"$WORK/client.out" 2>"$WORK/client.err") &
  CLIENT=$!
  wait_progress 40000
else
  COUNT=120 # 6 s of INCR every 50 ms
  (close_fds && cd "$WORK" && exec ip netns exec "$NS" redis-server --port "$PORT" --bind 127.0.0.1 \
    --save "" --appendonly no --daemonize no --dir "$WORK" </dev/null >"$WORK/server.out" 2>"$WORK/server.err") &
  SERVER=$!
  wait_listening "$NS" "$PORT" "$SERVER" || fail "redis-server does not listen: $(first_line "$WORK/server.out")"
  (close_fds && exec ip netns exec "$NS" redis-cli -p "$PORT" -r "$COUNT" -i 0.05 INCR counter \
    </dev/null >"$WORK/client.out" 2>"$WORK/client.err") &
  CLIENT=$!
  wait_progress 10
fi
# The server's PID inside `ip netns exec` (which execs it: the same PID).
in_ns "$BIN_DIR/cr_full" --dir "$WORK/ck" --tree --tcp-established --kill "$SERVER" \
  </dev/null >/dev/null 2>"$WORK/tool.err" || fail "cr_full --tcp-established --kill: $(first_line "$WORK/tool.err")"
wait_exit "$SERVER" 10 || fail "the server still runs after cr_full --kill"
at_kill=$(progress)
rules=$(ip -n "$NS" rule show priority 0)
[[ $(head -n 1 <<<"$rules") == *blackhole* ]] || fail "no lock rule before the local lookup: $rules"
sleep 1.5 # the client sends into the gap: it must meet no reset
[[ $(proc_state "$CLIENT") != [Z-] ]] || fail "the client ended while the server was gone: $(first_line "$WORK/client.err") $(tail -n 1 "$WORK/client.out")"

(close_fds && exec ip netns exec "$NS" "$BIN_DIR/cr_restart" --dir "$WORK/ck" \
  </dev/null >"$WORK/restart.out" 2>"$WORK/restart.err") &
RESTART=$!
wait_exit "$CLIENT" 60 || fail "the client did not finish"
((EXIT_STATUS == 0)) || fail "the client $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/client.err")"
if [[ $MODE == stream ]]; then
  grep -qx "ok $BYTES $BYTES" "$WORK/client.out" || fail "the client did not get every byte: $(tail -n 1 "$WORK/client.out")"
  wait_exit "$RESTART" 30 || fail "the restored server did not finish"
  ((EXIT_STATUS == 0)) || fail "the restored server $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/restart.err")"
else
  [[ ! -s $WORK/client.err ]] || fail "redis-cli reported: $(first_line "$WORK/client.err")"
  seq 1 "$COUNT" | cmp -s - "$WORK/client.out" ||
    fail "redis-cli's answers are not 1..$COUNT: $(grep -v '^[0-9]*$' "$WORK/client.out" | head -n 1)"
  # redis-cli connects again after a reset, silently when it can: the
  # server must have seen its one connection and this one only.
  conns=$(in_ns redis-cli -p "$PORT" INFO stats | tr -d '\r' | awk -F: '$1 == "total_connections_received" { print $2 }')
  [[ $conns == 2 ]] || fail "redis-server received $conns connections: the client connected again"
  { kill_tree "$RESTART" && wait "$RESTART"; } 2>/dev/null || true # it waits for the server
fi
rules=$(ip -n "$NS" rule show priority 0)
[[ $rules == "0:	from all lookup local" ]] || fail "the rules of priority 0 after the restore: $rules"
pass "server killed at $at_kill, the client finished without a reset"
