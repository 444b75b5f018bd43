// SPDX-License-Identifier: Apache-2.0
#pragma once
// BindingContext: what every binding of one job shares, for the policies to
// evaluate on: the usable CPUs, the participating GPUs and their NUMA nodes,
// and per node its allowed CPUs and physical cores. A context derives each
// fact once, when a policy first asks, and keeps it, so binding every GPU
// with every policy (bind_all, bind_table) pays for each fact once, while one
// binding (bind) pays only for what its policy reads.
//
// Facts are kept only when they succeed: a failure is derived again where it
// is asked for, by the same code, so it reads exactly as without the context.
// Part of the toolkit for writing a policy (docs/policies.md, "Writing your
// own policy").

#include "gpuaff/config.hpp"

#include <cstddef>
#include <string_view>
#include <vector>

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/cores.hpp"
#include "gpuaff/policy/locality.hpp"

namespace gpuaff {
inline namespace v0 {

/// Where a GPU stands among the participating GPUs of its NUMA node.
struct NodeShare {
  int node = -1;  ///< the GPU's node
  int rank = 0;   ///< its position among the node's participating GPUs, in index order
  int count = 0;  ///< how many participating GPUs the node has
};

/// The facts one job's bindings share. Built from a Topology and the job; the
/// Topology must outlive it. Not copyable: what it hands out refers into it.
class BindingContext {
 public:
  constexpr BindingContext(const Topology& topo, const JobOptions& job = {})
      : topo_(&topo),
        job_(job),
        usable_(topo.usable()),
        gpu_nodes_(topo.gpus.size(), unresolved),
        node_facts_(topo.nodes.size() + 1) {  // the last: a node id the topology lacks
    auto n = detail::participating_gpus(topo, job);
    participating_ = n ? *n : 0;
  }
  BindingContext(const BindingContext&) = delete;
  BindingContext& operator=(const BindingContext&) = delete;

  constexpr const Topology& topology() const { return *topo_; }
  constexpr const JobOptions& job() const { return job_; }
  /// Topology::usable(): the allowed and online CPUs.
  constexpr const CpuSet& usable() const { return usable_; }

  /// Checks that `gpu` exists and takes part in the job; returns how many
  /// GPUs take part (GPUs 0..n-1).
  /// Errors: Errc::not_found (no such GPU), Errc::invalid_argument (beyond
  /// JobOptions::nproc, or a bad nproc).
  constexpr Result<int> check_gpu(int gpu) const {
    if (gpu >= 0 && gpu < participating_) return participating_;
    return detail::check_gpu(*topo_, gpu, job_);
  }

  /// resolve_gpu_node(): the NUMA node of a participating GPU.
  constexpr Result<int> gpu_node(int gpu) {
    GPUAFF_TRY_VOID(check_gpu(gpu));
    return peer_node(gpu);
  }

  /// The node of visible GPU `gpu` (an index below Topology::gpus.size()),
  /// without the participation check: for the peers of a checked GPU.
  constexpr Result<int> peer_node(int gpu) {
    int& known = gpu_nodes_[static_cast<std::size_t>(gpu)];
    if (known != unresolved) return known;
    GPUAFF_TRY(int node, detail::resolve_node_of(*topo_, gpu, job_));
    known = node;
    return node;
  }

  /// Resolves the node of every participating GPU (then read by
  /// known_node()); returns how many there are. For a policy whose share
  /// depends on every GPU's node.
  /// Errors: the first GPU's that has no known node, prefixed with `why`.
  template <class = void>
  constexpr Result<int> all_gpu_nodes(std::string_view why) {
    for (int i = 0; i < participating_; ++i) {
      auto r = peer_node(i);
      if (!r) return fail(r.error().code(), why, ", every GPU of the job needs a known node: ", r.error().message());
    }
    return participating_;
  }
  /// After a successful all_gpu_nodes(): the node of participating GPU `gpu`.
  constexpr int known_node(int gpu) const { return gpu_nodes_[static_cast<std::size_t>(gpu)]; }

  /// The node of `gpu` and its place among the node's participating GPUs.
  /// Errors: those of check_gpu and gpu_node (for this GPU or a peer).
  template <class = void>
  constexpr Result<NodeShare> node_share(int gpu) {
    GPUAFF_TRY(int participating, check_gpu(gpu));
    GPUAFF_TRY(int node, peer_node(gpu));
    NodeShare s;
    s.node = node;
    for (int i = 0; i < participating; ++i) {
      if (i == gpu) {
        s.rank = s.count++;
        continue;
      }
      auto other = peer_node(i);
      if (!other)
        return fail(other.error().code(), "to split node ", node,
                    " among its GPUs, every GPU of the job needs a known node: ", other.error().message());
      if (*other == node) ++s.count;
    }
    return s;
  }

  /// The allowed (usable) CPUs of node `id`; empty when the node does not
  /// exist, is memory-only, or lies wholly outside the allowed set.
  constexpr const CpuSet& node_cpus(int id) { return facts(id).cpus; }
  /// node_cpus() of Topology::nodes[at].
  constexpr const CpuSet& node_cpus_at(std::size_t at) { return facts_at(at).cpus; }
  /// physical_cores(node_cpus(id)).
  template <class = void>
  constexpr const CoreList& cores(int id) {
    NodeFacts& f = facts(id);
    if (!f.has_cores) {
      f.cores = physical_cores(*topo_, f.cpus);
      f.has_cores = true;
    }
    return f.cores;
  }
  /// cores(id).size(), counted without building the list when it is not built yet.
  template <class = void>
  constexpr int core_count(int id) {
    NodeFacts& f = facts(id);
    if (f.has_cores) return static_cast<int>(f.cores.size());
    if (f.core_count < 0) f.core_count = count_physical_cores(*topo_, f.cpus);
    return f.core_count;
  }

 private:
  static constexpr int unresolved = -1;  ///< a GPU's node not yet resolved (a resolved node is >= 0)
  // What a policy asks about a node, each part worked out when first asked.
  struct NodeFacts {
    bool has_cpus = false;
    bool has_cores = false;
    int core_count = -1;
    CpuSet cpus;
    CoreList cores;
  };

  constexpr NodeFacts& facts(int id) {
    int at = topo_->node_index(id);
    return facts_at(at < 0 ? topo_->nodes.size() : static_cast<std::size_t>(at));
  }
  constexpr NodeFacts& facts_at(std::size_t at) {
    NodeFacts& f = node_facts_[at];
    if (!f.has_cpus) {
      if (at < topo_->nodes.size()) {
        f.cpus = topo_->nodes[at].cpus;
        f.cpus &= usable_;
      }
      f.has_cpus = true;
    }
    return f;
  }

  const Topology* topo_;
  JobOptions job_;
  CpuSet usable_;
  int participating_ = 0;  ///< 0 when the job's nproc is bad (check_gpu() fails first)
  std::vector<int> gpu_nodes_;          ///< per visible GPU: its node once resolved, else `unresolved`
  std::vector<NodeFacts> node_facts_;  ///< per Topology::nodes entry, then one for ids it lacks
};

/// A policy written as a rule on a BindingContext: a copyable value with
/// `constexpr Result<CpuSet> evaluate(BindingContext&, int gpu) const`.
/// Every built-in policy is one; gpuaff::bind makes the context.
template <class P>
concept ContextPolicy = std::copy_constructible<P> && requires(const P& p, BindingContext& ctx, int gpu) {
  { p.evaluate(ctx, gpu) } -> std::same_as<Result<CpuSet>>;
};

/// A binding policy: a ContextPolicy, or a copyable value with
/// `constexpr Result<CpuSet> bind(const Topology&, int gpu, const JobOptions&) const`.
/// Either goes through the same gpuaff::bind as the built-in ones, which
/// checks its result.
template <class P>
concept BindingPolicy = ContextPolicy<P> || (std::copy_constructible<P> &&
                                             requires(const P& p, const Topology& topo, int gpu, const JobOptions& job) {
                                               { p.bind(topo, gpu, job) } -> std::same_as<Result<CpuSet>>;
                                             });

}  // namespace v0
}  // namespace gpuaff
