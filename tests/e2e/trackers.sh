#!/usr/bin/env bash
# trackers.sh BIN_DIR: the trackers cr_check reports as working are the ones
# an independent probe (helpers/tracker_probe.c: the plainest use of each
# kernel interface) finds, and, where CKPT_EXPECT_TRACKERS names them (CI
# does, for the machines it runs on), those. A broken probe in the library
# would otherwise turn every test of a tracker into a skip.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
BIN_DIR=$(cd "$1" && pwd)
E2E_CASE=trackers
probe=$("${E2E_PROG_DIR:-$BIN_DIR/e2e}/tracker_probe") || fail "tracker_probe failed"
check=$("$BIN_DIR/cr_check" --json | jq -r '[.trackers[] as $t | select(.[$t].ok) | $t] | join(" ")') ||
  fail "cr_check --json failed"
[[ $check == "$probe" ]] || fail "cr_check reports '$check' as working, an independent probe finds '$probe'"
if [[ -n ${CKPT_EXPECT_TRACKERS:-} ]]; then
  [[ $check == "$CKPT_EXPECT_TRACKERS" ]] ||
    fail "cr_check reports '$check', this machine is expected to have '$CKPT_EXPECT_TRACKERS'"
fi
pass "$check"
