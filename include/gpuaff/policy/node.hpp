#pragma once
// PyTorch's `--numa-binding=node`: the allowed CPUs of the GPU's NUMA node.

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/locality.hpp"

namespace gpuaff {
inline namespace v0 {

/// The allowed CPUs of the GPU's NUMA node (resolve_gpu_node).
struct NodePolicy {
  /// Errors: those of resolve_gpu_node; Errc::empty_result when the node has
  /// no allowed CPU (a memory-only node, or a container that excludes it).
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    GPUAFF_TRY(int node, resolve_gpu_node(topo, gpu, job));
    CpuSet cpus = detail::node_allowed(topo, node);
    if (cpus.empty()) return detail::no_allowed_cpu(topo, gpu, node, "node");
    return cpus;
  }
};
static_assert(BindingPolicy<NodePolicy>);

}  // namespace v0
}  // namespace gpuaff
