#!/usr/bin/env bash
# criu_compare.sh --criu PATH [--size MiB[,MiB...]] [--reps N] [--bin DIR] [--dir DIR]
#
# Our tools against a CRIU binary on the same workload, in one run, the two
# alternating (issue 14 item 5; docs/performance.md "Against CRIU 4.2").
# The workload (bench/workloads/writer) is an incompressible process of SIZE
# MiB (4 KiB pages) that rewrites 1 % of its pages per second (0.1 % every
# 100 ms). Every measurement gets a fresh process (a process we tracked
# carries our userfaultfd, which CRIU refuses to dump), and before every dump
# and restore a file of 1.5 x SIZE is written and deleted ("warm": the page
# cache has memory at hand, for both tools alike). Images go to DIR (default
# /var/tmp), on disk, and are deleted right after each measurement.
#
# Per repetition (order ours-first and CRIU-first alternate):
#   ours full     cr_full, wall (durable: fsync + rename) and frozen time;
#                 1 s later cr_incr (1 % written, the program still writing):
#                 its frozen time, and 1 s later the same with cr_incr --live;
#                 then restore of the full (cr_restart --detach) until the
#                 process runs;
#   ours no-sync  cr_full --no-sync, wall;
#   ours live     cr_full --live: final frozen time, the longest stop of the
#                 pre-copy (the arm), wall;
#   criu          criu dump -R (leave running), wall ("plain"), then fsync of
#                 every image file and the directory ("durable" = plain + that);
#                 frozen time from CRIU's stats-dump; restore (criu restore -d)
#                 until the process runs.
# Prints medians, ratios against the issue's targets and one JSON line.
# Exit 0 after a run, 77 when it cannot run here (no CRIU given, or `criu
# check` fails), 2 on bad arguments, 1 when a tool failed.
set -uo pipefail

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; }
die() {
  echo "criu_compare: $*" >&2
  exit 1
}
bad() {
  echo "criu_compare: $*" >&2
  exit 2
}

HERE=$(cd "$(dirname "$0")" && pwd)
CRIU="" SIZES="1024,64" REPS=5 BIN="$HERE/../build/bin" PARENT=/var/tmp
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --criu) CRIU=${2-}; shift 2 || bad "--criu needs a path" ;;
    --size) SIZES=${2-}; shift 2 || bad "--size needs MiB" ;;
    --reps) REPS=${2-}; shift 2 || bad "--reps needs a number" ;;
    --bin) BIN=${2-}; shift 2 || bad "--bin needs a directory" ;;
    --dir) PARENT=${2-}; shift 2 || bad "--dir needs a directory" ;;
    *) bad "unknown argument '$1' (--help for usage)" ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || bad "--reps must be a positive number, not '$REPS'"
