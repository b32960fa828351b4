#!/usr/bin/env bash
# run_guest.sh BUILD_DIR [SUITE...]: kernel-dependent tests inside Debian's own
# kernel under qemu (TCG), where the ckpt_dirty module loads and soft-dirty
# works (the development kernel has neither; see docs/kernel-tests.md).
#
# 1. Finds the kernel the module was built for (BUILD_DIR/kmod/kernel-release)
#    and Debian's image of it: apt-get download + dpkg-deb -x into
#    BUILD_DIR/kernel (kept for later runs; not installed).
# 2. Builds an initramfs: static busybox, the module, the project's tools,
#    test programs, unit tests and benchmarks with the shared libraries ldd
#    names, bash and jq for the end-to-end scripts, Debian's criu, and the
#    kernel modules criu needs.
# 3. Boots it with qemu-system-x86_64 -accel tcg -cpu max (no KVM: the host's
#    cannot run a stock kernel; "max" has XSAVE, which the tools need), 2 CPUs,
#    serial console. The guest's /init runs the
#    suites and prints "KTEST PASS name (detail)" / "KTEST FAIL name: why" /
#    "KTEST INFO ..." lines, then "KTEST END", and powers off.
# 4. Decides here: every expected test must have passed, none failed, and
#    the guest must have reached its end. qemu's own exit status says nothing.
#
# Suites (default: all): module e2e bench criu.
#   module  kmod_test (the module's own tests), the soft-dirty unit tests,
#           cr_check, kernel warnings;
#   e2e     incremental_chain.sh and run_case.sh's incremental modes, once
#           with --tracker=kmod and once with --tracker=soft-dirty;
#   bench   bench_dirty: first-write cost and collect cost per tracker;
#   criu    Debian's criu against cr_full/cr_incr/cr_restart on one workload.
# Environment: KTEST_TIMEOUT (seconds for the guest, default 840), KTEST_CPU
# (qemu -cpu, default max),
# KTEST_KEEP=1 keeps the work directory, KTEST_LOG=FILE copies the console.
# Exit: 0 pass, 1 fail, 2 usage, 77 skip (no module built, or no qemu/kernel
# image obtainable: the reason is printed).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
(($# >= 1)) || {
  echo "usage: $0 BUILD_DIR [module|e2e|bench|criu]..." >&2
  exit 2
}
BUILD=$(cd "$1" && pwd)
shift
SUITES=("$@")
((${#SUITES[@]})) || SUITES=(module e2e bench criu)
for s in "${SUITES[@]}"; do
  case $s in module | e2e | bench | criu) ;; *) echo "unknown suite $s" >&2 && exit 2 ;; esac
done
skip() {
  echo "SKIP kernel tests: $*"
  exit 77
}
fail() {
  echo "FAIL kernel tests: $*"
  exit 1
}

KO=$BUILD/kmod/ckpt_dirty.ko
[[ -f $KO && -f $BUILD/kmod/kernel-release ]] ||
  skip "the ckpt_dirty module was not built (no linux-headers-amd64 at configure time)"
KREL=$(<"$BUILD/kmod/kernel-release")
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
BUSYBOX=$(command -v busybox || true)
[[ -n $BUSYBOX ]] && file -L "$BUSYBOX" | grep -q "statically linked" ||
  skip "no static busybox (apt-get install busybox-static)"

# ---- Debian's kernel image for KREL ----
KCACHE=${CKPT_KERNEL_CACHE:-$BUILD/kernel}
KROOT=$KCACHE/linux-image-$KREL
if [[ ! -f $KROOT/boot/vmlinuz-$KREL ]]; then
  mkdir -p "$KCACHE"
  tmp=$(mktemp -d "$KCACHE/dl.XXXXXX")
  # (Package lists may be missing or stale on a machine set up long ago.)
  (cd "$tmp" && apt-get download "linux-image-$KREL" >/dev/null 2>"$tmp/err") ||
    { apt-get update -qq >/dev/null 2>&1 || true; (cd "$tmp" && apt-get download "linux-image-$KREL" >/dev/null 2>"$tmp/err"); } ||
    skip "cannot download linux-image-$KREL: $(grep -v '^W:' "$tmp/err" | head -n 1)"
  dpkg-deb -x "$tmp"/linux-image-*.deb "$tmp/x" || fail "cannot unpack linux-image-$KREL"
  rm -rf "$KROOT"
  mv "$tmp/x" "$KROOT"
  rm -rf "$tmp"
fi
VMLINUZ=$KROOT/boot/vmlinuz-$KREL

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-ktest.XXXXXX")
cleanup() {
  if [[ ${KTEST_KEEP:-0} == 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,run,etc,root,ckpt/bin/e2e,ckpt/tests/e2e,ckpt/kmods}

# ---- the initramfs ----
# add_file SRC [DEST]: copies SRC to the same path (or DEST) inside ROOT,
# stripped of debug sections when it is an ELF file.
add_file() {
  local src=$1 dest=${2:-$1}
  mkdir -p "$ROOT$(dirname "$dest")"
  if file -L "$src" | grep -q ELF; then
    strip --strip-debug -o "$ROOT$dest" "$src" 2>/dev/null || cp -L "$src" "$ROOT$dest"
  else
    cp -L "$src" "$ROOT$dest"
  fi
  chmod --reference="$src" "$ROOT$dest"
}
# add_elf SRC [DEST]: add_file plus the shared libraries ldd names.
declare -A LIBS_DONE
add_elf() {
  local src=$1 lib
  add_file "$@"
  while read -r lib; do
    [[ -n $lib && -z ${LIBS_DONE[$lib]:-} ]] || continue
    LIBS_DONE[$lib]=1
    add_file "$lib"
    # The path the loader asks for may be a symlink (/lib64/ld-linux...).
  done < <(ldd "$src" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }')
}

cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [[ -e $ROOT/bin/$applet || $applet == busybox ]] || ln -s busybox "$ROOT/bin/$applet"
done
# GNU tools the end-to-end scripts rely on (busybox has all, but options differ).
for t in bash jq timeout mktemp stat od cmp find seq wc tr head tail sed grep awk cat cp rm \
  ls mkdir touch dd env sleep file nproc; do
  p=$(command -v "$t" || true)
  [[ -n $p ]] || continue
  rm -f "$ROOT/bin/$t"
  add_elf "$(readlink -f "$p")" "/bin/$t"
done
[[ -x $ROOT/bin/bash && -x $ROOT/bin/jq ]] || skip "bash or jq missing on this machine (apt-get install jq)"
ln -sf bash "$ROOT/bin/sh.bash"
mkdir -p "$ROOT/usr/bin" "$ROOT/lib64"
ln -sf /bin/env "$ROOT/usr/bin/env"
# libmagic's database, for `file` (used by nothing in the guest but harmless).
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"

cp "$KO" "$ROOT/ckpt/ckpt_dirty.ko"
shopt -s nullglob
for tool in "$BUILD"/bin/cr_*; do add_elf "$tool" "/ckpt/bin/${tool##*/}"; done
for prog in "$BUILD"/bin/e2e/*; do add_elf "$prog" "/ckpt/bin/e2e/${prog##*/}"; done
shopt -u nullglob
cp "$SRC"/tests/e2e/*.sh "$ROOT/ckpt/tests/e2e/"
mkdir -p "$ROOT/ckpt/tests/kernel"
cp "$HERE/criu_compare.sh" "$ROOT/ckpt/tests/kernel/"
for f in kmod_test bench_dirty mem_workload; do
  [[ -x $BUILD/bin/kernel/$f ]] || fail "$BUILD/bin/kernel/$f not built"
  add_elf "$BUILD/bin/kernel/$f" "/ckpt/bin/$f"
done
[[ -x $BUILD/bin/unit_tests ]] || fail "$BUILD/bin/unit_tests not built"
add_elf "$BUILD/bin/unit_tests" /ckpt/bin/unit_tests
add_file "$HERE/guest_init.sh" /init
chmod +x "$ROOT/init"
printf '%s\n' "${SUITES[@]}" >"$ROOT/ckpt/suites"
echo "$KREL" >"$ROOT/ckpt/kernel-release"

# criu (Debian's 3.17) and the kernel modules it asks for.
if [[ " ${SUITES[*]} " == *" criu "* ]]; then
  CRIU=$(command -v criu || true)
  [[ -n $CRIU ]] || fail "criu missing (scripts/setup.sh installs it)"
  add_elf "$(readlink -f "$CRIU")" /sbin/criu
fi
# Kernel modules the guest's /init loads first, in load order (the package has
# no modules.dep): nftables for CRIU's kernel-feature probe; the sock_diag
# modules for CRIU's socket dumping and for ours (UNIX sockets are read
# through unix_diag, TIME-WAIT sockets destroyed through inet_diag; a stock
# kernel loads them on demand from /lib/modules, which the initramfs lacks).
if [[ " ${SUITES[*]} " == *" criu "* || " ${SUITES[*]} " == *" e2e "* ]]; then
  for m in crc32c_generic libcrc32c nfnetlink nf_tables netlink_diag unix_diag inet_diag tcp_diag udp_diag \
    raw_diag af_packet_diag tun veth; do
    ko=$(find "$KROOT/lib/modules/$KREL" -name "$m.ko*" | head -n 1)
    [[ -n $ko ]] || continue
    cp "$ko" "$ROOT/ckpt/kmods/"
    echo "${ko##*/}" >>"$ROOT/ckpt/kmods/order"
  done
fi

(cd "$ROOT" && find . | cpio -o -H newc --quiet) >"$WORK/initrd.cpio"
echo "initramfs: $(du -m "$WORK/initrd.cpio" | cut -f1) MiB, kernel $KREL"

# ---- boot ----
LOG=$WORK/console.log
rc=0
timeout "${KTEST_TIMEOUT:-840}" qemu-system-x86_64 -accel tcg -cpu "${KTEST_CPU:-max}" -smp 2 -m 3072 -nographic \
  -no-reboot -kernel "$VMLINUZ" -initrd "$WORK/initrd.cpio" \
  -append "console=ttyS0 panic=-1 loglevel=4 transparent_hugepage=always" \
  </dev/null >"$LOG" 2>&1 || rc=$?
[[ -n ${KTEST_LOG:-} ]] && cp "$LOG" "$KTEST_LOG"
tr -d '\r' <"$LOG" | { grep -a '^KTEST ' || true; } | sed 's/^KTEST //'
((rc != 124)) || echo "(qemu still running after ${KTEST_TIMEOUT:-840}s: killed)"
((rc == 0 || rc == 124)) || echo "(qemu exited with status $rc)"

# ---- verdict ----
mapfile -t passed < <(tr -d '\r' <"$LOG" | grep -a '^KTEST PASS ' | awk '{ print $3 }')
mapfile -t failed < <(tr -d '\r' <"$LOG" | grep -a '^KTEST FAIL ' | awk '{ print $3 }' | tr -d ':')
expect=()
for s in "${SUITES[@]}"; do
  case $s in
    module)
      expect+=(kmod.version kmod.access kmod.permission kmod.random_sets kmod.kernel_writes kmod.madv_dontneed
        kmod.tlb_other_cpu kmod.thp_write kmod.thp_quiet kmod.thp_split kmod.thp_after_split kmod.fork
        kmod.fork_cow kmod.token kmod.reserved kmod.exec kmod.exit kmod.unload kmod.trusted_group unit.soft_dirty unit.kmod_tracker cr_check.kmod
        cr_check.soft-dirty kernel.no_warnings) ;;
    e2e)
      for t in kmod soft-dirty; do
        expect+=("e2e.incremental_chain.$t" "e2e.heap_pattern.new-chains.$t" "e2e.job.incremental.$t"
          "e2e.job.tcp.incremental.$t" "e2e.job.unix.incremental.$t" "e2e.job.sysv.incremental.$t"
          "e2e.job.udp.incremental.$t")
        for c in heap_pattern cxx_containers; do
          expect+=("e2e.$c.incremental.$t" "e2e.$c.incremental-after-restore.$t")
        done
      done ;;
    bench) expect+=(bench.dirty) ;;
    criu) expect+=(criu.compare) ;;
  esac
done
missing=()
for e in "${expect[@]}"; do
  [[ " ${passed[*]} " == *" $e "* || " ${failed[*]} " == *" $e "* ]] || missing+=("$e")
done
grep -aq '^KTEST END' <(tr -d '\r' <"$LOG") || {
  echo "--- last console lines ---"
  tr -d '\r' <"$LOG" | tail -n 30
  fail "the guest did not reach its end (crash, hang or timeout); ${#passed[@]} passed before"
}
((${#failed[@]} == 0)) || fail "${#failed[@]} failed: ${failed[*]}"
((${#missing[@]} == 0)) || fail "no result from: ${missing[*]}"
echo "PASS kernel tests: ${#passed[@]} passed in the $KREL guest (${SUITES[*]})"
