#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit and end-to-end).
# Most tests need root (ptrace of other users' processes, clone3 with a chosen
# PID, PR_SET_MM): run as root or through sudo. Arguments go to ctest (then
# everything runs in one ctest, as given).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
CTEST=($SUDO ctest --test-dir build --output-on-failure)
(($# == 0)) || exec "${CTEST[@]}" --timeout 300 "$@"

# The qemu guest (label kernel: Debian's own kernel under TCG, minutes of one
# core) runs alongside the host's tests instead of after them; its output is
# printed when both are done. The host's tests run one at a time, as before.
# CKPT_TEST_ALONGSIDE, a command, runs on that core after the guest (CI
# builds the sanitizer pass there: .ci/run).
guest_log=build/kernel-guest.log
alongside() {
  "${CTEST[@]}" --timeout 900 -L kernel || return
  [[ -z ${CKPT_TEST_ALONGSIDE:-} ]] || bash -c "$CKPT_TEST_ALONGSIDE"
}
alongside >"$guest_log" 2>&1 &
guest=$!
host_rc=0
# corpus-pending: real programs a known gap stops today (tests/corpus).
"${CTEST[@]}" --timeout 300 -LE 'kernel|corpus-pending' || host_rc=$?
guest_rc=0
wait "$guest" || guest_rc=$?
echo "---- the guest's tests (label kernel)${CKPT_TEST_ALONGSIDE:+ and $CKPT_TEST_ALONGSIDE}, run alongside ----"
cat "$guest_log"
((host_rc == 0 && guest_rc == 0))
