#!/usr/bin/env bash
# A Java program (OpenJDK 17, compiled by javac, run by `java` with the
# JVM's defaults: its GC, JIT compiler and other service threads) with 16
# worker threads hashing in a thread pool, checkpointed while they compute,
# killed, restored: the combined digest must be an uninterrupted run's.
# (Each task sleeps a little while WORK/pace exists: lib.sh, pace_on.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin java "$@"

cat >"$WORK/Chains.java" <<'JAVA'
import java.io.File;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

public class Chains {
  static final AtomicInteger done = new AtomicInteger();

  static byte[] chain(int seed) throws Exception {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    byte[] h = Integer.toString(seed).getBytes();
    List<byte[]> keep = new ArrayList<>();
    for (int i = 0; i < 30000; i++) {
      h = md.digest(h);
      if (i % 64 == 0) keep.add(h.clone()); // garbage for the collector
      if (keep.size() > 200) keep.clear();
    }
    if (new File("pace").exists()) Thread.sleep(1000);
    int n = done.incrementAndGet();
    if (n % 8 == 0) {
      synchronized (System.out) {
        System.out.println("done " + n);
        System.out.flush();
      }
    }
    return h;
  }

  public static void main(String[] args) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(16);
    List<Future<byte[]>> results = new ArrayList<>();
    for (int i = 0; i < 320; i++) {
      final int seed = i;
      results.add(pool.submit(() -> chain(seed)));
    }
    MessageDigest all = MessageDigest.getInstance("SHA-256");
    for (Future<byte[]> f : results) all.update(f.get());
    pool.shutdown();
    StringBuilder sb = new StringBuilder();
    for (byte b : all.digest()) sb.append(String.format("%02x", b));
    System.out.println("result " + sb);
  }
}
JAVA
# The JVM's performance data file, /tmp/hsperfdata_USER/PID (mapped
# shared): a JVM removes it when it ends, a killed one does not.
PERF=/tmp/hsperfdata_$(id -un)
CLEANUP_CMDS+=('rm -f "$PERF/$ROOT"')
[[ -d $PERF ]] || CLEANUP_CMDS+=('rmdir "$PERF"')
run_fg javac javac -d . Chains.java
t=$EPOCHREALTIME
run_fg ref java Chains
phase "uninterrupted" "$t"
pace_on
start_bg run java Chains
wait_until 60 "first results" 'grep -q "^done 16$" "$WORK/run.out"'
checkpoint full
sleep 0.5
checkpoint incr
! grep -q '^result' "$WORK/run.out" || fail "the program finished before it was killed"
threads=$(find "/proc/$ROOT/task" -mindepth 1 -maxdepth 1 | wc -l)
kill_tree
pace_off
restore_wait
ref=$(grep '^result' "$WORK/ref.out")
got=$(grep '^result' "$WORK/run.out") || fail "the restored program printed no result"
[[ $got == "$ref" ]] || fail "the restored program's $got differs from an uninterrupted run's $ref"
corpus_pass "$threads threads"
