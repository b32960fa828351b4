#!/usr/bin/env bash
# chain_dir.sh BIN_DIR CASE [PRELOAD]: a checkpoint directory's edges, with a
# job of three processes (sh and two sleeps) checkpointed with --tree.
#   removal-kill  cr_full --tree killed (PRELOAD: kill_at_unlink.so) right
#                 after each file it deletes of the chain it supersedes, in
#                 turn: every generation left is whole (cr_info --verify
#                 passes) and the next cr_full, without --force, succeeds and
#                 leaves one generation and no leftover
#   job-bind      job.img deleted, or taken from another generation, or a
#                 member's meta.img taken from another generation: cr_info
#                 --verify, cr_restart and cr_incr refuse in one line (the
#                 job keeps running); cr_info --verify
#                 --generation 77 (no such generation) refuses in one line
#   run-dir       a directory of chains as cr_run writes them (DIR/chain-N):
#                 cr_info lists the chains and describes the newest, --chain N
#                 picks one, cr_compact and cr_restart take the directory
# Prints PASS/FAIL like run_case.sh; exit 0 pass, 1 fail, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# >= 2)) || {
  echo "usage: $0 BIN_DIR removal-kill|job-bind|run-dir [PRELOAD]" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
CASE=$2
PRELOAD=${3:-}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-chain-dir-$CASE.XXXXXX")
install_traps
CK=$WORK/ck
LOGS=("$WORK/tool.err" "$WORK/tool.out")
E2E_CASE="chain_dir $CASE"

tool() {
  TOOL_RC=0
  timeout 60 "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
}
must() {
  tool "$@"
  ((TOOL_RC == 0)) || fail "${1##*/} ${*:2}: exit $TOOL_RC: $(first_line "$WORK/tool.err")"
}
expect_refusal() {
  ((TOOL_RC != 0 && TOOL_RC < 128)) || fail "$1: exit $TOOL_RC, expected a refusal"
  is_one_line "$WORK/tool.err" || fail "$1: not a one-line error: $(head -c 300 "$WORK/tool.err")"
}

# start_job: PID, a sh with two sleeping children (three processes).
start_job() {
  (close_fds && exec setsid sh -c 'sleep 600 & sleep 600 & wait') </dev/null >/dev/null 2>&1 &
  PID=$!
  OWN_PIDS+=("$PID")
  for _ in $(seq 100); do
    (($(pgrep -c -P "$PID" || true) == 2)) && break
    sleep 0.05
  done
  (($(pgrep -c -P "$PID" || true) == 2)) || fail "the job did not start its children"
  OWN_PIDS+=($(pgrep -P "$PID"))
}
gens() { (cd "$1" && ls -d gen-* 2>/dev/null) | tr '\n' ' '; }

