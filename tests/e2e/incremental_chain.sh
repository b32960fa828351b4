#!/usr/bin/env bash
# incremental_chain.sh BIN_DIR [MODE]: a chain of 12 generations of a program
# whose memory layout keeps changing, and every generation restored.
#
# The program (programs/incr_layout.c) goes through rounds 0..11; each round
# changes its layout (mmap, munmap, mremap, MAP_FIXED, MADV_DONTNEED, brk, a
# private file mapping) and writes pages at random, saves a copy of its memory,
# signals round-k.ready and waits for go-k. The driver checkpoints each round:
# cr_full for round 0, cr_incr for the others (generation g = round g-1), then
# lets it go on. The original must end by itself with exit 0. Then each
# generation g is restored with `cr_restart --generation g`: the restored
# process finds verify-(g-1), compares its memory byte for byte with its copy
# of that round, checks that what it had unmapped is unmapped, and must print
# "verified round g-1" and exit 0 (every generation is tried; the failures are
# listed at the end). Last, a copy of the chain with one content byte flipped
# in a middle generation must be refused by cr_restart.
#
# The whole chain runs once per dirty-page tracker that works here (cr_check),
# or only with E2E_TRACKER when it is set (auto, kmod, pagemap-scan, ...).
#
# Modes:
#   normal    (default) as above;
#   sabotage  the program corrupts its copy of round 5 (TEST_SABOTAGE=1): the
#             restore of generation 6 must fail verification (exit 1, one line
#             naming round 5) while every other generation passes. Proves the
#             comparison can fail. Runs with E2E_TRACKER, default auto.
# Environment: E2E_TRACKER (see above); E2E_SEED (1) seeds the program's
# choices; E2E_PROG_DIR (BIN_DIR/e2e); E2E_KEEP=1 keeps the temporary
# directory.
# Prints a table of the generations and "PASS incremental_chain ..." or
# "FAIL incremental_chain ...: reason". Exit 0 pass, 1 fail, 2 usage, 77 skip
# (only when the tracker asked for does not work on this kernel).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

usage() {
  echo "usage: $0 BIN_DIR [normal|sabotage]" >&2
  exit 2
}
(($# == 1 || $# == 2)) || usage
MODE=${2:-normal}
case $MODE in normal | sabotage) ;; *) usage ;; esac
BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
  echo "FAIL incremental_chain: no directory $1"
  exit 1
}
PROG=${E2E_PROG_DIR:-$BIN_DIR/e2e}/incr_layout

