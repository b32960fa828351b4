#!/usr/bin/env bash
# ctest bench.criu_compare: bench/criu_compare.sh answers --help with help
# (no run), refuses bad arguments with one line and exit 2, and skips (77,
# reason printed) without a CRIU binary. With CRIU=PATH in the environment it
# also runs one short comparison (64 MiB, one repetition) and checks that
# every figure came out.
#   test_criu_compare.sh BIN_DIR
set -uo pipefail
BIN=${1:?usage: test_criu_compare.sh BIN_DIR}
S=$(cd "$(dirname "$0")" && pwd)/criu_compare.sh
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$S" --help --criu /bin/false 2>&1) || fail "--help exited non-zero"
grep -q -- '--criu PATH' <<<"$out" || fail "--help printed no usage"
grep -qE 'SKIP|repetition [0-9]+ of' <<<"$out" && fail "--help did more than print help"
for bad in "--reps 0" "--reps x" "--size -5" "--size 1,,2" "--nosuch" "--bin /nonexistent"; do
  # shellcheck disable=SC2086
  "$S" --bin "$BIN" $bad >/dev/null 2>"${TMPDIR:-/tmp}/criu_compare.err"
  rc=$?
  [[ $rc -eq 2 ]] || fail "criu_compare.sh $bad exited $rc, not 2"
  [[ $(wc -l <"${TMPDIR:-/tmp}/criu_compare.err") -eq 1 ]] || fail "criu_compare.sh $bad: not one line"
done
rm -f "${TMPDIR:-/tmp}/criu_compare.err"

if [[ -z ${CRIU:-} ]]; then
  out=$("$S" --bin "$BIN")
  rc=$?
  [[ $rc -eq 77 ]] || fail "without --criu: exit $rc, not 77 (skip)"
  grep -q 'SKIP: no CRIU binary' <<<"$out" || fail "without --criu: no reason printed"
  echo "$out"
  exit 77
fi
out=$("$S" --bin "$BIN" --criu "$CRIU" --size 64 --reps 1)
rc=$?
echo "$out"
[[ $rc -eq 77 ]] && exit 77
[[ $rc -eq 0 ]] || fail "criu_compare.sh exited $rc"
for k in ours_full_ms criu_durable_ms ours_nosync_ms criu_plain_ms ours_live_frozen_ms \
  criu_frozen_ms ours_restore_ms criu_restore_ms ours_incr_frozen_ms; do
  grep -q "\"$k\": [0-9]" <<<"$out" || fail "no figure for $k"
done
