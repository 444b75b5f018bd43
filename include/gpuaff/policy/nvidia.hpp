// SPDX-License-Identifier: Apache-2.0
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

#include "gpuaff/config.hpp"

#include <cstddef>
#include <optional>
#include <vector>

#include "gpuaff/policy/bind.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// The options' own error, before any binding: min/max cores must make sense.
template <class = void>
constexpr Result<void> check_nvidia_options(const NvidiaOptions& o, std::string_view mode) {
  if (o.min_cores < 0)
    return fail(Errc::invalid_argument, mode, ": min_cores=", o.min_cores, " is negative (0 means at least one core)");
  if (o.max_cores < 0)
    return fail(Errc::invalid_argument, mode, ": max_cores=", o.max_cores, " is negative (0 means no limit)");
  if (o.max_cores > 0 && o.min_cores > o.max_cores)
    return fail(Errc::invalid_argument, mode, ": min_cores=", o.min_cores, " is above max_cores=", o.max_cores);
  return {};
}

/// The allowed CPUs of the socket(s) holding node `node`: the union of the
/// packages that share a CPU with the node.
/// Errors: Errc::not_found when no package holds any CPU of the node.
template <class = void>
constexpr Result<CpuSet> socket_cpus(const Topology& topo, int node) {
  const NumaNode* n = topo.find_node(node);
  CpuSet out;
  if (n != nullptr)
    for (const Package& p : topo.packages)
      if (p.cpus.intersects(n->cpus)) out |= p.cpus;
  if (out.empty())
    return fail(Errc::not_found, "scope=socket: NUMA node ", node, " belongs to no package in ", topo.origin.view(),
                " (no socket information); use scope=node");
  return out & topo.usable();
}

/// Socket scope: the cores of a node's socket that are local to no
/// participating GPU ("spare"), and where each node core stands among the
/// socket's GPU-local cores.
struct SocketSpread {
  CoreList spare;                  ///< the socket's cores local to no participating GPU
  std::vector<std::size_t> local;  ///< per node core: its position among the socket's GPU-local cores
  std::size_t local_count = 0;     ///< how many GPU-local cores the socket has
};

/// The SocketSpread of `node`, after ctx.all_gpu_nodes() gave `participating`.
/// Errors: those of socket_cpus for this node.
template <class = void>
constexpr Result<SocketSpread> socket_spread(BindingContext& ctx, int node, int participating) {
  const Topology& topo = ctx.topology();
  GPUAFF_TRY(CpuSet own, socket_cpus(topo, node));
  const CoreList& node_cores = ctx.cores(node);
  // The socket's GPU-local CPUs: the nodes of participating GPUs in this socket.
  CpuSet assigned;
  for (int i = 0; i < participating; ++i) {
    int m = ctx.known_node(i);
    bool seen = false;
    for (int j = 0; j < i && !seen; ++j) seen = ctx.known_node(j) == m;
    if (seen) continue;
    auto s = socket_cpus(topo, m);
    if (s && *s == own) assigned |= ctx.node_cpus(m);
  }
  CoreList local = physical_cores(topo, assigned);
  SocketSpread out;
  out.spare = physical_cores(topo, own - assigned);
  out.local_count = local.size();
  out.local.reserve(node_cores.size());
  for (std::size_t g = 0; g < node_cores.size(); ++g) {
    std::size_t p = 0;
    while (p < local.size() && local.key(p) != node_cores.key(g)) ++p;
    out.local.push_back(p);
  }
  return out;
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
  const CoreList* node = nullptr;
  std::optional<SocketSpread> socket;  ///< socket scope only
  constexpr std::size_t size() const { return node->size(); }
};

/// The node cores of `node`, with their socket-scope extras (socket scope:
/// after ctx.all_gpu_nodes() gave `participating`).
template <class = void>
constexpr Result<GroupedCores> grouped_cores(BindingContext& ctx, int node, Scope scope, int participating) {
  GroupedCores out;
  out.node = &ctx.cores(node);
  if (scope == Scope::node || out.node->empty()) return out;
  GPUAFF_TRY(SocketSpread spread, socket_spread(ctx, node, participating));
  out.socket = std::move(spread);
  return out;
}

/// The node cores a GPU picks: positions first, first + step, ... below end
/// in GroupedCores::node.
struct Picked {
  std::size_t first = 0;
  std::size_t step = 1;
  std::size_t end = 0;
  constexpr bool empty() const { return first >= end; }
};

