# round_chain.sh: sourced by drivers whose program works in rounds and keeps
# a copy of its memory per round (programs/hot_cold.c, programs/huge_flip.c):
# a chain of ROUNDS generations (cr_full for round 0, cr_incr for the
# others, pagemap-scan), then every generation restored and the restored
# process comparing its memory byte for byte with its copy of that round.
# Needs lib.sh.

# round_chain_setup NAME PROGRAM ROUNDS "$@": the driver's arguments (BIN_DIR)
# checked, BIN_DIR, PROG, NAME, ROUNDS and TOOL_TIMEOUT set, the tools and
# the program present; a skip (77) where the pagemap-scan tracker does not
# work.
round_chain_setup() {
  NAME=$1 ROUNDS=$3
  local program=$2
  shift 3
  (($# == 1)) || {
    echo "usage: $0 BIN_DIR" >&2
    exit 2
  }
  BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
    echo "FAIL $NAME: no directory $1"
    exit 1
  }
  PROG=${E2E_PROG_DIR:-$BIN_DIR/e2e}/$program
  TOOL_TIMEOUT=60
  E2E_CASE="$NAME" # for pass, fail and skip (lib.sh)
  local tool ok
  for tool in cr_full cr_incr cr_restart cr_check; do
    [[ -x $BIN_DIR/$tool ]] || fail "$BIN_DIR/$tool not built"
  done
  [[ -x $PROG ]] || fail "test program $PROG not built"
  ok=$("$BIN_DIR/cr_check" --json 2>/dev/null | jq -r '.["pagemap-scan"].ok // false') || ok=false
  if [[ $ok != true ]]; then
    echo "SKIP $NAME: the pagemap-scan tracker does not work on this kernel"
    exit 77
  fi
}

# round_chain_start TAG: the work directory and the program, running.
round_chain_start() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-$1.XXXXXX")
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
}

# round_chain_take HOOK: one generation per round; WRITTEN[g] = pages it
# saved. HOOK K G runs after generation G (round K) is taken, before the
# program goes on. The program must then end by itself with exit 0.
round_chain_take() {
  local hook=$1 k g rc tool
  declare -g -a WRITTEN
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
    "$hook" "$k" "$g"
    touch "$RUN/go-$k"
  done
  wait_exit "$PID" 30 || fail "the original still running after its last round"
  ((EXIT_STATUS == 0)) || fail "the original $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
}

# round_chain_restore_all: restores every generation; BAD = those that did
# not come back as their round.
round_chain_restore_all() {
  local g k rc
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
}
