// SPDX-License-Identifier: Apache-2.0
#pragma once
// The consistency checks every source applies to what it read, whatever the
// format (sysfs root, JSON file): each finds the first offending pair, and the
// source words the error with its own file names.
//
// - Two NUMA nodes that list the same CPU: the kernel maps each CPU to exactly
//   one node, so a tree where two cpulists overlap was edited or damaged, and
//   every node-based binding drawn from it would be wrong (a GPU bound to CPUs
//   of two sockets, `exclusive` sets that collide). An error.
// - Two PCI devices with the same address: the kernel names each function
//   once; a second entry would make a duplicate GPU and shift every later
//   index. An error.
// - Online CPUs in no node's cpulist: no policy is wrong because of them (a
//   node binding simply never includes them), so the sources only note them.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Two nodes (positions in `nodes`, first < second) and the CPUs both list.
struct NodeOverlap {
  std::size_t first = 0;
  std::size_t second = 0;
  CpuSet shared;
};

/// The first pair of nodes whose cpulists share a CPU, or nullopt.
template <class = void>
std::optional<NodeOverlap> find_node_overlap(const std::vector<NumaNode>& nodes) {
  CpuSet seen;
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    if (nodes[j].cpus.intersects(seen)) {
      for (std::size_t i = 0; i < j; ++i) {
        CpuSet shared = nodes[i].cpus & nodes[j].cpus;
        if (!shared.empty()) return NodeOverlap{i, j, shared};
      }
    }
    seen |= nodes[j].cpus;
  }
  return std::nullopt;
}

/// The wording of an overlap, e.g. "nodes 0 and 1 both list CPUs 4-7".
template <class = void>
std::string node_overlap_text(const std::vector<NumaNode>& nodes, const NodeOverlap& o) {
  return std::string("nodes ") + std::to_string(nodes[o.first].id) + std::string(" and ") + std::to_string(nodes[o.second].id) +
         " both list CPUs " + o.shared.to_list() + " (each CPU belongs to exactly one node)";
}

/// The first pair of equal addresses (positions, first < second), or nullopt.
template <class = void>
std::optional<std::pair<std::size_t, std::size_t>> find_duplicate_address(
    const std::vector<PciAddress>& addresses) {
  for (std::size_t j = 1; j < addresses.size(); ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (addresses[i] == addresses[j]) return std::pair{i, j};
  return std::nullopt;
}

/// Online CPUs that no node lists (empty when the topology has no nodes).
template <class = void>
CpuSet cpus_in_no_node(const Topology& t) {
  if (t.nodes.empty()) return CpuSet{};
  CpuSet in_nodes;
  for (const auto& n : t.nodes) in_nodes |= n.cpus;
  return t.online - in_nodes;
}

/// The note about `cpus_in_no_node`, naming where the node lists came from.
template <class = void>
std::string no_node_note(const CpuSet& lost, std::string_view where) {
  return std::string(where) + ": online CPUs " + lost.to_list() +
         " are in no node's cpulist; a `node` binding never includes them";
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
