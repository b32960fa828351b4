#!/usr/bin/env bash
# openmpi.sh's job restored as after a reboot of the node: Debian 12 clears
# /tmp at boot (systemd's tmpfiles.d/tmp.conf) and /dev/shm is a tmpfs, so
# once the job is killed its session directory in /tmp (the PMIx shared
# segments its processes map, the launcher's files) and its /dev/shm
# segments are removed before cr_restart.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$CORPUS_DIR/mpi_case.sh"
corpus_begin openmpi-reboot "$@"
# shellcheck disable=SC2034 # read by the commands in CLEANUP_CMDS and AFTER_KILL
SESSION_DIRS="/tmp/ompi.$(hostname).$(id -u)"
CLEANUP_CMDS+=('rm -rf "$SESSION_DIRS/pid.$ROOT"' 'rmdir "$SESSION_DIRS"')
[[ -n $(hostname) ]] || fail "no host name: the session directory cannot be found"
AFTER_KILL='[[ -d $SESSION_DIRS/pid.$ROOT ]] || fail "no session directory $SESSION_DIRS/pid.$ROOT"
  rm -rf "$SESSION_DIRS/pid.$ROOT"
  remove_job_files'
mpi_case openmpi mpirun.openmpi --allow-run-as-root
