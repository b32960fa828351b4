#!/usr/bin/env bash
# levels_drain.sh BUILD [REPS] [INTERVAL]: what two levels cost a
# memory-bound program. workloads/mg (NPB-MG-like, 445 MB rewritten every
# second) runs alone, under cr_run with one level (page content with
# O_DIRECT to /var/tmp), and under cr_run --local /dev/shm (the job
# released after the tmpfs write, the copy to /var/tmp after it), without
# and with --flush-rate 100; each a checkpoint every INTERVAL s (default 2),
# the four arms alternated REPS times (default 3). Prints each run's wall
# time and, per arm, the median slowdown against the runs alone.
set -euo pipefail
BUILD=$(realpath "$1")
REPS=${2:-3}
INTERVAL=${3:-2}
MG=("$BUILD/bin/workloads/mg" 256 48)
W=$(mktemp -d /var/tmp/levels_drain.XXXXXX)
trap 'rm -rf "$W" /dev/shm/levels_drain.$$' EXIT
run() {  # run ARM: prints the wall time
  local t0 t1
  rm -rf "$W/ck" /dev/shm/levels_drain.$$
  t0=$EPOCHREALTIME
  case $1 in
  alone) "${MG[@]}" >/dev/null ;;
  one) "$BUILD/bin/cr_run" --dir "$W/ck" --interval "$INTERVAL" -- "${MG[@]}" >/dev/null 2>&1 ;;
  two) "$BUILD/bin/cr_run" --dir "$W/ck" --local /dev/shm/levels_drain.$$ --interval "$INTERVAL" \
    -- "${MG[@]}" >/dev/null 2>&1 ;;
  two-100) "$BUILD/bin/cr_run" --dir "$W/ck" --local /dev/shm/levels_drain.$$ --flush-rate 100 \
    --interval "$INTERVAL" -- "${MG[@]}" >/dev/null 2>&1 ;;
  esac
  t1=$EPOCHREALTIME
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$t1"
}
declare -A times
for r in $(seq "$REPS"); do
  for arm in alone one two two-100; do
    t=$(run "$arm")
    times[$arm]+="$t "
    echo "rep $r $arm ${t} s"
  done
done
python3 - "${times[alone]}" "${times[one]}" "${times[two]}" "${times[two-100]}" <<'PY'
import statistics, sys
alone, one, two, two100 = ([float(x) for x in a.split()] for a in sys.argv[1:])
base = statistics.median(alone)
for name, ts in (("one level (O_DIRECT to /var/tmp)", one), ("two levels (tmpfs, then /var/tmp)", two),
                 ("two levels, --flush-rate 100", two100)):
    print(f"{name}: median {statistics.median(ts):.2f} s, slowdown {100 * (statistics.median(ts) / base - 1):.1f} %")
print(f"alone: median {base:.2f} s")
PY
