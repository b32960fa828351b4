#!/usr/bin/env bash
# job_migrate.sh BIN_DIR TEST: a job (a process tree) through cr_migrate
# --tree and cr_pause. The job is programs/job_tree (shared anonymous
# memory, a pipe with unread bytes, a file at a shared offset, process
# groups, a zombie) or, with a "tcp-" test, programs/tcp_pair (loopback TCP
# connections with data queued both ways, and a listener). Both check their
# whole state themselves and end with "done <root pid> <nonce>".
# Migration goes from network namespace A to a cr_recv in namespace B (its
# own PID namespace too, as on another node), over a veth pair this script
# makes; inside B the job's loopback connections get their addresses back.
#   frozen, tcp-frozen   cr_migrate --frozen --tree: the source job ends,
#                        the job finishes on B
#   live, tcp-live       cr_migrate --live --tree: pre-copy rounds, then
#                        the final stop; finishes on B
#   recv-killed          the receiver is killed mid-stream (link
#                        throttled): cr_migrate fails with one line, every
#                        member runs on at A, untouched, and the job
#                        finishes there
#   restore-fails        the receiver runs in this PID namespace, where the
#                        job's PIDs are taken (by the source job itself):
#                        its restore fails, cr_migrate reports it in one
#                        line, the job runs on at A untouched and finishes
#   changed              a member joins the job during the pre-copy of
#                        cr_migrate --live --tree: refused in one line
#                        naming it, the job runs on at A untouched
#   pause, tcp-pause     cr_full --tree, the job works on (3 s), cr_pause rolls
#                        it back (kill and restore with the same PIDs): its
#                        round counters (read from its shared memory) go
#                        back to the checkpoint's, and it finishes
#   pause-refused        a PID of the checkpointed job is now held by a
#                        process outside the job: one line, the job untouched
# Prints PASS/FAIL; exit 77 = skip. Needs root.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

