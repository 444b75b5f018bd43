#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slurm's specialized cores (docs/contract.md section 7): the one-node cluster
# of cluster.sh with CpuSpecList=0, so CPU 0 is the node's system core and no
# job may use it (slurm.schedmd.com/core_spec.html). A step then holds CPU 1
# alone: gpuaff exec under --baseline cgroup binds within it (never CPU 0),
# and topo names CPU 0 as outside the step's cgroup cpuset.
#   core_spec_test.sh GPUAFF
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUAFF" >&2; exit 2; }
gpuaff=$(realpath -- "$1")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"  # skip, prepare_root, slurm_prologue, slurm_start_cluster

slurm_prologue core-spec
export GPUAFF_SLURM_NODE_EXTRA="CpuSpecList=0"
slurm_start_cluster
failures=0
expect() {  # expect WHAT ACTUAL EXPECTED
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', expected '$3'"; failures=$((failures + 1)); fi
}
# One task, one fake GPU, Slurm's binding off. Both fake GPUs sit on node 0
# (CPUs 0-1); the step's cpuset is CPU 1 (CPU 0 is specialized), so the
# GPU's share under --baseline cgroup is CPU 1.
out=$(timeout 60 srun -n1 --gres=gpu:1 --cpu-bind=none bash "$here/task.sh" --own-root "$tmp/task_spec" -- \
  "$gpuaff" exec --gpu 0 --baseline cgroup --root @ROOT@ -- grep Cpus_allowed_list /proc/self/status 2>"$tmp/spec.err") || true
cat "$tmp/spec.err" >&2
echo "$out" | sed 's/^/    /'
expect "the step starts on CPU 1 alone (CPU 0 is the spec core)" "$(sed -n 's/^before=\([^ ]*\).*/\1/p' <<<"$out")" "1"
expect "exec binds within the step, off the spec core" "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' <<<"$out")" "1"
topo=$(timeout 60 srun -n1 --cpu-bind=none "$gpuaff" topo 2>&1) || true
expect "topo in the step names CPU 0 outside the cgroup cpuset" \
  "$(sed -n 's/^  outside the cgroup cpuset: //p' <<<"$topo")" "0"
if [[ $failures -ne 0 ]]; then
  echo "FAIL: $failures check(s) failed; slurmd log tail:"
  tail -n 20 "$cluster/log/slurmd.log"
  exit 1
fi
echo "PASS: CpuSpecList=0 keeps every share off CPU 0"
