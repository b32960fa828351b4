#!/usr/bin/env bash
# run_fuzz.sh BIN_DIR TARGET SECONDS|runs=N: runs one libFuzzer target of
# BIN_DIR/fuzz for SECONDS (or N executions) from seeds made here: a real
# small checkpoint (a full and an incremental of `sleep`, taken with
# BIN_DIR's cr_full/cr_incr), copies of this process's /proc files, and the
# frame seeds fuzz_frames writes itself. Prints "FUZZ TARGET: N executions,
# 0 crashes" and exits 0, or shows the crash and exits 1. FUZZ_TIMEOUT: the
# seconds one input may take (default 10; long runs on a loaded machine
# raise it, since a slow input there is the load, and a hang still shows).
set -euo pipefail
(($# == 3)) || {
  echo "usage: $0 BIN_DIR TARGET SECONDS|runs=N" >&2
  exit 2
}
BIN=$(cd "$1" && pwd)
TARGET=$2
BUDGET=$3
TOOLS=${CKPT_FUZZ_TOOLS:-$BIN}  # where cr_full and cr_incr are (default: BIN_DIR)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-fuzz-$TARGET.XXXXXX")
# The image targets write a file per input: on a tmpfs that costs nothing
# (fuzz_image_pages ran 84 inputs a second with this on a disk, 4,000 on
# /dev/shm).
SCRATCH_BASE=$WORK
[[ -d /dev/shm && -w /dev/shm ]] && SCRATCH_BASE=/dev/shm
SCRATCH=$(mktemp -d "$SCRATCH_BASE/ckpt-fuzz-scratch.XXXXXX")
SLEEPER=
cleanup() {
  [[ -n $SLEEPER ]] && kill -9 "$SLEEPER" 2>/dev/null || true
  rm -rf "$WORK" "$SCRATCH"
}
trap cleanup EXIT
CORPUS=$WORK/corpus
mkdir -p "$CORPUS"
export CKPT_FUZZ_SCRATCH=$SCRATCH

checkpoint() { # a full and an incremental of a small real process in $WORK/ck
  # fds >= 3 closed first: the tools refuse pipes shared with other processes.
  (for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    ((fd < 3)) || eval "exec $fd>&-"
  done
  exec sleep 600 </dev/null >/dev/null 2>&1) &
  SLEEPER=$!
  sleep 0.1
  # --compress: gen-000001 holds zstd runs (the image targets decode them), gen-000002 plain ones.
  "$TOOLS/cr_full" --dir "$WORK/ck" --tracker hash --compress "$SLEEPER" >/dev/null
  "$TOOLS/cr_incr" --dir "$WORK/ck" "$SLEEPER" >/dev/null
  { kill -9 "$SLEEPER" && wait "$SLEEPER"; } 2>/dev/null || true
  SLEEPER=
  export CKPT_FUZZ_BASE=$WORK/ck
}

case $TARGET in
  fuzz_image_pages | fuzz_image_addr | fuzz_image_meta)
    checkpoint
    f=${TARGET#fuzz_image_}.img
    cp "$WORK/ck/gen-000001/$f" "$CORPUS/gen1"
    cp "$WORK/ck/gen-000002/$f" "$CORPUS/gen2"
    ;;
  fuzz_chain)
    checkpoint
    cp "$WORK/ck/gen-000002/meta.img" "$CORPUS/gen2"
    ;;
  fuzz_meta_records)
    checkpoint
    for g in 1 2; do tail -c +65 "$WORK/ck/gen-00000$g/meta.img" >"$CORPUS/records$g"; done
    ;;
  fuzz_proc)
    i=0
    for f in maps status limits; do
      { printf "\\x0$i"; cat "/proc/self/$f"; } >"$CORPUS/$f"
      i=$((i + 1))
    done
    ;;
  fuzz_frames)
    export CKPT_FUZZ_SEEDS=$CORPUS
    ;;
  *)
    echo "unknown target $TARGET" >&2
    exit 2
    ;;
esac

if [[ $BUDGET == runs=* ]]; then limit=(-runs="${BUDGET#runs=}"); else limit=(-max_total_time="$BUDGET"); fi
rc=0
(cd "$WORK" && "$BIN/fuzz/$TARGET" "${limit[@]}" -timeout="${FUZZ_TIMEOUT:-10}" -print_final_stats=1 \
  -artifact_prefix="$WORK/" "$CORPUS" >"$WORK/log" 2>&1) || rc=$?
runs=$(awk '/stat::number_of_executed_units:/ { print $2 }' "$WORK/log")
if ((rc != 0)); then
  echo "FUZZ $TARGET: crashed (exit $rc) after ${runs:-?} executions"
  grep -A30 -m1 'ERROR:\|runtime error\|deadly signal' "$WORK/log" || tail -n 40 "$WORK/log"
  for a in "$WORK"/crash-* "$WORK"/leak-* "$WORK"/timeout-*; do
    [[ -e $a ]] && echo "input (base64): $(head -c 2048 "$a" | base64 -w0)"
  done
  exit 1
fi
echo "FUZZ $TARGET: ${runs:-?} executions, 0 crashes, $(awk '/stat::peak_rss_mb:/ { print $2 }' "$WORK/log") MB peak"
