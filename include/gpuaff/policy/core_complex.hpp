#pragma once
// PyTorch's `--numa-binding=core-complex`: one last-level-cache group (an AMD
// CCX, an Intel socket's L3) of the GPU's node per GPU.

#include <algorithm>
#include <vector>

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/locality.hpp"

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
    GPUAFF_TRY(detail::NodeShare share, detail::node_share(topo, gpu, job));
    CpuSet cpus = detail::node_allowed(topo, share.node);
    if (cpus.empty()) return detail::no_allowed_cpu(topo, gpu, share.node, "core-complex");
    struct Group {
      int key;
      int count;
      CpuSet cpus;
    };
    std::vector<Group> groups;
    CpuSet left = cpus;
    for (const CacheGroup& g : topo.core_complexes) {
      if (!g.cpus.intersects(left)) continue;
      CpuSet mine = g.cpus & left;
      left -= mine;
      groups.push_back(Group{g.cpus.first(), mine.count(), mine});
    }
    if (left.any()) groups.push_back(Group{left.first(), left.count(), left});
    std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      return a.count != b.count ? a.count > b.count : a.key < b.key;
    });
    return groups[static_cast<std::size_t>(share.rank) % groups.size()].cpus;
  }
};
static_assert(BindingPolicy<CoreComplexPolicy>);

}  // namespace v0
}  // namespace gpuaff
