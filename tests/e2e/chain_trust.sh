#!/usr/bin/env bash
# chain_trust.sh BIN_DIR CASE: a real chain of chain_phases (full + 2
# incrementals, --tracker hash, taken once), then:
#   swap        gen-000001 <-> gen-000002 swapped: cr_info --verify and
#               cr_restart refuse with one line naming a generation directory
#               (before the format bound generations to their parents, this
#               restored a wrong state with exit 0); the unswapped chain restores.
#   missing     gen-000002 deleted: cr_info --verify refuses (a restore would).
#   other-chain cr_full of another process into the directory refuses with one
#               line and keeps the chain; --force moves it aside into
#               DIR/replaced-<chain id>, where it still verifies and restores.
#   campaign    chain_campaign: CAMPAIGN_COUNT (default 1000) seeded random
#               mutations (CAMPAIGN_SEED, default 13), each a clean refusal or
#               a byte-identical restore.
# Prints PASS/FAIL like run_case.sh; exit 0 pass, 1 fail, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# == 2)) || {
  echo "usage: $0 BIN_DIR swap|missing|other-chain|campaign" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
CASE=$2
PROG=$BIN_DIR/e2e/chain_phases
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-chain-$CASE.XXXXXX")
install_traps
CK=$WORK/ck
LOGS=("$WORK/prog.err" "$WORK/tool.err" "$WORK/tool.out")

E2E_CASE="chain_trust $CASE" # for pass, fail and skip (lib.sh)

# tool CMD...: runs a tool, TOOL_RC its status, output in tool.out/tool.err.
tool() {
  TOOL_RC=0
  timeout 60 "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
}
expect_refusal() {
  ((TOOL_RC != 0 && TOOL_RC < 128)) || fail "$1: exit $TOOL_RC, expected a refusal"
  is_one_line "$WORK/tool.err" || fail "$1: not a one-line error"
}

# Restores $1 with "q" on stdin; the process must report phase $2 and its nonce.
expect_restore() {
  # stdin and stdout are pipes, as at the checkpoint (the process checks its fds).
  local rc
  set +e
  printf 'q\n' | timeout 60 "$BIN_DIR/cr_restart" --dir "$1" 2>"$WORK/tool.err" | cat >"$WORK/restored.out"
  rc=${PIPESTATUS[1]}
  set -e
  ((rc == 0)) || fail "restore of $1: $(describe_status $rc): $(first_line "$WORK/tool.err")"
  [[ $(cat "$WORK/restored.out") == "final phase $2"$'\n'"done $READY_ID" ]] ||
    fail "restore of $1: wrong state: $(head -c 200 "$WORK/restored.out")"
}

# start_phases: runs chain_phases with its stdin and stdout on pipes to us.
start_phases() {
  rm -f "$WORK/ready"
  coproc PHASES { close_fds && exec "$PROG" "$WORK/ready" 1024 2>"$WORK/prog.err"; }
  PID=$PHASES_PID
  OWN_PIDS+=("$PID")
  wait_file "$WORK/ready" "$PID" 30 || fail "chain_phases not ready"
  READY_ID=$(<"$WORK/ready")
}
next_phase() {
  echo n >&"${PHASES[1]}"
  local line
  IFS= read -r -t 30 line <&"${PHASES[0]}" || fail "no progress line from chain_phases"
  [[ $line == "phase $1" ]] || fail "chain_phases said '$line'"
}

