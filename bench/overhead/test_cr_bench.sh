#!/usr/bin/env bash
# ctest bench.cr_bench: the overhead harness end to end on two class S
# kernels with a short schedule. Checks that every run verified (the harness
# exits 0 only then), that the CSV files have the rows the schedule implies,
# that each restart read the number of generations its chain length says,
# and that the plots are real PNG files.
#   test_cr_bench.sh BIN_DIR
set -euo pipefail
BIN=${1:?usage: test_cr_bench.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d /tmp/cr_bench_test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "gnuplot missing (scripts/setup.sh installs gnuplot-nox)"; exit 1; }

# Bad input: one line on stderr, non-zero exit, nothing measured.
for bad in "--interval -1" "--interval 0" "--incrementals -2" "--npb nosuch" "--workload /nonexistent"; do
  set +e
  # shellcheck disable=SC2086
  /usr/bin/python3 "$HERE/cr_bench" --bin "$BIN" --out "$OUT/bad" $bad 2>"$OUT/err" >/dev/null
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "cr_bench $bad exited 0"
  [ "$(wc -l <"$OUT/err")" -eq 1 ] || fail "cr_bench $bad: not one line: $(cat "$OUT/err")"
done
# A workload that fails its own check is reported as failed, not measured.
set +e
/usr/bin/python3 "$HERE/cr_bench" --bin "$BIN" --out "$OUT/bad" --no-plots -- /bin/sh -c 'echo result: 1' \
  2>"$OUT/err" >/dev/null
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "success pattern" "$OUT/err" || fail "a run without the success line was accepted"

# A restarted run whose compared lines differ from the uninterrupted run's is
# a failure: the header line is printed before the first checkpoint, so a
# restarted run never prints it again.
set +e
/usr/bin/python3 "$HERE/cr_bench" --bin "$BIN" --npb cg --class S --interval 10% --incrementals 1 \
  --compare '^cg: grid' --no-plots --out "$OUT/differs" 2>"$OUT/err" >/dev/null
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "result differs" "$OUT/err" ||
  fail "a restarted run with a different result was accepted: $(tail -n 1 "$OUT/err")"

# Intervals as a share of the uninterrupted runtime, so the schedule fits
# however loaded the machine is; one live migration over loopback each.
/usr/bin/python3 "$HERE/cr_bench" --bin "$BIN" --npb cg,ft --class S --interval 10%,20% \
  --incrementals 2 --migrate --out "$OUT/r" >"$OUT/stdout" 2>"$OUT/progress" ||
  { cat "$OUT/progress" >&2; fail "cr_bench exited non-zero"; }
grep -q "checkpointed run" "$OUT/progress" || fail "no progress line"

for w in cg.S ft.S; do
  d="$OUT/r/$w"
  for f in runs.csv checkpoints.csv overhead.csv restarts.csv result.json table.md stats.jsonl sizes.png \
    migration.csv migration.png; do
    [ -s "$d/$f" ] || fail "$w: no $f"
  done
  # runs.csv: one uninterrupted run and one checkpointed run per interval.
  [ "$(grep -c ',uninterrupted,' "$d/runs.csv")" -eq 1 ] || fail "$w: uninterrupted rows"
  [ "$(grep -c ',checkpointed,' "$d/runs.csv")" -eq 2 ] || fail "$w: checkpointed rows"
  # overhead.csv: one row per interval, with a measured slowdown.
  [ "$(tail -n +2 "$d/overhead.csv" | wc -l)" -eq 2 ] || fail "$w: overhead rows"
  # checkpoints.csv: a full first, then the 2-incrementals pattern, with bytes.
  /usr/bin/python3 - "$d/checkpoints.csv" <<'PY' || fail "$w: checkpoints.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows, "no checkpoints"
for interval in {r["interval_s"] for r in rows}:
    kinds = [r["kind"] for r in rows if r["interval_s"] == interval]
    want = [("full" if i % 3 == 0 else "incr") for i in range(len(kinds))]
    assert kinds == want, (interval, kinds)
for r in rows:
    assert int(r["bytes_written"]) > 0 and int(r["disk_bytes"]) > 0, r
    assert float(r["frozen_s"]) > 0 and float(r["total_s"]) >= float(r["frozen_s"]), r
    assert (r["dirty_fraction"] == "") == (r["kind"] == "full"), r
PY
  # restarts.csv: chain lengths 0, 1, 2, each reading k+1 generations, all verified.
  /usr/bin/python3 - "$d/restarts.csv" <<'PY' || fail "$w: restarts.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [int(r["chain_length"]) for r in rows] == [0, 1, 2], rows
for r in rows:
    assert int(r["generations_read"]) == int(r["chain_length"]) + 1, r
    assert float(r["restore_s"]) > 0 and r["verified"] == "True", r
PY
  # migration.csv: pre-copy rounds, bytes in each, the last one frozen.
  /usr/bin/python3 - "$d/migration.csv" <<'PY' || fail "$w: migration.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows and [int(r["round"]) for r in rows] == list(range(1, len(rows) + 1)), rows
assert all(int(r["bytes"]) > 0 for r in rows), rows
PY
done
# summary.csv: one row per workload, with O_f, O_i, R_f and S_1 measured.
/usr/bin/python3 - "$OUT/r/summary.csv" <<'PY' || fail "summary.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["workload"] for r in rows] == ["cg.S", "ft.S"], rows
for r in rows:
    for k in ("baseline_s", "O_f", "O_i", "R_f", "R_f1i", "S_1", "full_MiB", "incr_MiB"):
        assert r[k] != "", (k, r)
PY
# Plots: PNG magic, a real size, and gnuplot's dimensions in the header.
for png in "$OUT/r/overhead_vs_interval.png" "$OUT/r/restart_vs_chain.png" "$OUT/r/cg.S/sizes.png" \
  "$OUT/r/ft.S/sizes.png" "$OUT/r/cg.S/migration.png" "$OUT/r/ft.S/migration.png"; do
  /usr/bin/python3 - "$png" <<'PY' || fail "$png is not a valid PNG"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", "magic"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (900, 560), (w, h)
assert len(b) > 10000, len(b)
PY
done
echo "cr_bench: all checks passed ($(tail -n +2 "$OUT/r/cg.S/checkpoints.csv" | wc -l) + $(tail -n +2 "$OUT/r/ft.S/checkpoints.csv" | wc -l) checkpoints)"
