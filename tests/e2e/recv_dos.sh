#!/usr/bin/env bash
# recv_dos.sh BIN_DIR TEST: cr_recv under clients that do not know the token.
#
# Runs in a network namespace of its own (loopback only; no fixed names, so
# any port is free), the receiver in a PID namespace of its own (the
# migrated heap_pattern keeps its PID while the source still exists).
#   crowd  100 clients from 100 addresses (50 idle, 50 sending a HELLO one
#          byte every 500 ms) and 40 idle ones from one address stay
#          connected; a frozen migration goes through meanwhile and its
#          program finishes on the receiver's side. The receiver holds 116
#          of them at the gate at once (the one address is held to its 16,
#          the oldest dropped), and drops every one at its handshake deadline
#          (10 s here).
#   once   cr_recv --once is sent junk first (random bytes, connections
#          closed at once, a wrong token, a client that stays and says
#          nothing, a sender that authenticates and then gives up); it
#          reports each and keeps listening; then a valid
#          migration lands and cr_recv exits 0 once the program finished.
# Prints "PASS recv_dos TEST" or "FAIL recv_dos TEST: reason". Needs root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTS=(crowd once sigterm)
(($# == 2)) && [[ " ${TESTS[*]} " == *" $2 "* ]] || {
  echo "usage: $0 BIN_DIR TEST (${TESTS[*]})" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}

pass() {
  echo "PASS recv_dos $TEST${1:+ ($1)}"
  exit 0
}
fail() {
  echo "FAIL recv_dos $TEST: $*"
  show_logs
  exit 1
}
skip() {
  echo "SKIP recv_dos $TEST: $*"
  exit 77
}

((EUID == 0)) || skip "needs root (namespaces)"
command -v ip >/dev/null || skip "no ip command (iproute2)"
if [[ -z ${RECV_DOS_NETNS:-} ]]; then
  RECV_DOS_NETNS=1 exec unshare --net -- bash "$0" "$@" || skip "cannot create a network namespace"
fi
ip link set lo up || skip "cannot bring up loopback in a new network namespace"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-recv-dos-$TEST.XXXXXX")
chmod 755 "$WORK"
install_traps
# The clients' command lines do not name WORK (kill_own spares them): they
# are ended here, also when a check fails.
CLIENTS=()
trap 'for c in "${CLIENTS[@]}"; do kill -9 "$c" 2>/dev/null || true; done; cleanup_common' EXIT
LOGS=("$WORK/prog.err" "$WORK/recv.err" "$WORK/migrate.err")
PORT=7070
head -c 32 /dev/urandom >"$WORK/token"
chmod 600 "$WORK/token"

# start_receiver ARGS...: cr_recv on 127.0.0.1:PORT in a PID namespace of
# its own; sets RPID (unshare's PID) and waits until it listens.
start_receiver() {
  (close_fds && exec unshare --pid --fork --mount-proc --kill-child \
    "$BIN_DIR/cr_recv" --listen "127.0.0.1:$PORT" --token "$WORK/token" "$@" \
    </dev/null >"$WORK/recv.out" 2>"$WORK/recv.err") &
  RPID=$!
  OWN_PIDS+=("$RPID")
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -n $(ss -Hltn "sport = :$PORT" 2>/dev/null) ]] && return 0
    [[ -e /proc/$RPID ]] || fail "cr_recv ended before listening: $(first_line "$WORK/recv.err")"
    sleep 0.05
  done
  fail "cr_recv not listening after 10 s"
}

