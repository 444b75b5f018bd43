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

#include <cstddef>
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

/// One entry of a flattened core list: entry `i` of a node's CoreList, or of
/// the socket's spare cores (socket scope).
struct Pick {
  const CoreList* list = nullptr;
  std::size_t i = 0;
};

/// The node cores of one GPU's node and, with socket scope, the extras they
/// carry: node core g carries spare[p_g], spare[p_g + L], spare[p_g + 2L], ...
/// where p_g is its position among the socket's L GPU-local cores (extras
/// are dealt round-robin, in ascending order, to the GPU-local cores).
struct GroupedCores {
  CoreList node;
  CoreList spare;                   ///< socket scope: the socket's cores local to no participating GPU
  std::vector<std::size_t> local;   ///< socket scope: p_g of every node core (L when it is not GPU-local)
  std::size_t local_count = 0;      ///< L
  constexpr std::size_t size() const { return node.size(); }
};

/// The node cores of `node`, with their socket-scope extras.
/// `gpu_nodes`: the resolved nodes of the participating GPUs (socket scope only).
constexpr Result<GroupedCores> grouped_cores(const Topology& topo, int node, const std::vector<int>& gpu_nodes,
                                             Scope scope) {
  GroupedCores out;
  out.node = physical_cores(topo, node_allowed(topo, node));
  if (scope == Scope::node || out.node.empty()) return out;
  GPUAFF_TRY(CpuSet socket, socket_cpus(topo, node));
  // The socket's GPU-local CPUs: the nodes of participating GPUs in this socket.
  CpuSet assigned;
  for (std::size_t i = 0; i < gpu_nodes.size(); ++i) {
    int m = gpu_nodes[i];
    bool seen = false;
    for (std::size_t j = 0; j < i && !seen; ++j) seen = gpu_nodes[j] == m;
    if (seen) continue;
    auto s = socket_cpus(topo, m);
    if (s && *s == socket) assigned |= node_allowed(topo, m);
  }
  CoreList local = physical_cores(topo, assigned);
  out.spare = physical_cores(topo, socket - assigned);
  out.local_count = local.size();
  out.local.reserve(out.node.size());
  for (const CoreRef& g : out.node.refs) {
    std::size_t p = 0;
    while (p < local.size() && local.refs[p].key != g.key) ++p;
    out.local.push_back(p);
  }
  return out;
}

/// Node cores `picked` (positions in `g.node`) first, then the first extra of
/// each, the second, ... (every extra is kept; none is dropped when some cores
/// carry more than others).
constexpr std::vector<Pick> flatten(const GroupedCores& g, const std::vector<std::size_t>& picked) {
  std::vector<Pick> out;
  out.reserve(picked.size());
  for (std::size_t k : picked) out.push_back(Pick{&g.node, k});
  if (g.spare.empty() || g.local_count == 0) return out;
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t k : picked) {
      std::size_t p = g.local[k];
      if (p >= g.local_count) continue;
      std::size_t e = p + round * g.local_count;
      if (e < g.spare.size()) {
        out.push_back(Pick{&g.spare, e});
        any = true;
      }
    }
    if (!any) break;
  }
  return out;
}

constexpr CpuSet pick_threads(const Topology& topo, const std::vector<Pick>& cores, Smt smt) {
  CpuSet out;
  for (const Pick& p : cores) add_threads(topo, *p.list, p.list->refs[p.i], smt, out);
  return out;
}

/// Applies min/max physical cores, then the SMT choice.
constexpr Result<CpuSet> finish_nvidia(const Topology& topo, int gpu, int node, std::vector<Pick> cores,
                                       const NvidiaOptions& o, std::string_view mode) {
  int need = o.min_cores < 1 ? 1 : o.min_cores;
  if (static_cast<int>(cores.size()) < need)
    return fail(Errc::insufficient_cores, mode, ": ", gpu_label(topo, gpu), " (NUMA node ", node, ") gets ", cores.size(),
                " physical cores, fewer than the minimum of ", need, "; lower --min-cores or run fewer processes");
  if (o.max_cores > 0 && cores.size() > static_cast<std::size_t>(o.max_cores))
    cores.resize(static_cast<std::size_t>(o.max_cores));
  return pick_threads(topo, cores, o.smt);
}

