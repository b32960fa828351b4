#!/usr/bin/env bash
# Open MPI with its default settings (mpirun -np 2: vader shared memory,
# its session directory in /tmp), a 2-rank cg_mpi job checkpointed by its
# launcher as a tree, killed, restored: the uninterrupted run's result.
# (--allow-run-as-root: the tests run as root.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$CORPUS_DIR/mpi_case.sh"
corpus_begin openmpi "$@"
mpi_case openmpi mpirun.openmpi --allow-run-as-root
