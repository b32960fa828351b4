#!/usr/bin/env bash
# compress.sh BIN_DIR MODE: compressed page content (cr_full/cr_incr --compress,
# docs/format.md "Compressed runs").
#
# Modes:
#   chain    heap_pattern (32 MiB, E2E_COMPRESSIBLE=1: pages that compress)
#            through run_case.sh's "incremental" flow with --compress: a full
#            and two incrementals, kill -9, restore; the restored program
#            checks every byte of its memory and must exit 0. Then the same
#            program checkpointed here with --compress, and the generation
#            must really hold compressed runs (addr.img header flag bit 1).
#   corrupt  a full --compress --kill of heap_pattern; one byte inside a
#            compressed run's frame flipped: cr_info --verify and cr_restart
#            must refuse with one line naming the checksum mismatch, and
#            exit non-zero; flipped back, cr_restart brings the program back
#            and it finishes with exit 0 (nothing was lost). A bad level
#            (--compress=99, --compress=-1) is refused with one line and
#            leaves the target running. (--compress with --live: live.sh.)
# Prints "PASS compress MODE ..." or "FAIL compress MODE: reason".
# Exit 0 pass, 1 fail, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

(($# == 2)) && [[ $2 == chain || $2 == corrupt ]] || {
  echo "usage: $0 BIN_DIR chain|corrupt" >&2
  exit 2
}
BIN_DIR=$(cd "$1" && pwd)
MODE=$2
PROG=${E2E_PROG_DIR:-$BIN_DIR/e2e}/heap_pattern
E2E_CASE="compress $MODE"
TOOL_TIMEOUT=60

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-e2e-compress.XXXXXX")
install_traps
CKPT=$WORK/ckpt
LOGS=("$WORK/prog.err" "$WORK/tool.err")
export E2E_COMPRESSIBLE=1

# u32/u64 at byte OFFSET of FILE, in decimal.
u32_at() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }
u64_at() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }

# start_program STEPS MIB: heap_pattern (MIB MiB, STEPS steps of 10 ms) and waits until it is ready.
start_program() {
  (close_fds && exec "$PROG" "$WORK/ready" "$2" "$1" </dev/null >"$WORK/prog.out" 2>"$WORK/prog.err") &
  PID=$!
  OWN_PIDS+=("$PID")
  wait_file "$WORK/ready" "$PID" 30 || fail "heap_pattern never became ready"
}

# The file offset in GEN/pages.img of the middle of the first compressed run
# of GEN, or nothing. addr.img: 64-byte header, 40-byte records (flags at +12,
# content_offset at +16, stored pages in flags bits 16-31).
compressed_run_byte() {
  local addr=$1/addr.img n i rec flags
  (($(u64_at "$addr" 48) & 2)) || return 0
  n=$(u64_at "$addr" 40)
  for ((i = 0; i < n; i++)); do
    rec=$((64 + 40 * i))
    flags=$(u32_at "$addr" $((rec + 12)))
    if ((flags & 2)); then
      echo $((4096 + $(u64_at "$addr" $((rec + 16))) + (flags >> 16) * 4096 / 2))
      return 0
    fi
  done
}

flip_byte() {
  local b
  b=$(od -An -t u1 -j "$2" -N 1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

case $MODE in
  chain)
    rc=0
    E2E_CKPT_ARGS=--compress E2E_HEAP_ARGS="32 100" bash "$HERE/run_case.sh" "$BIN_DIR" heap_pattern incremental \
      >"$WORK/tool.err" 2>&1 || rc=$?
    ((rc == 0)) || fail "full + incrementals with --compress, restored: $(tail -n 1 "$WORK/tool.err")"
    start_program 1000 32
    "$BIN_DIR/cr_full" --dir "$CKPT" --compress "$PID" 2>"$WORK/tool.err" || fail "cr_full --compress: $(first_line "$WORK/tool.err")"
    "$BIN_DIR/cr_incr" --dir "$CKPT" --compress=3 "$PID" 2>"$WORK/tool.err" || fail "cr_incr --compress=3: $(first_line "$WORK/tool.err")"
    for g in "$CKPT"/gen-000001 "$CKPT"/gen-000002; do
      [[ -n $(compressed_run_byte "$g") ]] || fail "${g##*/} holds no compressed run"
    done
    full=$(stat -c %s "$CKPT/gen-000001/pages.img")
    ((full < 20 * 1048576)) || fail "gen-000001/pages.img is $full bytes for 32 MiB of 1-byte-in-8 words"
    "$BIN_DIR/cr_info" --dir "$CKPT" --verify >/dev/null 2>"$WORK/tool.err" || fail "cr_info --verify: $(first_line "$WORK/tool.err")"
    pass "restored byte for byte; pages.img of the full $((full >> 20)) MiB for 32 MiB"
    ;;

  corrupt)
    start_program 100 32
    for bad in --compress=99 --compress=-1; do
      rc=0
      # shellcheck disable=SC2086 # two words on purpose
      "$BIN_DIR/cr_full" --dir "$WORK/bad" $bad "$PID" 2>"$WORK/tool.err" || rc=$?
      ((rc != 0)) || fail "cr_full $bad succeeded"
      is_one_line "$WORK/tool.err" || fail "cr_full $bad: not one line on stderr"
      [[ $(first_line "$WORK/tool.err") == *compress* ]] || fail "cr_full $bad: no cause naming --compress: $(first_line "$WORK/tool.err")"
      st=$(proc_state "$PID")
      [[ $st != T && $st != t && $st != Z && $st != - ]] || fail "target not running after cr_full $bad (state $st)"
    done
    "$BIN_DIR/cr_full" --dir "$CKPT" --compress --kill "$PID" 2>"$WORK/tool.err" || fail "cr_full --compress --kill: $(first_line "$WORK/tool.err")"
    wait_exit "$PID" 10 || fail "program still running after cr_full --kill"
    GEN=$CKPT/gen-000001
    at=$(compressed_run_byte "$GEN")
    [[ -n $at ]] || fail "the full holds no compressed run"
    flip_byte "$GEN/pages.img" "$at"
    rc=0
    "$BIN_DIR/cr_info" --dir "$CKPT" --verify >/dev/null 2>"$WORK/tool.err" || rc=$?
    ((rc != 0)) || fail "cr_info --verify accepted a damaged compressed run"
    rc=0
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >/dev/null 2>"$WORK/tool.err" || rc=$?
    ((rc != 0)) || fail "cr_restart restored a damaged compressed run"
    is_one_line "$WORK/tool.err" || fail "cr_restart: not one line on stderr: $(head -c 300 "$WORK/tool.err")"
    grep -q "checksum mismatch" "$WORK/tool.err" || fail "cr_restart's refusal names no checksum: $(first_line "$WORK/tool.err")"
    why=$(first_line "$WORK/tool.err")
    flip_byte "$GEN/pages.img" "$at"
    rc=0
    timeout "$TOOL_TIMEOUT" "$BIN_DIR/cr_restart" --dir "$CKPT" </dev/null >"$WORK/prog.out" 2>"$WORK/tool.err" || rc=$?
    ((rc == 0)) || fail "cr_restart of the repaired checkpoint $(describe_status "$rc"): $(first_line "$WORK/tool.err")"
    pass "refused: $why"
    ;;
esac
