#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Open MPI (mpirun/mpiexec): one rank per GPU, each bound by gpuaff. Open MPI
# sets OMPI_COMM_WORLD_LOCAL_RANK (MPICH and Intel MPI set MPI_LOCALRANKID,
# Cray PALS sets PALS_LOCAL_RANKID); `gpuaff exec --local-rank` reads any of them.
# --bind-to none: Open MPI's own core binding would only be replaced (where
# it cannot be turned off, add --baseline cgroup to the gpuaff options).
# Memory is left to the kernel's first touch; --membind local is strict.
#
#   NP=8 examples/mpirun.sh ./trainer --epochs 3
#   NP=16 HOSTS=node1:8,node2:8 examples/mpirun.sh ./trainer
# Environment: NP (default 8), HOSTS (optional), POLICY (default core-complex), GPUAFF.
set -euo pipefail
gpuaff=${GPUAFF:-gpuaff}
hosts=()
[[ -n ${HOSTS:-} ]] && hosts=(--host "$HOSTS")
exec mpirun -np "${NP:-8}" "${hosts[@]}" --bind-to none \
  "$gpuaff" exec --local-rank --policy "${POLICY:-core-complex}" -- "$@"
