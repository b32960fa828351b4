#!/usr/bin/env bash
# cr_run.sh BIN MODE: the cr_run launcher with a real job (cr_work: a root and
# two workers, 16 MiB each, whose final digest covers all their memory). Every
# mode ends with the job's "result" line equal to an uninterrupted run's and
# cr_run's exit status equal to the job's.
#   restart      scheduled checkpoints (full + incrementals, chains pruned to
#                --keep), their page content written with O_DIRECT (not left in
#                the page cache); the job's root is SIGKILLed and restarted
#                automatically
#   usr1         --interval 0 --buffered: checkpoints only on SIGUSR1, page
#                content left in the page cache; a worker and then the root
#                killed, restarted twice
#   no-restarts  --restarts 0: the killed job is not restarted, cr_run exits 137
#   resume-alive cr_run itself SIGKILLed; cr_run --resume adopts the running
#                job (a full checkpoint; the same process runs on, watched),
#                checkpoints it on, restarts it when it is SIGKILLed, and
#                finishes it;
#                --resume with a schedule option is refused, --buffered is kept
#   resume-dead  cr_run and the whole job SIGKILLed (a node reboot);
#                cr_run --resume restores the newest generation
#   stop         SIGUSR2: a checkpoint, then the whole job ended, cr_run exits
#                75 and records it stopped; a second cr_run --resume restores
#                it; the job's three processes write to a pipe that cr_run
#                holds too (stdout), at the checkpoint and after the restore:
#                it stays the launcher's
#   levels       --local L1 (two levels; --dir the shared one): every
#                checkpoint flushed to --dir; the root killed: restored from
#                the local level; the newest local generation damaged:
#                restored from the shared level's copy of it; the local
#                level gone (a node that lost its disk): restored from the
#                shared level; cr_info shows both levels; bad
#                --local/--flush-rate refused
#   levels-full  --local with a shared level that is full (a 2 MiB tmpfs):
#                every flush fails in one line and is tried again, the job
#                runs on, the local copies stay, nothing half-copied is
#                left there, and a kill restores from the local level
#   levels-partner
#                --local L1 --partner (a cr_noded on this host standing for
#                another node's agent): every checkpoint copied there too;
#                the local level lost: restored from the partner's copy
#                (fetched into the local level) rather than the older
#                shared one; the partner gone: each copy fails in one line
#                and is tried again, a kill restores from the local level;
#                the partner back: its copy catches up; the partner's copy
#                damaged with the local level lost: restored from the
#                shared level; cr_info shows what the partner holds, or
#                that it cannot be asked; cr_plan levels --from plans with
#                the costs the job recorded; the finished job's copies are
#                dropped from the partner; bad --partner options refused
#   levels-partner-full
#                --partner whose store is full (a 2 MiB tmpfs): every copy
#                there fails in one line and is tried again, nothing
#                half-stored is visible there, the shared copies go on and
#                a kill restores from the local level
#   auto         --interval auto --mtbf 6: every checkpoint's planned period
#                equals cr_plan interval's exact period for the C (mean of the
#                measured total_seconds), R (the newest full's, then the
#                measured restore's) and MTBF it logged, and the next
#                checkpoint comes that long after; bad --interval/--mtbf refused
# Runs under tests/e2e/helpers/subreaper (see CMakeLists.txt), which reaps the
# job once its launcher is killed.
set -euo pipefail
BIN=$1
MODE=$2
source "$(dirname "$0")/lib.sh"
WORK=$(mktemp -d /tmp/cr_run.XXXXXX)
install_traps
# A failed run can leave the job's workers waiting for their gate: end every
# process started from WORK before the common cleanup removes it.
kill_work_procs() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $cmd == *"$WORK/"* ]] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  return 0
}
trap 'kill_work_procs; cleanup_common' EXIT
CR_RUN=$BIN/cr_run
cp "$BIN/e2e/cr_work" "$WORK/cr_work"
# 200 rounds of work, then the job waits for the gate file that the test
# creates once it killed and restarted it: nothing races the job's end.
GATE=$WORK/gate
JOB=("$WORK/cr_work" 200 2 16 "$GATE")
LOG=$WORK/log
LOGS+=("$LOG" "$WORK/err" "$WORK/resume.err")

