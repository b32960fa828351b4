#!/usr/bin/env bash
# write_patterns.sh BIN_DIR [PATTERN...]: the pagemap-scan tracker's
# incrementals against the pages really written, per write pattern
# (programs/write_patterns.c: band, sparse, stream, sweep, phase, quiet; all
# by default).
#
# For each pattern: cr_full for round 0, cr_incr for rounds 1..9 (adaptive
# tracking as configured, on by default). The program counts, by content,
# the pages of its region that changed in each round (the ground truth).
# Each incremental must save (pages_written + pages_zero) at most that many
# plus 10 % of it plus FLOOR pages (the rest of the process: its stack,
# stdio buffers and the program's own page-hash table, about 40 pages per
# round here); so must the pages it reads in the freeze (saved or found
# unchanged: pages_unchanged), plus the blocks written in the round before,
# but for the stream. As root, the tracker's
# adaptive state after each generation
# must leave no more blocks unprotected ("hot" or being sampled) than the
# region's blocks the program wrote in that round and the one before: a
# block no longer written leaves the hot set within two intervals.
# Prints one table per pattern: round, changed, saved, read, hot.
# Exit 0 pass, 1 fail, 2 usage, 77 skip (no pagemap-scan on this kernel).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# >= 1)) || {
  echo "usage: $0 BIN_DIR [PATTERN...]" >&2
  exit 2
}
BIN_DIR=$(cd "$1" 2>/dev/null && pwd) || {
  echo "FAIL write_patterns: no directory $1"
  exit 1
}
shift
PATTERNS=("$@")
((${#PATTERNS[@]})) || PATTERNS=(band sparse stream sweep phase quiet)
PROG=${E2E_PROG_DIR:-$BIN_DIR/e2e}/write_patterns
ROUNDS=10
FLOOR=${WRITE_PATTERNS_FLOOR:-96}
TOOL_TIMEOUT=60
NAME=write_patterns
E2E_CASE="$NAME"
for tool in cr_full cr_incr cr_check; do
  [[ -x $BIN_DIR/$tool ]] || fail "$BIN_DIR/$tool not built"
done
[[ -x $PROG ]] || fail "test program $PROG not built"
ok=$("$BIN_DIR/cr_check" --json 2>/dev/null | jq -r '.["pagemap-scan"].ok // false') || ok=false
if [[ $ok != true ]]; then
  echo "SKIP $NAME: the pagemap-scan tracker does not work on this kernel"
  exit 77
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-patterns.XXXXXX")
install_traps
LOGS=("$WORK/prog.err" "$WORK/tool.err")
PROBLEMS=()

# Blocks of the region written in round K (the program's pattern, by block:
# kept in step with write_patterns.c).
blocks_written() { # PATTERN K
  local k=$2
  ((k >= 1)) || {
    echo 0
    return
  }
  case $1 in
    band) echo 2 ;;
    stream) echo 1 ;;
    sparse | sweep) echo 16 ;;
    phase) echo 16 ;;
    quiet) ((k <= 4)) && echo 16 || echo 0 ;;
  esac
}

# Blocks the tracker's state leaves not fully protected (hot or sampled).
count_hot() {
  local state
  state=$(ls /run/libckpt/tracking/"$PID"-*.adaptive 2>/dev/null | head -n 1 || true)
  if [[ -z $state ]]; then
    echo 0
    return
  fi
  # Lines after the header: "addr backoff left sampled heavy ...".
  awk 'NR > 1 && ($4 != 0 || $3 > 0) { n++ } END { print n + 0 }' "$state"
}

run_pattern() { # PATTERN
  local pattern=$1 k g rc tool run=$WORK/$1 ckpt=$WORK/$1.ckpt
  mkdir "$run"
  (
    exec </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err"
    close_fds
    exec "$PROG" "$pattern" "$run"
  ) &
  PID=$!
  OWN_PIDS+=("$PID")
  printf '%s\n%5s %8s %8s %8s %4s\n' "pattern $pattern" round changed saved read hot
  for ((k = 0; k < ROUNDS; k++)); do
    g=$((k + 1))
    rc=0
    wait_file "$run/round-$k.ready" "$PID" 30 || rc=$?
    ((rc == 0)) || fail "$pattern: round $k not ready (wait $rc): $(first_line "$WORK/prog.err")"
    if ((k == 0)); then tool=cr_full; else tool=cr_incr; fi
    rc=0
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/$tool" --dir "$ckpt" --tracker pagemap-scan --json "$PID" \
      </dev/null >"$WORK/gen.json" 2>"$WORK/tool.err" || rc=$?
    ((rc == 0)) || fail "$pattern: $tool for round $k $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
    local json changed saved read hot allowed bound
    json=$(grep '^{' "$WORK/gen.json" | tail -n 1)
    saved=$(jq -r '.pages_written + .pages_zero' <<<"$json")
    read=$(jq -r '.pages_written + .pages_zero + (.pages_unchanged // 0)' <<<"$json")
    changed=$(<"$run/round-$k.changed")
    hot=-
    ((EUID == 0)) && hot=$(count_hot)
    printf '%5d %8d %8d %8d %4s\n' "$k" "$changed" "$saved" "$read" "$hot"
    if ((k > 0)); then
      bound=$((changed + changed / 10 + FLOOR))
      ((saved <= bound)) ||
        PROBLEMS+=("$pattern round $k: saved $saved pages, $changed changed (bound $bound)")
      # What the freeze copies, too, plus one round of the blocks written in
      # the round before (a hot block not written since is copied once, then
      # verified by content before the next freeze); except for the stream,
      # whose blocks' samples the parent never read, so they are never found
      # calm before a freeze (they leave the hot set by the writer's counts).
      local read_bound=$((bound + 512 * $(blocks_written "$pattern" $((k - 1)))))
      [[ $pattern == stream ]] || ((read <= read_bound)) ||
        PROBLEMS+=("$pattern round $k: read $read pages, $changed changed (bound $read_bound)")
      if [[ $hot != - ]]; then
        allowed=$(($(blocks_written "$pattern" "$k") + $(blocks_written "$pattern" $((k - 1)))))
        ((allowed > 16)) && allowed=16
        ((hot <= allowed)) ||
          PROBLEMS+=("$pattern round $k: $hot blocks left hot, $allowed written in the last two rounds")
      fi
    fi
    touch "$run/go-$k"
  done
  wait_exit "$PID" 30 || fail "$pattern: the program still running after its last round"
  ((EXIT_STATUS == 0)) || fail "$pattern: the program $(describe_status "$EXIT_STATUS"): $(first_line "$WORK/prog.err")"
}

for p in "${PATTERNS[@]}"; do run_pattern "$p"; done
if ((${#PROBLEMS[@]})); then
  printf '%s\n' "${PROBLEMS[@]}"
  fail "${#PROBLEMS[@]} incrementals over their bound (first: ${PROBLEMS[0]})"
fi
echo "PASS $NAME: ${PATTERNS[*]}: every incremental within changed + 10 % + $FLOOR pages"
