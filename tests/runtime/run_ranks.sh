#!/usr/bin/env bash
# run_ranks.sh N BINARY [ARGS...]: BINARY on N MPI ranks of this machine (shared memory between
# them, oversubscribing its cores; root allowed: CI runs as root). Its exit code: mpirun's.
set -euo pipefail
command -v mpirun >/dev/null || { echo "FAIL: no mpirun (bash tools/setup.sh installs openmpi-bin)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
n=$1
shift
exec mpirun -np "$n" --bind-to none "$@"
