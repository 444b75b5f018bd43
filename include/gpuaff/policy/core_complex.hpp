// SPDX-License-Identifier: Apache-2.0
#pragma once
// PyTorch's `--numa-binding=core-complex`: one last-level-cache group (an AMD
// CCX, an Intel socket's L3) of the GPU's node per GPU.

#include "gpuaff/config.hpp"

#include <algorithm>
#include <vector>

#include "gpuaff/policy/bind.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// A last-level-cache group of a node's allowed CPUs.
struct CacheShare {
  int key = 0;    ///< lowest CPU of the whole group
  int count = 0;  ///< allowed CPUs of the node it holds
  int index = 0;  ///< into Topology::core_complexes; -1: the node's CPUs in no listed group
};

/// The allowed CPUs `cpus` of a node grouped by Topology::core_complexes
/// (a CPU belongs to the first group that lists it), more allowed CPUs
/// first, then by key; the CPUs in no listed group form one more group.
template <class = void>
constexpr std::vector<CacheShare> cache_groups(const Topology& topo, const CpuSet& cpus) {
  std::vector<CacheShare> groups;
  SparseSet left(cpus);
  for (std::size_t i = 0; i < topo.core_complexes.size() && !left.empty(); ++i) {
    const CpuSet& g = topo.core_complexes[i].cpus;
    if (!left.hits(g)) continue;
    int before = left.count_left();
    left.remove(g);
    groups.push_back(CacheShare{g.first(), before - left.count_left(), static_cast<int>(i)});
  }
  if (!left.empty()) groups.push_back(CacheShare{left.first_left(), left.count_left(), -1});
  std::sort(groups.begin(), groups.end(), [](const CacheShare& a, const CacheShare& b) {
    return a.count != b.count ? a.count > b.count : a.key < b.key;
  });
  return groups;
}

}  // namespace detail

/// The node's allowed CPUs grouped by Topology::core_complexes (key: lowest
/// CPU of the whole group), sorted by more allowed CPUs first, then key.
/// GPU r of the node gets group r % groups, so GPUs share groups when there
/// are fewer groups than GPUs. Allowed CPUs of the node in no listed group
/// (no cache information) form one more group.
/// Errors: those of resolve_gpu_node (for this GPU or one on its node);
/// Errc::empty_result naming the node and the allowed set when the node
/// has no allowed CPU (PyTorch divides by zero there).
struct CoreComplexPolicy {
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    const Topology& topo = ctx.topology();
    GPUAFF_TRY(NodeShare node, ctx.node_share(gpu));
    const CpuSet& cpus = ctx.node_cpus(node.node);
    if (cpus.empty()) return no_allowed_cpu(topo, gpu, node.node, "core-complex");
    std::vector<detail::CacheShare> groups = detail::cache_groups(topo, cpus);
    int chosen = groups[static_cast<std::size_t>(node.rank) % groups.size()].index;
    // The chosen group's CPUs: those of the node that no earlier group took.
    CpuSet mine = cpus;
    for (std::size_t i = 0; i < topo.core_complexes.size(); ++i) {
      const CpuSet& g = topo.core_complexes[i].cpus;
      if (static_cast<int>(i) == chosen) {
        mine &= g;
        break;
      }
      if (g.intersects(mine)) mine -= g;
    }
    return mine;
  }
};
static_assert(BindingPolicy<CoreComplexPolicy>);

}  // namespace v0
}  // namespace gpuaff