/// Every entry of `list`, in order.
constexpr std::vector<Pick> every_pick(const CoreList& list) {
  std::vector<Pick> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) out.push_back(Pick{&list, i});
  return out;
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
  GPUAFF_TRY(GroupedCores groups, grouped_cores(topo, own, nodes, o.scope));
  int cores_here = static_cast<int>(groups.size());
  if (cores_here == 0) return no_allowed_cpu(topo, gpu, own, mode);

  int per = cores_here / gpus_here;
  std::size_t usable_groups = groups.size();
  if (o.balanced) {
    // Every GPU gets the smallest share of any node. A node that cannot give
    // each of its GPUs one core (or has no allowed CPU) fails its own GPUs
    // only, instead of pulling every GPU's share to zero.
    if (cores_here < gpus_here) return too_few_cores(mode, cores_here, own, gpus_here);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      int m = nodes[i];
      bool seen = false;
      for (std::size_t j = 0; j < i && !seen; ++j) seen = nodes[j] == m;
      if (seen) continue;
      int d = 0;
      for (int n : nodes) d += n == m ? 1 : 0;
      // This node's count is known; the others are counted without building them.
      int c = m == own ? cores_here : count_physical_cores(topo, node_allowed(topo, m));
      if (c >= d && c / d < per) per = c / d;
    }
    usable_groups = static_cast<std::size_t>(gpus_here * per);
  }

  std::vector<std::size_t> picked;
  if (layout == UniqueLayout::contiguous) {
    if (per == 0) return too_few_cores(mode, cores_here, own, gpus_here);
    picked.reserve(static_cast<std::size_t>(per));
    for (int k = rank * per; k < (rank + 1) * per; ++k) picked.push_back(static_cast<std::size_t>(k));
  } else {
    for (std::size_t k = static_cast<std::size_t>(rank); k < usable_groups; k += static_cast<std::size_t>(gpus_here))
      picked.push_back(k);
    if (picked.empty()) return too_few_cores(mode, cores_here, own, gpus_here);
  }
  return finish_nvidia(topo, gpu, own, flatten(groups, picked), o, mode);
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
      CpuSet cpus = detail::node_allowed(topo, node);
      if (cpus.empty()) return detail::no_allowed_cpu(topo, gpu, node, "all");
      // Every thread of every core, no count to check: the node's allowed CPUs.
      if (options.smt == Smt::all && options.max_cores == 0 && options.min_cores <= 1) return cpus;
      detail::CoreList cores = detail::physical_cores(topo, cpus);
      return detail::finish_nvidia(topo, gpu, node, detail::every_pick(cores), options, "all");
    }
    GPUAFF_TRY(CpuSet socket, detail::socket_cpus(topo, node));
    if (socket.empty())
      return fail(Errc::empty_result, "all --scope socket: the socket of ", detail::gpu_label(topo, gpu), " (NUMA node ",
                  node, ") has no allowed CPU (allowed CPUs: ", detail::cpulist_text(topo.usable()), ")");
    GPUAFF_TRY(std::vector<int> nodes, detail::participating_nodes(topo, participating, job, "all --scope socket"));
    CpuSet local;
    for (int m : nodes) local |= detail::node_allowed(topo, m);
    detail::CoreList all = detail::physical_cores(topo, socket);
    std::vector<unsigned char> is_local(all.size());
    for (std::size_t i = 0; i < all.size(); ++i)
      is_local[i] = detail::threads_of(topo, all, all.refs[i]).intersects(local) ? 1 : 0;
    std::vector<detail::Pick> ordered;
    ordered.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i)
      if (is_local[i] != 0) ordered.push_back(detail::Pick{&all, i});
    for (std::size_t i = 0; i < all.size(); ++i)
      if (is_local[i] == 0) ordered.push_back(detail::Pick{&all, i});
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
    detail::CoreList cores = detail::physical_cores(topo, detail::node_allowed(topo, node));
    if (cores.empty()) return detail::no_allowed_cpu(topo, gpu, node, "single");
    CpuSet out;
    detail::add_threads(topo, cores, cores.refs[0], options.smt, out);
    return out;
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
    detail::CoreList cores = detail::physical_cores(topo, detail::node_allowed(topo, share.node));
    if (cores.empty()) return detail::no_allowed_cpu(topo, gpu, share.node, "single-unique");
    if (share.rank >= static_cast<int>(cores.size()))
      return fail(Errc::insufficient_cores, "single-unique: only ", cores.size(), " physical cores on node ", share.node,
                  " but ", share.count, " GPUs; ", detail::gpu_label(topo, gpu),
                  " finds every core taken by a lower GPU; use --policy single to share a core, or fewer processes");
    CpuSet out;
    detail::add_threads(topo, cores, cores.refs[static_cast<std::size_t>(share.rank)], options.smt, out);
    return out;
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
