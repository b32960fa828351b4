#!/usr/bin/env bash
# setup.sh [demo]: installs the Debian packages libckpt needs (only those
# missing: with `demo`, only what building takes; else also what the tests
# run) and builds it into build/. Safe to run again: it only does what is
# left to do.
set -euo pipefail
cd "$(dirname "$0")/.."

# What building needs (the demo needs no more).
PACKAGES=(build-essential cmake pkg-config
  libcli11-dev nlohmann-json3-dev libxxhash-dev libzstd-dev liburing-dev libseccomp-dev libssl-dev
  libgtest-dev googletest util-linux procps iproute2)
# What the tests need besides (`setup.sh` without `demo`).
TEST_PACKAGES=(gfortran
  # tests/e2e/creds.sh own-restore: setcap
  libcap2-bin
  # tests/package: man pages rendered by man -l
  man-db groff-base
  # tests/kernel: build the ckpt_dirty module, boot Debian's kernel under qemu
  # with a busybox initramfs, compare with Debian's CRIU in that guest.
  linux-headers-amd64 qemu-system-x86 busybox-static cpio file jq criu
  # kmod.build.*: the module also builds against Debian 12's newer kernel.
  linux-headers-6.12-amd64
  # bench/overhead: the cr_bench harness and its plots.
  python3 gnuplot-nox
  # bench/workloads/mpi and tests/e2e/mpi.sh (docs/mpi.md)
  openmpi-bin libopenmpi-dev mpich
  # tests/e2e/terminals.sh and tcp_local.sh: real programs on ptys and loopback TCP
  tmux screen redis-server redis-tools
  # tests/e2e/bad_input.sh debugged: a target a debugger holds
  gdb
  # tools/cr_slurm (the SPANK plugin) and tests/slurm: a real Slurm
  libslurm-dev slurmctld slurmd slurm-client munge)
if [[ ${1:-all} != demo ]]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
  # tests/corpus: the real programs its cases run, one line per case there.
  read -r -a CORPUS_PACKAGES <<<"$(sed -e '/^#/d' -e 's/^[^:]*://' tests/corpus/packages.txt | tr '\n' ' ')"
  PACKAGES+=("${CORPUS_PACKAGES[@]}")
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The demo builds only what it runs: the tools it calls and its workload.
TARGETS=()
[[ ${1:-all} != demo ]] || TARGETS=(--target cr_full cr_incr cr_restart cr_info sparse)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" "${TARGETS[@]}" 2>&1 | grep -E "error|warning:" || true
# The build above hides chatter; make sure it really succeeded.
cmake --build build -j "$(nproc)" "${TARGETS[@]}" >/dev/null
echo "setup: built into build/bin"
