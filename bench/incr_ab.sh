#!/bin/bash
# incr_ab.sh OLD_BIN NEW_BIN [MIB] [REPS]: frozen time of incrementals at 1 %
# of a program that keeps writing, two builds compared in the same run.
# One workloads/writer of MIB MiB (default 1024) rewriting 1 % of its pages
# per second, a cr_full by NEW_BIN, then REPS times (default 6): one second,
# cr_incr by each build (order swapped every repetition), then the same with
# --live. Prints each frozen time and the medians (docs/performance.md, "The
# final freeze of an incremental at 1 %"). Both builds must share the format.
set -u
if [[ ${1:-} == --help || ${1:-} == -h || $# -lt 2 ]]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  [[ ${1:-} == --help || ${1:-} == -h ]] && exit 0 || exit 2
fi
OLD=$1 NEW=$2 MIB=${3:-1024} REPS=${4:-6}
for b in "$OLD" "$NEW"; do
  [[ -x $b/cr_incr ]] || { echo "incr_ab: $b/cr_incr missing" >&2; exit 2; }
done
[[ -x $NEW/workloads/writer && -x $NEW/cr_full ]] || { echo "incr_ab: $NEW lacks cr_full or workloads/writer" >&2; exit 2; }
W=$(mktemp -d /var/tmp/incr_ab.XXXXXX) || exit 1
PID=""
trap '[[ -n $PID ]] && kill -9 "$PID" 2>/dev/null; rm -rf "$W"' EXIT
setsid "$NEW/workloads/writer" "$W/ready" "$MIB" $((MIB * 256 / 1000)) 100 </dev/null >"$W/out" 2>&1 &
PID=$!
disown "$PID"
for _ in $(seq 600); do [[ -s $W/ready ]] && break; sleep 0.05; done
[[ -s $W/ready ]] || { echo "incr_ab: the workload did not start" >&2; exit 1; }
"$NEW/cr_full" --json --dir "$W/ckpt" "$PID" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
frozen_ms() { python3 -c "import json,sys; print('%.1f' % (json.load(sys.stdin)['frozen_seconds'] * 1000))"; }
for r in $(seq "$REPS"); do
  for mode in plain live; do
    args=(); [[ $mode == live ]] && args=(--live)
    order="old new"; (( r % 2 )) || order="new old"
    for who in $order; do
      b=$OLD; [[ $who == new ]] && b=$NEW
      sleep 1
      v=$("$b/cr_incr" "${args[@]}" --json --dir "$W/ckpt" "$PID" 2>"$W/err" | frozen_ms) ||
        { cat "$W/err" >&2; exit 1; }
      echo "$mode $who $v" | tee -a "$W/res"
    done
  done
done
python3 - "$W/res" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, who, v = line.split()
    d[mode, who].append(float(v))
for mode in ("plain", "live"):
    o, n = statistics.median(d[mode, "old"]), statistics.median(d[mode, "new"])
    print(f"cr_incr {mode:5s} frozen ms, medians: old {o:8.1f}  new {n:8.1f}  new/old {n / o:.2f}")
PY