start_job
case $CASE in
  removal-kill)
    [[ -f $PRELOAD ]] || fail "no preload $PRELOAD"
    must "$BIN_DIR/cr_full" --tree --dir "$CK" "$PID"
    kills=0
    for ((n = 1; n <= 60; ++n)); do
      # The chain a full supersedes: a full and an incremental, 3 members each.
      must "$BIN_DIR/cr_incr" --dir "$CK" "$PID"
      before=$(gens "$CK")
      TOOL_RC=0
      CKPT_KILL_AT_UNLINK=$n LD_PRELOAD=$PRELOAD timeout 60 "$BIN_DIR/cr_full" --tree --dir "$CK" "$PID" \
        </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
      ((TOOL_RC == 0)) && break # past the last deletion: nothing left to kill
      ((TOOL_RC == 137)) || fail "cr_full with unlink $n killing it: exit $TOOL_RC: $(first_line "$WORK/tool.err")"
      kills=$((kills + 1))
      left=$(gens "$CK")
      for g in $left; do
        [[ -f $CK/$g/meta.img ]] || fail "killed after unlink $n: $g is left without meta.img ($(ls "$CK/$g" | tr '\n' ' '))"
      done
      tool "$BIN_DIR/cr_info" --verify --dir "$CK"
      ((TOOL_RC == 0)) || fail "killed after unlink $n (had $before, left $left): cr_info --verify: $(first_line "$WORK/tool.err")"
      [[ $(proc_state "$PID") == [SR] ]] || fail "the job's root is $(proc_state "$PID")"
      must "$BIN_DIR/cr_full" --tree --dir "$CK" "$PID"
      [[ $(gens "$CK" | wc -w) == 1 ]] || fail "after unlink $n and a cr_full: $(gens "$CK")"
      leftover=$(find "$CK" -mindepth 1 -maxdepth 1 -name '.*')
      [[ -z $leftover ]] || fail "after unlink $n and a cr_full, left: $leftover"
    done
    ((kills >= 6)) || fail "only $kills deletions to kill cr_full at"
    ((TOOL_RC == 0)) || fail "cr_full was still killed after 60 deletions"
    pass "killed after each of $kills deletions, every time a whole chain left"
    ;;
  job-bind)
    must "$BIN_DIR/cr_full" --tree --dir "$CK" "$PID"
    must "$BIN_DIR/cr_incr" --dir "$CK" "$PID"
    must "$BIN_DIR/cr_info" --verify --dir "$CK"
    member=$(cd "$CK/gen-000002" && ls -d member-* | head -n 1)
    [[ -n $member ]] || fail "no member directory in $(ls "$CK/gen-000002")"
    # Each damage on a copy; verify and restore must refuse it.
    damage() { # NAME COMMAND...: the command damages $copy
      local name=$1
      shift
      copy=$WORK/$name
      rm -rf "$copy"
      cp -a "$CK" "$copy"
      "$@"
      tool "$BIN_DIR/cr_info" --verify --dir "$copy"
      expect_refusal "cr_info --verify ($name)"
      grep -q "$copy/gen-00000[12]" "$WORK/tool.err" || fail "$name: names no generation: $(first_line "$WORK/tool.err")"
      tool "$BIN_DIR/cr_restart" --dir "$copy"
      expect_refusal "cr_restart ($name)"
      tool "$BIN_DIR/cr_incr" --dir "$copy" "$PID"
      expect_refusal "cr_incr ($name)"
      [[ $(proc_state "$PID") == [SR] ]] || fail "$name: the job's root is $(proc_state "$PID") after cr_incr"
    }
    damage no-job rm "$WORK/no-job/gen-000002/job.img"
    damage other-job cp "$CK/gen-000001/job.img" "$WORK/other-job/gen-000002/job.img"
    damage other-member cp "$CK/gen-000001/$member/meta.img" "$WORK/other-member/gen-000002/$member/meta.img"
    # A full's job.img bound too (no parent digest covers it).
    damage full-no-job rm "$WORK/full-no-job/gen-000002/job.img" "$WORK/full-no-job/gen-000001/job.img"
    tool "$BIN_DIR/cr_info" --verify --dir "$CK" --generation 77
    expect_refusal "cr_info --verify --generation 77"
    grep -q "no generation 77" "$WORK/tool.err" || fail "--generation 77: $(first_line "$WORK/tool.err")"
    tool "$BIN_DIR/cr_info" --dir "$CK" --generation 77
    expect_refusal "cr_info --generation 77"
    must "$BIN_DIR/cr_info" --verify --dir "$CK" --generation 2
    pass
    ;;
  run-dir)
    RUN=$WORK/run
    mkdir -m 0700 "$RUN"
    must "$BIN_DIR/cr_full" --tree --dir "$RUN/chain-000001" "$PID"
    must "$BIN_DIR/cr_full" --tree --dir "$RUN/chain-000002" "$PID"
    must "$BIN_DIR/cr_incr" --dir "$RUN/chain-000002" "$PID"
    mkdir -m 0700 "$RUN/chain-000003" # a chain being started: nothing committed yet
    must "$BIN_DIR/cr_info" --dir "$RUN"
    grep -q "^chain 1: $RUN/chain-000001, 1 generation" "$WORK/tool.out" || fail "cr_info: $(cat "$WORK/tool.out")"
    grep -q "^chain 2: $RUN/chain-000002, 2 generations (1 to 2), described below" "$WORK/tool.out" ||
      fail "cr_info: $(cat "$WORK/tool.out")"
    grep -q "^chain 3: .*no committed generation" "$WORK/tool.out" || fail "cr_info: $(cat "$WORK/tool.out")"
    grep -q "^generation 2 (incremental): pid $PID" "$WORK/tool.out" || fail "cr_info: $(cat "$WORK/tool.out")"
    must "$BIN_DIR/cr_info" --dir "$RUN" --json
    [[ $(jq -c '[.dir, (.chains | map(.chain)), (.generations | map(.generation))]' "$WORK/tool.out") == \
      "[\"$RUN/chain-000002\",[1,2,3],[1,2]]" ]] || fail "cr_info --json: $(cat "$WORK/tool.out")"
    must "$BIN_DIR/cr_info" --dir "$RUN" --chain 1 --verify --json
    [[ $(jq -c '[.dir, (.generations | map(.generation))]' "$WORK/tool.out") == "[\"$RUN/chain-000001\",[1]]" ]] ||
      fail "cr_info --chain 1: $(cat "$WORK/tool.out")"
    tool "$BIN_DIR/cr_info" --dir "$RUN" --chain 9
    expect_refusal "cr_info --chain 9"
    tool "$BIN_DIR/cr_info" --dir "$RUN/chain-000001" --chain 1
    expect_refusal "cr_info --chain 1 of a chain itself"
    # cr_compact of the directory folds its newest chain (this job's three
    # processes) into generation 3, a full; the older chain is untouched.
    must "$BIN_DIR/cr_compact" --dir "$RUN" --json
    [[ $(jq -c '[.generation, .generations_folded]' "$WORK/tool.out") == "[3,2]" ]] ||
      fail "cr_compact --dir RUN: $(cat "$WORK/tool.out")"
    [[ $(cd "$RUN/chain-000002" && echo gen-*) == gen-000003 && -d $RUN/chain-000001/gen-000001 ]] ||
      fail "after cr_compact: $(cd "$RUN" && echo chain-*/gen-*)"
    # cr_restart of the directory: the newest chain's newest generation.
    kids=$(pgrep -P "$PID")
    kill -9 "$PID" $kids
    wait "$PID" 2>/dev/null || true
    kill_all_gone "$PID" $kids || fail "the job did not die"
    must "$BIN_DIR/cr_restart" --dir "$RUN" --detach --json
    [[ $(jq -c '[.pid, .processes, .generation]' "$WORK/tool.out") == "[$PID,3,3]" ]] ||
      fail "cr_restart --dir RUN: $(cat "$WORK/tool.out")"
    OWN_PIDS+=($(pgrep -P "$PID"))
    (($(pgrep -c -P "$PID" || true) == 2)) || fail "the restored job has not its two children"
    pass
    ;;
  *) fail "unknown case $CASE" ;;
esac