die() {
  echo "cr_run.$MODE: $*" >&2
  show_logs
  exit 1
}

# wait_lines PATTERN N PID SECONDS: until the log has N lines matching PATTERN.
wait_lines() {
  local deadline=$((SECONDS + $4)) n
  while :; do
    n=$(grep -c -- "$1" "$LOG" 2>/dev/null || true)
    ((n >= $2)) && return 0
    [[ $(proc_state "$3") != - && $(proc_state "$3") != Z ]] || die "cr_run ended before $2 x '$1'"
    ((SECONDS < deadline)) || die "no $2 x '$1' within $4 s"
    sleep 0.05
  done
}

# The uninterrupted result.
touch "$GATE"
(close_fds; exec "${JOB[@]}") >"$WORK/expected" </dev/null || die "uninterrupted run failed"
grep -q '^result ' "$WORK/expected" || die "uninterrupted run printed no result"
rm "$GATE"

start_cr_run() {  # with OUT_PIPE=1 the job's output goes through a pipe cr_run holds too
  if [[ ${OUT_PIPE:-0} == 1 ]]; then
    (close_fds; exec "$CR_RUN" --dir "$WORK/ck" --log "$LOG" "$@" -- "${JOB[@]}") \
      > >(cat >"$WORK/out") 2>"$WORK/err" </dev/null &
  else
    (close_fds; exec "$CR_RUN" --dir "$WORK/ck" --log "$LOG" "$@" -- "${JOB[@]}") \
      >"$WORK/out" 2>"$WORK/err" </dev/null &
  fi
  CR=$!
  OWN_PIDS+=("$CR")
  if [[ " $* " == *" --json "* ]]; then
    wait_lines '"event":"start"' 1 "$CR" 30
    ROOT=$(sed -n 's/.*"event":"start","pid":\([0-9]*\).*/\1/p' "$LOG" | head -1)
  else
    wait_lines "started job" 1 "$CR" 30
    ROOT=$(sed -n 's/.*started job \([0-9]*\).*/\1/p' "$LOG" | head -1)
  fi
  [[ -n $ROOT ]] || die "no job PID in the log"
  # Until the job has started its two workers.
  local deadline=$((SECONDS + 30))
  until [[ $(cat /proc/"$ROOT"/task/*/children 2>/dev/null | wc -w) -ge 2 ]]; do
    ((SECONDS < deadline)) || die "the job started no workers within 30 s"
    sleep 0.02
  done
  OWN_PIDS+=("$ROOT")
}

# cached_share: the page cache's share (percent) of the page files' bytes.
cached_share() {
  local files
  mapfile -t files < <(find "$WORK/ck" -name pages.img)
  ((${#files[@]})) || die "no page file under $WORK/ck"
  fincore -b -n -o RES,SIZE "${files[@]}" | awk '{ r += $1; s += $2 } END { print int(100 * r / s) }'
}

finish() {  # finish EXPECTED_STATUS: cr_run ends with it and the result is exact
  touch "$GATE"
  wait_exit "$CR" 60 || die "cr_run did not end"
  [[ $EXIT_STATUS == "$1" ]] || die "cr_run exited $EXIT_STATUS, expected $1"
  if [[ $1 == 0 ]]; then
    cmp -s "$WORK/expected" "$WORK/out" ||
      die "result differs: $(cat "$WORK/out") vs $(cat "$WORK/expected")"
  fi
}

case $MODE in
restart)
  start_cr_run --interval 0.4 --incrementals 2 --keep 2 --restarts 2
  # A full and two incrementals, then a new chain's full: both kinds committed.
  wait_lines "checkpoint (scheduled): chain" 4 "$CR" 30
  grep -q "incremental checkpoint (scheduled): chain 1 generation 3" "$LOG" ||
    die "no incremental on chain 1 (schedule)"
  # O_DIRECT by default: only the files' header pages pass through the cache.
  if dd if=/dev/zero of="$WORK/direct-probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
    share=$(cached_share)
    ((share < 10)) || die "$share % of the page files' bytes are in the page cache (O_DIRECT expected)"
  else
    echo "cr_run.$MODE: the filesystem of $WORK refuses O_DIRECT: page cache not checked"
  fi
  kill -9 "$ROOT"
  wait_lines "restored chain" 1 "$CR" 30
  grep -q "was killed by signal 9" "$LOG" || die "the death was not reported"
  finish 0
  grep -q "restarts used: 1" "$LOG" || die "expected exactly one restart"
  chains=$(find "$WORK/ck" -maxdepth 1 -name 'chain-*' | wc -l)
  ((chains <= 2)) || die "$chains chains kept, --keep 2"
  ;;
usr1)
  start_cr_run --interval 0 --restarts 2 --json --buffered
  for i in 1 2; do
    kill -USR1 "$CR"
    wait_lines '"event":"checkpoint"' "$i" "$CR" 30
  done
  share=$(cached_share)
  ((share > 50)) || die "--buffered: only $share % of the page files' bytes are in the page cache"
  grep -q '"kind":"incremental"' "$LOG" || die "the second SIGUSR1 gave no incremental"
  grep -q '"processes":3' "$LOG" || die "the job's three processes were not all checkpointed"
  ! grep -q '"reason":"scheduled"' "$LOG" || die "a scheduled checkpoint with --interval 0"
  # The root killed twice: two restarts, the second from a chain begun
  # after the first.
  kill -9 "$ROOT"
  wait_lines '"event":"restart"' 1 "$CR" 30
  kill -USR1 "$CR"
  wait_lines '"event":"checkpoint"' 3 "$CR" 30
  kill -9 "$ROOT"
  wait_lines '"event":"restart"' 2 "$CR" 30
  finish 0
  grep -q '"event":"exit".*"exit_code":0.*"restarts_used":2' "$LOG" || die "no exit record"
  ;;
no-restarts)
  start_cr_run --interval 0 --restarts 0
  kill -USR1 "$CR"
  wait_lines "checkpoint (SIGUSR1): chain" 1 "$CR" 30
  kill -9 "$ROOT"
  finish 137
  grep -q "no restarts left" "$LOG" || die "no 'no restarts left' line"
  ! grep -q "restored chain" "$LOG" || die "restarted with --restarts 0"
  ;;
resume-alive | resume-dead)
  start_cr_run --interval 0.3 --incrementals 1 --buffered
  wait_lines "checkpoint (scheduled): chain" 3 "$CR" 30
  kill -9 "$CR"
  wait_exit "$CR" 10 || die "cr_run did not die"
  for opt in --buffered "--interval 5"; do
    rc=0
    # shellcheck disable=SC2086
    "$CR_RUN" --resume "$WORK/ck" $opt >/dev/null 2>"$WORK/err" </dev/null || rc=$?
    ((rc != 0)) && [[ $(wc -l <"$WORK/err") == 1 ]] ||
      die "cr_run --resume $opt: rc $rc, $(cat "$WORK/err")"
  done
  grep -q '"buffered": true' "$WORK/ck/cr_run.json" || die "--buffered not recorded"
  if [[ $MODE == resume-dead ]]; then
    kill -9 "$ROOT" $(cat /proc/"$ROOT"/task/*/children 2>/dev/null) 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while [[ $(proc_state "$ROOT") != - ]]; do
      ((SECONDS < deadline)) || die "the job's root $ROOT was not reaped"
      sleep 0.05
    done
  else
    [[ $(proc_state "$ROOT") != - ]] || die "the job ended with its launcher"
  fi
  (close_fds; exec "$CR_RUN" --resume "$WORK/ck" --log "$LOG") \
    >>"$WORK/out" 2>"$WORK/resume.err" </dev/null &
  CR=$!
  OWN_PIDS+=("$CR")
  if [[ $MODE == resume-alive ]]; then
    start=$(awk '{ print $22 }' "/proc/$ROOT/stat")
    wait_lines "full checkpoint (adopt)" 1 "$CR" 30
    wait_lines "adopting the running job" 1 "$CR" 30
    # Adopted, not killed and restored: the same process runs on, and the
    # schedule goes on with it.
    [[ $(awk '{ print $22 }' "/proc/$ROOT/stat" 2>/dev/null) == "$start" ]] ||
      die "the adopted job's root $ROOT is not the process that was running"
    n=$(grep -c "checkpoint (scheduled): chain" "$LOG")
    wait_lines "checkpoint (scheduled): chain" $((n + 2)) "$CR" 30
    # Its death by a signal reaches the new launcher, which restarts it.
    kill -9 "$ROOT"
    wait_lines "restored chain" 1 "$CR" 30
  else
    wait_lines "resume: the job is gone" 1 "$CR" 30
  fi
  finish 0
  ;;
stop)
  OUT_PIPE=1 start_cr_run --interval 0 --incrementals 2
  kill -USR1 "$CR"
  wait_lines "checkpoint (SIGUSR1): chain" 1 "$CR" 30
  members=$(cat /proc/"$ROOT"/task/*/children)
  kill -USR2 "$CR"
  wait_exit "$CR" 60 || die "cr_run did not end after SIGUSR2"
  [[ $EXIT_STATUS == 75 ]] || die "cr_run exited $EXIT_STATUS after a stop, expected 75"
  grep -q "incremental checkpoint (SIGUSR2): chain 1 generation 2" "$LOG" ||
    die "no checkpoint before the stop"
  grep -q "stopped the job after its checkpoint" "$LOG" || die "no stop line"
  for p in $ROOT $members; do
    [[ $(proc_state "$p") == - ]] || die "member $p still runs after the stop"
  done
  grep -q '"stopped": true' "$WORK/ck/cr_run.json" || die "the stop is not recorded"
  (close_fds; exec "$CR_RUN" --resume "$WORK/ck" --log "$LOG") \
    2>"$WORK/resume.err" </dev/null | cat >>"$WORK/out" &
  sleep 0.2
  CR=$(pgrep -f -n "cr_run --resume $WORK/ck") || die "cr_run --resume did not start"
  OWN_PIDS+=("$CR")
  wait_lines "restored chain 1 generation 2 (resume after a stop)" 1 "$CR" 30
  finish 0
  ;;
levels)
  for bad in "--local relative/dir" "--flush-rate 5" "--local $WORK/l1 --flush-rate -1"; do
    rc=0
    # shellcheck disable=SC2086
    "$CR_RUN" --dir "$WORK/bad" $bad -- /bin/true >/dev/null 2>"$WORK/err" </dev/null || rc=$?
    ((rc != 0)) || die "cr_run $bad exited 0"
    [[ $(wc -l <"$WORK/err") == 1 ]] || die "cr_run $bad: not one line: $(cat "$WORK/err")"
  done
  L1=$WORK/local
  start_cr_run --interval 0.3 --incrementals 3 --restarts 3 --local "$L1"
  wait_lines "flushed chain 1 generation 2 to the shared level" 1 "$CR" 30
  kill -9 "$ROOT"
  wait_lines "from the local level (restart 1 of 3)" 1 "$CR" 30
  # cr_info shows both levels: the shared chains, and the local ones.
  "$BIN/cr_info" --dir "$WORK/ck" --json >"$WORK/info.json" || die "cr_info --dir $WORK/ck failed"
  jq -e --arg l "$L1" '.local_level.dir == $l and (.local_level.chains | length) >= 1 and
    (.chains | length) >= 1' "$WORK/info.json" >/dev/null || die "cr_info shows no local level"
  # Damage the newest local generation once the shared level has it too.
  n=$(grep -c "flushed chain" "$LOG")
  wait_lines "flushed chain" $((n + 1)) "$CR" 30
  root=$(sed -n 's/.*"root_pid": \([0-9]*\).*/\1/p' "$WORK/ck/cr_run.json")
  kill -STOP "$CR"
  newest=$(find "$L1" -name pages.img -path '*gen-*' | sort | tail -1)
  [[ -n $newest ]] || die "no local page file"
  dd if=/dev/urandom of="$newest" bs=4096 seek=4 count=8 conv=notrunc status=none
  kill -CONT "$CR"
  kill -9 "$root"
  wait_lines "from the shared level (restart 2 of 3)" 1 "$CR" 30
  grep -q "from the local level failed" "$LOG" || die "the damaged local copy was not tried and refused"
  # The node's local level is gone.
  n=$(grep -c "flushed chain" "$LOG")
  wait_lines "flushed chain" $((n + 1)) "$CR" 30
  root=$(sed -n 's/.*"root_pid": \([0-9]*\).*/\1/p' "$WORK/ck/cr_run.json")
  kill -STOP "$CR"
  rm -rf "$L1"
  kill -CONT "$CR"
  kill -9 "$root"
  wait_lines "from the shared level (restart 3 of 3)" 1 "$CR" 30
  finish 0
  ;;
levels-full)
  mkdir -p "$WORK/ck"
  mount -t tmpfs -o size=2m tmpfs "$WORK/ck" || die "cannot mount a tmpfs"
  MOUNTS+=("$WORK/ck")
  start_cr_run --interval 0.3 --local "$WORK/local"
  wait_lines "to the shared level failed: .*No space left on device (tried again)" 2 "$CR" 60
  ! grep -q "flushed chain" "$LOG" || die "a flush into a full file system succeeded"
  [[ -z $(find "$WORK/ck" -name '.flushing-*' -o -name 'gen-*' | head -1) ]] ||
    die "a partial copy is visible on the shared level: $(find "$WORK/ck" | tr '\n' ' ')"
  kill -9 "$ROOT"
  wait_lines "from the local level" 1 "$CR" 30
  finish 0
  ;;
levels-partner)
  head -c 32 /dev/urandom >"$WORK/token"
  chmod 600 "$WORK/token"
  PORT=$((22000 + $$ % 20000))
  P=(--partner "127.0.0.1:$PORT" --partner-token "$WORK/token")
  for bad in "--partner 127.0.0.1:$PORT --partner-token $WORK/token" \
    "--local $WORK/l1 --partner 127.0.0.1:$PORT" "--local $WORK/l1 --partner nowhere --partner-token $WORK/token" \
    "--local $WORK/l1 ${P[*]} --partner-name ../x" "--local $WORK/l1 --partner-token $WORK/token" \
    "--local $WORK/l1 --partner 127.0.0.1:$PORT --partner-token $WORK/missing"; do
    rc=0
    # shellcheck disable=SC2086
    "$CR_RUN" --dir "$WORK/bad" $bad -- /bin/true >/dev/null 2>"$WORK/err" </dev/null || rc=$?
    ((rc != 0)) || die "cr_run $bad exited 0"
    [[ $(wc -l <"$WORK/err") == 1 ]] || die "cr_run $bad: not one line: $(cat "$WORK/err")"
  done
  start_partner() {
    (close_fds; exec "$BIN/cr_noded" --listen "127.0.0.1:$PORT" --token "$WORK/token" \
      --dir "$WORK/partner") >/dev/null 2>>"$WORK/noded.err" </dev/null &
    NODED=$!
    OWN_PIDS+=("$NODED")
    local deadline=$((SECONDS + 30))
    until grep -q listening "$WORK/noded.err" 2>/dev/null && ss -ltn | grep -q ":$PORT "; do
      ((SECONDS < deadline)) || die "cr_noded did not listen: $(cat "$WORK/noded.err")"
      sleep 0.05
    done
  }
  LOGS+=("$WORK/noded.err")
  start_partner
  L1=$WORK/local
  # The shared copies slow (--flush-rate), so that one is in progress at each kill.
  start_cr_run --interval 0.3 --incrementals 3 --restarts 4 --local "$L1" --flush-rate 40 "${P[@]}" \
    --partner-name job-7
  wait_lines "flushed chain 1 generation 2 to the partner level" 1 "$CR" 30
  [[ -d $WORK/partner/partners/job-7/chain-000001/gen-000002 ]] ||
    die "no copy in the partner's store: $(find "$WORK/partner" | tr '\n' ' ')"
  "$BIN/cr_info" --dir "$WORK/ck" --json >"$WORK/info.json" || die "cr_info --dir $WORK/ck failed"
  jq -e '.partner_level.name == "job-7" and .partner_level.chain == 1 and
    .partner_level.generation >= 2' "$WORK/info.json" >/dev/null ||
    die "cr_info does not show the partner's copy: $(jq -c .partner_level "$WORK/info.json")"
  # The node and its disk are lost; the shared level is behind.
  kill -STOP "$CR"
  rm -rf "$L1" "$WORK/ck"/chain-*
  kill -9 "$ROOT"
  kill -CONT "$CR"
  wait_lines "from the partner level (restart 1 of 4)" 1 "$CR" 30
  [[ -n $(find "$L1" -path '*chain-*/gen-*' -name job.img | head -1) ]] ||
    die "the partner's copy was not fetched into the local level"
  # The partner goes away: the copies fail, the job runs on, the local level restores.
  kill -9 "$NODED"
  wait_exit "$NODED" 10 || true
  wait_lines "to the partner level failed: .*(tried again)" 1 "$CR" 60
  root=$(sed -n 's/.*"root_pid": \([0-9]*\).*/\1/p' "$WORK/ck/cr_run.json")
  kill -9 "$root"
  wait_lines "from the local level (restart 2 of 4)" 1 "$CR" 30
  grep -q "the partner level cannot be asked" "$LOG" || die "the unreachable partner was not reported"
  "$BIN/cr_info" --dir "$WORK/ck" >"$WORK/info.txt" || die "cr_info with the partner gone failed"
  grep -q "the partner level, 127.0.0.1:$PORT: cannot be asked: .*refused" "$WORK/info.txt" ||
    die "cr_info does not show the partner's gap: $(cat "$WORK/info.txt")"
  # Back: the copies catch up.
  n=$(grep -c "to the partner level:" "$LOG" || true)
  start_partner
  wait_lines "to the partner level:" $((n + 2)) "$CR" 60
  # The partner's copies damaged, the local level lost: the shared level.
  # cr_run and its copies in flight are stopped, and the partner restarted,
  # so that no copy stored meanwhile escapes the damage.
  wait_lines "flushed chain .* to the shared level" $(($(grep -c "to the shared level:" "$LOG") + 1)) "$CR" 30
  root=$(sed -n 's/.*"root_pid": \([0-9]*\).*/\1/p' "$WORK/ck/cr_run.json")
  kids=$(cat /proc/"$CR"/task/*/children)
  # shellcheck disable=SC2086
  kill -STOP "$CR" $kids
  # The agent and its sessions (a copy being stored would land after the damage).
  # shellcheck disable=SC2046
  kill -9 "$NODED" $(cat /proc/"$NODED"/task/*/children 2>/dev/null) 2>/dev/null || true
  wait_exit "$NODED" 10 || true
  n=0
  while read -r f; do
    dd if=/dev/urandom of="$f" bs=4096 seek=4 count=8 conv=notrunc status=none
    n=$((n + 1))
  done < <(find "$WORK/partner/partners/job-7" -name pages.img -path '*gen-*')
  ((n > 0)) || die "no page file in the partner's store"
  rm -rf "$L1"
  start_partner
  kill -9 "$root"
  # shellcheck disable=SC2086
  kill -CONT "$CR" $kids 2>/dev/null || true
  wait_lines "level (restart 3 of 4)" 1 "$CR" 30
  grep -q "from the shared level (restart 3 of 4)" "$LOG" ||
    die "not restored from the shared level: $(grep "restart 3 of 4" "$LOG")"
  grep -q "from the partner level failed" "$LOG" || die "the damaged partner copy was not tried"
  finish 0
  # The job finished: its copies on the partner are gone.
  [[ -d $WORK/partner/partners && ! -e $WORK/partner/partners/job-7 ]] ||
    die "the finished job's copies stay on the partner: $(ls "$WORK/partner/partners")"
  # cr_plan levels plans with what the job measured: C per level (the local
  # checkpoint, plus the copy's time for the others), R where it restored.
  "$BIN/cr_plan" levels --from "$WORK/ck" --mtbf 6h --json >"$WORK/plan.json" 2>"$WORK/err" ||
    die "cr_plan levels --from: $(cat "$WORK/err")"
  python3 - "$WORK/ck/cr_run.json" "$WORK/plan.json" <<'PY' || die "cr_plan levels --from does not plan with the measured costs"
import json, sys
m = json.load(open(sys.argv[1]))["measured"]
p = json.load(open(sys.argv[2]))["inputs"]
mean = lambda c: c["seconds"] / c["n"]
ck = m["checkpoint"]
C = [mean(ck["local"]), mean(ck["local"]) + mean(ck["partner"]), mean(ck["local"]) + mean(ck["shared"])]
R = [mean(m["restore"][l]) if l in m["restore"] else C[i] for i, l in enumerate(["local", "partner", "shared"])]
assert m["restore"]["partner"]["n"] == 1 and m["restore"]["local"]["n"] == 1, m["restore"]
assert all(abs(a - b) <= 1e-9 * max(1, b) for a, b in zip(p["C"], C)), (p["C"], C)
assert all(abs(a - b) <= 1e-9 * max(1, b) for a, b in zip(p["R"], R)), (p["R"], R)
assert ck["local"]["n"] >= 5 and ck["partner"]["n"] >= 3 and ck["shared"]["n"] >= 1, ck
PY
  ;;
levels-partner-full)
  # The partner's store is a full file system (a 2 MiB tmpfs): every copy
  # fails in one line and is tried again, nothing half-stored is visible
  # there, and the job's other levels go on.
  head -c 32 /dev/urandom >"$WORK/token"
  chmod 600 "$WORK/token"
  PORT=$((22000 + $$ % 20000))
  mkdir -p "$WORK/partner"
  mount -t tmpfs -o size=2m,mode=0700 tmpfs "$WORK/partner" || die "cannot mount a tmpfs"
  MOUNTS+=("$WORK/partner")
  (close_fds; exec "$BIN/cr_noded" --listen "127.0.0.1:$PORT" --token "$WORK/token" \
    --dir "$WORK/partner") >/dev/null 2>"$WORK/noded.err" </dev/null &
  OWN_PIDS+=("$!")
  LOGS+=("$WORK/noded.err")
  deadline=$((SECONDS + 30))
  until ss -ltn | grep -q ":$PORT "; do
    ((SECONDS < deadline)) || die "cr_noded did not listen: $(cat "$WORK/noded.err")"
    sleep 0.05
  done
  start_cr_run --interval 0.3 --local "$WORK/local" --partner "127.0.0.1:$PORT" \
    --partner-token "$WORK/token"
  wait_lines "to the partner level failed: .*No space left on device (tried again)" 2 "$CR" 60
  wait_lines "to the shared level:" 2 "$CR" 30
  ! grep -q "to the partner level:" "$LOG" || die "a copy into a full partner store succeeded"
  [[ -z $(find "$WORK/partner" -name 'gen-*' | head -1) ]] ||
    die "a partial copy is visible on the partner: $(find "$WORK/partner" | tr '\n' ' ')"
  kill -9 "$ROOT"
  wait_lines "from the local level" 1 "$CR" 30
  finish 0
  ;;
