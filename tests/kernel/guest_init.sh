#!/bin/sh
# /init of the test guest (tests/kernel/run_guest.sh): runs the suites named
# in /ckpt/suites, prints KTEST lines on the console and powers off.
export PATH=/bin:/sbin:/usr/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t devpts -o ptmxmode=0666 devpts /dev/pts
mount -t tmpfs tmp /tmp
mount -t tmpfs shm /dev/shm
ip link set lo up 2>/dev/null || ifconfig lo up
hostname ktest
# No background page moving in the tracked processes: proactive compaction
# and khugepaged migrate or collapse pages, which the module conservatively
# reports as written (MMU notifier events). Correct, but it makes the "a quiet
# round is small" checks depend on the host's load.
echo 0 >/proc/sys/vm/compaction_proactiveness
echo 86400000 >/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs 2>/dev/null
cd /tmp || exit 1

say() { echo "KTEST $*"; }
SUITES=" $(tr '\n' ' ' </ckpt/suites) "
has() { case $SUITES in *" $1 "*) return 0 ;; esac; return 1; }
# result NAME LOGFILE RC: PASS/FAIL from a script's exit status and last line.
result() {
  last=$(grep -a -E '^(PASS|FAIL|SKIP)' "$2" | tail -n 1)
  if [ "$3" = 0 ]; then say "PASS $1 (${last#PASS })"; else
    say "FAIL $1: exit $3: ${last:-$(tail -n 1 "$2")}"
    sed 's/^/    /' "$2" | tail -n 25
  fi
}
say "INFO kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { print $2 / 1024 " MiB" }' /proc/meminfo)"

# The modules run_guest.sh copied (sock_diag and nftables), then ours.
[ -f /ckpt/kmods/order ] && while read -r m; do insmod "/ckpt/kmods/$m" 2>/dev/null; done </ckpt/kmods/order
if insmod /ckpt/ckpt_dirty.ko; then say "INFO ckpt_dirty loaded"; else say "FAIL kmod.load: insmod failed"; fi

if has module; then
  /ckpt/bin/kmod_test /ckpt/ckpt_dirty.ko
  # The unit tests that skip on the development kernel.
  for u in soft_dirty:SoftDirty kmod_tracker:KmodTracker; do
    rc=0
    /ckpt/bin/unit_tests --gtest_filter="${u#*:}*" >/tmp/unit.log 2>&1 || rc=$?
    if [ $rc = 0 ] && grep -q '^\[  PASSED  \]' /tmp/unit.log && ! grep -q '^\[  SKIPPED \]' /tmp/unit.log; then
      say "PASS unit.${u%%:*} ($(grep -c '^\[       OK \]' /tmp/unit.log) tests)"
    else
      say "FAIL unit.${u%%:*}: exit $rc"
      tail -n 20 /tmp/unit.log | sed 's/^/    /'
    fi
  done
  /ckpt/bin/cr_check --json >/tmp/check.json 2>&1
  for t in kmod soft-dirty; do
    ok=$(jq -r --arg t "$t" '.[$t].ok' /tmp/check.json)
    detail=$(jq -r --arg t "$t" '.[$t].detail' /tmp/check.json)
    if [ "$ok" = true ]; then say "PASS cr_check.$t ($detail)"; else say "FAIL cr_check.$t: $detail"; fi
  done
fi

if has e2e; then
  # The two chains run side by side (one per vCPU): each is a long sequence
  # of short steps, and TCG is slow.
  for t in kmod soft-dirty; do
    (E2E_TRACKER=$t bash /ckpt/tests/e2e/incremental_chain.sh /ckpt/bin >/tmp/chain-$t.log 2>&1
      echo $? >/tmp/chain-$t.rc) &
  done
  wait
  for t in kmod soft-dirty; do
    rc=$(cat /tmp/chain-$t.rc)
    result "e2e.incremental_chain.$t" /tmp/chain-$t.log "$rc"
    [ "$rc" = 0 ] && grep -a -E '^ +[0-9]+ (full|incremental) ' /tmp/chain-$t.log | sed "s/^/KTEST INFO chain $t: /"
  done
  for t in kmod soft-dirty; do
    for c in heap_pattern cxx_containers; do
      for m in incremental incremental-after-restore; do
        rc=0
        E2E_TRACKER=$t E2E_HEAP_ARGS="32 600" bash /ckpt/tests/e2e/run_case.sh /ckpt/bin $c $m >/tmp/case.log 2>&1 || rc=$?
        result "e2e.$c.$m.$t" /tmp/case.log $rc
      done
    done
    # Chains of one process in three directories: the ledger (soft-dirty)
    # and the token (kmod) make the oldest chain's next incremental save all.
    rc=0
    E2E_TRACKER=$t E2E_HEAP_ARGS="32 600" bash /ckpt/tests/e2e/run_case.sh /ckpt/bin heap_pattern new-chains >/tmp/case.log 2>&1 || rc=$?
    result "e2e.heap_pattern.new-chains.$t" /tmp/case.log $rc
    # A process tree (shared memory, pipe, groups, zombie) as one job.
    rc=0
    E2E_TRACKER=$t E2E_JOB_ROUNDS=3000 bash /ckpt/tests/e2e/job.sh /ckpt/bin incremental >/tmp/case.log 2>&1 || rc=$?
    result "e2e.job.incremental.$t" /tmp/case.log $rc
    # Two processes joined by a TCP connection with queued data (repair mode).
    rc=0
    E2E_TRACKER=$t E2E_JOB_PROG=tcp_pair E2E_JOB_PROCS=2 E2E_JOB_ROUNDS=3000 \
      bash /ckpt/tests/e2e/job.sh /ckpt/bin incremental >/tmp/case.log 2>&1 || rc=$?
    result "e2e.job.tcp.incremental.$t" /tmp/case.log $rc
    # UNIX sockets of every kind with queued data; SysV segments with their ids;
    # UDP sockets with queued datagrams. (shared_fds holds an eventfd, which
    # 6.1 cannot describe: no eventfd-semaphore in fdinfo, refused by design.)
    for k in unix:unix_pair sysv:sysv_shm udp:udp_pair; do
      rc=0
      E2E_TRACKER=$t E2E_JOB_PROG=${k#*:} E2E_JOB_PROCS=2 E2E_JOB_ROUNDS=3000 \
        bash /ckpt/tests/e2e/job.sh /ckpt/bin incremental >/tmp/case.log 2>&1 || rc=$?
      result "e2e.job.${k%%:*}.incremental.$t" /tmp/case.log $rc
    done
  done
fi

if has bench; then
  /ckpt/bin/bench_dirty
fi

if has criu; then
  bash /ckpt/tests/kernel/criu_compare.sh
fi

# Last: anything the kernel complained about during all of the above.
if dmesg | grep -E 'WARNING:|BUG:|Oops:|general protection|KASAN|UBSAN|circular locking|scheduling while atomic|sleeping function called|refcount_t:|list_del corruption' >/tmp/warn.log; then
  say "FAIL kernel.no_warnings: $(head -n 1 /tmp/warn.log)"
  dmesg | tail -n 40 | sed 's/^/    /'
else
  say "PASS kernel.no_warnings (dmesg clean after all suites)"
fi
say "END"
sync
poweroff -f