/// Node cores `picked` first, then the first extra of each, the second, ...
/// (every extra is kept; none is dropped when some cores carry more than others).
template <class = void>
constexpr std::vector<Pick> flatten(const GroupedCores& g, const Picked& picked) {
  std::vector<Pick> out;
  if (!picked.empty()) out.reserve((picked.end - picked.first + picked.step - 1) / picked.step);
  for (std::size_t k = picked.first; k < picked.end; k += picked.step) out.push_back(Pick{g.node, k});
  if (!g.socket) return out;
  const SocketSpread& s = *g.socket;
  if (s.spare.empty() || s.local_count == 0) return out;
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t k = picked.first; k < picked.end; k += picked.step) {
      std::size_t p = s.local[k];
      if (p >= s.local_count) continue;
      std::size_t e = p + round * s.local_count;
      if (e < s.spare.size()) {
        out.push_back(Pick{&s.spare, e});
        any = true;
      }
    }
    if (!any) break;
  }
  return out;
}

/// `all --scope socket`, for a non-empty socket: the socket's cores, and
/// their order: those holding a CPU of any participating GPU's node first
/// (each part in ascending order). After ctx.all_gpu_nodes().
struct SocketOrder {
  CoreList cores;
  std::vector<std::size_t> order;
};
template <class = void>
constexpr SocketOrder socket_order(BindingContext& ctx, const CpuSet& socket, int participating) {
  CpuSet local;
  for (int i = 0; i < participating; ++i) local |= ctx.node_cpus(ctx.known_node(i));
  SocketOrder out{physical_cores(ctx.topology(), socket), {}};
  out.order.reserve(out.cores.size());
  for (std::size_t i = 0; i < out.cores.size(); ++i)
    if (out.cores.threads(i).intersects(local)) out.order.push_back(i);
  for (std::size_t i = 0; i < out.cores.size(); ++i)
    if (!out.cores.threads(i).intersects(local)) out.order.push_back(i);
  return out;
}

/// Applies min/max physical cores, then the SMT choice, to the flattened
/// core list of `count` entries, entry i being pick(i) (a Pick): a list
/// that is a plain run of one CoreList needs no vector.
template <class PickAt>
constexpr Result<CpuSet> finish_nvidia(const Topology& topo, int gpu, int node, std::size_t count, PickAt pick,
                                       const NvidiaOptions& o, std::string_view mode) {
  int need = o.min_cores < 1 ? 1 : o.min_cores;
  if (static_cast<int>(count) < need)
    return fail(Errc::insufficient_cores, mode, ": ", gpu_label(topo, gpu), " (NUMA node ", node, ") gets ", count,
                " physical cores, fewer than the minimum of ", need, "; lower min_cores=N or run fewer processes");
  if (o.max_cores > 0 && count > static_cast<std::size_t>(o.max_cores)) count = static_cast<std::size_t>(o.max_cores);
  CpuSet out;
  for (std::size_t i = 0; i < count; ++i) {
    Pick p = pick(i);
    p.list->add_threads(p.i, o.smt, out);
  }
  return out;
}

/// finish_nvidia on a list of picks.
template <class = void>
constexpr Result<CpuSet> finish_nvidia(const Topology& topo, int gpu, int node, const std::vector<Pick>& cores,
                                       const NvidiaOptions& o, std::string_view mode) {
  return finish_nvidia(topo, gpu, node, cores.size(), [&cores](std::size_t i) { return cores[i]; }, o, mode);
}

enum class UniqueLayout { interleaved, contiguous };

template <class = void>
constexpr Unexpected<Error> too_few_cores(std::string_view mode, int cores, int node, int gpus) {
  return fail(Errc::insufficient_cores, mode, ": only ", cores, " physical cores on node ", node, " but ", gpus,
              " GPUs, and each needs a core of its own; use policy=single or policy=all to share, or fewer processes (nproc=N)");
}

/// The fewest cores per GPU any node with participating GPUs can give
/// (balanced unique-* modes), starting from this node's `per`. A node that
/// cannot give each of its GPUs one core (or has no allowed CPU) is left
/// out: it fails its own GPUs only, instead of pulling every GPU's share to
/// zero. After ctx.all_gpu_nodes() gave `participating`.
template <class = void>
constexpr int balanced_share(BindingContext& ctx, int participating, int own, int own_cores, int per) {
  for (int i = 0; i < participating; ++i) {
    int m = ctx.known_node(i);
    bool seen = false;
    for (int j = 0; j < i && !seen; ++j) seen = ctx.known_node(j) == m;
    if (seen) continue;
    int d = 0;
    for (int k = 0; k < participating; ++k) d += ctx.known_node(k) == m ? 1 : 0;
    // The other nodes are counted, not built, unless the context has them already.
    int c = m == own ? own_cores : ctx.core_count(m);
    if (c >= d && c / d < per) per = c / d;
  }
  return per;
}

