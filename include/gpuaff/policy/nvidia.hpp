#pragma once
// The five modes of NVIDIA's gpu_affinity: all, single, single-unique,
// unique-interleaved and unique-contiguous, with its scope (node/socket),
// SMT (all/one), balanced and min/max physical core options.
//
// The model: each GPU's "node cores" are the physical cores of its node's
// allowed CPUs (a physical core is the tuple of its allowed siblings, grouped
// by Topology::cores, so SMT4/SMT8 and any numbering work). With socket scope,
// each socket's cores local to none of the participating GPUs ("extras") are
// handed round-robin, in ascending order, to the socket's GPU-local cores in
// ascending order; every node core carries its extras along. A mode picks node
// cores (with their extras); the picked list is flattened as: every picked
// node core, then the first extra of each, then the second, and so on;
// min_cores/max_cores act on that list; Smt picks the threads of each core.

#include <algorithm>
#include <vector>

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/locality.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

constexpr Result<void> check_nvidia_options(const NvidiaOptions& o, std::string_view mode) {
  if (o.min_cores < 0)
    return fail(Errc::invalid_argument, mode, ": --min-cores ", o.min_cores, " is negative (0 means at least one core)");
  if (o.max_cores < 0)
    return fail(Errc::invalid_argument, mode, ": --max-cores ", o.max_cores, " is negative (0 means no limit)");
  if (o.max_cores > 0 && o.min_cores > o.max_cores)
    return fail(Errc::invalid_argument, mode, ": --min-cores ", o.min_cores, " is above --max-cores ", o.max_cores);
  return {};
}

/// The allowed CPUs of the socket(s) holding node `node`: the union of the
/// packages that share a CPU with the node.
/// Errors: Errc::not_found when no package holds any CPU of the node.
constexpr Result<CpuSet> socket_cpus(const Topology& topo, int node) {
  const NumaNode* n = topo.find_node(node);
  CpuSet out;
  if (n != nullptr)
    for (const Package& p : topo.packages)
      if (p.cpus.intersects(n->cpus)) out |= p.cpus;
  if (out.empty())
    return fail(Errc::not_found, "--scope socket: NUMA node ", node, " belongs to no package in ", topo.origin.view(),
                " (no socket information); use --scope node");
  return out & topo.usable();
}

/// A node core and the extras (socket scope) it carries.
struct CoreGroup {
  PhysicalCore core;
  std::vector<PhysicalCore> extras;
};

/// The node cores of `node`, each with its socket-scope extras.
/// `gpu_nodes`: the resolved nodes of the participating GPUs (socket scope only).
constexpr Result<std::vector<CoreGroup>> grouped_cores(const Topology& topo, int node, const std::vector<int>& gpu_nodes,
                                                       Scope scope) {
  std::vector<CoreGroup> out;
  for (const PhysicalCore& c : physical_cores(topo, node_allowed(topo, node))) out.push_back(CoreGroup{c, {}});
  if (scope == Scope::node || out.empty()) return out;
  GPUAFF_TRY(CpuSet socket, socket_cpus(topo, node));
  // The socket's GPU-local CPUs: the nodes of participating GPUs in this socket.
  CpuSet assigned;
  std::vector<int> seen;
  for (int m : gpu_nodes) {
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) continue;
    seen.push_back(m);
    auto s = socket_cpus(topo, m);
    if (s && *s == socket) assigned |= node_allowed(topo, m);
  }
  std::vector<PhysicalCore> local = physical_cores(topo, assigned);
  std::vector<PhysicalCore> spare = physical_cores(topo, socket - assigned);
  // Extra k goes to local core k % |local|; so local core p carries extras p, p + |local|, ...
  for (CoreGroup& g : out) {
    std::size_t p = 0;
    while (p < local.size() && local[p].key != g.core.key) ++p;
    for (std::size_t k = p; k < spare.size() && p < local.size(); k += local.size()) g.extras.push_back(spare[k]);
  }
  return out;
}

