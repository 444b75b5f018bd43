#pragma once
// PyTorch's `--numa-binding=node`: the allowed CPUs of the GPU's NUMA node.

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

/// The allowed CPUs of the GPU's NUMA node (resolve_gpu_node).
struct NodePolicy {
  /// Errors: those of resolve_gpu_node; Errc::empty_result when the node has
  /// no allowed CPU (a memory-only node, or a container that excludes it).
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    detail::JobContext ctx(topo, job);
    return evaluate(ctx, gpu);
  }
  /// bind() on the facts of a context (shared by the job's bindings).
  constexpr Result<CpuSet> evaluate(detail::JobContext& ctx, int gpu) const {
    GPUAFF_TRY(int node, ctx.resolve(gpu));
    const CpuSet& cpus = ctx.allowed(node);
    if (cpus.empty()) return detail::no_allowed_cpu(ctx.topo(), gpu, node, "node");
    return cpus;
  }
};
static_assert(BindingPolicy<NodePolicy>);

}  // namespace v0
}  // namespace gpuaff