IFS=, read -ra SIZE_LIST <<<"$SIZES"
((${#SIZE_LIST[@]})) || bad "--size needs at least one size"
for s in "${SIZE_LIST[@]}"; do
  [[ $s =~ ^[1-9][0-9]*$ ]] || bad "--size must be MiB, positive, comma-separated, not '$SIZES'"
done
for t in cr_full cr_incr cr_restart workloads/writer; do
  [[ -x $BIN/$t ]] || bad "$BIN/$t missing (build it, or pass --bin DIR)"
done
[[ -d $PARENT ]] || bad "--dir $PARENT is not a directory"

if [[ -z $CRIU ]]; then
  echo "criu_compare: SKIP: no CRIU binary given (--criu PATH; docs/performance.md says how to build CRIU 4.2)"
  exit 77
fi
[[ -x $CRIU ]] || { echo "criu_compare: SKIP: $CRIU is not an executable file"; exit 77; }
if ! check_out=$("$CRIU" check 2>&1); then
  echo "criu_compare: SKIP: '$CRIU check' fails on this kernel: $(tail -n 1 <<<"$check_out")"
  exit 77
fi
[[ $(id -u) -eq 0 ]] || { echo "criu_compare: SKIP: CRIU and cr_restart need root here"; exit 77; }
CRIU_VER=$("$CRIU" --version | awk '/^Version/ { print $2 }')

W=$(mktemp -d "$PARENT/criu_compare.XXXXXX") || die "cannot create a directory in $PARENT"
PID=""
cleanup() {
  [[ -n $PID ]] && kill -9 "$PID" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
RES=$W/results  # lines: size metric value

now() { echo "$EPOCHREALTIME"; }
ms_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
record() {
  [[ $3 =~ ^[0-9.]+$ ]] || die "no figure for $2 ($3)"
  echo "$1 $2 $3" >>"$RES"
}
json_ms() { python3 -c "import json,sys; print('%.1f' % (json.load(sys.stdin)['$1'] * 1000))"; }

warm() {  # the page cache gets memory at hand, the same for every tool
  dd if=/dev/zero of="$W/warm" bs=1M count=$((MIB * 3 / 2)) status=none conv=notrunc 2>/dev/null
  rm -f "$W/warm"
}
start() {  # a fresh writer; PID set when its memory is filled
  rm -f "$W/ready"
  setsid "$BIN/workloads/writer" "$W/ready" "$MIB" $((MIB * 256 / 1000)) 100 \
    </dev/null >"$W/writer.out" 2>&1 &
  PID=$!
  for _ in $(seq 600); do [[ -s $W/ready ]] && break; sleep 0.05; done
  [[ -s $W/ready ]] || die "the workload did not start"
}
gone() {  # waits until PID no longer exists
  for _ in $(seq 200); do [[ -e /proc/$PID ]] || return 0; sleep 0.02; done
  die "process $PID did not end"
}
stop() {
  kill -9 "$PID" 2>/dev/null
  wait "$PID" 2>/dev/null
  gone
}
running() {  # the restored process runs under its old PID (not a zombie)
  sleep 0.2
  local st
  st=$(awk '{ print $3 }' "/proc/$PID/stat" 2>/dev/null)
  [[ -n $st && $st != Z ]]
}
# CRIU's frozen time (microseconds) from its stats-dump image: two magic
# words, a size, then a stats_entry whose field 1 is the dump_stats_entry
# (field 2: frozen_time, in microseconds).
criu_frozen_ms() {
  python3 - "$1/stats-dump" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()[8:]
def varint(m, i):
    v = s = 0
    while True:
        c = m[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def fields(m):
    i, out = 0, {}
    while i < len(m):
        k, i = varint(m, i)
        if k & 7 == 0:
            out[k >> 3], i = varint(m, i)
        elif k & 7 == 2:
            n, i = varint(m, i)
            out[k >> 3], i = m[i:i + n], i + n
        else:
            raise SystemExit("stats-dump: unexpected wire type %d" % (k & 7))
    return out
n = struct.unpack("<I", b[:4])[0]
dump = fields(fields(b[4:4 + n])[1])
print("%.1f" % (dump[2] / 1000.0))
PY
}

ours() {
  local d=$W/ours out
  # full (durable), then an incremental 1 s later, then restore of the full
  rm -rf "$d"
  start
  warm
  local t=$(now)
  out=$("$BIN/cr_full" --json --dir "$d" "$PID" 2>"$W/err") || die "cr_full: $(cat "$W/err")"
  record "$MIB" ours_full_ms "$(ms_since "$t")"
  record "$MIB" ours_full_frozen_ms "$(json_ms frozen_seconds <<<"$out")"
  sleep 1
  out=$("$BIN/cr_incr" --json --dir "$d" "$PID" 2>"$W/err") || die "cr_incr: $(cat "$W/err")"
  record "$MIB" ours_incr_frozen_ms "$(json_ms frozen_seconds <<<"$out")"
  sleep 1
  out=$("$BIN/cr_incr" --live --json --dir "$d" "$PID" 2>"$W/err") || die "cr_incr --live: $(cat "$W/err")"
  record "$MIB" ours_incr_live_frozen_ms "$(json_ms frozen_seconds <<<"$out")"
  record "$MIB" ours_incr_live_stop_ms "$(json_ms precopy_frozen_max_seconds <<<"$out")"
  stop
  warm
  t=$(now)
  "$BIN/cr_restart" --dir "$d" --generation 1 --detach >/dev/null 2>"$W/err" ||
    die "cr_restart: $(cat "$W/err")"
  record "$MIB" ours_restore_ms "$(ms_since "$t")"
  running || die "our restored process is not running"
  stop
  rm -rf "$d"

  # --no-sync
  start
  warm
  t=$(now)
  "$BIN/cr_full" --no-sync --dir "$d" "$PID" >/dev/null 2>"$W/err" ||
    die "cr_full --no-sync: $(cat "$W/err")"
  record "$MIB" ours_nosync_ms "$(ms_since "$t")"
  stop
  rm -rf "$d"

  # --live
  start
  warm
  t=$(now)
  out=$("$BIN/cr_full" --live --json --dir "$d" "$PID" 2>"$W/err") ||
    die "cr_full --live: $(cat "$W/err")"
  record "$MIB" ours_live_ms "$(ms_since "$t")"
  record "$MIB" ours_live_frozen_ms "$(json_ms frozen_seconds <<<"$out")"
  record "$MIB" ours_live_stop_ms "$(json_ms precopy_frozen_max_seconds <<<"$out")"
  stop
  rm -rf "$d"
}

criu() {
  local d=$W/criu
  rm -rf "$d"
  mkdir -p "$d"
  start
  warm
  local t=$(now)
  "$CRIU" dump -t "$PID" -D "$d" -R -o dump.log >/dev/null 2>&1 ||
    die "criu dump failed: $(tail -n 3 "$d/dump.log")"
  record "$MIB" criu_plain_ms "$(ms_since "$t")"
  sync "$d"/* "$d" || die "fsync of CRIU's images failed"
  record "$MIB" criu_durable_ms "$(ms_since "$t")"
  record "$MIB" criu_frozen_ms "$(criu_frozen_ms "$d")"
  stop
  warm
  t=$(now)
  "$CRIU" restore -D "$d" -d -o restore.log >/dev/null 2>&1 ||
    die "criu restore failed: $(tail -n 3 "$d/restore.log")"
  record "$MIB" criu_restore_ms "$(ms_since "$t")"
  running || die "CRIU's restored process is not running"
  stop
  rm -rf "$d"
}

for MIB in "${SIZE_LIST[@]}"; do
  for ((r = 1; r <= REPS; r++)); do
    echo "criu_compare: $MIB MiB, repetition $r of $REPS" >&2
    if ((r % 2)); then ours; criu; else criu; ours; fi
  done
done

# A VM that reports freed memory to its host (virtio-balloon free page
# reporting) gets 2 MiB blocks back slowly about 2 s after they were freed:
# whichever tool then takes fresh huge pages pays the host's faults (up to
# 3 x the 64 MiB dump here). Printed, as bench_migrate does
# (docs/performance.md, "Free page reporting").
if order=$(cat /sys/module/page_reporting/parameters/page_reporting_order 2>/dev/null); then
  if ((order > 10)); then
    echo "free page reporting: off (order $order)"
  else
    echo "free page reporting: on (blocks of $((4 << order)) KiB), so fresh memory may come slowly from the host; see docs/performance.md"
  fi
fi
python3 - "$RES" "$CRIU_VER" "$REPS" <<'PY'
import json, statistics, sys
res, ver, reps = sys.argv[1], sys.argv[2], sys.argv[3]
vals = {}
for line in open(res):
    mib, k, v = line.split()
    vals.setdefault(int(mib), {}).setdefault(k, []).append(float(v))
print(f"CRIU {ver}: medians of {reps} (ms); ratio = ours / CRIU; target in brackets")
rows = [
    ("full dump, durable", "ours_full_ms", "criu_durable_ms", 0.8),
    ("full dump, ours --no-sync vs CRIU plain", "ours_nosync_ms", "criu_plain_ms", 0.8),
    ("frozen, ours --live", "ours_live_frozen_ms", "criu_frozen_ms", 0.1),
    ("frozen, ours plain", "ours_full_frozen_ms", "criu_frozen_ms", None),
    ("restore until running", "ours_restore_ms", "criu_restore_ms", 0.5),
]
out = {"criu_version": ver, "reps": int(reps), "sizes": {}}
for mib in sorted(vals, reverse=True):
    med = {k: statistics.median(v) for k, v in vals[mib].items()}
    out["sizes"][str(mib)] = {"medians_ms": med}
    print(f"\n{mib} MiB")
    print(f"  {'':42s} {'ours':>9s} {'CRIU':>9s} {'ratio':>7s}")
    for name, a, b, target in rows:
        ratio = med[a] / med[b] if med[b] else float("inf")
        out["sizes"][str(mib)][a + "/" + b] = ratio
        mark = "" if target is None else f"  [<= {target}: {'met' if ratio <= target else 'MISSED'}]"
        print(f"  {name:42s} {med[a]:9.1f} {med[b]:9.1f} {ratio:7.3f}{mark}")
    for name, k in (("incremental at 1 % (writing), frozen", "ours_incr_frozen_ms"),
                    ("same, cr_incr --live, frozen", "ours_incr_live_frozen_ms")):
        print(f"  {name:42s} {med[k]:9.1f} {'n/a':>9s} {'':7s}"
              f"  [<= 20 ms: {'met' if med[k] <= 20 else 'MISSED'}]")
    print(f"  {'cr_incr --live, longest pre-copy stop':42s} {med['ours_incr_live_stop_ms']:9.1f}")
    print(f"  {'cr_full --live, longest pre-copy stop':42s} {med['ours_live_stop_ms']:9.1f}"
          "  (round 1: the tracker set up in the process)")
    print(f"  {'cr_full --live, wall':42s} {med['ours_live_ms']:9.1f}")
print("\nJSON " + json.dumps(out))
PY
