#!/usr/bin/env bash
# migrate.sh BIN_DIR TEST: migration between two "nodes" and job pause.
#
# The nodes are two network namespaces joined by a veth pair that this script
# creates and removes. The receiver runs in node B inside its own PID
# namespace (another node has its own PIDs, so the process keeps its PID
# there while the original still exists here). The migrated program is
# heap_pattern, which keeps rewriting its memory and checks every byte at
# the end: it must finish with exit 0 and its "done <pid> <nonce>" line,
# whichever node it ends on.
#   frozen        cr_migrate --frozen, the program finishes on B; the receiver
#                 built it while its memory arrived (metadata first)
#   live          cr_migrate --live (pre-copy while it writes), finishes on B,
#                 with --dir on B: the received chain is kept and verifies
#   live-threads  live migration of mt_compute (5 threads; checks its TIDs,
#                 TLS, masks, robust lists and its result itself)
#   recv-killed   the receiver is killed mid-transfer (link throttled):
#                 cr_migrate fails, the program continues on A and finishes
#   sender-killed cr_migrate is killed mid-transfer: cr_recv refuses the
#                 truncated stream, restores nothing; the program finishes on A
#   bad-token     wrong token, and a token file others can read: refused by
#                 both sides, nothing restored, the program finishes on A
#   garbage       random bytes, and a stream with one corrupted frame:
#                 refused, nothing restored, the program finishes on A
#   pause         cr_full, the program writes on and changes its layout,
#                 cr_pause rolls it back in place (same PID): its append-only
#                 log shows exactly one step back, to the checkpoint, and it
#                 finishes with every byte of its state correct
#   pause-compare the same with a hash-tracked chain (every page compared)
#   pause-refused refusals with one line, the process untouched: a chain of
#                 another PID, and threads that are not the checkpoint's
#                 (thread_swap replaced its worker since)
#   pause-threads mt_compute (5 threads): cr_full, 0.8 s of rounds, cr_pause
#                 reuses its threads; it finishes and its own checks pass
#                 (result against a serial recomputation, TIDs, TLS, masks,
#                 alternate stacks, robust lists)
# Prints "PASS migrate TEST" or "FAIL migrate TEST: reason". Needs root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTS=(frozen live live-threads recv-killed sender-killed bad-token garbage pause pause-compare pause-threads pause-refused)
(($# == 2)) && [[ " ${TESTS[*]} " == *" $2 "* ]] || {
  echo "usage: $0 BIN_DIR TEST (${TESTS[*]})" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}

pass() {
  echo "PASS migrate $TEST${1:+ ($1)}"
  exit 0
}
fail() {
  echo "FAIL migrate $TEST: $*"
  show_logs
  exit 1
}
skip() {
  echo "SKIP migrate $TEST: $*"
  exit 77
}

((EUID == 0)) || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip command (iproute2)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-migrate-$TEST.XXXXXX")
chmod 755 "$WORK"
TAG=$$
NS_A=ckmA$TAG
NS_B=ckmB$TAG
PORT=$((20000 + TAG % 20000))
ADDR_B=10.251.$((TAG % 250)).2
RPIDS=()
# shellcheck source=netns.sh
source "$HERE/netns.sh"

cleanup() {
  local p
  for p in "${RPIDS[@]}"; do kill_tree "$p"; done
  netns_remove "$NS_A" "$NS_B"
  cleanup_common
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
LOGS=("$WORK/prog.err" "$WORK/recv.err" "$WORK/migrate.err" "$WORK/tool.err")

if [[ $TEST != pause* ]]; then
  netns_pair "$NS_A" "$NS_B" "10.251.$((TAG % 250))" "v$TAG" || skip "$NETNS_WHY"
fi

head -c 32 /dev/urandom >"$WORK/token"
chmod 600 "$WORK/token"

# start_target MIB STEPS: heap_pattern on node A; sets TPID, READY_ID.
start_target() {
  (close_fds && exec ip netns exec "$NS_A" "$PROG_DIR/heap_pattern" "$WORK/ready" "$1" "$2" \
    </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  local rc=0
  wait_file "$WORK/ready" "$TPID" 30 || rc=$?
  ((rc == 0)) || fail "target did not become ready: $(first_line "$WORK/prog.err")"
  READY_ID=$(<"$WORK/ready")
}

# start_receiver [ARGS...]: cr_recv --once on node B in its own PID namespace.
start_receiver() { start_ns_receiver "$NS_B" "$ADDR_B:$PORT" "$@"; }

# migrate ARGS...: cr_migrate on node A; sets MIG_RC.
migrate() {
  MIG_RC=0
  (close_fds && exec timeout 60 ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" \
    --to "$ADDR_B:$PORT" "$@" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || MIG_RC=$?
}

# wait_receiver: waits for cr_recv --once; sets RECV_RC.
wait_receiver() {
  RECV_RC=0
  wait_exit "$RPID" 60 || fail "cr_recv still running after 60 s"
  RECV_RC=$EXIT_STATUS
}

# expect_refused PATTERN: cr_recv --once reported a failed attempt matching
# PATTERN (one line) and goes on listening (--once waits for a successful
# migration); then the receiver is stopped.
expect_refused() {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -q -- "$1" "$WORK/recv.err" 2>/dev/null && break
    [[ -e /proc/$RPID ]] || fail "cr_recv ended after a failed attempt: $(first_line "$WORK/recv.err")"
    sleep 0.1
  done
  grep -q -- "$1" "$WORK/recv.err" || fail "cr_recv did not report \"$1\": $(first_line "$WORK/recv.err")"
  sleep 0.2
  [[ $(proc_state "$RPID") != [Z-] ]] || fail "cr_recv --once ended after a failed attempt"
  echo "  cr_recv -> $(grep -m1 -- "$1" "$WORK/recv.err")"
  kill_tree "$RPID"
  wait_exit "$RPID" 10 || fail "cr_recv did not stop"
}

# expect_finished_on WHERE: the program that became ready printed its done line.
expect_done() {
  local last
  last=$(tail -n 1 "$WORK/prog.out" 2>/dev/null)
  [[ $last == "done $READY_ID" ]] || fail "$1: the program did not finish correctly (last line \"$last\", want \"done $READY_ID\"): $(first_line "$WORK/prog.err")"
}

# start_slow_migration WHAT: a frozen migration of TPID in the background
# (the link is throttled by the caller), still under way 1.5 s later, before
# WHAT happens to it; sets MPID.
start_slow_migration() {
  (close_fds && exec ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" --to "$ADDR_B:$PORT" \
    --token "$WORK/token" --frozen "$TPID" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") &
  MPID=$!
  sleep 1.5
  [[ -e /proc/$MPID ]] || fail "cr_migrate ended before $1: $(first_line "$WORK/migrate.err")"
}

# start_local PROG ARGS...: PROG on this node (no namespaces: cr_pause
# cases), its ready file first; sets TPID and READY_ID.
start_local() {
  local prog=$1
  shift
  (close_fds && exec "$PROG_DIR/$prog" "$WORK/ready" "$@" \
    </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  TPID=$!
  OWN_PIDS+=("$TPID")
  wait_file "$WORK/ready" "$TPID" 30 || fail "$prog did not become ready"
  READY_ID=$(<"$WORK/ready")
}

# checkpoint_local [CR_FULL OPTIONS]: cr_full of TPID into $WORK/ck.
checkpoint_local() {
  "$BIN_DIR/cr_full" --dir "$WORK/ck" "$@" "$TPID" >/dev/null 2>"$WORK/tool.err" ||
    fail "cr_full: $(first_line "$WORK/tool.err")"
}

# expect_source_ok: the source was left running and finishes by itself.
expect_source_ok() {
  local st
  st=$(proc_state "$TPID")
  [[ $st != - && $st != Z ]] || fail "the source process is gone after the failed migration"
  [[ $st != T && $st != t ]] || fail "the source process was left stopped (state $st)"
  [[ $(tracer_of "$TPID") == 0 ]] || fail "the source process was left traced"
  wait_exit "$TPID" 60 || fail "the source still runs 60 s later"
  ((EXIT_STATUS == 0)) || fail "the source $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
  expect_done "source"
}

# expect_one_line_failure WHO RC FILE
expect_one_line_failure() {
  (($2 != 0)) || fail "$1 succeeded"
  (($2 < 124)) || fail "$1 $(describe_status "$2") (crash or timeout)"
  is_one_line "$3" || fail "$1 failed without exactly one line on stderr: $(head -c 300 "$3")"
  echo "  $1 -> $(first_line "$3")"
}

# expect_nothing_restored: cr_recv restored no process (it would print the
# done line a second time, or fail in prog.err) and left no staging data.
expect_nothing_restored() {
  [[ ! -s $WORK/recv.out ]] || fail "cr_recv reported a restored process: $(head -c 200 "$WORK/recv.out")"
  if compgen -G "/dev/shm/ckpt-recv-*" >/dev/null; then
    local d
    for d in /dev/shm/ckpt-recv-*; do
      local pid=${d#/dev/shm/ckpt-recv-}
      pid=${pid%%-*}
      [[ ! -e /proc/$pid ]] || [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") != *"$WORK"* ]] ||
        fail "cr_recv left its staging directory $d"
    done
  fi
}

throttle() { # slows the link A->B to $1 so a transfer takes seconds
  ip netns exec "$NS_A" tc qdisc add dev "v$TAG-A" root tbf rate "$1" burst 64kb latency 200ms ||
    skip "no tc/tbf to throttle the link"
}

case $TEST in
  frozen)
    start_receiver --json
    start_target 128 400
    migrate --token "$WORK/token" --frozen --json "$TPID"
    ((MIG_RC == 0)) || fail "cr_migrate --frozen $(describe_status "$MIG_RC"): $(first_line "$WORK/migrate.err")"
    for k in rounds bytes_total migration_seconds downtime_seconds; do
      grep -q "\"$k\"" "$WORK/migrate.out" || fail "cr_migrate --json lacks $k"
    done
    { wait_exit "$TPID" 10; } 2>/dev/null || fail "the source still exists after a successful migration"
    wait_receiver
    ((RECV_RC == 0)) || fail "the migrated program $(describe_status "$RECV_RC"): $(first_line "$WORK/prog.err") $(first_line "$WORK/recv.err")"
    expect_done "after frozen migration"
    # Metadata first: the process was built from its layout while its memory arrived.
    grep -q '"build":"while-arriving"' "$WORK/recv.out" ||
      fail "the receiver did not build the process while it arrived: $(head -c 300 "$WORK/recv.out")"
    pass "$(head -c 300 "$WORK/migrate.out" | grep -o '"downtime_seconds":[0-9.e-]*')"
    ;;

  live)
    start_receiver --json --dir "$WORK/kept"
    start_target 128 400
    migrate --token "$WORK/token" --live --json "$TPID"
    ((MIG_RC == 0)) || fail "cr_migrate --live $(describe_status "$MIG_RC"): $(first_line "$WORK/migrate.err")"
    rounds=$(grep -o '"rounds":[0-9]*' "$WORK/migrate.out" | cut -d: -f2)
    ((rounds >= 2)) || fail "live migration took $rounds round(s): no pre-copy happened"
    { wait_exit "$TPID" 10; } 2>/dev/null || fail "the source still exists after a successful migration"
    wait_receiver
    ((RECV_RC == 0)) || fail "the migrated program $(describe_status "$RECV_RC"): $(first_line "$WORK/prog.err") $(first_line "$WORK/recv.err")"
    expect_done "after live migration"
    grep -q '"build":"warm"' "$WORK/recv.out" ||
      fail "the receiver did not build the process from each generation: $(head -c 300 "$WORK/recv.out")"
    gens=$(find "$WORK/kept" -maxdepth 1 -name 'gen-*' | wc -l)
    ((gens == rounds)) || fail "--dir kept $gens generations, expected $rounds"
    "$BIN_DIR/cr_info" --dir "$WORK/kept" --verify >/dev/null 2>"$WORK/tool.err" ||
      fail "the kept chain does not verify: $(first_line "$WORK/tool.err")"
    pass "$rounds rounds, $(grep -o '"downtime_seconds":[0-9.e-]*' "$WORK/migrate.out")"
    ;;

  live-threads)
    start_receiver
    (close_fds && exec ip netns exec "$NS_A" "$PROG_DIR/mt_compute" "$WORK/ready" "$WORK/mt.out" \
      </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
    TPID=$!
    OWN_PIDS+=("$TPID")
    wait_file "$WORK/ready" "$TPID" 30 || fail "mt_compute did not become ready"
    READY_ID=$(<"$WORK/ready")
    migrate --token "$WORK/token" --live --json "$TPID"
    ((MIG_RC == 0)) || fail "cr_migrate --live $(describe_status "$MIG_RC"): $(first_line "$WORK/migrate.err")"
    { wait_exit "$TPID" 10; } 2>/dev/null || fail "the source still exists after a successful migration"
    wait_receiver
    ((RECV_RC == 0)) || fail "the migrated program $(describe_status "$RECV_RC"): $(first_line "$WORK/prog.err") $(first_line "$WORK/recv.err")"
    expect_done "after live migration"
    pass "$(grep -o '"downtime_seconds":[0-9.e-]*' "$WORK/migrate.out")"
    ;;

  recv-killed)
    throttle 200mbit
    mapfile -t shm_before < <(ls /dev/shm | grep '^ckpt-recv-' | sort)
    start_receiver
    start_target 128 300
    start_slow_migration "the receiver was killed"
    staged=$(comm -13 <(printf '%s\n' "${shm_before[@]}") <(ls /dev/shm | grep '^ckpt-recv-' | sort))
    [[ -n $staged ]] || fail "no staging directory in /dev/shm while receiving"
    kill_tree "$RPID"
    wait_exit "$MPID" 30 || fail "cr_migrate still runs 30 s after the receiver was killed"
    expect_one_line_failure cr_migrate "$EXIT_STATUS" "$WORK/migrate.err"
    expect_source_ok
    # The next receiver removes what the killed one left (its lock is free).
    start_receiver
    for s in $staged; do
      [[ ! -e /dev/shm/$s ]] || fail "the next cr_recv left the killed one's staging /dev/shm/$s"
    done
    echo "  staging of the killed receiver removed by the next one: $(echo $staged)"
    ;;

  sender-killed)
    throttle 200mbit
    start_receiver
    start_target 128 300
    start_slow_migration "it was killed"
    kill_tree "$MPID"
    expect_refused "truncated"
    expect_nothing_restored
    expect_source_ok
    ;;

  bad-token)
    start_target 32 300
    # A token file others may read is refused outright, by both tools.
    cp "$WORK/token" "$WORK/open-token"
    chmod 644 "$WORK/open-token"
    rc=0
    "$BIN_DIR/cr_recv" --listen "127.0.0.1:$PORT" --token "$WORK/open-token" --once \
      </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
    expect_one_line_failure "cr_recv with a 0644 token" "$rc" "$WORK/tool.err"
    rc=0
    "$BIN_DIR/cr_migrate" --to "127.0.0.1:$PORT" --token "$WORK/open-token" --frozen "$TPID" \
      </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
    expect_one_line_failure "cr_migrate with a 0644 token" "$rc" "$WORK/tool.err"
    # The wrong secret: the receiver refuses the sender.
    start_receiver
    head -c 32 /dev/urandom >"$WORK/wrong-token"
    chmod 600 "$WORK/wrong-token"
    migrate --token "$WORK/wrong-token" --frozen "$TPID"
    expect_one_line_failure "cr_migrate with the wrong token" "$MIG_RC" "$WORK/migrate.err"
    grep -q "authentication failed" "$WORK/migrate.err" || fail "refused for another reason"
    expect_refused "authentication failed"
    expect_nothing_restored
    expect_source_ok
    ;;

  garbage)
    start_target 64 1000
    # Random bytes instead of a stream.
    start_receiver
    ip netns exec "$NS_A" bash -c "head -c 200000 /dev/urandom >/dev/tcp/$ADDR_B/$PORT" 2>/dev/null || true
    expect_refused "bad frame magic"
    expect_nothing_restored
    # A real stream whose 11th content frame gets a wrong check on the way
    # (frame_proxy, a man in the middle on node A).
    start_receiver
    (close_fds && exec ip netns exec "$NS_A" "$PROG_DIR/frame_proxy" 127.0.0.1 "$PORT" \
      "$ADDR_B" "$PORT" 10 </dev/null >"$WORK/proxy.out" 2>"$WORK/proxy.err") &
    PROXY=$!
    RPIDS+=("$PROXY")
    for ((i = 0; i < 100; i++)); do
      grep -q listening "$WORK/proxy.out" 2>/dev/null && break
      sleep 0.05
    done
    MIG_RC=0
    (close_fds && exec timeout 60 ip netns exec "$NS_A" \
      "$BIN_DIR/cr_migrate" --to "127.0.0.1:$PORT" --token "$WORK/token" --frozen "$TPID" \
      </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || MIG_RC=$?
    grep -q corrupted "$WORK/proxy.out" || fail "the proxy did not see 11 content frames"
    expect_refused "checksum mismatch"
    expect_one_line_failure "cr_migrate (corrupted frame)" "$MIG_RC" "$WORK/migrate.err"
    expect_nothing_restored
    expect_source_ok
    ;;

  pause | pause-compare)
    # rollback_log appends each step to an O_APPEND log and changes its
    # layout every 25 steps; a rollback shows in the log as a step that
    # comes again. pause: the chain's pagemap-scan tracker says which pages
    # may differ; pause-compare: a hash chain, every page is compared.
    [[ -x $BIN_DIR/cr_pause ]] || fail "$BIN_DIR/cr_pause not built"
    tracker=auto
    [[ $TEST == pause-compare ]] && tracker=hash
    start_local rollback_log "$WORK/log" 300
    sleep 0.5
    ck_lo=$(wc -l <"$WORK/log")
    checkpoint_local --tracker "$tracker"
    ck_hi=$(wc -l <"$WORK/log")
    sleep 1 # ~100 more steps: chunks rewritten, heap grown, scratch blocks replaced
    before=$(wc -l <"$WORK/log")
    rc=0
    "$BIN_DIR/cr_pause" --dir "$WORK/ck" --json "$TPID" >"$WORK/pause.out" 2>"$WORK/tool.err" || rc=$?
    ((rc == 0)) || fail "cr_pause $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
    [[ $(proc_state "$TPID") != [TtZ-] ]] || fail "the process is not running after cr_pause"
    [[ $(tracer_of "$TPID") == 0 ]] || fail "the process is still traced after cr_pause"
    wait_exit "$TPID" 60 || fail "the rolled-back process still runs 60 s later"
    ((EXIT_STATUS == 0)) || fail "the rolled-back process $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
    expect_done "after cr_pause"
    # The log: 0, 1, ..., K, then exactly one step back to where the
    # checkpoint was, then on to 299.
    awk -v lo="$ck_lo" -v hi="$ck_hi" -v before="$before" '
      NR > 1 && $1 != prev + 1 {
        drops++
        if ($1 > prev) { print "log skips from " prev " to " $1; bad = 1 }
        if ($1 < lo - 1 || $1 > hi) { print "rolled back to step " $1 ", the checkpoint was taken between steps " lo " and " hi; bad = 1 }
        if (prev + 1 < before - 1) { print "rollback at step " prev ", expected ~" before; bad = 1 }
      }
      { prev = $1 }
      END {
        if (drops != 1) { print drops + 0 " rollbacks in the log, expected 1"; bad = 1 }
        if (prev != 299) { print "log ends at " prev; bad = 1 }
        exit bad
      }' "$WORK/log" >"$WORK/log.check" || fail "$(head -n 1 "$WORK/log.check")"
    pass "$(grep -o '"method":"[a-z]*"\|"pages_written":[0-9]*\|"frozen_seconds":[0-9.]*\|"vmas_[a-z]*":[0-9]*' "$WORK/pause.out" | tr '\n' ' ')"
    ;;

  pause-refused)
    [[ -x $BIN_DIR/cr_pause ]] || fail "$BIN_DIR/cr_pause not built"
    start_local thread_swap "$WORK/swapped"
    checkpoint_local
    # A chain of another process.
    rc=0
    "$BIN_DIR/cr_pause" --dir "$WORK/ck" "$$" >"$WORK/pause.out" 2>"$WORK/tool.err" || rc=$?
    expect_one_line_failure "cr_pause (another PID's chain)" "$rc" "$WORK/tool.err"
    grep -q "holds checkpoints of PID $TPID" "$WORK/tool.err" || fail "refused for another reason: $(first_line "$WORK/tool.err")"
    # Threads that are not the checkpoint's.
    kill -USR1 "$TPID"
    wait_file "$WORK/swapped" "$TPID" 10 || fail "thread_swap did not replace its worker"
    rc=0
    "$BIN_DIR/cr_pause" --dir "$WORK/ck" "$TPID" >"$WORK/pause.out" 2>"$WORK/tool.err" || rc=$?
    expect_one_line_failure "cr_pause (threads replaced)" "$rc" "$WORK/tool.err"
    grep -q "is new, TID [0-9]* ended" "$WORK/tool.err" || fail "refused for another reason: $(first_line "$WORK/tool.err")"
    [[ $(proc_state "$TPID") != [TtZ-] ]] || fail "the process is not running after the refusal"
    [[ $(tracer_of "$TPID") == 0 ]] || fail "the process is still traced after the refusal"
    wait_exit "$TPID" 30 || fail "thread_swap still runs 30 s later"
    ((EXIT_STATUS == 0)) || fail "thread_swap $(describe_status "$EXIT_STATUS") after the refusal: $(first_line "$WORK/prog.err")"
    expect_done "after the refusal"
    ;;

  pause-threads)
    [[ -x $BIN_DIR/cr_pause ]] || fail "$BIN_DIR/cr_pause not built"
    start_local mt_compute "$WORK/mt.out"
    checkpoint_local
    sleep 0.8 # ~60 rounds: every worker's array rewritten, the shared sum moved on
    rc=0
    "$BIN_DIR/cr_pause" --dir "$WORK/ck" --json "$TPID" >"$WORK/pause.out" 2>"$WORK/tool.err" || rc=$?
    ((rc == 0)) || fail "cr_pause $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
    written=$(grep -o '"pages_written":[0-9]*' "$WORK/pause.out" | cut -d: -f2)
    ((${written:-0} > 0)) || fail "cr_pause wrote no page back: $(head -c 300 "$WORK/pause.out")"
    [[ $(tracer_of "$TPID") == 0 ]] || fail "the process is still traced after cr_pause"
    wait_exit "$TPID" 60 || fail "the rolled-back process still runs 60 s later"
    ((EXIT_STATUS == 0)) || fail "the rolled-back process $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
    expect_done "after cr_pause"
    pass "$(grep -o '"method":"[a-z]*"\|"pages_written":[0-9]*\|"frozen_seconds":[0-9.]*' "$WORK/pause.out" | tr '\n' ' ')"
    ;;
esac
pass