template <class = void>
constexpr Result<CpuSet> bind_unique(BindingContext& ctx, int gpu, const NvidiaOptions& o, UniqueLayout layout) {
  const Topology& topo = ctx.topology();
  std::string_view mode = layout == UniqueLayout::contiguous ? "unique-contiguous" : "unique-interleaved";
  GPUAFF_TRY_VOID(check_nvidia_options(o, mode));
  GPUAFF_TRY(int participating, ctx.check_gpu(gpu));
  GPUAFF_TRY(int own, ctx.peer_node(gpu));
  GPUAFF_TRY_VOID(ctx.all_gpu_nodes(mode));
  int gpus_here = 0;  // D: participating GPUs on this node
  int rank = 0;       // j: this GPU's position among them
  for (int i = 0; i < participating; ++i) {
    if (ctx.known_node(i) != own) continue;
    if (i == gpu) rank = gpus_here;
    ++gpus_here;
  }
  GPUAFF_TRY(GroupedCores groups, grouped_cores(ctx, own, o.scope, participating));
  int cores_here = static_cast<int>(groups.size());
  if (cores_here == 0) return no_allowed_cpu(topo, gpu, own, mode);

  int per = cores_here / gpus_here;
  std::size_t usable_groups = groups.size();
  if (o.balanced) {
    // Every GPU gets the smallest share of any node.
    if (cores_here < gpus_here) return too_few_cores(mode, cores_here, own, gpus_here);
    per = balanced_share(ctx, participating, own, cores_here, per);
    usable_groups = static_cast<std::size_t>(gpus_here * per);
  }

  Picked picked;
  if (layout == UniqueLayout::contiguous) {
    if (per == 0) return too_few_cores(mode, cores_here, own, gpus_here);
    picked = {static_cast<std::size_t>(rank * per), 1, static_cast<std::size_t>((rank + 1) * per)};
  } else {
    picked = {static_cast<std::size_t>(rank), static_cast<std::size_t>(gpus_here), usable_groups};
    if (picked.empty()) return too_few_cores(mode, cores_here, own, gpus_here);
  }
  if (!groups.socket) {  // node scope: the picked node cores alone
    std::size_t count = (picked.end - picked.first + picked.step - 1) / picked.step;
    return finish_nvidia(topo, gpu, own, count,
                         [&](std::size_t i) { return Pick{groups.node, picked.first + i * picked.step}; }, o, mode);
  }
  return finish_nvidia(topo, gpu, own, flatten(groups, picked), o, mode);
}

}  // namespace detail

/// `all`: every core of the scope's affinity. Node scope: the node's cores.
/// Socket scope: the socket's cores, those local to any participating GPU
/// first (each part in ascending order), so that max_cores keeps GPU-local
/// cores. A GPU whose node has no allowed CPU still gets its socket's cores
/// with socket scope.
/// Errors: invalid options (Errc::invalid_argument); those of
/// resolve_gpu_node (socket scope: for every participating GPU);
/// Errc::empty_result when the scope has no allowed CPU;
/// Errc::insufficient_cores below min_cores.
struct AllPolicy {
  NvidiaOptions options{};
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    const Topology& topo = ctx.topology();
    GPUAFF_TRY_VOID(detail::check_nvidia_options(options, "all"));
    GPUAFF_TRY_VOID(ctx.check_gpu(gpu));
    GPUAFF_TRY(int node, ctx.peer_node(gpu));
    if (options.scope == Scope::node) {
      const CpuSet& cpus = ctx.node_cpus(node);
      if (cpus.empty()) return no_allowed_cpu(topo, gpu, node, "all");
      // Every thread of every core, no count to check: the node's allowed CPUs.
      if (options.smt == Smt::all && options.max_cores == 0 && options.min_cores <= 1) return cpus;
      const CoreList& cores = ctx.cores(node);
      return detail::finish_nvidia(topo, gpu, node, cores.size(), [&cores](std::size_t i) { return detail::Pick{&cores, i}; },
                                   options, "all");
    }
    GPUAFF_TRY(CpuSet socket, detail::socket_cpus(topo, node));
    if (socket.empty())
      return fail(Errc::empty_result, "all scope=socket: the socket of ", detail::gpu_label(topo, gpu), " (NUMA node ",
                  node, ") has no allowed CPU (allowed CPUs: ", detail::cpulist_text(ctx.usable()), ")");
    GPUAFF_TRY(int participating, ctx.all_gpu_nodes("all scope=socket"));
    detail::SocketOrder f = detail::socket_order(ctx, socket, participating);
    return detail::finish_nvidia(
        topo, gpu, node, f.order.size(), [&f](std::size_t i) { return detail::Pick{&f.cores, f.order[i]}; }, options, "all");
  }
};
static_assert(BindingPolicy<AllPolicy>);