# No tracker asked for: run the whole test once per tracker that works here.
if [[ -z ${E2E_TRACKER:-} && $MODE == normal ]]; then
  trackers=()
  if [[ -x $BIN_DIR/cr_check ]]; then
    mapfile -t trackers < <("$BIN_DIR/cr_check" --json 2>/dev/null |
      jq -r '.trackers[] as $t | select(.[$t].ok == true) | $t') || true
  fi
  ((${#trackers[@]})) || {
    echo "FAIL incremental_chain: cr_check --json lists no working tracker"
    exit 1
  }
  failed=()
  for t in "${trackers[@]}"; do
    rc=0
    E2E_TRACKER=$t bash "${BASH_SOURCE[0]}" "$@" || rc=$?
    # cr_check said this tracker works: a skip is a failure here.
    ((rc == 0)) || failed+=("$t")
  done
  if ((${#failed[@]})); then
    echo "FAIL incremental_chain: with tracker(s) ${failed[*]} (of ${trackers[*]})"
    exit 1
  fi
  echo "PASS incremental_chain: trackers ${trackers[*]}"
  exit 0
fi
TRACKER=${E2E_TRACKER:-auto}
SEED=${E2E_SEED:-1}
ROUNDS=12          # the program's rounds 0..11 = generations 1..12
SABOTAGE_ROUND=5   # programs/incr_layout.c's SABOTAGE_ROUND
TOOL_TIMEOUT=60    # seconds a tool may take (cr_restart includes the verification)
READY_TIMEOUT=30   # seconds a round may take to become ready
T_START=$EPOCHREALTIME

# ms_since SINCE: whole milliseconds since SINCE (an $EPOCHREALTIME value).
ms_since() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'
}

NAME="incremental_chain [$TRACKER]"
[[ $MODE == normal ]] || NAME+=" $MODE"
E2E_CASE="$NAME" # for pass, fail and skip (lib.sh)

for tool in cr_full cr_incr cr_restart cr_info; do
  [[ -x $BIN_DIR/$tool ]] || fail "$BIN_DIR/$tool not built"
done
[[ -x $PROG ]] || fail "test program $PROG not built"
if [[ $TRACKER != auto && -x $BIN_DIR/cr_check ]]; then
  ok=$("$BIN_DIR/cr_check" --json 2>/dev/null | jq -r --arg t "$TRACKER" '.[$t].ok // false') || ok=false
  if [[ $ok != true ]]; then
    echo "SKIP $NAME: tracker $TRACKER does not work on this kernel"
    exit 77
  fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-incremental_chain.XXXXXX")
install_traps
RUN=$WORK/run   # the program's READY_DIR: copies, ready/go/verify files, its data file
CKPT=$WORK/ckpt
mkdir "$RUN"
LOGS=("$WORK/prog.err" "$WORK/tool.err")

# ---- the original run: 12 rounds, one checkpoint each ----

# The program's stdout and stderr are pipes (drained into files), so that a
# restored process, whose stdio is connected to cr_restart's, sees the same
# kind of fd it had at ready time.
exec {OUT_FD}> >(exec cat >"$WORK/prog.out")
OUT_CAT=$!
exec {ERR_FD}> >(exec cat >"$WORK/prog.err")
ERR_CAT=$!
PROG_ENV=(E2E_SEED="$SEED")
[[ $MODE == sabotage ]] && PROG_ENV+=(TEST_SABOTAGE=1)
(
  exec </dev/null 1>&"$OUT_FD" 2>&"$ERR_FD"
  close_fds
  exec env "${PROG_ENV[@]}" "$PROG" "$RUN"
) &
PID=$!
OWN_PIDS+=("$PID")
exec {OUT_FD}>&- {ERR_FD}>&-

declare -a WRITTEN SCANNED ZERO BYTES TRK SECS INFO
READY_ID=""
for ((k = 0; k < ROUNDS; k++)); do
  g=$((k + 1))
  rc=0
  wait_file "$RUN/round-$k.ready" "$PID" "$READY_TIMEOUT" || rc=$?
  if ((rc == 2)); then
    wait_exit "$PID" 5 || true
    sleep 0.1 # let the stderr pipe drain
    fail "program ended ($(describe_status "$EXIT_STATUS")) before round $k was ready: $(first_line "$WORK/prog.err")"
  fi
  ((rc == 0)) || fail "round $k not ready after ${READY_TIMEOUT}s"
  read -r rpid nonce info <"$RUN/round-$k.ready"
  [[ $rpid == "$PID" ]] || fail "round-$k.ready names pid $rpid, the program is $PID"
  [[ -z $READY_ID || $READY_ID == "$rpid $nonce" ]] || fail "round $k ready from another process ($rpid $nonce)"
  READY_ID="$rpid $nonce"
  INFO[g]=$info

  if ((k == 0)); then tool=cr_full; else tool=cr_incr; fi
  t0=$EPOCHREALTIME
  rc=0
  timeout "$TOOL_TIMEOUT" "$BIN_DIR/$tool" --dir "$CKPT" --tracker "$TRACKER" --json "$PID" </dev/null \
    >"$WORK/gen-$g.json" 2>"$WORK/tool.err" || rc=$?
  SECS[g]=$(ms_since "$t0")
  ((rc == 0)) || fail "$tool for round $k $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
  json=$(grep '^{' "$WORK/gen-$g.json" | tail -n 1) || fail "$tool --json printed no statistics"
  gen=$(jq -r .generation <<<"$json")
  ((gen == g)) || fail "$tool for round $k wrote generation $gen, expected $g"
  WRITTEN[g]=$(jq -r .pages_written <<<"$json")
  SCANNED[g]=$(jq -r .pages_scanned <<<"$json")
  ZERO[g]=$(jq -r .pages_zero <<<"$json")
  BYTES[g]=$(jq -r .bytes_written <<<"$json")
  TRK[g]=$(jq -r .tracker <<<"$json")
  st=$(proc_state "$PID")
  [[ $st != T && $st != t && $(tracer_of "$PID") == 0 ]] || fail "program left stopped or traced after $tool (state $st)"
  touch "$RUN/go-$k"
done

wait_exit "$PID" 30 || fail "the original still running 30s after go-$((ROUNDS - 1))"
# Both cats end once the program's pipes are closed.
for cat_pid in "$OUT_CAT" "$ERR_CAT"; do
  for _ in $(seq 100); do
    st=$(proc_state "$cat_pid")
    [[ $st == Z || $st == - ]] && break
    sleep 0.02
  done
done
((EXIT_STATUS == 0)) || fail "the original $(describe_status "$EXIT_STATUS") after its last round: $(first_line "$WORK/prog.err")"
[[ $(tail -n 1 "$WORK/prog.out") == "done $READY_ID" ]] ||
  fail "the original did not end with \"done $READY_ID\": $(tail -n 1 "$WORK/prog.out")"
T_CHAIN=$(elapsed "$T_START")

rc=0
timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_info" --dir "$CKPT" --verify </dev/null >"$WORK/cr_info.out" 2>"$WORK/tool.err" || rc=$?
((rc == 0)) || fail "cr_info --verify of the chain $(describe_status "$rc"): $(first_line "$WORK/tool.err")"

echo "incremental_chain: seed $SEED, tracker $TRACKER, $ROUNDS generations in ${T_CHAIN}s"
printf '%4s %-11s %-12s %8s %8s %7s %10s %6s  %s\n' gen kind tracker scanned written zero bytes ms "program's round"
for ((g = 1; g <= ROUNDS; g++)); do
  kind=incremental
  ((g > 1)) || kind=full
  printf '%4d %-11s %-12s %8s %8s %7s %10s %6s  %s\n' "$g" "$kind" "${TRK[g]}" "${SCANNED[g]}" \
    "${WRITTEN[g]}" "${ZERO[g]}" "${BYTES[g]}" "${SECS[g]}" "${INFO[g]}"
done

# Incrementals of the quiet rounds (a few page writes, no layout change) must
# be much smaller than the full checkpoint. kmod reports pages that hold a
# reference beyond their mappings (a writer in flight, or just a per-CPU LRU
# batch not drained yet: several batch kinds of up to 15 pages per CPU, and
# the module cannot drain them); right after a round that faulted in many
# pages that can be a third of this small program (CI saw 132 of 398), so
# its bound is "fewer than the full", and the excess is printed.
for ((g = 2; g <= ROUNDS; g++)); do
  [[ ${INFO[g]} == quiet=1* ]] || continue
  factor=4
  [[ ${TRK[g]} == kmod ]] && factor=1
  ((WRITTEN[g] * factor < WRITTEN[1])) ||
    fail "generation $g (a quiet round) wrote ${WRITTEN[g]} pages, not much fewer than the full's ${WRITTEN[1]}"
  ((WRITTEN[g] * 4 < WRITTEN[1])) ||
    echo "NOTE generation $g (a quiet round, ${TRK[g]}) wrote ${WRITTEN[g]} of the full's ${WRITTEN[1]} pages"
done

# ---- restore every generation ----

# restart G DIR: runs cr_restart --generation G on DIR with its stdout and
# stderr on pipes (drained into $WORK/restart-G.out/.err); sets RC.
restart() {
  local g=$1 dir=$2
  {
    set +e # (this group runs in a subshell)
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$dir" --generation "$g" --json </dev/null |
      cat >"$WORK/restart-$g.out"
    echo "${PIPESTATUS[0]}" >"$WORK/restart-$g.rc"
  } 2>&1 | cat >"$WORK/restart-$g.err" || true
  RC=$(<"$WORK/restart-$g.rc")
}

# check_generation G: the restore of generation G must have verified round G-1
# (or, sabotaged round, failed verification as it must). Returns 1 with the
# reason in WHY.
check_generation() {
  local g=$1 k=$(($1 - 1)) verdict
  verdict=$(grep -m 1 '^verified round' "$WORK/restart-$g.out" || true)
  if [[ $MODE == sabotage && $k == "$SABOTAGE_ROUND" ]]; then
    WHY="with round $k's copy corrupted, the restored program $(describe_status "$RC"), expected exit 1"
    ((RC == 1)) || return 1
    WHY="the failed verification gave no one-line reason"
    is_one_line "$WORK/restart-$g.err" || return 1
    WHY="the reason does not name round $k: $(first_line "$WORK/restart-$g.err")"
    grep -q "round $k: " "$WORK/restart-$g.err" || return 1
    WHY="failed as it must: $(first_line "$WORK/restart-$g.err")"
    return 0
  fi
  WHY="cr_restart $(describe_status "$RC"): $(first_line "$WORK/restart-$g.err")"
  ((RC == 0)) || return 1
  WHY="no \"verified round $k\" from the restored process"
  [[ $verdict == "verified round $k:"* ]] || return 1
  WHY="the restored process is not the checkpointed one (no \"done $READY_ID\")"
  [[ $(grep '^done ' "$WORK/restart-$g.out" | tail -n 1) == "done $READY_ID" ]] || return 1
  WHY=$verdict
}

printf '%4s %8s  %s\n' gen ms "restored process"
BAD=()
for ((g = 1; g <= ROUNDS; g++)); do
  k=$((g - 1))
  [[ ! -e /proc/$PID ]] || fail "pid $PID in use before the restore of generation $g"
  touch "$RUN/verify-$k"
  t0=$EPOCHREALTIME
  restart "$g" "$CKPT"
  rm -f "$RUN/verify-$k"
  ((RC != 124)) || fail "cr_restart --generation $g still running after ${TOOL_TIMEOUT}s"
  if check_generation "$g"; then
    printf '%4d %8s  %s\n' "$g" "$(ms_since "$t0")" "$WHY"
  else
    printf '%4d %8s  FAILED: %s\n' "$g" "$(ms_since "$t0")" "$WHY"
    BAD+=("$g")
    [[ -n ${FIRST_BAD:-} ]] || FIRST_BAD="generation $g (round $k): $WHY"
  fi
done
if ((${#BAD[@]})); then
  LOGS=()
  fail "${#BAD[@]} of $ROUNDS generations did not restore correctly (${BAD[*]}); first: $FIRST_BAD"
fi

# ---- a corrupt generation is refused ----

# One content byte flipped in the middle of a middle generation's pages.img
# (in a copy of the chain): cr_restart must refuse that generation before
# anything runs. Generation 9 is an incremental with layout changes in the
# default seed; any generation from the middle with content will do.
for g in 9 6 5 2; do
  size=$(stat -c %s "$CKPT/$(printf 'gen-%06d' "$g")/pages.img")
  ((size > 4096)) && break
done
((size > 4096)) || fail "no generation among 2, 5, 6, 9 has page content"
cp -a "$CKPT" "$WORK/corrupt"
img=$WORK/corrupt/$(printf 'gen-%06d' "$g")/pages.img
off=$((4096 + (size - 4096) / 2 + 123))
byte=$(od -An -tu1 -j "$off" -N 1 "$img" | tr -d ' ')
printf '%b' "$(printf '\\%03o' $(((byte ^ 0x5a) & 255)))" | dd of="$img" bs=1 seek="$off" conv=notrunc status=none
touch "$RUN/verify-$((g - 1))"
restart "$g" "$WORK/corrupt"
# shellcheck disable=SC2034 # read by show_logs (lib.sh)
LOGS=("$WORK/restart-$g.err" "$WORK/restart-$g.out")
((RC != 0)) || fail "cr_restart restored generation $g with a flipped byte in its pages.img"
if grep -q '^verified\|^done ' "$WORK/restart-$g.out" || grep -q '^incr_layout:' "$WORK/restart-$g.err"; then
  fail "a process ran from the corrupt generation $g"
fi
is_one_line "$WORK/restart-$g.err" || fail "cr_restart gave no one-line reason for the corrupt generation $g"
[[ ! -e /proc/$PID ]] || fail "pid $PID in use after the refused restore"
echo "corrupt generation $g (byte $off of pages.img flipped) refused: $(first_line "$WORK/restart-$g.err")"

echo "PASS $NAME (seed $SEED, tracker $TRACKER, chain ${T_CHAIN}s, total $(elapsed "$T_START")s)"
