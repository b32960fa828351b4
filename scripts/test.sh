#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit and end-to-end).
# Most tests need root (ptrace of other users' processes, clone3 with a chosen
# PID, PR_SET_MM): run as root or through sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
exec $SUDO ctest --test-dir build --output-on-failure --timeout 300 "$@"
