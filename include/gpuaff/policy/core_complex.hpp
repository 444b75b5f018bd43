#pragma once
// PyTorch's `--numa-binding=core-complex`: one last-level-cache group (an AMD
// CCX, an Intel socket's L3) of the GPU's node per GPU.

#include <vector>

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

/// The node's allowed CPUs grouped by Topology::core_complexes (key: lowest
/// CPU of the whole group), sorted by more allowed CPUs first, then key.
/// GPU r of the node gets group r % groups, so GPUs share groups when there
/// are fewer groups than GPUs. Allowed CPUs of the node in no listed group
/// (no cache information) form one more group.
struct CoreComplexPolicy {
  /// Errors: those of resolve_gpu_node (for this GPU or one on its node);
  /// Errc::empty_result naming the node and the allowed set when the node
  /// has no allowed CPU (PyTorch divides by zero there).
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    detail::JobContext ctx(topo, job);
    return evaluate(ctx, gpu);
  }
  /// bind() on the facts of a context (shared by the job's bindings).
  constexpr Result<CpuSet> evaluate(detail::JobContext& ctx, int gpu) const {
    const Topology& topo = ctx.topo();
    GPUAFF_TRY(detail::NodeShare share, detail::node_share(ctx, gpu));
    const CpuSet& cpus = ctx.allowed(share.node);
    if (cpus.empty()) return detail::no_allowed_cpu(topo, gpu, share.node, "core-complex");
    const std::vector<detail::CacheShare>& groups = ctx.cache_groups(share.node);
    int chosen = groups[static_cast<std::size_t>(share.rank) % groups.size()].index;
    // The chosen group's CPUs: those of the node that no earlier group took.
    Result<CpuSet> mine = cpus;  // made in place: returned without a copy
    for (std::size_t i = 0; i < topo.core_complexes.size(); ++i) {
      const CpuSet& g = topo.core_complexes[i].cpus;
      if (static_cast<int>(i) == chosen) {
        *mine &= g;
        break;
      }
      if (g.intersects(*mine)) *mine -= g;
    }
    return mine;
  }
};
static_assert(BindingPolicy<CoreComplexPolicy>);

}  // namespace v0
}  // namespace gpuaff