auto)
  # Bad input: one line, non-zero, no job started.
  for bad in "--interval auto --mtbf 0.5" "--interval auto --mtbf -3" "--interval auto --mtbf 2x" \
    "--interval soon" "--interval 5 --mtbf 60"; do
    rc=0
    # shellcheck disable=SC2086
    "$CR_RUN" --dir "$WORK/bad" $bad -- /bin/true >/dev/null 2>"$WORK/err" </dev/null || rc=$?
    ((rc != 0)) || die "cr_run $bad exited 0"
    [[ $(wc -l <"$WORK/err") == 1 ]] || die "cr_run $bad: not one line: $(cat "$WORK/err")"
  done
  start_cr_run --interval auto --mtbf 6 --incrementals 2 --restarts 1 --json
  wait_lines '"event":"checkpoint"' 4 "$CR" 60
  kill -9 "$ROOT"
  wait_lines '"event":"restart"' 1 "$CR" 30
  wait_lines '"event":"checkpoint"' 5 "$CR" 60
  finish 0
  python3 - "$LOG" "$BIN/cr_plan" <<'PY' || die "the planned intervals do not follow the measured costs"
import json, subprocess, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def plan(C, R):
    out = subprocess.run([sys.argv[2], "interval", "--C", repr(C), "--R", repr(R), "--mtbf", "6",
                          "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["exact"]["period_s"]
def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))
start = next(e for e in events if e["event"] == "start")
first = next(e for e in events if e["event"] == "checkpoint")
# The first checkpoint: after the provisional period (C = R = 1 s).
assert first["time"] - start["time"] >= plan(1.0, 1.0) - 0.05, (start, first)
totals, R, prev = [], None, None
for e in events:
    if e["event"] == "restart":
        assert e["plan"]["R_source"] == "restore" and close(e["plan"]["R"], e["restore_seconds"]), e
        R = e["restore_seconds"]
        assert close(e["interval_s"], plan(e["plan"]["C"], R)), e
        prev = None  # the schedule starts again from the restore
        continue
    if e["event"] != "checkpoint":
        continue
    assert e["reason"] == "scheduled", e
    totals.append(e["total_seconds"])
    if e["kind"] == "full" and (R is None or e["plan"]["R_source"] == "full"):
        R = e["total_seconds"]
    p = e["plan"]
    assert p["mtbf_s"] == 6, e
    assert close(p["C"], sum(totals) / len(totals)), (p, totals)  # C: the measured mean
    assert close(p["R"], R), (p, R)
    want = plan(p["C"], p["R"])
    assert close(e["interval_s"], want), (e["interval_s"], want)
    assert e["interval_s"] < 6, e  # a short MTBF gives a short period
    if prev is not None:
        # The next checkpoint began the planned period after this one ended
        # (its event comes when it has ended: its own duration plus slack).
        gap = e["time"] - prev["time"]
        assert gap >= prev["interval_s"] - 0.05, (gap, prev["interval_s"])
        assert gap <= prev["interval_s"] + e["total_seconds"] + 2.0, (gap, prev["interval_s"], e)
    prev = e
assert len(totals) >= 5 and R is not None, totals
print(f"intervals {[round(e['interval_s'], 3) for e in events if e['event'] == 'checkpoint']}")
PY
  ;;
*) die "unknown mode" ;;
esac
echo "cr_run.$MODE: ok"
