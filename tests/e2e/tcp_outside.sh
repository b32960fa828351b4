#!/usr/bin/env bash
# tcp_outside.sh BIN_DIR: a client (programs/tcp_stream.c) in namespace B,
# connected to a server in namespace A that is not checkpointed; both
# stream data both ways at a steady pace and check every byte.
#   1. cr_full without --tcp-established refuses the connection by name and
#      the client keeps running;
#   2. cr_full --tcp-established --kill of the client while the server keeps
#      sending: the connection is locked (its packets held back, a FIB rule
#      in B) and the client ends without a FIN or a reset;
#   3. cr_restart in a namespace without the client's address is refused by
#      name (the server still waits);
#   4. cr_restart in B: the client goes on, the rule goes, and both ends
#      finish with every byte as sent (the server saw no reset, no end of
#      file, no wrong byte: what it sent while the client was gone came
#      again by retransmission).
# Exit 77 (skip) where network namespaces cannot be made.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=netns.sh
source "$HERE/netns.sh"
BIN_DIR=$(cd "$1" && pwd)
PROG=$BIN_DIR/e2e/tcp_stream
NAME="nodes tcp-outside"
NS_A=crnA$$
NS_B=crnB$$
NS_C=crnC$$
NET=10.251.$(($$ % 250))
PORT=$((20000 + $$ % 20000))
BYTES=${E2E_TCP_BYTES:-700000} # ~14 s at 51 KB/s each way
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-tcpout.XXXXXX")
install_traps
LOGS=("$WORK/server.err" "$WORK/client.err" "$WORK/tool.err" "$WORK/restart.err")
E2E_CASE="$NAME" # for pass, fail and skip (lib.sh)
cleanup() {
  local p
  for p in ${SERVER:-} ${CLIENT:-} ${RESTART:-}; do kill_tree "$p"; done
  netns_remove "$NS_A" "$NS_B" "$NS_C"
  cleanup_common
}
trap cleanup EXIT

[[ -x $PROG ]] || fail "$PROG was not built"
netns_pair "$NS_A" "$NS_B" "$NET" "crn$$" || { echo "SKIP $NAME: $NETNS_WHY"; exit 77; }
ip netns add "$NS_C" && ip -n "$NS_C" link set lo up

got() { awk '$1 == "got" { n = $2 } END { print n + 0 }' "$1"; }
wait_got() { # FILE N PID: until FILE says at least N bytes arrived
  local deadline=$((SECONDS + 60))
  while (($(got "$1") < $2)); do
    [[ $(proc_state "$3") != [Z-] ]] || fail "$1: the program ended early: $(first_line "${1%.out}.err")"
    ((SECONDS < deadline)) || fail "$1: no progress"
    sleep 0.05
  done
}

(close_fds && cd "$WORK" && exec ip netns exec "$NS_A" "$PROG" serve "$NET.1" "$PORT" "$BYTES" \
  </dev/null >"$WORK/server.out" 2>"$WORK/server.err") &
SERVER=$!
wait_listening "$NS_A" "$PORT" "$SERVER" || fail "the server does not listen: $(first_line "$WORK/server.err")"
(close_fds && cd "$WORK" && exec ip netns exec "$NS_B" "$PROG" connect "$NET.1" "$PORT" "$BYTES" \
  </dev/null >"$WORK/client.out" 2>"$WORK/client.err") &
CLIENT=$!
wait_got "$WORK/client.out" 40000 "$CLIENT"

# 1. Refused by name without the option.
rc=0
ip netns exec "$NS_B" "$BIN_DIR/cr_full" --dir "$WORK/refused" "$CLIENT" </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
((rc != 0)) || fail "cr_full without --tcp-established saved a connection to a peer outside the job"
grep -q "its peer is not in the job.*--tcp-established" "$WORK/tool.err" || fail "cr_full did not name the connection: $(first_line "$WORK/tool.err")"
n=$(got "$WORK/client.out")
wait_got "$WORK/client.out" $((n + 8192)) "$CLIENT"

# 2. Checkpoint and kill the client; the server goes on sending.
T=$EPOCHREALTIME
ip netns exec "$NS_B" "$BIN_DIR/cr_full" --dir "$WORK/ck" --tcp-established --kill --json "$CLIENT" \
  </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || fail "cr_full --tcp-established --kill: $(first_line "$WORK/tool.err")"
T_CKPT=$(elapsed "$T")
wait_exit "$CLIENT" 10 || fail "the client still runs after cr_full --kill"
at_kill=$(got "$WORK/client.out")
[[ $(ip -n "$NS_B" rule show priority 0) == *blackhole* ]] || fail "no rule holds the connection's packets back in $NS_B"
sleep 2 # the server sends into the gap; its packets must meet no reset
[[ $(proc_state "$SERVER") != [Z-] ]] || fail "the server ended while the client was gone: $(first_line "$WORK/server.err")"
server_got=$(got "$WORK/server.out")

# 3. Where its local address does not exist: refused by name.
rc=0
ip netns exec "$NS_C" "$BIN_DIR/cr_restart" --dir "$WORK/ck" </dev/null >/dev/null 2>"$WORK/restart.err" || rc=$?
((rc != 0)) || fail "cr_restart rebuilt the connection where its address does not exist"
grep -q "$NET.2:[0-9]* -> $NET.1:$PORT: its local address does not exist on this node" "$WORK/restart.err" ||
  fail "cr_restart in $NS_C did not name the connection: $(first_line "$WORK/restart.err")"
[[ $(proc_state "$SERVER") != [Z-] ]] || fail "the server ended after the refused restore"

# 4. Restore in B: both ends finish with every byte.
: >"$WORK/restart.err"
T=$EPOCHREALTIME
(close_fds && exec ip netns exec "$NS_B" "$BIN_DIR/cr_restart" --dir "$WORK/ck" \
  </dev/null >"$WORK/restart.out" 2>>"$WORK/restart.err") &
RESTART=$!
wait_exit "$SERVER" 120 || fail "the server did not finish"
((EXIT_STATUS == 0)) || fail "the server $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/server.err")"
wait_exit "$RESTART" 60 || fail "the restored client did not finish"
((EXIT_STATUS == 0)) || fail "the restored client $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/restart.err") $(first_line "$WORK/client.err")"
grep -qx "ok $BYTES $BYTES" "$WORK/server.out" || fail "the server did not get every byte: $(tail -n 1 "$WORK/server.out")"
grep -qx "ok $BYTES $BYTES" "$WORK/client.out" || fail "the client did not get every byte: $(tail -n 1 "$WORK/client.out")"
[[ $(ip -n "$NS_B" rule show priority 0) != *blackhole* ]] || fail "the restore left the rule in $NS_B"
pass "client killed after $at_kill bytes in, server at $server_got; cr_full ${T_CKPT}s, $(grep -o '"frozen_seconds":[0-9.]*' "$WORK/tool.out")"