/// `single`: the first node core; the GPUs of a node share it. Always one
/// physical core (min_cores above 1 is an error; max_cores has no effect).
/// Errors: invalid options; those of resolve_gpu_node; Errc::empty_result
/// when the node has no allowed CPU.
struct SinglePolicy {
  NvidiaOptions options{};
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    GPUAFF_TRY_VOID(detail::check_nvidia_options(options, "single"));
    if (options.min_cores > 1)
      return fail(Errc::invalid_argument, "single: gives one physical core per GPU, so min_cores=", options.min_cores,
                  " cannot be met; use unique-contiguous or all");
    GPUAFF_TRY(int node, ctx.gpu_node(gpu));
    const CoreList& cores = ctx.cores(node);
    if (cores.empty()) return no_allowed_cpu(ctx.topology(), gpu, node, "single");
    return cores.threads(0, options.smt);
  }
};
static_assert(BindingPolicy<SinglePolicy>);

/// `single-unique`: the first node core not taken by a lower GPU, i.e. node
/// core r for the node's r-th participating GPU. One physical core.
/// Errors: invalid options; those of resolve_gpu_node (this GPU or a peer);
/// Errc::empty_result when the node has no allowed CPU;
/// Errc::insufficient_cores when the node's GPUs outnumber its cores
/// (NVIDIA's version crashes there).
struct SingleUniquePolicy {
  NvidiaOptions options{};
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    const Topology& topo = ctx.topology();
    GPUAFF_TRY_VOID(detail::check_nvidia_options(options, "single-unique"));
    if (options.min_cores > 1)
      return fail(Errc::invalid_argument, "single-unique: gives one physical core per GPU, so min_cores=",
                  options.min_cores, " cannot be met; use unique-contiguous");
    GPUAFF_TRY(NodeShare share, ctx.node_share(gpu));
    const CoreList& cores = ctx.cores(share.node);
    if (cores.empty()) return no_allowed_cpu(topo, gpu, share.node, "single-unique");
    if (share.rank >= static_cast<int>(cores.size()))
      return fail(Errc::insufficient_cores, "single-unique: only ", cores.size(), " physical cores on node ", share.node,
                  " but ", share.count, " GPUs; ", detail::gpu_label(topo, gpu),
                  " finds every core taken by a lower GPU; use policy=single to share a core, or fewer processes");
    return cores.threads(static_cast<std::size_t>(share.rank), options.smt);
  }
};
static_assert(BindingPolicy<SingleUniquePolicy>);

/// `unique-interleaved`: the node's GPUs share out its cores by stride: GPU j
/// of D takes node cores j, j+D, j+2D, ... Balanced: only the first D*per
/// cores are dealt, per being the smallest cores/GPUs of any node.
/// Errors: invalid options; those of resolve_gpu_node (any participating
/// GPU); Errc::empty_result when the node has no allowed CPU;
/// Errc::insufficient_cores when the GPU gets no core or fewer than min_cores.
struct UniqueInterleavedPolicy {
  NvidiaOptions options{};
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    return detail::bind_unique(ctx, gpu, options, detail::UniqueLayout::interleaved);
  }
};
static_assert(BindingPolicy<UniqueInterleavedPolicy>);

/// `unique-contiguous` (NVIDIA's default): GPU j of D takes node cores
/// [j*per, (j+1)*per); per = the smallest cores/GPUs of any node when
/// balanced, this node's cores/GPUs otherwise.
/// Errors: as UniqueInterleavedPolicy.
struct UniqueContiguousPolicy {
  NvidiaOptions options{};
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    return detail::bind_unique(ctx, gpu, options, detail::UniqueLayout::contiguous);
  }
};
static_assert(BindingPolicy<UniqueContiguousPolicy>);

}  // namespace v0
}  // namespace gpuaff
