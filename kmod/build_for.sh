#!/usr/bin/env bash
# build_for.sh KDIR: builds the module against the kernel headers in KDIR, in
# a scratch directory (Kbuild writes next to the sources), and fails on any
# compiler warning or unresolved symbol. ctest runs it for every installed
# /usr/src/linux-headers-*-amd64 other than the one the build uses.
set -euo pipefail
KDIR=$1
SRC=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-kmod-build.XXXXXX")
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/include/uapi"
cp "$SRC/ckpt_dirty.c" "$SRC/Kbuild" "$out/"
cp "$SRC/include/uapi/ckpt_dirty.h" "$out/include/uapi/"
if ! make -C "$KDIR" M="$out" modules >"$out/log" 2>&1 || grep -E "warning:|WARNING:" "$out/log"; then
  tail -n 20 "$out/log"
  echo "FAIL ckpt_dirty does not build cleanly against $KDIR"
  exit 1
fi
echo "PASS ckpt_dirty builds against $KDIR ($(modinfo -F vermagic "$out/ckpt_dirty.ko"))"
