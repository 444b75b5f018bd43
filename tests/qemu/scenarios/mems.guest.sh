# SPDX-License-Identifier: Apache-2.0
# The allowed memory nodes of a live load (docs/contract.md section 1): asked
# of the kernel (get_mempolicy with MPOL_F_MEMS_ALLOWED), they must be the
# nodes /proc/self/status prints as Mems_allowed_list. A shell joins a cgroup
# v2 cpuset whose cpuset.mems is node 1 (of 0-2) and runs gpuaff topo there.
[ "$GPUAFF_QEMU_SHAPE" = 2s2n-smt2-memnode ] || exit 0
[ -x /bin/gpuaff ] || { echo "@@GPUAFF-QEMU mems skipped=no-tool"; exit 0; }
cg=/sys/fs/cgroup
[ -e $cg/cgroup.controllers ] || { mkdir -p $cg && mount -t cgroup2 cgroup2 $cg; }
echo +cpuset >$cg/cgroup.subtree_control
mkdir -p $cg/memjob && echo 1 >$cg/memjob/cpuset.mems || echo "@@GPUAFF-QEMU mems no-cpuset"
sh -c '
  echo $$ >/sys/fs/cgroup/memjob/cgroup.procs
  echo "@@GPUAFF-QEMU mems status $(grep Mems_allowed_list /proc/self/status | tr -d " \t")"
  echo "@@GPUAFF-QEMU mems topo $(/bin/gpuaff topo --format json | grep -o "\"mems_allowed\": *\"[^\"]*\"" | tr -d " ")"
'