TESTS=(frozen tcp-frozen live tcp-live recv-killed restore-fails changed pause tcp-pause pause-refused)
(($# == 2)) && [[ " ${TESTS[*]} " == *" $2 "* ]] || {
  echo "usage: $0 BIN_DIR TEST (${TESTS[*]})" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
TEST=$2
PROG_DIR=${E2E_PROG_DIR:-$BIN_DIR/e2e}
PROG=job_tree
PROCS=4
if [[ $TEST == tcp-* ]]; then
  PROG=tcp_pair
  PROCS=2
fi

E2E_CASE="job_migrate $TEST" # for pass, fail and skip (lib.sh)
((EUID == 0)) || skip "needs root"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-jobmig-$TEST.XXXXXX")
chmod 755 "$WORK"
TAG=$$
NS_A=ckjA$TAG
NS_B=ckjB$TAG
PORT=$((20000 + (TAG + 7) % 20000))
NET=10.252.$((TAG % 250))
ADDR_B=$NET.2
RPIDS=()
LOGS=("$WORK/prog.err" "$WORK/recv.err" "$WORK/migrate.err" "$WORK/tool.err" "$WORK/pause.err")

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

if [[ $TEST != *pause* ]]; then
  netns_pair "$NS_A" "$NS_B" "$NET" "j$TAG" || skip "$NETNS_WHY"
fi
head -c 32 /dev/urandom >"$WORK/token"
chmod 600 "$WORK/token"

tree_pids() {
  local p=$1 c
  echo "$p"
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# start_job ROUNDS [NS]: the job (in namespace NS if given); sets ROOT,
# MEMBERS, READY_ID.
start_job() {
  local ns=()
  [[ -n ${2:-} ]] && ns=(ip netns exec "$2")
  (close_fds && exec "${ns[@]}" "$PROG_DIR/$PROG" "$WORK/ready" "$WORK" "$1" \
    </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  ROOT=$!
  OWN_PIDS+=("$ROOT")
  local rc=0
  wait_file "$WORK/ready" "$ROOT" 30 || rc=$?
  ((rc == 0)) || fail "job not ready ($rc): $(first_line "$WORK/prog.err")"
  READY_ID=$(<"$WORK/ready")
  sleep 0.2 # the children settle (job_tree's zombie exits after ready)
  MEMBERS=$(tree_pids "$ROOT" | tr '\n' ' ')
  local n
  n=$(echo $MEMBERS | wc -w)
  ((n == PROCS)) || fail "the job has $n processes, expected $PROCS"
  for p in $MEMBERS; do OWN_PIDS+=("$p"); done
}

# start_receiver [ARGS...]: cr_recv --once in B, in a PID namespace of its
# own unless SAME_PIDS=1.
start_receiver() { start_ns_receiver "$NS_B" "$ADDR_B:$PORT" --json "$@"; }

expect_done() {
  local last
  last=$(tail -n 1 "$WORK/prog.out" 2>/dev/null)
  [[ $last == "done $READY_ID" ]] || fail "$1: the job did not finish correctly (last line \"$last\", want \"done $READY_ID\"): $(first_line "$WORK/prog.err")"
}

# members_gone SECONDS: no PID of the source job is left.
members_gone() {
  local deadline=$((SECONDS + $1)) p alive
  while :; do
    alive=""
    for p in $MEMBERS; do [[ $(proc_state "$p") == [Z-] ]] || alive="$alive $p"; done
    [[ -z $alive ]] && return 0
    ((SECONDS < deadline)) || fail "members of the source job still run:$alive"
    sleep 0.05
  done
}

# job_untouched: every member runs, none stopped or traced.
job_untouched() {
  local p st
  for p in $MEMBERS; do
    st=$(proc_state "$p")
    [[ $st == Z ]] && continue # job_tree's zombie stays one
    [[ $st != - ]] || fail "member $p is gone"
    [[ $st != T && $st != t ]] || fail "member $p was left stopped"
    [[ $(tracer_of "$p") == 0 ]] || fail "member $p was left traced"
  done
}

# rounds PID: job_tree's round counters (root, A, B) from its shared memory
# (the first words of its 8 MiB MAP_SHARED|MAP_ANONYMOUS region).
rounds() {
  local start
  start=$(awk '$6 == "/dev/zero" && $7 == "(deleted)" { split($1, a, "-"); print a[1]; exit }' "/proc/$1/maps")
  [[ -n $start ]] || fail "no shared anonymous region in PID $1"
  dd if="/proc/$1/mem" bs=24 count=1 iflag=skip_bytes skip=$((16#$start)) 2>/dev/null | od -An -tu8 | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'
}

case $TEST in
  frozen | tcp-frozen | live | tcp-live)
    mode=--frozen
    [[ $TEST == *live ]] && mode=--live
    # live: the receiver keeps the chain it received (--dir), which must verify.
    if [[ $TEST == live ]]; then start_receiver --dir "$WORK/kept"; else start_receiver; fi
    start_job 600 "$NS_A"
    sleep 0.3
    disown "$ROOT" # it ends by SIGKILL: no "Killed" report from bash
    rc=0
    (close_fds && exec timeout 120 ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" --to "$ADDR_B:$PORT" \
      --token "$WORK/token" $mode --tree --json "$ROOT" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || rc=$?
    ((rc == 0)) || fail "cr_migrate $mode --tree $(describe_status "$rc"): $(first_line "$WORK/migrate.err")"
    grep -q "\"processes\":$PROCS" "$WORK/migrate.out" || fail "cr_migrate did not move $PROCS processes: $(cat "$WORK/migrate.out")"
    rounds=$(grep -o '"rounds":[0-9]*' "$WORK/migrate.out" | cut -d: -f2)
    if [[ $mode == --live ]]; then
      ((rounds >= 2)) || fail "live migration took $rounds round(s): no pre-copy"
    else
      ((rounds == 1)) || fail "frozen migration took $rounds rounds"
    fi
    members_gone 10
    wait_exit "$RPID" 90 || fail "the job on B still runs 90 s later"
    ((EXIT_STATUS == 0)) || fail "the migrated job $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err") $(first_line "$WORK/recv.err")"
    expect_done "after the migration"
    if [[ $TEST == live ]]; then
      gens=$(find "$WORK/kept" -maxdepth 1 -name 'gen-*' | wc -l)
      ((gens == rounds)) || fail "--dir kept $gens generations, expected $rounds"
      "$BIN_DIR/cr_info" --dir "$WORK/kept" --verify >"$WORK/info.out" 2>"$WORK/tool.err" ||
        fail "the kept job chain does not verify: $(first_line "$WORK/tool.err")"
      (($(grep -c '^  process ' "$WORK/info.out") >= PROCS)) || fail "the kept chain lists fewer than $PROCS processes"
    fi
    pass "$rounds round(s), $(grep -o '"downtime_seconds":[0-9.e-]*\|"bytes_total":[0-9]*' "$WORK/migrate.out" | tr '\n' ' ')"
    ;;

  recv-killed)
    ip netns exec "$NS_A" tc qdisc add dev "j$TAG-A" root tbf rate 20mbit burst 64kb latency 200ms ||
      skip "no tc/tbf to throttle the link"
    start_receiver
    start_job 800 "$NS_A"
    (close_fds && exec ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" --to "$ADDR_B:$PORT" \
      --token "$WORK/token" --frozen --tree "$ROOT" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") &
    MPID=$!
    sleep 1.5 # ~9 MiB to send at 20 Mbit/s: about a third is through
    [[ -e /proc/$MPID ]] || fail "cr_migrate ended before the receiver was killed: $(first_line "$WORK/migrate.err")"
    grep -q . "$WORK/recv.out" && fail "something was restored already"
    kill_tree "$RPID"
    wait_exit "$MPID" 60 || fail "cr_migrate still runs 60 s after the receiver was killed"
    rc=$EXIT_STATUS
    ((rc != 0 && rc < 124)) || fail "cr_migrate $(describe_status "$rc") after the receiver was killed"
    is_one_line "$WORK/migrate.err" || fail "cr_migrate failed without one line: $(head -c 300 "$WORK/migrate.err")"
    echo "  cr_migrate -> $(first_line "$WORK/migrate.err")"
    job_untouched
    wait_exit "$ROOT" 60 || fail "the job still runs 60 s later"
    ((EXIT_STATUS == 0)) || fail "the job at the source $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
    expect_done "at the source"
    ;;

  restore-fails)
    SAME_PIDS=1 start_receiver
    start_job 500 "$NS_A"
    rc=0
    (close_fds && exec timeout 120 ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" --to "$ADDR_B:$PORT" \
      --token "$WORK/token" --frozen --tree "$ROOT" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || rc=$?
    ((rc != 0 && rc < 124)) || fail "cr_migrate $(describe_status "$rc") although the receiver cannot restore"
    is_one_line "$WORK/migrate.err" || fail "cr_migrate failed without one line: $(head -c 300 "$WORK/migrate.err")"
    grep -q "receiver: .*PID" "$WORK/migrate.err" || fail "not the receiver's restore failure: $(first_line "$WORK/migrate.err")"
    echo "  cr_migrate -> $(first_line "$WORK/migrate.err")"
    job_untouched
    wait_exit "$ROOT" 60 || fail "the job still runs 60 s later"
    ((EXIT_STATUS == 0)) || fail "the job at the source $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
    expect_done "at the source"
    ;;

  changed)
    # A member joins the job while the pre-copy runs (link throttled, so the
    # first round takes seconds): the migration is refused in one line
    # naming it, nothing is restored on B, and every member runs on at A.
    ip netns exec "$NS_A" tc qdisc add dev "j$TAG-A" root tbf rate 20mbit burst 64kb latency 200ms ||
      skip "no tc/tbf to throttle the link"
    start_receiver
    (close_fds && exec ip netns exec "$NS_A" bash -c \
      '"$1" "$2/ready" 16 100000 & sleep 1.5; exec -a "$2/joiner" sleep 300 & wait' \
      _ "$PROG_DIR/heap_pattern" "$WORK" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
    ROOT=$!
    OWN_PIDS+=("$ROOT")
    wait_file "$WORK/ready" "$ROOT" 30 || fail "job not ready: $(first_line "$WORK/prog.err")"
    rc=0
    (close_fds && exec timeout 120 ip netns exec "$NS_A" "$BIN_DIR/cr_migrate" --to "$ADDR_B:$PORT" \
      --token "$WORK/token" --live --tree "$ROOT" </dev/null >"$WORK/migrate.out" 2>"$WORK/migrate.err") || rc=$?
    MEMBERS=$(tree_pids "$ROOT" | tr '\n' ' ')
    for p in $MEMBERS; do OWN_PIDS+=("$p"); done
    (($(echo $MEMBERS | wc -w) == 3)) || fail "the job has $(echo $MEMBERS | wc -w) processes, expected 3"
    ((rc != 0 && rc < 124)) || fail "cr_migrate $(describe_status "$rc") although the job changed: $(cat "$WORK/migrate.out")"
    is_one_line "$WORK/migrate.err" || fail "cr_migrate failed without one line: $(head -c 300 "$WORK/migrate.err")"
    grep -q "changed during the pre-copy.*joined" "$WORK/migrate.err" ||
      fail "refused for another reason: $(first_line "$WORK/migrate.err")"
    grep -q '"pid"' "$WORK/recv.out" && fail "the receiver restored something"
    echo "  cr_migrate -> $(first_line "$WORK/migrate.err")"
    job_untouched
    pass "refused"
    ;;

  pause | tcp-pause)
    [[ $PROG == job_tree ]] && rounds_arg=1000 || rounds_arg=400
    start_job $rounds_arg
    [[ $PROG == job_tree ]] && r_lo=$(rounds "$ROOT")
    "$BIN_DIR/cr_full" --tree --dir "$WORK/ck" "$ROOT" >/dev/null 2>"$WORK/tool.err" ||
      fail "cr_full --tree: $(first_line "$WORK/tool.err")"
    [[ $PROG == job_tree ]] && r_hi=$(rounds "$ROOT")
    sleep 3
    [[ $PROG == job_tree ]] && r_before=$(rounds "$ROOT")
    disown "$ROOT" # it ends by SIGKILL: no "Killed" report from bash
    # cr_pause waits for the restored root (now its child) and forwards its
    # status; its JSON line comes once the job runs again.
    (close_fds && exec timeout 120 "$BIN_DIR/cr_pause" --dir "$WORK/ck" --json "$ROOT" \
      </dev/null >"$WORK/pause.out" 2>"$WORK/pause.err") &
    PPID_=$!
    for ((i = 0; i < 600; i++)); do
      [[ -s $WORK/pause.out ]] && break
      [[ -e /proc/$PPID_ ]] || break
      sleep 0.02
    done
    [[ -s $WORK/pause.out ]] || fail "cr_pause printed nothing: $(first_line "$WORK/pause.err")"
    grep -q '"how":"restart"' "$WORK/pause.out" || fail "cr_pause did not say how: $(cat "$WORK/pause.out")"
    grep -q "rolled back by kill and restore" "$WORK/pause.err" || fail "cr_pause did not tell the user: $(first_line "$WORK/pause.err")"
    if [[ $PROG == job_tree ]]; then
      r_after=$(rounds "$ROOT")
      [[ -n $r_after ]] || fail "cannot read the counters of the restored root: $(grep -c . "/proc/$ROOT/maps") maps, $(cat "$WORK/pause.out")"
      # Each counter is back where it was at the checkpoint (between the
      # reads around cr_full), give or take the rounds run since the restore.
      read -r -a lo <<<"$r_lo"
      read -r -a hi <<<"$r_hi"
      read -r -a be <<<"$r_before"
      read -r -a af <<<"$r_after"
      for k in 0 1 2; do
        ((af[k] >= lo[k])) || fail "counter $k is ${af[k]} after cr_pause, below ${lo[k]} before the checkpoint"
        ((af[k] < be[k] - 50)) || fail "counter $k is ${af[k]} after cr_pause, it was ${be[k]} before: not rolled back"
        ((af[k] <= hi[k] + 100)) || fail "counter $k is ${af[k]} right after cr_pause, the checkpoint had at most ${hi[k]}"
      done
      echo "  round counters: checkpoint ${r_lo// /,}..${r_hi// /,}, before cr_pause ${r_before// /,}, after ${r_after// /,}"
    fi
    wait_exit "$PPID_" 110 || fail "the rolled-back job still runs"
    ((EXIT_STATUS == 0)) || fail "cr_pause (waiting for the job) $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/pause.err") $(first_line "$WORK/prog.err")"
    expect_done "after cr_pause"
    pass "$(grep -o '"frozen_seconds":[0-9.]*\|"reap_seconds":[0-9.]*\|"restore_seconds":[0-9.]*\|"processes":[0-9]*' "$WORK/pause.out" | tr '\n' ' ')"
    ;;

  pause-refused)
    # Paced until the checks are done, however long they take here.
    touch "$WORK/pace"
    E2E_PACE_FILE=$WORK/pace start_job 100000
    "$BIN_DIR/cr_full" --tree --dir "$WORK/ck" "$ROOT" >/dev/null 2>"$WORK/tool.err" ||
      fail "cr_full --tree: $(first_line "$WORK/tool.err")"
    # A chain of another job.
    rc=0
    timeout 60 "$BIN_DIR/cr_pause" --dir "$WORK/ck" "$$" </dev/null >"$WORK/pause.out" 2>"$WORK/pause.err" || rc=$?
    ((rc != 0 && rc < 124)) || fail "cr_pause of another PID $(describe_status "$rc")"
    is_one_line "$WORK/pause.err" || fail "no one-line reason: $(cat "$WORK/pause.err")"
    grep -q "of the job of PID $ROOT" "$WORK/pause.err" || fail "refused for another reason: $(first_line "$WORK/pause.err")"
    echo "  cr_pause -> $(first_line "$WORK/pause.err")"
    # A member's image damaged (one byte of its page content): found before
    # any member is touched, naming the member.
    mdir=$(find "$WORK/ck" -mindepth 2 -maxdepth 2 -type d -name 'member-*' | head -n 1)
    [[ -n $mdir ]] || fail "no member directory in the checkpoint"
    victim=${mdir##*member-}
    size=$(stat -c %s "$mdir/pages.img")
    ((size > 8192)) || fail "member $victim saved no page content"
    printf '\xff' | dd of="$mdir/pages.img" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
    rc=0
    timeout 60 "$BIN_DIR/cr_pause" --dir "$WORK/ck" "$ROOT" </dev/null >"$WORK/pause.out" 2>"$WORK/pause.err" || rc=$?
    ((rc != 0 && rc < 124)) || fail "cr_pause of a damaged chain $(describe_status "$rc")"
    is_one_line "$WORK/pause.err" || fail "no one-line reason: $(cat "$WORK/pause.err")"
    grep -q "$victim" "$WORK/pause.err" || fail "the message does not name member $victim: $(first_line "$WORK/pause.err")"
    echo "  cr_pause -> $(first_line "$WORK/pause.err")"
    job_untouched
    rm "$WORK/pace"
    wait_exit "$ROOT" 60 || fail "the job still runs 60 s later"
    ((EXIT_STATUS == 0)) || fail "the job $(describe_status "$EXIT_STATUS") after the refusals: $(first_line "$WORK/prog.err")"
    expect_done "after the refusals"
    ;;
esac
pass
