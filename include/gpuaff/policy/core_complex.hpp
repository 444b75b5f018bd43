#pragma once
// PyTorch's `--numa-binding=core-complex`: one last-level-cache group (an AMD
// CCX, an Intel socket's L3) of the GPU's node per GPU.

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
      int index;  // into Topology::core_complexes; -1: the CPUs of no listed group
    };
    std::vector<Group> groups;
    detail::SparseSet left(cpus);
    for (std::size_t i = 0; i < topo.core_complexes.size() && !left.empty(); ++i) {
      const CpuSet& g = topo.core_complexes[i].cpus;
      if (!left.hits(g)) continue;
      int before = left.count_left();
      left.remove(g);
      groups.push_back(Group{g.first(), before - left.count_left(), static_cast<int>(i)});
    }
    if (!left.empty()) groups.push_back(Group{left.first_left(), left.count_left(), -1});
    // Insertion sort (more allowed CPUs first, then key): a node has a few groups.
    auto before = [](const Group& a, const Group& b) { return a.count != b.count ? a.count > b.count : a.key < b.key; };
    for (std::size_t i = 1; i < groups.size(); ++i) {
      Group g = groups[i];
      std::size_t j = i;
      for (; j > 0 && before(g, groups[j - 1]); --j) groups[j] = groups[j - 1];
      groups[j] = g;
    }
    int chosen = groups[static_cast<std::size_t>(share.rank) % groups.size()].index;
    // The chosen group's CPUs: those of the node that no earlier group took.
    CpuSet mine = cpus;
    for (std::size_t i = 0; i < topo.core_complexes.size(); ++i) {
      const CpuSet& g = topo.core_complexes[i].cpus;
      if (static_cast<int>(i) == chosen) return mine & g;
      if (g.intersects(mine)) mine -= g;
    }
    return mine;
  }
};
static_assert(BindingPolicy<CoreComplexPolicy>);

}  // namespace v0
}  // namespace gpuaff