/// Picked node cores first, then the first extra of each, the second, ...
/// (every extra is kept; none is dropped when some cores carry more than others).
constexpr std::vector<PhysicalCore> flatten(const std::vector<CoreGroup>& picked) {
  std::vector<PhysicalCore> out;
  for (const CoreGroup& g : picked) out.push_back(g.core);
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (const CoreGroup& g : picked) {
      if (round < g.extras.size()) {
        out.push_back(g.extras[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  return out;
}

constexpr CpuSet pick_threads(const std::vector<PhysicalCore>& cores, Smt smt) {
  CpuSet out;
  for (const PhysicalCore& c : cores) {
    if (smt == Smt::all) out |= c.threads;
    else out.set(c.threads.first());
  }
  return out;
}

/// Applies min/max physical cores, then the SMT choice.
constexpr Result<CpuSet> finish_nvidia(const Topology& topo, int gpu, int node, std::vector<PhysicalCore> cores,
                                       const NvidiaOptions& o, std::string_view mode) {
  int need = o.min_cores < 1 ? 1 : o.min_cores;
  if (static_cast<int>(cores.size()) < need)
    return fail(Errc::insufficient_cores, mode, ": ", gpu_label(topo, gpu), " (NUMA node ", node, ") gets ", cores.size(),
                " physical cores, fewer than the minimum of ", need, "; lower --min-cores or run fewer processes");
  if (o.max_cores > 0 && cores.size() > static_cast<std::size_t>(o.max_cores))
    cores.resize(static_cast<std::size_t>(o.max_cores));
  return pick_threads(cores, o.smt);
}

enum class UniqueLayout { interleaved, contiguous };

constexpr Unexpected<Error> too_few_cores(std::string_view mode, int cores, int node, int gpus) {
  return fail(Errc::insufficient_cores, mode, ": only ", cores, " physical cores on node ", node, " but ", gpus,
              " GPUs, and each needs a core of its own; use --policy single or all to share, or fewer processes (--nproc)");
}

constexpr Result<CpuSet> bind_unique(const Topology& topo, int gpu, const JobOptions& job, const NvidiaOptions& o,
                                     UniqueLayout layout) {
  std::string_view mode = layout == UniqueLayout::contiguous ? "unique-contiguous" : "unique-interleaved";
  GPUAFF_TRY_VOID(check_nvidia_options(o, mode));
  GPUAFF_TRY(int participating, check_gpu(topo, gpu, job));
  GPUAFF_TRY(int own, resolve_node_of(topo, gpu, job));
  GPUAFF_TRY(std::vector<int> nodes, participating_nodes(topo, participating, job, mode));
  int gpus_here = 0;  // D: participating GPUs on this node
  int rank = 0;       // j: this GPU's position among them
  for (int i = 0; i < participating; ++i) {
    if (nodes[static_cast<std::size_t>(i)] != own) continue;
    if (i == gpu) rank = gpus_here;
    ++gpus_here;
  }
  GPUAFF_TRY(std::vector<CoreGroup> groups, grouped_cores(topo, own, nodes, o.scope));
  int cores_here = static_cast<int>(groups.size());
  if (cores_here == 0) return no_allowed_cpu(topo, gpu, own, mode);

  int per = cores_here / gpus_here;
  std::size_t usable_groups = groups.size();
  if (o.balanced) {
    // Every GPU gets the smallest share of any node. A node that cannot give
    // each of its GPUs one core (or has no allowed CPU) fails its own GPUs
    // only, instead of pulling every GPU's share to zero.
    if (cores_here < gpus_here) return too_few_cores(mode, cores_here, own, gpus_here);
    std::vector<int> seen;
    for (int m : nodes) {
      if (std::find(seen.begin(), seen.end(), m) != seen.end()) continue;
      seen.push_back(m);
      int d = static_cast<int>(std::count(nodes.begin(), nodes.end(), m));
      int c = count_physical_cores(topo, node_allowed(topo, m));
      if (c >= d && c / d < per) per = c / d;
    }
    usable_groups = static_cast<std::size_t>(gpus_here * per);
  }

  std::vector<CoreGroup> picked;
  if (layout == UniqueLayout::contiguous) {
    if (per == 0) return too_few_cores(mode, cores_here, own, gpus_here);
    for (int k = rank * per; k < (rank + 1) * per; ++k) picked.push_back(groups[static_cast<std::size_t>(k)]);
  } else {
    for (std::size_t k = static_cast<std::size_t>(rank); k < usable_groups; k += static_cast<std::size_t>(gpus_here))
      picked.push_back(groups[k]);
    if (picked.empty()) return too_few_cores(mode, cores_here, own, gpus_here);
  }
  return finish_nvidia(topo, gpu, own, flatten(picked), o, mode);
}

}  // namespace detail

/// `all`: every core of the scope's affinity. Node scope: the node's cores.
/// Socket scope: the socket's cores, those local to any participating GPU
/// first (each part in ascending order), so that max_cores keeps GPU-local
/// cores. A GPU whose node has no allowed CPU still gets its socket's cores
/// with socket scope.
struct AllPolicy {
  NvidiaOptions options{};
  /// Errors: invalid options (Errc::invalid_argument); those of
  /// resolve_gpu_node (socket scope: for every participating GPU);
  /// Errc::empty_result when the scope has no allowed CPU;
  /// Errc::insufficient_cores below min_cores.
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    GPUAFF_TRY_VOID(detail::check_nvidia_options(options, "all"));
    GPUAFF_TRY(int participating, detail::check_gpu(topo, gpu, job));
    GPUAFF_TRY(int node, detail::resolve_node_of(topo, gpu, job));
    if (options.scope == Scope::node) {
      std::vector<detail::PhysicalCore> cores = detail::physical_cores(topo, detail::node_allowed(topo, node));
      if (cores.empty()) return detail::no_allowed_cpu(topo, gpu, node, "all");
      return detail::finish_nvidia(topo, gpu, node, cores, options, "all");
    }
    GPUAFF_TRY(CpuSet socket, detail::socket_cpus(topo, node));
    if (socket.empty())
      return fail(Errc::empty_result, "all --scope socket: the socket of ", detail::gpu_label(topo, gpu), " (NUMA node ",
                  node, ") has no allowed CPU (allowed CPUs: ", detail::cpulist_text(topo.usable()), ")");
    GPUAFF_TRY(std::vector<int> nodes, detail::participating_nodes(topo, participating, job, "all --scope socket"));
    CpuSet local;
    for (int m : nodes) local |= detail::node_allowed(topo, m);
    std::vector<detail::PhysicalCore> all = detail::physical_cores(topo, socket);
    std::vector<detail::PhysicalCore> ordered;
    for (const auto& c : all)
      if (c.threads.intersects(local)) ordered.push_back(c);
    for (const auto& c : all)
      if (!c.threads.intersects(local)) ordered.push_back(c);
    return detail::finish_nvidia(topo, gpu, node, ordered, options, "all");
  }
};
static_assert(BindingPolicy<AllPolicy>);

/// `single`: the first node core; the GPUs of a node share it. Always one
/// physical core (min_cores above 1 is an error; max_cores has no effect).
struct SinglePolicy {
  NvidiaOptions options{};
  /// Errors: invalid options; those of resolve_gpu_node; Errc::empty_result
  /// when the node has no allowed CPU.
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    GPUAFF_TRY_VOID(detail::check_nvidia_options(options, "single"));
    if (options.min_cores > 1)
      return fail(Errc::invalid_argument, "single: gives one physical core per GPU, so --min-cores ", options.min_cores,
                  " cannot be met; use unique-contiguous or all");
    GPUAFF_TRY(int node, resolve_gpu_node(topo, gpu, job));
    std::vector<detail::PhysicalCore> cores = detail::physical_cores(topo, detail::node_allowed(topo, node));
    if (cores.empty()) return detail::no_allowed_cpu(topo, gpu, node, "single");
    cores.resize(1);
    return detail::pick_threads(cores, options.smt);
  }
};
static_assert(BindingPolicy<SinglePolicy>);

/// `single-unique`: the first node core not taken by a lower GPU, i.e. node
/// core r for the node's r-th participating GPU. One physical core.
struct SingleUniquePolicy {
  NvidiaOptions options{};
  /// Errors: invalid options; those of resolve_gpu_node (this GPU or a peer);
  /// Errc::empty_result when the node has no allowed CPU;
  /// Errc::insufficient_cores when the node's GPUs outnumber its cores
  /// (NVIDIA's version crashes there).
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    GPUAFF_TRY_VOID(detail::check_nvidia_options(options, "single-unique"));
    if (options.min_cores > 1)
      return fail(Errc::invalid_argument, "single-unique: gives one physical core per GPU, so --min-cores ",
                  options.min_cores, " cannot be met; use unique-contiguous");
    GPUAFF_TRY(detail::NodeShare share, detail::node_share(topo, gpu, job));
    std::vector<detail::PhysicalCore> cores = detail::physical_cores(topo, detail::node_allowed(topo, share.node));
    if (cores.empty()) return detail::no_allowed_cpu(topo, gpu, share.node, "single-unique");
    if (share.rank >= static_cast<int>(cores.size()))
      return fail(Errc::insufficient_cores, "single-unique: only ", cores.size(), " physical cores on node ", share.node,
                  " but ", share.count, " GPUs; ", detail::gpu_label(topo, gpu),
                  " finds every core taken by a lower GPU; use --policy single to share a core, or fewer processes");
    std::vector<detail::PhysicalCore> mine{cores[static_cast<std::size_t>(share.rank)]};
    return detail::pick_threads(mine, options.smt);
  }
};
static_assert(BindingPolicy<SingleUniquePolicy>);

