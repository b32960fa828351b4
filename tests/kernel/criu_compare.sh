#!/bin/bash
# criu_compare.sh [MIB]: Debian's CRIU against our tools on one workload, in
# the test guest (tests/kernel/run_guest.sh, suite "criu"; root, module
# loaded, soft-dirty available).
#
# The workload (mem_workload, MIB MiB of 4 KiB pages, default 64) rewrites
# 0.1 % of its pages every 100 ms. For each tool, on the same running process:
#   full   a full checkpoint that leaves the process running
#          (cr_full --tracker=kmod | criu dump -R --track-mem);
#   incr   1 s later, a restorable incremental on top of it
#          (cr_incr | criu dump -R --track-mem --prev-images-dir);
#   size   bytes of the full and of the incremental images;
#   restore  the process killed, then restored from the incremental chain
#          until it runs detached (cr_restart --detach | criu restore -d).
# CRIU also gets its own iterative step, pre-dump (memory only, not
# restorable), timed as "predump". Prints KTEST INFO lines, one JSON line and
# "KTEST PASS criu.compare (...)" when both tools did every step (each
# restored process must be running its old PID afterwards), else KTEST FAIL.
set -uo pipefail
MIB=${1:-64}
BIN=/ckpt/bin
W=/tmp/criu-compare
rm -rf "$W"
mkdir -p "$W"
say() { echo "KTEST $*"; }
die() {
  say "FAIL criu.compare: $*"
  for f in "$W"/*.log; do [[ -s $f ]] && tail -n 12 "$f" | sed "s|^|    ${f##*/}: |"; done
  [[ -n ${PID:-} ]] && kill -9 "$PID" 2>/dev/null
  lsmod | sed 's/^/    lsmod: /'
  dmesg | tail -n 8 | sed 's/^/    dmesg: /'
  exit 1
}
ms() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
bytes() { du -sb "$@" | awk '{ s += $1 } END { print s }'; }

# The kernel modules CRIU's socket and feature probes use are loaded by /init.

start() {
  rm -f "$W/ready"
  setsid "$BIN/mem_workload" "$W/ready" "$MIB" </dev/null >"$W/workload.out" 2>&1 &
  PID=$!
  for _ in $(seq 300); do [[ -s $W/ready ]] && break; sleep 0.1; done
  [[ -s $W/ready ]] || die "workload not ready"
}
stop() {
  kill -9 "$PID" 2>/dev/null
  wait "$PID" 2>/dev/null
  for _ in $(seq 100); do [[ -e /proc/$PID ]] || break; sleep 0.05; done
}
# restored_runs: the restored process runs under the old PID (not a zombie).
restored_runs() {
  local st
  st=$(awk '{ print $3 }' "/proc/$PID/stat" 2>/dev/null)
  [[ -n $st && $st != Z ]]
}
kill_restored() {
  kill -9 "$PID" 2>/dev/null
  for _ in $(seq 100); do [[ -e /proc/$PID ]] || break; sleep 0.05; done
}

# ---- ours ----
start
t=$EPOCHREALTIME
"$BIN/cr_full" --dir "$W/ours" --tracker=kmod "$PID" >"$W/ours-full.log" 2>&1 || die "cr_full failed"
OURS_FULL=$(ms "$t")
sleep 1
t=$EPOCHREALTIME
"$BIN/cr_incr" --dir "$W/ours" "$PID" >"$W/ours-incr.log" 2>&1 || die "cr_incr failed"
OURS_INCR=$(ms "$t")
OURS_FULL_B=$(bytes "$W"/ours/gen-000001)
OURS_INCR_B=$(bytes "$W"/ours/gen-000002)
stop
t=$EPOCHREALTIME
"$BIN/cr_restart" --dir "$W/ours" --detach >"$W/ours-restore.log" 2>&1 || die "cr_restart failed"
OURS_RESTORE=$(ms "$t")
sleep 0.3
restored_runs || die "our restored process is not running"
kill_restored

# ---- CRIU ----
criu --version >"$W/criu-version.log" 2>&1
CRIU_VER=$(awk '/Version/ { print $2 }' "$W/criu-version.log")
start
mkdir -p "$W/criu/full" "$W/criu/pre" "$W/criu/incr"
t=$EPOCHREALTIME
criu dump -t "$PID" -D "$W/criu/full" -R --track-mem -o dump.log >/dev/null 2>&1 ||
  { cp "$W/criu/full/dump.log" "$W/criu-full.log" 2>/dev/null; die "criu dump failed"; }
CRIU_FULL=$(ms "$t")
sleep 1
t=$EPOCHREALTIME
criu pre-dump -t "$PID" -D "$W/criu/pre" --prev-images-dir ../full --track-mem -o pre.log \
  >/dev/null 2>&1 || { cp "$W/criu/pre/pre.log" "$W/criu-pre.log"; die "criu pre-dump failed"; }
CRIU_PRE=$(ms "$t")
sleep 1
t=$EPOCHREALTIME
criu dump -t "$PID" -D "$W/criu/incr" --prev-images-dir ../pre --track-mem -R -o dump.log \
  >/dev/null 2>&1 || { cp "$W/criu/incr/dump.log" "$W/criu-incr.log"; die "criu incremental dump failed"; }
CRIU_INCR=$(ms "$t")
CRIU_FULL_B=$(bytes "$W/criu/full")
CRIU_INCR_B=$(bytes "$W/criu/incr")
stop
t=$EPOCHREALTIME
criu restore -D "$W/criu/incr" -d -o restore.log >/dev/null 2>&1 ||
  { cp "$W/criu/incr/restore.log" "$W/criu-restore.log"; die "criu restore failed"; }
CRIU_RESTORE=$(ms "$t")
sleep 0.3
restored_runs || die "CRIU's restored process is not running"
kill_restored

say "INFO criu workload: $MIB MiB, 0.1 % of pages rewritten every 100 ms; CRIU $CRIU_VER"
say "INFO criu           ours(kmod)  criu"
say "INFO criu full ms   $OURS_FULL $CRIU_FULL"
say "INFO criu incr ms   $OURS_INCR $CRIU_INCR (criu pre-dump: $CRIU_PRE)"
say "INFO criu restore ms $OURS_RESTORE $CRIU_RESTORE"
say "INFO criu full bytes $OURS_FULL_B $CRIU_FULL_B"
say "INFO criu incr bytes $OURS_INCR_B $CRIU_INCR_B"
say "INFO criu json {\"mib\": $MIB, \"criu_version\": \"$CRIU_VER\", \"ours\": {\"full_ms\": $OURS_FULL, \"incr_ms\": $OURS_INCR, \"restore_ms\": $OURS_RESTORE, \"full_bytes\": $OURS_FULL_B, \"incr_bytes\": $OURS_INCR_B}, \"criu\": {\"full_ms\": $CRIU_FULL, \"predump_ms\": $CRIU_PRE, \"incr_ms\": $CRIU_INCR, \"restore_ms\": $CRIU_RESTORE, \"full_bytes\": $CRIU_FULL_B, \"incr_bytes\": $CRIU_INCR_B}}"
say "PASS criu.compare (full $OURS_FULL vs $CRIU_FULL ms, incr $OURS_INCR vs $CRIU_INCR ms, restore $OURS_RESTORE vs $CRIU_RESTORE ms)"