# gatekeepers: how many handshake processes cr_recv runs now (its children).
gatekeepers() {
  local recv
  recv=$(cat /proc/"$RPID"/task/*/children 2>/dev/null | awk '{ print $1 }')
  [[ -n $recv ]] || {
    echo 0
    return
  }
  cat /proc/"$recv"/task/*/children 2>/dev/null | wc -w
}

# clients NAME COUNT MODE SOURCE: recv_clients in the background, waits
# until all are connected.
clients() {
  ("$PROG_DIR/recv_clients" "$PORT" "$2" "$3" "$4" >"$WORK/$1.out" 2>"$WORK/$1.err") &
  CLIENTS+=($!)
  OWN_PIDS+=($!)
  local i
  for ((i = 0; i < 200; i++)); do
    grep -q '^connected' "$WORK/$1.out" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "clients $1 did not connect: $(first_line "$WORK/$1.err")"
}

start_target() { # MIB STEPS: heap_pattern here; sets TPID, READY_ID
  (close_fds && exec "$PROG_DIR/heap_pattern" "$WORK/ready" "$1" "$2" \
    </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  wait_file "$WORK/ready" "$TPID" 30 || fail "target did not become ready: $(first_line "$WORK/prog.err")"
  READY_ID=$(<"$WORK/ready")
}

migrate() { # ARGS...: cr_migrate; sets MIG_RC and MIG_SECONDS
  local t0=$EPOCHREALTIME
  MIG_RC=0
  (close_fds && exec timeout 60 "$BIN_DIR/cr_migrate" --to "127.0.0.1:$PORT" "$@" \
    </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || MIG_RC=$?
  MIG_SECONDS=$(elapsed "$t0")
}

expect_done() {
  local last
  last=$(tail -n 1 "$WORK/prog.out" 2>/dev/null)
  [[ $last == "done $READY_ID" ]] || fail "$1: the program did not finish correctly (last line \"$last\", want \"done $READY_ID\"): $(first_line "$WORK/prog.err")"
}

refusals() { grep -c -- "$1" "$WORK/recv.err" || true; }

case $TEST in
  crowd)
    # A deadline longer than the default 5 s: on a loaded 2-core machine,
    # connecting 140 clients and starting the target may take seconds.
    start_receiver --json --handshake-timeout 10
    t_connect=$EPOCHREALTIME
    clients idle 50 idle "127.0.1.%d"
    clients slow 50 slow "127.0.2.%d"
    clients one 40 idle 127.0.0.2
    # Each connection gets its gatekeeper as it is accepted.
    for ((i = 0; i < 100; i++)); do
      held=$(gatekeepers)
      per_source=$(refusals "max-per-source")
      ((held == 116 && per_source == 24)) && break
      sleep 0.05
    done
    ((held == 116)) || fail "cr_recv holds $held connections at the gate, expected 116 (100 + 16 from 127.0.0.2)"
    ((per_source == 24)) || fail "$per_source connections from 127.0.0.2 dropped, expected 24"
    start_target 32 2000
    migrate --token "$WORK/token" --frozen "$TPID"
    ((MIG_RC == 0)) || fail "cr_migrate with 116 clients waiting $(describe_status "$MIG_RC"): $(first_line "$WORK/migrate.err")"
    held=$(gatekeepers)
    ((held >= 100)) || fail "only $held clients at the gate after the migration (took $MIG_SECONDS s): dropped before their deadline ($(elapsed "$t_connect") s after they connected)"
    { wait_exit "$TPID" 10; } 2>/dev/null || fail "the source still exists after a successful migration"
    # Every client at the gate goes at its deadline (10 s after it connected).
    sleep "$(awk -v a="$t_connect" -v b="$EPOCHREALTIME" 'BEGIN { d = a + 11 - b; print (d > 0 ? d : 0) }')"
    for ((i = 0; i < 100; i++)); do
      late=$(refusals "no authentication within")
      ((late >= 116)) && break
      sleep 0.05
    done
    ((late == 116)) || fail "$late connections dropped at their handshake deadline, expected 116"
    kill -TERM "${CLIENTS[@]}"
    for c in "${CLIENTS[@]}"; do wait "$c" || true; done
    closed=$(cat "$WORK/idle.out" "$WORK/slow.out" "$WORK/one.out" | awk '/^closed-by-peer/ { n += $2 } END { print n + 0 }')
    ((closed == 140)) || fail "the receiver closed $closed of the 140 clients' connections"
    grep -q '"pid"' "$WORK/recv.out" || fail "cr_recv --json reported no restored process"
    for ((i = 0; i < 300; i++)); do
      [[ $(tail -n 1 "$WORK/prog.out") == done* ]] && break
      sleep 0.1
    done
    expect_done "after the migration"
    pass "migration took $MIG_SECONDS s with 116 clients at the gate"
    ;;

  once)
    start_receiver --once
    start_target 32 600
    clients junk 5 junk "127.0.3.%d"
    clients close 3 close "127.0.4.%d"
    clients silent 1 idle 127.0.5.1
    head -c 32 /dev/urandom >"$WORK/wrong-token"
    chmod 600 "$WORK/wrong-token"
    migrate --token "$WORK/wrong-token" --frozen "$TPID"
    ((MIG_RC != 0)) || fail "cr_migrate with the wrong token succeeded"
    grep -q "authentication failed" "$WORK/migrate.err" || fail "wrong token refused for another reason: $(first_line "$WORK/migrate.err")"
    for ((i = 0; i < 100; i++)); do
      (($(refusals "bad frame magic") == 5 && $(refusals "closed the connection") == 3)) && break
      sleep 0.05
    done
    (($(refusals "bad frame magic") == 5)) || fail "$(refusals "bad frame magic") of 5 junk connections reported"
    (($(refusals "closed the connection") == 3)) || fail "$(refusals "closed the connection") of 3 closed connections reported"
    (($(refusals "authentication failed") == 1)) || fail "the wrong token was not reported"
    [[ $(proc_state "$RPID") != [Z-] ]] || fail "cr_recv --once ended after failed connections: $(first_line "$WORK/recv.err")"
    # An authenticated migration that fails (no such process: the sender
    # gives up after the handshake) is not the one --once waits for either.
    migrate --token "$WORK/token" --frozen 4194000
    ((MIG_RC != 0)) || fail "cr_migrate of a PID that does not exist succeeded"
    for ((i = 0; i < 100; i++)); do
      (($(refusals "nothing restored") == 1)) && break
      sleep 0.05
    done
    (($(refusals "nothing restored") == 1)) || fail "the failed authenticated migration was not reported"
    sleep 0.2
    [[ $(proc_state "$RPID") != [Z-] ]] || fail "cr_recv --once ended after a failed migration: $(tail -n 1 "$WORK/recv.err")"
    [[ $(proc_state "$TPID") != [TtZ-] ]] || fail "the target is not running after the refused migration"
    migrate --token "$WORK/token" --frozen "$TPID"
    ((MIG_RC == 0)) || fail "cr_migrate after the junk $(describe_status "$MIG_RC"): $(first_line "$WORK/migrate.err")"
    { wait_exit "$TPID" 10; } 2>/dev/null || fail "the source still exists after a successful migration"
    wait_exit "$RPID" 60 || fail "cr_recv --once still runs 60 s after the migration"
    ((EXIT_STATUS == 0)) || fail "cr_recv --once $(describe_status "$EXIT_STATUS"): $(tail -n 1 "$WORK/recv.err")"
    expect_done "after the migration"
    kill -TERM "${CLIENTS[@]}" 2>/dev/null || true
    wait "${CLIENTS[-1]}" || true
    grep -q "closed-by-peer 1" "$WORK/silent.out" || fail "the silent client's connection outlived cr_recv --once"
    pass "$(grep -c . "$WORK/recv.err") refusals reported before the migration landed"
    ;;
  sigterm)
    # SIGTERM ends a receiver that is waiting, after a failed migration
    # too, also as the first process of its PID namespace (where a signal
    # without a handler does nothing).
    start_receiver --once
    migrate --token "$WORK/token" --frozen 4194000
    ((MIG_RC != 0)) || fail "cr_migrate of a PID that does not exist succeeded"
    for ((i = 0; i < 100; i++)); do
      (($(refusals "nothing restored") == 1)) && break
      sleep 0.05
    done
    (($(refusals "nothing restored") == 1)) || fail "the failed migration was not reported"
    recv=$(cat /proc/"$RPID"/task/*/children 2>/dev/null | awk '{ print $1 }')
    [[ -n $recv ]] || fail "cr_recv is gone before SIGTERM"
    kill -TERM "$recv"
    wait_exit "$RPID" 5 || fail "cr_recv --once still runs 5 s after SIGTERM"
    ((EXIT_STATUS == 143)) || fail "cr_recv ended with $(describe_status "$EXIT_STATUS") after SIGTERM, not 143"
    pass "ended by SIGTERM after a failed migration"
    ;;
esac
