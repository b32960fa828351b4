#!/usr/bin/env bash
# Open MPI with its default settings (mpirun -np 2: vader shared memory,
# its session directory in /tmp), a 2-rank cg_mpi job checkpointed by its
# launcher as a tree, killed, restored: the uninterrupted run's result.
# (--allow-run-as-root: the tests run as root.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$CORPUS_DIR/mpi_case.sh"
corpus_begin openmpi "$@"
# The session directory a killed job leaves (a finished one removes it).
# shellcheck disable=SC2034 # read by the commands in CLEANUP_CMDS and AFTER_KILL
SESSION_DIRS="/tmp/ompi.$(hostname).$(id -u)"
CLEANUP_CMDS+=('rm -rf "$SESSION_DIRS/pid.$ROOT"' 'rmdir "$SESSION_DIRS"')
mpi_case openmpi mpirun.openmpi --allow-run-as-root
