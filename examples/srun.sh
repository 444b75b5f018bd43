#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slurm: one task per GPU, each bound by gpuaff. srun sets SLURM_LOCALID in
# every task; `gpuaff exec --local-rank` turns it into the GPU index.
# Keep Slurm's own CPU binding out of the way (--cpu-bind=none) and give each
# task the whole node's CPUs (--cpus-per-task or an exclusive node), so gpuaff
# can pick the GPU's CPUs within the job's allocation (its cgroup).
#
#   sbatch --nodes 2 --gpus-per-node 8 --exclusive examples/srun.sh ./trainer --epochs 3
# or inside an allocation:
#   examples/srun.sh ./trainer --epochs 3
#
# If Slurm gives each task only its own GPU (--gpus-per-task 1 or
# --gpu-bind=single:1), CUDA_VISIBLE_DEVICES holds one GPU per task and the
# local rank no longer indexes it: use `gpuaff exec --gpu 0` instead.
# Memory is left to the kernel's first touch (already the GPU's node once the
# CPUs are bound); add --membind local for strict binding, which can end in the
# OOM killer when the node fills up.
# Environment: GPUS_PER_NODE (default 8), POLICY (default exclusive), GPUAFF.
#SBATCH --ntasks-per-node=8
set -euo pipefail
gpuaff=${GPUAFF:-gpuaff}
exec srun --ntasks-per-node "${GPUS_PER_NODE:-8}" --cpu-bind=none \
  "$gpuaff" exec --local-rank --policy "${POLICY:-exclusive}" -- "$@"
