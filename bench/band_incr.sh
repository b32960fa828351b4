#!/bin/bash
# band_incr.sh BIN_DIR [MIB] [PERIOD_MS] [GAP_S] [COUNT] [ADAPTIVE]: what incrementals of
# a rotating band save. A program of MIB MiB (default 256) rewrites one eighth
# of its memory over and over for PERIOD_MS (default 300), then the next
# eighth (tests/e2e/programs/write_patterns.c, "timed"); cr_full, then COUNT
# (default 5) cr_incr, GAP_S seconds apart (default 0.1). Prints, per
# incremental, the pages saved, the pages read and the frozen time; ADAPTIVE
# off (default on) for plain tracking (docs/performance.md, "Adaptive
# tracking with a bound").
set -u
if [[ ${1:-} == --help || ${1:-} == -h || $# -lt 1 ]]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  [[ ${1:-} == --help || ${1:-} == -h ]] && exit 0 || exit 2
fi
BIN=$1 MIB=${2:-256} PERIOD=${3:-300} GAP=${4:-0.1} COUNT=${5:-5} ADAPTIVE=${6:-on}
PROG=$BIN/e2e/write_patterns
for t in "$BIN/cr_full" "$BIN/cr_incr" "$PROG"; do
  [[ -x $t ]] || { echo "band_incr: $t missing" >&2; exit 2; }
done
W=$(mktemp -d /var/tmp/band_incr.XXXXXX) || exit 1
PID=""
trap '[[ -n $PID ]] && kill -9 "$PID" 2>/dev/null; rm -rf "$W"' EXIT
(
  # Only stdio: a checkpoint refuses descriptors shared with processes outside the job.
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    ((fd >= 3)) && eval "exec $fd>&-"
  done
  exec setsid "$PROG" timed "$MIB" "$PERIOD" 600 "$W/ready" </dev/null >"$W/out" 2>&1
) &
PID=$!
disown "$PID"
for _ in $(seq 600); do [[ -s $W/ready ]] && break; sleep 0.05; done
[[ -s $W/ready ]] || { echo "band_incr: the program did not start" >&2; exit 1; }
sleep 1
"$BIN/cr_full" --adaptive "$ADAPTIVE" --json --dir "$W/ckpt" "$PID" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; exit 1; }
printf '%4s %8s %8s %10s\n' incr saved read frozen_ms
for i in $(seq "$COUNT"); do
  sleep "$GAP"
  j=$("$BIN/cr_incr" --adaptive "$ADAPTIVE" --json --dir "$W/ckpt" "$PID" 2>"$W/err" | grep '^{' | tail -n 1) ||
    { cat "$W/err" >&2; exit 1; }
  jq -r --arg i "$i" '[$i, .pages_written + .pages_zero, .pages_written + .pages_zero + (.pages_unchanged // 0),
    (.frozen_seconds * 1000 | floor)] | @tsv' <<<"$j" | awk '{ printf "%4s %8s %8s %10s\n", $1, $2, $3, $4 }'
done
