#!/usr/bin/env bash
# huge_pages.sh BIN_DIR: the pagemap-scan tracker keeps transparent huge pages
# huge and misses no write while blocks flip between huge and small.
#
# The program (programs/huge_flip.c) has four 2 MiB blocks in huge pages
# (MADV_HUGEPAGE + MADV_COLLAPSE) that it writes, splits, collapses, partly
# unmaps and drops pages of over rounds 0..13, keeping a copy of its memory
# and its huge-page count per round. The driver takes cr_full for round 0 and
# cr_incr for the others (pagemap-scan). Then it checks that block 0, which
# the program rewrites whole every round, was still huge at the last round
# (with huge pages write-protected as before, the first write after the
# full split it), and restores every generation: the restored process
# compares its memory byte for byte with its copy of that round ("verified
# round k").
# Prints "PASS huge_pages ..." or "FAIL huge_pages: reason".
# Exit 0 pass, 1 fail, 2 usage, 77 skip (no pagemap-scan, or no huge pages).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# == 1)) || {
  echo "usage: $0 BIN_DIR" >&2
  exit 2
}
BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
  echo "FAIL adaptive_tracking: no directory $1"
  exit 1
}
PROG=${E2E_PROG_DIR:-$BIN_DIR/e2e}/huge_flip
ROUNDS=14
TOOL_TIMEOUT=60
NAME=huge_pages
E2E_CASE="$NAME" # for pass, fail and skip (lib.sh)
for tool in cr_full cr_incr cr_restart cr_check; do
  [[ -x $BIN_DIR/$tool ]] || fail "$BIN_DIR/$tool not built"
done
[[ -x $PROG ]] || fail "test program $PROG not built"
ok=$("$BIN_DIR/cr_check" --json 2>/dev/null | jq -r '.["pagemap-scan"].ok // false') || ok=false
if [[ $ok != true ]]; then
  echo "SKIP $NAME: the pagemap-scan tracker does not work on this kernel"
  exit 77
fi
unset LIBCKPT_ADAPTIVE_TRACKING LIBCKPT_KEEP_HUGE_PAGES

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-huge.XXXXXX")
install_traps
RUN=$WORK/run
CKPT=$WORK/ckpt
mkdir "$RUN"
LOGS=("$WORK/prog.err" "$WORK/tool.err")

exec {OUT_FD}> >(exec cat >"$WORK/prog.out")
exec {ERR_FD}> >(exec cat >"$WORK/prog.err")
(
  exec </dev/null 1>&"$OUT_FD" 2>&"$ERR_FD"
  close_fds
  exec "$PROG" "$RUN"
) &
PID=$!
OWN_PIDS+=("$PID")
exec {OUT_FD}>&- {ERR_FD}>&-

declare -a WRITTEN THP
for ((k = 0; k < ROUNDS; k++)); do
  g=$((k + 1))
  rc=0
  wait_file "$RUN/round-$k.ready" "$PID" 30 || rc=$?
  ((rc == 0)) || fail "round $k not ready (wait $rc): $(first_line "$WORK/prog.err")"
  read -r READY_ID <"$RUN/round-$k.ready"
  if ((k == 0)); then tool=cr_full; else tool=cr_incr; fi
  rc=0
  timeout "$TOOL_TIMEOUT" "$BIN_DIR/$tool" --dir "$CKPT" --tracker pagemap-scan --json "$PID" \
    </dev/null >"$WORK/gen-$g.json" 2>"$WORK/tool.err" || rc=$?
  ((rc == 0)) || fail "$tool for round $k $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
  WRITTEN[g]=$(grep '^{' "$WORK/gen-$g.json" | tail -n 1 | jq -r '.pages_written + .pages_zero')
  THP[g]=$(<"$RUN/round-$k.thp")
  touch "$RUN/go-$k"
done
wait_exit "$PID" 30 || fail "the original still running after its last round"
((EXIT_STATUS == 0)) || fail "the original $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"

printf '%4s %8s %8s\n' gen saved "THP KiB"
for ((g = 1; g <= ROUNDS; g++)); do printf '%4d %8s %8s\n' "$g" "${WRITTEN[g]}" "${THP[g]}"; done
if ((THP[1] < 8192)); then
  echo "SKIP $NAME: the program got no huge pages (MADV_COLLAPSE refused?): ${THP[1]} KiB"
  exit 77
fi
# Block 0 is rewritten whole every round: it must still be huge at the end.
# (Checked after the restores, so that a run that splits them still shows
# whether it lost a write.)
SPLIT=""
((THP[ROUNDS] >= 2048)) || SPLIT="huge pages were split: ${THP[ROUNDS]} KiB huge at the last round"

BAD=()
for ((g = 1; g <= ROUNDS; g++)); do
  k=$((g - 1))
  [[ ! -e /proc/$PID ]] || fail "pid $PID in use before the restore of generation $g"
  touch "$RUN/verify-$k"
  # stdout and stderr on pipes, as the original's were (the program checks).
  {
    set +e
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$CKPT" --generation "$g" </dev/null |
      cat >"$WORK/restart-$g.out"
    echo "${PIPESTATUS[0]}" >"$WORK/restart-$g.rc"
  } 2>&1 | cat >"$WORK/restart-$g.err" || true
  rc=$(<"$WORK/restart-$g.rc")
  rm -f "$RUN/verify-$k"
  if ((rc == 0)) && grep -q "^verified round $k\$" "$WORK/restart-$g.out" &&
    [[ $(grep '^done ' "$WORK/restart-$g.out" | tail -n 1) == "done $READY_ID" ]]; then
    echo "generation $g: verified round $k"
  else
    echo "generation $g: FAILED ($(describe_status "$rc")): $(first_line "$WORK/restart-$g.err")"
    BAD+=("$g")
  fi
done
((${#BAD[@]} == 0)) || fail "generations ${BAD[*]} did not restore correctly${SPLIT:+; $SPLIT}"
[[ -z $SPLIT ]] || fail "$SPLIT"
echo "PASS $NAME: $ROUNDS generations restored byte for byte; ${THP[ROUNDS]} KiB still huge at the end"
