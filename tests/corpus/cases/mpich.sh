#!/usr/bin/env bash
# MPICH with its default settings (hydra's mpiexec -np 2), a 2-rank cg_mpi
# job checkpointed by its launcher as a tree, killed, restored: the
# uninterrupted run's result.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$CORPUS_DIR/mpi_case.sh"
corpus_begin mpich "$@"
mpi_case mpich mpiexec.mpich
