# SPDX-License-Identifier: Apache-2.0
# Checks mems.guest.sh's lines (sourced by run_guest.sh after the guest
# powered off). Only shape 2s2n-smt2-memnode runs it.
if [[ $shape == 2s2n-smt2-memnode ]]; then
  grep -q '^@@GPUAFF-QEMU mems skipped=no-tool' "$log.txt" && { echo "mems: skipped (no static tool)"; return 0; }
  lines=$(grep '^@@GPUAFF-QEMU mems' "$log.txt")
  # The guest kernel has cgroup v2's cpuset (init.sh's --baseline checks use it).
  grep -q '^@@GPUAFF-QEMU mems no-cpuset' "$log.txt" && die "mems: cpuset.mems could not be set to 1: $lines"
  # The shell joined a cpuset of memory node 1 only: the kernel's own text says 1.
  grep -q '^@@GPUAFF-QEMU mems status Mems_allowed_list:1$' "$log.txt" ||
    die "mems: the kernel's Mems_allowed_list in the cpuset of node 1 is not 1: $lines"
  # gpuaff asked the kernel (get_mempolicy), not the file: the same node.
  grep -q '^@@GPUAFF-QEMU mems topo "mems_allowed":"1"$' "$log.txt" ||
    die "mems: gpuaff topo's mems_allowed in the cpuset of node 1 is not \"1\": $lines"
  echo "mems: in a cpuset of memory node 1 (of 0-2), the kernel and gpuaff topo both say 1"
fi
