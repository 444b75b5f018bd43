// SPDX-License-Identifier: Apache-2.0
#pragma once
// PyTorch's `--numa-binding=socket`: the allowed CPUs of every NUMA node in
// the socket of the GPU's node.

#include "gpuaff/config.hpp"

#include "gpuaff/policy/bind.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

/// s = the package of the lowest allowed CPU of the GPU's node; the result is
/// the union of the allowed CPUs of every node whose lowest allowed CPU is in s.
///
/// Nodes with no allowed CPU (memory-only nodes such as GB200 GPU memory, HBM
/// or CXL; nodes outside a container's cpuset) are skipped: they have no
/// lowest CPU, and PyTorch's version of this rule crashes on them.
/// Errors: those of resolve_gpu_node; Errc::empty_result when the GPU's own
/// node has no allowed CPU; Errc::not_found when the topology places that
/// CPU in no package (no socket information); Errc::parse_error when usable
/// CPUs of the package are in no node (a node's cpulist was lost).
struct SocketPolicy {
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    const Topology& topo = ctx.topology();
    GPUAFF_TRY(int node, ctx.gpu_node(gpu));
    const CpuSet& start = ctx.node_cpus(node);
    if (start.empty()) return no_allowed_cpu(topo, gpu, node, "socket");
    const Package* pkg = topo.package_of_cpu(start.first());
    if (pkg == nullptr)
      return fail(Errc::not_found, "socket: CPU ", start.first(), " of NUMA node ", node, " (", detail::gpu_label(topo, gpu),
                  ") belongs to no package in ", topo.origin.view(), "; without socket information use policy=node");
    CpuSet out;
    // Usable CPUs of the package that no node lists: a node lost its cpulist
    // (a memory-only node's package has all its CPUs in other nodes), and the
    // socket's share would silently lack them.
    CpuSet lost = pkg->cpus & topo.usable();
    for (std::size_t i = 0; i < topo.nodes.size(); ++i) {
      lost -= topo.nodes[i].cpus;
      const CpuSet& cpus = ctx.node_cpus_at(i);
      if (cpus.empty()) continue;  // memory-only or not allowed: no lowest CPU to place
      if (pkg->cpus.test(cpus.first())) out |= cpus;
    }
    if (!lost.empty())
      return fail(Errc::parse_error, "socket: CPUs ", detail::cpulist_text(lost), " of the package of ", detail::gpu_label(topo, gpu),
                  " are in no NUMA node's cpulist in ", topo.origin.view(), ", so a node of that socket lost its "
                  "list (see the notes of gpuaff topo) and the socket's CPUs are unknown; record the machine again, "
                  "or use policy=node");
    return out;
  }
};
static_assert(BindingPolicy<SocketPolicy>);

}  // namespace v0
}  // namespace gpuaff
