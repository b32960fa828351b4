#!/usr/bin/env bash
# ctest bench.cr_bench_mpi: the overhead harness on an MPI job (cg_mpi, 4
# ranks under Open MPI's mpirun, 32 MiB, 60 iterations of at least 0.2 s): every checkpoint is of the whole
# tree (mpirun and its ranks), and after the kill each restart from the full
# and from full + 1 incremental restores all five processes and prints the
# uninterrupted run's result line (the harness exits 0 only then).
#   test_cr_bench_mpi.sh BIN_DIR          exit 77: no Open MPI here
set -euo pipefail
BIN=${1:?usage: test_cr_bench_mpi.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v mpirun.openmpi >/dev/null || { echo "SKIP: no mpirun.openmpi (openmpi-bin)"; exit 77; }
[ -x "$BIN/workloads/mpi/openmpi/cg_mpi" ] || { echo "SKIP: cg_mpi was not built (no mpicc.openmpi)"; exit 77; }
OUT=$(mktemp -d /tmp/cr_bench_mpi_test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

/usr/bin/python3 "$HERE/cr_bench" --bin "$BIN" --mpi cg_mpi --mpi-size 32,60,200 --interval 20% \
  --incrementals 1 --no-plots --out "$OUT/r" >"$OUT/stdout" 2>"$OUT/progress" ||
  { tr '\r' '\n' <"$OUT/progress" | tail -n 5 >&2; fail "cr_bench --mpi exited non-zero"; }
d=$OUT/r/cg_mpi.np4.32M
for f in runs.csv checkpoints.csv restarts.csv result.json table.md; do
  [ -s "$d/$f" ] || fail "no $f"
done
/usr/bin/python3 - "$d" <<'PY' || fail "the MPI job's rows"
import csv, json, os, sys
d = sys.argv[1]
stats = [json.loads(l) for l in open(os.path.join(d, "stats.jsonl")) if l.startswith("{")]
ck = [s for s in stats if "kind" in s]
assert ck and all(s["processes"] == 5 for s in ck), [s.get("processes") for s in ck]
rows = list(csv.DictReader(open(os.path.join(d, "restarts.csv"))))
assert [int(r["chain_length"]) for r in rows] == [0, 1], rows
for r in rows:  # every generation of each of the 5 processes read
    assert int(r["generations_read"]) == 5 * (int(r["chain_length"]) + 1), r
    assert r["verified"] == "True" and float(r["restore_s"]) > 0, r
res = json.load(open(os.path.join(d, "result.json")))
assert any(l.startswith("result: cg ranks 4") for l in res["baseline"]["result"]), res["baseline"]
PY
# Nothing of the job is left: no process in its directories, no /dev/shm files.
! ls -d /dev/shm/cr_bench-cg_mpi.* 2>/dev/null | grep -q . || fail "the job's TMPDIR was left in /dev/shm"
echo "cr_bench --mpi: all checks passed"
