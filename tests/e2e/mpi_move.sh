# shellcheck shell=bash
# Sourced by mpi.sh for ACTION pause, migrate-frozen and migrate-live (uses
# its variables and functions: launch_cmd, reference, wait_computing,
# record_job_files, tool...). Each first runs the job uninterrupted for its
# result line, then:
#   pause           the job computes; cr_full --tree of the launcher; 2 s
#                   later cr_pause rolls the whole job back (kill and
#                   restore with the same PIDs: it must say so) and waits
#                   for it; it finishes with exactly the reference result;
#   migrate-frozen  the job runs in network namespace A; cr_migrate --frozen
#   migrate-live    (--live) --tree of the launcher to a cr_recv in namespace
#                   B (own PID namespace); every process at A ends, the job
#                   finishes on B with exactly the reference result.

RPIDS=()
NS_A=ckpA$$
NS_B=ckpB$$
PORT=$((20000 + ($$ + 11) % 20000))
NET=10.253.$(($$ % 250))
ADDR_B=$NET.2

# shellcheck source=netns.sh
source "$HERE/netns.sh"
move_cleanup() {
  local p
  for p in "${RPIDS[@]}"; do kill_tree "$p"; done
  netns_remove "$NS_A" "$NS_B"
  cleanup
}
trap move_cleanup EXIT

# As mpi.sh's start_job, in namespace $1.
start_job_in() {
  : >"$WORK/prog.out"
  : >"$PACE"
  (
    close_fds
    cd "$WORK"
    # shellcheck disable=SC2046
    exec env "${JOB_ENV[@]}" ip netns exec "$1" $(launch_cmd "$MIN_MS") </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err"
  ) &
  ROOT=$!
}

expect_reference() {
  local got
  got=$(grep '^result: ' "$WORK/prog.out") || fail "$1: the job printed no result: $(first_line "$WORK/prog.err")"
  [[ $got == "$REF" ]] || fail "$1: the result differs: '$got', uninterrupted: '$REF'"
  grep -qx 'check: ok' "$WORK/prog.out" || fail "$1: the job's self-check failed"
}

START=$EPOCHREALTIME
reference
REF_TIME=$(elapsed "$START")
case $ACTION in
  pause)
    start_job
    wait_computing
    record_job_files
    tool "$BIN_DIR/cr_full" --tree --dir "$CKPT" --json "$ROOT" || fail "cr_full --tree: $(first_line "$WORK/tool.err")"
    at_full=$(last_iter)
    sleep 2
    at_pause=$(last_iter)
    grep -q '^result: ' "$WORK/prog.out" && fail "the job finished before cr_pause: raise E2E_MPI_ITERS"
    rc=0
    # The job, paced, waits before its end until $PACE goes: that happens
    # once cr_pause says it restored the job (and waits for it).
    timeout 600 "$BIN_DIR/cr_pause" --dir "$CKPT" --json "$ROOT" </dev/null >"$WORK/pause.out" 2>"$WORK/pause.err" &
    pause_pid=$!
    while ! grep -q "rolled back by kill and restore" "$WORK/pause.err" && [[ -e /proc/$pause_pid ]]; do
      sleep 0.1
    done
    rm -f "$PACE"
    wait "$pause_pid" || rc=$?
    LOGS+=("$WORK/pause.err")
    ((rc == 0)) || fail "cr_pause (waiting for the job) $(describe_status "$rc"): $(grep -v 'rolled back by' "$WORK/pause.err" | head -n 1)"
    grep -q '"how":"restart"' "$WORK/pause.out" || fail "cr_pause did not say how: $(cat "$WORK/pause.out")"
    grep -q "rolled back by kill and restore" "$WORK/pause.err" || fail "cr_pause did not tell the user"
    expect_reference "after cr_pause"
    pass "checkpoint at iter $at_full, rolled back at iter $at_pause; $(grep -o '"frozen_seconds":[0-9.]*' "$WORK/pause.out"); reference run ${REF_TIME}s"
    ;;
  migrate-frozen | migrate-live)
    netns_pair "$NS_A" "$NS_B" "$NET" "p$$" || skip "$NETNS_WHY"
    head -c 32 /dev/urandom >"$WORK/token"
    chmod 600 "$WORK/token"
    LOGS+=("$WORK/recv.err" "$WORK/migrate.err")
    start_ns_receiver "$NS_B" "$ADDR_B:$PORT"
    start_job_in "$NS_A"
    wait_computing
    record_job_files
    mode=--${ACTION#migrate-}
    at_start=$(last_iter)
    rc=0
    (close_fds && exec timeout 600 ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" --to "$ADDR_B:$PORT" \
      --token "$WORK/token" $mode --tree --json "$ROOT" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || rc=$?
    ((rc == 0)) || fail "cr_migrate $mode --tree $(describe_status "$rc"): $(first_line "$WORK/migrate.err")"
    rm -f "$PACE" # the job runs on B: it may end
    n=$(wc -w <<<"$MEMBERS")
    grep -q "\"processes\":$n[,}]" "$WORK/migrate.out" || fail "cr_migrate did not move the job's $n processes: $(cat "$WORK/migrate.out")"
    for p in $MEMBERS; do
      for ((i = 0; i < 100; i++)); do [[ $(proc_state "$p") == [Z-] ]] && break; sleep 0.05; done
      [[ $(proc_state "$p") == [Z-] ]] || fail "process $p of the source job still runs"
    done
    { wait "$ROOT"; } 2>/dev/null || true
    wait_exit "$RPID" 600 || fail "the job on B still runs 600 s later"
    ((EXIT_STATUS == 0)) || fail "the migrated job $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err") $(first_line "$WORK/recv.err")"
    expect_reference "after cr_migrate $mode"
    pass "moved at iter $at_start; $(grep -o '"rounds":[0-9]*\|"downtime_seconds":[0-9.]*\|"bytes_total":[0-9]*' "$WORK/migrate.out" | tr '\n' ' ')reference run ${REF_TIME}s"
    ;;
esac
