#!/usr/bin/env bash
# The sanitizer and fuzzing pass of CI (.ci/run, after scripts/test.sh):
# builds the library, the tools, the unit tests and the libFuzzer targets
# with clang, AddressSanitizer and UndefinedBehaviorSanitizer into
# build-san/ (cmake/sanitizers.cmake), then runs
#   - every unit test (ctest -L unit),
#   - each fuzz target for FUZZ_SECONDS (default 10; ctest -L fuzz),
#   - a few end-to-end cases with the sanitized tools (the programs under
#     test come from build/, made by scripts/test.sh: they stay ordinary).
# Any sanitizer report fails the run. Needs root, like the tests.
# Phases: `build`; `unit` (unit tests and fuzz targets); `e2e` (the
# end-to-end cases); `run` = unit + e2e; no argument does all. CI builds and
# runs `unit` while the host's tests still run (.ci/run): only `e2e` comes
# after them, because its cases share names and ports with the host's.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# As root, run directly (an empty $SUDO before -E would make -E the command).
AS_ROOT=()
[ -z "$SUDO" ] || AS_ROOT=(sudo -E)
missing=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ -x build/bin/e2e/heap_pattern ] || bash scripts/setup.sh

PHASE=${1:-all}
t0=$(date +%s)
if [[ $PHASE == all || $PHASE == build ]]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # -O1 with line tables only, as libFuzzer's docs suggest: 10-20 % less compile
  # time per file than RelWithDebInfo (-O2 -g); this build is CI's largest item.
  # A unity build (16 sources per compiler run; the unit tests stay one per
  # file): about a third less compile time.
  cmake -S . -B build-san -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCKPT_SANITIZE=ON -DCKPT_FUZZ=ON \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
    -DFUZZ_SECONDS="${FUZZ_SECONDS:-10}" "${launcher[@]}" >/dev/null
  cmake --build build-san -j "${SANITIZE_JOBS:-$(nproc)}" --target unit_tests fuzz_targets cr_full cr_incr cr_restart cr_check cr_compact \
    cr_info cr_migrate cr_recv >/dev/null
  echo "sanitize: built in $(($(date +%s) - t0)) s"
fi
[[ $PHASE != build ]] || exit 0
case $PHASE in all | run | unit | e2e) ;; *)
  echo "usage: $0 [build|unit|e2e|run]" >&2
  exit 2
  ;;
esac

# Leaks are reported for the unit tests; the tools end with _exit paths
# and forked children that leak by design.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_unit() {
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
  # Excluded here (they pass in the normal build): the seccomp sandbox tests,
  # because ASan's runtime makes calls outside the allowlists in the sandboxed
  # child (SIGSYS), and PagemapScan.BlockedSystemCallsFinish, whose timing
  # does not hold under ASan; the cli.* cases, whose tools this
  # pass does not build (they run in the normal build); and the PagemapScan
  # cases that track a forked test process through many rounds of huge-page
  # and adaptive scans: a forked ASan process carries ASan's shadow mappings
  # (terabytes of address space), and each scan over them costs seconds of
  # kernel time (AdaptiveHotAndColdNeverMissAWrite takes minutes instead of
  # a second, almost all system time; HugeBlockRewrittenWithSameContentStaysHuge
  # does not see its block protected within its rounds), beyond the 300 s
  # limit when the host's tests run alongside; and WarmLayout.*,
  # which build a forked test process again from its layout: ASan's shadow
  # mapping (16 TiB, MAP_NORESERVE, which images do not record yet) cannot be
  # mapped again (ENOMEM), after a minute of checkpointing it. They run in
  # the normal build.
  "${AS_ROOT[@]}" ctest --test-dir build-san -L unit --output-on-failure --timeout 300 \
    -j "${SANITIZE_UNIT_JOBS:-2}" \
    -E 'MigrateSandbox\.|PagemapScan\.(BlockedSystemCallsFinish|AdaptiveHotAndCold|HugePagesStayHuge|HugeBlock|ANewFullArms|SampledArm)|^WarmLayout\.|^cli\.'

  # Any crash fails CI (each target also ran 1,000,000 executions with none,
  # docs/security.md). The filter keeps the log short; ctest's status decides.
  local fuzz_log=build-san/fuzz.log fuzz_rc=0
  "${AS_ROOT[@]}" ctest --test-dir build-san -L fuzz --output-on-failure --verbose >"$fuzz_log" 2>&1 ||
    fuzz_rc=$?
  grep -E "^[0-9]+: FUZZ|Test +#|tests passed|failed|ERROR|SUMMARY" "$fuzz_log" || true
  if ((fuzz_rc != 0)); then
    tail -n 60 "$fuzz_log"
    echo "sanitize: a fuzz target failed (above)"
    exit 1
  fi
}

run_e2e() {
  export ASAN_OPTIONS=detect_leaks=0
  export E2E_PROG_DIR=$PWD/build/bin/e2e
  for c in "heap_pattern plain" "heap_pattern incremental" "mt_compute restore" "fd_pipe plain"; do
    # shellcheck disable=SC2086
    "${AS_ROOT[@]}" bash tests/e2e/run_case.sh build-san/bin $c
  done
  "${AS_ROOT[@]}" bash tests/e2e/recv_dos.sh build-san/bin once
}

[[ $PHASE == e2e ]] || run_unit
[[ $PHASE == unit ]] || run_e2e
echo "sanitize: $PHASE done in $(($(date +%s) - t0)) s"