/// `unique-interleaved`: the node's GPUs share out its cores by stride: GPU j
/// of D takes node cores j, j+D, j+2D, ... Balanced: only the first D*per
/// cores are dealt, per being the smallest cores/GPUs of any node.
struct UniqueInterleavedPolicy {
  NvidiaOptions options{};
  /// Errors: invalid options; those of resolve_gpu_node (any participating
  /// GPU); Errc::empty_result when the node has no allowed CPU;
  /// Errc::insufficient_cores when the GPU gets no core or fewer than min_cores.
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    return detail::bind_unique(topo, gpu, job, options, detail::UniqueLayout::interleaved);
  }
};
static_assert(BindingPolicy<UniqueInterleavedPolicy>);

/// `unique-contiguous` (NVIDIA's default): GPU j of D takes node cores
/// [j*per, (j+1)*per); per = the smallest cores/GPUs of any node when
/// balanced, this node's cores/GPUs otherwise.
struct UniqueContiguousPolicy {
  NvidiaOptions options{};
  /// Errors: as UniqueInterleavedPolicy.
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    return detail::bind_unique(topo, gpu, job, options, detail::UniqueLayout::contiguous);
  }
};
static_assert(BindingPolicy<UniqueContiguousPolicy>);

}  // namespace v0
}  // namespace gpuaff