# The chain, once: full in phase 0, incrementals in phases 1 and 2.
start_phases
tool "$BIN_DIR/cr_full" --tracker hash --dir "$CK" "$PID"
((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
for p in 1 2; do
  next_phase $p
  tool "$BIN_DIR/cr_incr" --dir "$CK" "$PID"
  ((TOOL_RC == 0)) || fail "cr_incr: $(first_line "$WORK/tool.err")"
done
{ kill -9 "$PID" && wait "$PID"; } 2>/dev/null || true
cp "$WORK/ready" "$WORK/ready.saved"
[[ $(ls "$CK") == $'gen-000001\ngen-000002\ngen-000003' ]] || fail "unexpected chain: $(ls "$CK")"

case $CASE in
  swap)
    cp -a "$CK" "$WORK/swapped"
    mv "$WORK/swapped/gen-000001" "$WORK/swapped/tmp"
    mv "$WORK/swapped/gen-000002" "$WORK/swapped/gen-000001"
    mv "$WORK/swapped/tmp" "$WORK/swapped/gen-000002"
    tool "$BIN_DIR/cr_info" --dir "$WORK/swapped" --verify
    expect_refusal "cr_info --verify of a swapped chain"
    grep -q "$WORK/swapped/gen-00000[12]" "$WORK/tool.err" ||
      fail "the refusal names no directory: $(first_line "$WORK/tool.err")"
    tool "$BIN_DIR/cr_restart" --dir "$WORK/swapped"
    expect_refusal "cr_restart of a swapped chain"
    grep -q "$WORK/swapped/gen-00000[12]" "$WORK/tool.err" ||
      fail "the refusal names no directory: $(first_line "$WORK/tool.err")"
    [[ $(proc_state "$PID") == - ]] || fail "a process holds PID $PID after the refusal"
    why=$(first_line "$WORK/tool.err")
    expect_restore "$CK" 2
    pass "$why"
    ;;
  missing)
    rm -rf "$CK/gen-000002"
    tool "$BIN_DIR/cr_info" --dir "$CK" --verify
    expect_refusal "cr_info --verify with generation 2 missing"
    grep -q "needs generation 2" "$WORK/tool.err" || fail "refused for another reason: $(first_line "$WORK/tool.err")"
    tool "$BIN_DIR/cr_restart" --dir "$CK"
    expect_refusal "cr_restart with generation 2 missing"
    pass
    ;;
  other-chain)
    # Another process (a new chain_phases, so another PID) into the same directory.
    start_phases
    tool "$BIN_DIR/cr_full" --dir "$CK" "$PID"
    expect_refusal "cr_full into another process's chain"
    grep -q "holds the chain of PID" "$WORK/tool.err" || fail "refused for another reason: $(first_line "$WORK/tool.err")"
    [[ $(ls "$CK") == $'gen-000001\ngen-000002\ngen-000003' ]] || fail "the chain changed: $(ls "$CK")"
    [[ $(proc_state "$PID") == S ]] || fail "the new target is not running after the refusal"
    tool "$BIN_DIR/cr_full" --force --dir "$CK" "$PID"
    ((TOOL_RC == 0)) || fail "cr_full --force: $(first_line "$WORK/tool.err")"
    grep -q "moved the chain" "$WORK/tool.err" || fail "cr_full --force did not say where the chain went"
    aside=$(find "$CK" -maxdepth 1 -name 'replaced-*')
    [[ -n $aside && $(ls "$aside") == $'gen-000001\ngen-000002\ngen-000003' ]] ||
      fail "the old chain is not in DIR/replaced-*: $(ls -R "$CK")"
    [[ $(ls -d "$CK"/gen-*) == "$CK/gen-000001" ]] || fail "the new chain: $(ls "$CK")"
    # The same process again: no refusal (its own chain is superseded).
    tool "$BIN_DIR/cr_full" --dir "$CK" "$PID"
    ((TOOL_RC == 0)) || fail "cr_full of the chain's own process: $(first_line "$WORK/tool.err")"
    kill -9 "$PID"
    wait "$PID" 2>/dev/null || true
    READY_ID=$(<"$WORK/ready.saved")
    tool "$BIN_DIR/cr_info" --dir "$aside" --verify
    ((TOOL_RC == 0)) || fail "the chain moved aside does not verify: $(first_line "$WORK/tool.err")"
    expect_restore "$aside" 2
    pass
    ;;
  campaign)
    mv "$CK" "$WORK/pristine"
    mkdir "$WORK/ck" && mv "$WORK/pristine" "$WORK/ck/pristine"
    cp "$WORK/ready.saved" "$WORK/ck/ready"
    t0=$EPOCHREALTIME
    rc=0
    "$BIN_DIR/e2e/chain_campaign" "$BIN_DIR" "$WORK/ck/pristine" "$WORK" \
      "${CAMPAIGN_SEED:-13}" "${CAMPAIGN_COUNT:-1000}" >"$WORK/campaign.out" 2>&1 || rc=$?
    grep '^WRONG' "$WORK/campaign.out" | head -n 20 || true
    ((rc == 0)) || fail "$(tail -n 1 "$WORK/campaign.out")"
    pass "$(tail -n 1 "$WORK/campaign.out"), $(elapsed "$t0") s"
    ;;
  *) fail "unknown case $CASE" ;;
esac
