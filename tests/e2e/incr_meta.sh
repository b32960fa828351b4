#!/usr/bin/env bash
# incr_meta.sh BIN_DIR: the incremental path against mutated metadata. A real
# chain of a running chain_phases (a full and an incremental, the default
# tracker); then, META_FUZZ_COUNT times (default 90, seeded by the index), a
# copy of the chain whose newest meta.img got one mutation with its checksums
# recomputed (helpers/meta_fuzz.cpp: an unknown tracker name, an unknown
# format version, an unknown record, a changed byte, a cut or grown record...)
# and `cr_incr` of the live process into that copy. Each run must end with
# exit 0 or a one-line refusal (no signal, no hang); an unknown tracker or
# version must be refused; the target must keep running. At the end the
# untouched chain still restores the state it saved.
# Prints PASS/FAIL like run_case.sh; exit 0 pass, 1 fail, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# == 1)) || {
  echo "usage: $0 BIN_DIR" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
PROG=$BIN_DIR/e2e/chain_phases
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-incr-meta.XXXXXX")
install_traps
CK=$WORK/ck
LOGS=("$WORK/prog.err" "$WORK/tool.err" "$WORK/tool.out")
E2E_CASE="incr_meta"

tool() {
  TOOL_RC=0
  timeout 60 "$@" </dev/null >"$WORK/tool.out" 2>"$WORK/tool.err" || TOOL_RC=$?
}

rm -f "$WORK/ready"
coproc PHASES { close_fds && exec "$PROG" "$WORK/ready" 256 2>"$WORK/prog.err"; }
PID=$PHASES_PID
OWN_PIDS+=("$PID")
wait_file "$WORK/ready" "$PID" 30 || fail "chain_phases not ready"
READY_ID=$(<"$WORK/ready")
next_phase() {
  echo n >&"${PHASES[1]}"
  local line
  IFS= read -r -t 30 line <&"${PHASES[0]}" || fail "no progress line from chain_phases"
  [[ $line == "phase $1" ]] || fail "chain_phases said '$line'"
}

tool "$BIN_DIR/cr_full" --dir "$CK" "$PID"
((TOOL_RC == 0)) || fail "cr_full: $(first_line "$WORK/tool.err")"
next_phase 1
tool "$BIN_DIR/cr_incr" --dir "$CK" "$PID"
((TOOL_RC == 0)) || fail "cr_incr: $(first_line "$WORK/tool.err")"

count=${META_FUZZ_COUNT:-90}
accepted=0 refused=0
for ((i = 0; i < count; ++i)); do
  copy=$WORK/copy
  rm -rf "$copy"
  cp -al "$CK" "$copy" # hard links: meta_fuzz unlinks before it writes
  mutation=$("$BIN_DIR/e2e/meta_fuzz" "$copy/gen-000002" "$i") || fail "meta_fuzz $i failed"
  tool "$BIN_DIR/cr_incr" --dir "$copy" "$PID"
  note="mutation $i ($mutation)"
  ((TOOL_RC < 128 && TOOL_RC != 124)) || fail "$note: cr_incr $(describe_status "$TOOL_RC")"
  [[ $(proc_state "$PID") == [SR] ]] || fail "$note: the target is $(proc_state "$PID") after cr_incr"
  if ((TOOL_RC == 0)); then
    [[ ${mutation%% *} == other ]] || fail "$note: cr_incr accepted it"
    accepted=$((accepted + 1))
    continue
  fi
  is_one_line "$WORK/tool.err" || fail "$note: not a one-line error: $(head -c 300 "$WORK/tool.err")"
  case ${mutation%% *} in
    tracker) grep -q "does not know" "$WORK/tool.err" || fail "$note: $(first_line "$WORK/tool.err")" ;;
    version) grep -q "unsupported format version" "$WORK/tool.err" ||
      fail "$note: $(first_line "$WORK/tool.err")" ;;
  esac
  refused=$((refused + 1))
done

# The untouched chain still restores the state it saved.
{ kill -9 "$PID" && wait "$PID"; } 2>/dev/null || true
rc=0
set +e
printf 'q\n' | timeout 60 "$BIN_DIR/cr_restart" --dir "$CK" 2>"$WORK/tool.err" | cat >"$WORK/restored.out"
rc=${PIPESTATUS[1]}
set -e
((rc == 0)) || fail "restore: $(describe_status $rc): $(first_line "$WORK/tool.err")"
[[ $(cat "$WORK/restored.out") == "final phase 1"$'\n'"done $READY_ID" ]] ||
  fail "restore: wrong state: $(head -c 200 "$WORK/restored.out")"
pass "$count mutations: $refused refused in one line, $accepted accepted, target kept running"
