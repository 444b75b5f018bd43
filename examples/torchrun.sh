#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start one bound worker per GPU with torchrun. torchrun sets LOCAL_RANK in
# each worker; `gpuaff exec --local-rank` binds that worker's threads (and
# memory, with MEMBIND) to its GPU's CPUs, then execs Python. torchrun also
# sets LOCAL_WORLD_SIZE, which gpuaff takes as the number of GPUs of the job
# on this machine (as --nproc would), so NPROC workers on a larger machine
# split only the first NPROC GPUs' nodes. No torchrun
# change is needed, and the binding happens inside the worker, so it also
# holds for forkserver/spawn children that torchrun's own binding misses.
#
#   examples/torchrun.sh train.py [script args...]
# Environment: NPROC (default: GPUs visible to gpuaff), POLICY (default exclusive),
#              MEMBIND (default none: the kernel's first touch, already on the GPU's node once
#              the CPUs are bound; local is strict and can end in the OOM killer),
#              GPUAFF (default: gpuaff on PATH).
# A binding the machine refuses stops the job with one error line (exit 3-6):
# nothing runs unbound without saying so. To run unbound instead, add
# --fallback unbound to the gpuaff options yourself: it warns, and usage
# mistakes still exit 2.
set -euo pipefail
gpuaff=${GPUAFF:-gpuaff}
policy=${POLICY:-exclusive}
membind=${MEMBIND:-none}
if [[ -z ${NPROC:-} ]]; then
  # One worker per visible GPU: count the GPU rows of `gpuaff topo --format json`.
  NPROC=$("$gpuaff" topo --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))')
fi
# torch >= 2.x spells --nproc-per-node/--no-python; 1.13 (Debian 12) only the
# underscore forms, which later versions still accept. torch 1.13 on Python
# 3.11 crashes parsing --redirects/--tee unless each names exactly one stream
# (0 and 3 fail there, including the default): 1 logs stdout per rank and tees
# it to the console with a [default<rank>]: prefix; stderr passes through.
exec torchrun --standalone --nproc_per_node "$NPROC" --no_python --redirects 1 --tee 1 \
  "$gpuaff" exec --local-rank --policy "$policy" --membind "$membind" --omp-threads -- \
  python3 "$@"
