// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where a GPU is: its NUMA node (resolve_gpu_node) and the memory nodes to
// bind for it (memory_nodes). The GPUs that share a node: context.hpp;
// binding a PCI device that is not a visible GPU: pci_target.hpp.

#include "gpuaff/config.hpp"

#include <vector>

#include "gpuaff/policy/common.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// Whether `a` and `b` hold the same CPUs of `within`.
constexpr bool same_within(const CpuSet& a, const CpuSet& b, const CpuSet& within) {
  for (int i = 0, top = within.last() / 64; i <= top; ++i)
    if (((a.word_at(i) ^ b.word_at(i)) & within.word_at(i)) != 0) return false;
  return true;
}

/// resolve_gpu_node without the participation check (peers are checked by the caller).
constexpr Result<int> resolve_node_of(const Topology& topo, int gpu, const JobOptions& job) {
  const PciDevice& d = topo.gpus[static_cast<std::size_t>(gpu)].pci;
  if (d.numa_node >= 0) {
    if (topo.find_node(d.numa_node) != nullptr) return d.numa_node;
    return fail(Errc::not_found, gpu_label(topo, gpu), " reports NUMA node ", d.numa_node,
                ", which the topology does not have (nodes: ", node_ids_text(topo),
                "); the recording may be incomplete: record it again with gpuaff record");
  }
  if (topo.nodes.empty())
    return fail(Errc::not_found, gpu_label(topo, gpu), " has no NUMA node (numa_node -1) and ", topo.origin.view(),
                " lists no NUMA node; check the topology source");
  // 1. Only one node has CPUs: whatever the firmware forgot, the GPU's CPUs
  //    are there (memory-only nodes such as GPU memory are never candidates).
  int cpu_nodes = 0;
  int only = -1;
  for (const NumaNode& n : topo.nodes) {
    if (n.cpus.empty()) continue;
    ++cpu_nodes;
    only = n.id;
  }
  if (cpu_nodes == 1) return only;
  // 2. local_cpulist names exactly one node. With numa_node -1 the kernel
  //    reports every online CPU, so this holds only where the firmware gave
  //    a narrower affinity. Compared on online CPUs: a recording may list
  //    offline CPUs in one file and not the other.
  if (d.has_local_cpus && d.local_cpus.intersects(topo.online)) {
    for (const NumaNode& n : topo.nodes)
      if (n.cpus.any() && same_within(n.cpus, d.local_cpus, topo.online)) return n.id;
  }
  // 3. The user named the node.
  if (job.assume_node >= 0) {
    if (topo.find_node(job.assume_node) != nullptr) return job.assume_node;
    return fail(Errc::invalid_argument, "unknown_node=", job.assume_node,
                " names a NUMA node this machine does not have (nodes: ", node_ids_text(topo), ")");
  }
  if (job.assume_node < -1)
    return fail(Errc::invalid_argument, "unknown_node=", job.assume_node, " is not a node id (use 0 or above)");
  // 4. PyTorch's rule: node 0. Where there is no node 0 (sparse ids), the
  //    lowest-numbered node with CPUs, so that the binding is not empty.
  if (job.unknown_node == UnknownNode::node0) {
    if (topo.find_node(0) != nullptr) return 0;
    for (const NumaNode& n : topo.nodes)
      if (n.cpus.any()) return n.id;
    return topo.nodes.front().id;
  }
  if (d.has_local_cpus)
    return fail(Errc::unknown_locality, gpu_label(topo, gpu), " does not say which NUMA node it is on (numa_node -1, local_cpulist ",
                cpulist_text(d.local_cpus), " matches no single node of ", topo.nodes.size(),
                "); pass unknown_node=N to name its node, unknown_node=node0 for PyTorch's behaviour, or fallback=unbound");
  return fail(Errc::unknown_locality, gpu_label(topo, gpu), " does not say which NUMA node it is on (numa_node -1, no local_cpulist, ",
              topo.nodes.size(),
              " nodes); pass unknown_node=N to name its node, unknown_node=node0 for PyTorch's behaviour, or fallback=unbound");
}

}  // namespace detail

/// The NUMA node of GPU `gpu`:
///  - its PCI numa_node when that is >= 0 (it must be a node of the topology);
///  - numa_node -1 (VMs, single-node firmware): the only node with CPUs, if
///    there is one; else the node whose CPUs equal the device's local_cpulist
///    (on online CPUs); else JobOptions::assume_node; else, with
///    UnknownNode::node0, node 0 (or the lowest node with CPUs if there is no
///    node 0); else an error.
/// Errors: Errc::not_found (no such GPU, or a numa_node the topology lacks),
/// Errc::invalid_argument (GPU beyond --nproc, bad nproc, bad assume_node),
/// Errc::unknown_locality (numa_node -1 and nothing settles it; the message
/// says which flags do).
constexpr Result<int> resolve_gpu_node(const Topology& topo, int gpu, const JobOptions& job = {}) {
  GPUAFF_TRY_VOID(detail::check_gpu(topo, gpu, job));
  return detail::resolve_node_of(topo, gpu, job);
}

/// The NUMA nodes to bind memory to for GPU `gpu`: its resolved node (a CPU
/// node; on GB200/GH200 a GPU's PCI numa_node is its Grace CPU node, not the
/// GPU-memory nodes).
/// Mems_allowed_list is not consulted here: a CPU-only binding must not fail
/// because of memory, and applying a memory policy outside it is reported by
/// the apply layer (which can fall back to CPU-only binding when asked).
/// Errors: those of resolve_gpu_node; Errc::out_of_range for a node id beyond NodeSet.
constexpr Result<NodeSet> memory_nodes(const Topology& topo, int gpu, const JobOptions& job = {}) {
  GPUAFF_TRY(int node, resolve_gpu_node(topo, gpu, job));
  if (!NodeSet::valid_id(node))
    return fail(Errc::out_of_range, "NUMA node ", node, " of ", detail::gpu_label(topo, gpu), " is beyond the ",
                NodeSet::capacity, " nodes gpuaff supports");
  return NodeSet::single(node);
}

}  // namespace v0
}  // namespace gpuaff
