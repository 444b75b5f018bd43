#pragma once
// What every binding of one job shares: the usable CPUs, the participating
// GPUs and their nodes, and per node its allowed CPUs, physical cores and
// last-level-cache groups (and, for socket scope, its socket). A JobContext
// derives each fact once, when a policy first asks, and keeps it, so binding
// every GPU with every policy (bind_all, bind_table) pays for each fact once,
// while one binding (bind) pays only for what its policy reads.
//
// Every built-in policy is one function of a JobContext; its
// bind(topo, gpu, job) makes a context for that one call. Facts are kept only
// when they succeed: a failure is derived again where it is asked for, by the
// same code, so it reads exactly as without the context.

#include <cstddef>
#include <string_view>
#include <vector>

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/locality.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

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

/// A last-level-cache group of a node's allowed CPUs (core-complex policy).
struct CacheShare {
  int key = 0;    ///< lowest CPU of the whole group
  int count = 0;  ///< allowed CPUs of the node it holds
  int index = 0;  ///< into Topology::core_complexes; -1: the node's CPUs in no listed group
};

/// The socket-scope facts of one NUMA node, each derived on first use.
struct SocketFacts {
  bool has_socket = false;
  CpuSet socket;  ///< socket_cpus() when it succeeds
  bool has_spread = false;
  CoreList spare;                  ///< socket scope: the socket's cores local to no participating GPU
  std::vector<std::size_t> local;  ///< socket scope: position of every node core among the socket's GPU-local cores
  std::size_t local_count = 0;     ///< socket scope: how many GPU-local cores the socket has
  bool has_socket_order = false;
  CoreList socket_cores;              ///< `all --scope socket`: the socket's cores
  std::vector<std::size_t> socket_order;  ///< their positions, GPU-local first
};

/// The facts of one NUMA node, each derived on first use.
struct NodeFacts {
  CpuSet allowed;  ///< node_allowed(); set when the facts are made
  bool has_cores = false;
  CoreList cores;  ///< physical_cores(allowed)
  int core_count = -1;  ///< count_physical_cores(allowed); -1: not yet
  bool has_groups = false;
  std::vector<CacheShare> groups;  ///< core-complex groups, sorted (more CPUs first, then key)
  int socket = -1;  ///< index into the context's socket facts; -1: none yet
};

/// The facts one job's bindings share. Built from a Topology and the job; the
/// Topology must outlive it. Not copyable: the facts point into it.
class JobContext {
 public:
  constexpr JobContext(const Topology& topo, const JobOptions& job)
      : topo_(&topo), job_(job), usable_(topo.usable()) {
    auto n = participating_gpus(topo, job);
    participating_ = n ? *n : 0;
    // One allocation: the GPUs' nodes, then the nodes' slots (the last one for ids the topology lacks).
    known_.assign(topo.gpus.size() + topo.nodes.size() + 1, unresolved);
    facts_.reserve(topo.nodes.size() + 1);  // never grows past this: pointers into it stay valid
  }
  JobContext(const JobContext&) = delete;
  JobContext& operator=(const JobContext&) = delete;

  constexpr const Topology& topo() const { return *topo_; }
  constexpr const JobOptions& job() const { return job_; }
  /// Topology::usable().
  constexpr const CpuSet& usable() const { return usable_; }

  /// check_gpu(): the participating GPU count. A GPU below the count passes
  /// at once (the count is 0 when --nproc is bad); any other is check_gpu's.
  constexpr Result<int> check(int gpu) const {
    if (gpu >= 0 && gpu < participating_) return participating_;
    return check_gpu(*topo_, gpu, job_);
  }

  /// resolve_node_of() of a visible GPU (no participation check).
  constexpr Result<int> node_of(int gpu) {
    int& known = known_[static_cast<std::size_t>(gpu)];
    if (known != unresolved) return known;
    GPUAFF_TRY(int node, resolve_node_of(*topo_, gpu, job_));
    known = node;
    return node;
  }

  /// resolve_gpu_node().
  constexpr Result<int> resolve(int gpu) {
    GPUAFF_TRY_VOID(check(gpu));
    return node_of(gpu);
  }

  /// Resolves the nodes of the participating GPUs (read them with
  /// known_node()), for a GPU that passed check(); returns their count.
  /// Errors: the first GPU's that has no known node, prefixed with `why`.
  constexpr Result<int> know_all_nodes(std::string_view why) {
    if (all_known_) return participating_;
    for (int i = 0; i < participating_; ++i) {
      auto r = node_of(i);
      if (!r) return fail(r.error().code(), why, ", every GPU of the job needs a known node: ", r.error().message());
    }
    all_known_ = true;
    return participating_;
  }
  /// After know_all_nodes(): the node of participating GPU `gpu`.
  constexpr int known_node(int gpu) const { return known_[static_cast<std::size_t>(gpu)]; }

  /// node_allowed(): the allowed CPUs of node `id`.
  constexpr const CpuSet& allowed(int id) { return facts(id)->allowed; }
  /// The allowed CPUs of Topology::nodes[at].
  constexpr const CpuSet& allowed_at(std::size_t at) { return facts_at(static_cast<int>(at))->allowed; }
  /// physical_cores(allowed(id)).
  constexpr const CoreList& cores(int id) {
    NodeFacts* f = facts(id);
    if (!f->has_cores) {
      f->cores = physical_cores(*topo_, f->allowed);
      f->has_cores = true;
    }
    return f->cores;
  }
  /// How many entries cores(id) has, without building them if not yet built.
  constexpr int core_count(int id) {
    NodeFacts* f = facts(id);
    if (f->has_cores) return static_cast<int>(f->cores.size());
    if (f->core_count < 0) f->core_count = count_physical_cores(*topo_, f->allowed);
    return f->core_count;
  }
  /// The node's allowed CPUs grouped by Topology::core_complexes (key:
  /// lowest CPU of the whole group), more allowed CPUs first, then key; the
  /// CPUs in no listed group form one more group.
  constexpr const std::vector<CacheShare>& cache_groups(int id) {
    NodeFacts* f = facts(id);
    if (f->has_groups) return f->groups;
    std::vector<CacheShare>& groups = f->groups;
    SparseSet left(f->allowed);
    for (std::size_t i = 0; i < topo_->core_complexes.size() && !left.empty(); ++i) {
      const CpuSet& g = topo_->core_complexes[i].cpus;
      if (!left.hits(g)) continue;
      int before = left.count_left();
      left.remove(g);
      groups.push_back(CacheShare{g.first(), before - left.count_left(), static_cast<int>(i)});
    }
    if (!left.empty()) groups.push_back(CacheShare{left.first_left(), left.count_left(), -1});
    // Insertion sort (more allowed CPUs first, then key): a node has a few groups.
    auto before = [](const CacheShare& a, const CacheShare& b) {
      return a.count != b.count ? a.count > b.count : a.key < b.key;
    };
    for (std::size_t i = 1; i < groups.size(); ++i) {
      CacheShare g = groups[i];
      std::size_t j = i;
      for (; j > 0 && before(g, groups[j - 1]); --j) groups[j] = groups[j - 1];
      groups[j] = g;
    }
    f->has_groups = true;
    return groups;
  }
  /// socket_cpus(topo, id).
  constexpr Result<CpuSet> socket(int id) {
    SocketFacts* f = socket_facts(id);
    if (f->has_socket) return f->socket;
    GPUAFF_TRY(CpuSet s, socket_cpus(*topo_, id));
    f->socket = s;
    f->has_socket = true;
    return s;
  }

  /// Socket scope, for a node with cores, after know_all_nodes(): the
  /// node's socket facts with SocketFacts::spare, local and local_count set: the
  /// socket's cores that are local to no participating GPU, and where each
  /// node core stands among those that are.
  /// Errors: those of socket_cpus for this node.
  constexpr Result<const SocketFacts*> socket_spread(int id) {
    SocketFacts* f = socket_facts(id);
    if (f->has_spread) return f;
    GPUAFF_TRY(CpuSet own, socket(id));
    const CoreList& node = cores(id);
    // The socket's GPU-local CPUs: the nodes of participating GPUs in this socket.
    CpuSet assigned;
    for (int i = 0; i < participating_; ++i) {
      int m = known_node(i);
      bool seen = false;
      for (int j = 0; j < i && !seen; ++j) seen = known_node(j) == m;
      if (seen) continue;
      auto s = socket(m);
      if (s && *s == own) assigned |= allowed(m);
    }
    CoreList local = physical_cores(*topo_, assigned);
    f->spare = physical_cores(*topo_, own - assigned);
    f->local_count = local.size();
    f->local.reserve(node.size());
    for (const CoreRef& g : node.refs) {
      std::size_t p = 0;
      while (p < local.size() && local.refs[p].key != g.key) ++p;
      f->local.push_back(p);
    }
    f->has_spread = true;
    return f;
  }

  /// `all --scope socket`, after know_all_nodes() and a successful,
  /// non-empty socket(id): the node's socket facts with SocketFacts::socket_cores
  /// and socket_order set: the socket's cores, those holding a CPU of any
  /// participating GPU's node first (each part in ascending order).
  constexpr const SocketFacts& socket_order(int id) {
    SocketFacts* f = socket_facts(id);
    if (f->has_socket_order) return *f;
    CpuSet local;
    for (int i = 0; i < participating_; ++i) local |= allowed(known_node(i));
    f->socket_cores = physical_cores(*topo_, f->socket);
    const CoreList& all = f->socket_cores;
    // Filled by push_back, not sized up front: clang cannot constant-evaluate
    // libstdc++'s fill of a vector(n) of a trivial type.
    std::vector<unsigned char> is_local;
    is_local.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i)
      is_local.push_back(threads_of(*topo_, all, all.refs[i]).intersects(local) ? 1 : 0);
    f->socket_order.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i)
      if (is_local[i] != 0) f->socket_order.push_back(i);
    for (std::size_t i = 0; i < all.size(); ++i)
      if (is_local[i] == 0) f->socket_order.push_back(i);
    f->has_socket_order = true;
    return *f;
  }

 private:
  static constexpr int unresolved = -2147483647 - 1;

  /// The facts of node `id`, made on first use; a node the topology lacks
  /// has facts too, with no allowed CPU (its socket_cpus() fails).
  constexpr NodeFacts* facts(int id) {
    int at = topo_->node_index(id);
    return facts_at(at < 0 ? static_cast<int>(topo_->nodes.size()) : at);
  }
  /// The socket facts of node `id`, made on first use (in a vector of their
  /// own: node scope never pays for them).
  constexpr SocketFacts* socket_facts(int id) {
    NodeFacts* f = facts(id);
    if (f->socket < 0) {
      if (socket_facts_.capacity() == 0) socket_facts_.reserve(topo_->nodes.size() + 1);  // never grows past this
      f->socket = static_cast<int>(socket_facts_.size());
      socket_facts_.emplace_back();
    }
    return &socket_facts_[static_cast<std::size_t>(f->socket)];
  }
  /// The facts of Topology::nodes[at] (at == nodes.size(): of a node it lacks).
  constexpr NodeFacts* facts_at(int at) {
    int& slot = known_[topo_->gpus.size() + static_cast<std::size_t>(at)];
    if (slot < 0) {
      slot = static_cast<int>(facts_.size());
      facts_.emplace_back();
      if (static_cast<std::size_t>(at) < topo_->nodes.size()) {
        CpuSet& allowed = facts_.back().allowed;  // node_allowed(), without a temporary
        allowed = topo_->nodes[static_cast<std::size_t>(at)].cpus;
        allowed &= usable_;
      }
    }
    return &facts_[static_cast<std::size_t>(slot)];
  }

  const Topology* topo_;
  JobOptions job_;
  CpuSet usable_;
  int participating_ = 0;  ///< 0 when the job's nproc is bad (check() fails first)
  bool all_known_ = false;
  /// Per visible GPU: its resolved node, or `unresolved`; then per
  /// Topology::nodes entry (and one for ids it lacks): index into facts_,
  /// or `unresolved`.
  std::vector<int> known_;
  std::vector<NodeFacts> facts_;
  std::vector<SocketFacts> socket_facts_;
};

/// The node of a GPU, its position among the participating GPUs on that node
/// (in index order), and how many participating GPUs the node has.
struct NodeShare {
  int node = -1;
  int rank = 0;
  int count = 0;
};

/// Errors: those of check_gpu and resolve_gpu_node (for this GPU or a peer).
constexpr Result<NodeShare> node_share(JobContext& ctx, int gpu) {
  GPUAFF_TRY(int participating, ctx.check(gpu));
  GPUAFF_TRY(int node, ctx.node_of(gpu));
  NodeShare s;
  s.node = node;
  for (int i = 0; i < participating; ++i) {
    if (i == gpu) {
      s.rank = s.count++;
      continue;
    }
    auto other = ctx.node_of(i);
    if (!other)
      return fail(other.error().code(), "to split node ", node, " among its GPUs, every GPU of the job needs a known node: ",
                  other.error().message());
    if (*other == node) ++s.count;
  }
  return s;
}

/// A built-in policy: besides bind(topo, gpu, job), an evaluate(ctx, gpu)
/// that bind() is made of, so that many bindings can share one context.
template <class P>
concept ContextPolicy = requires(const P& p, JobContext& ctx, int gpu) {
  { p.evaluate(ctx, gpu) } -> std::same_as<Result<CpuSet>>;
};

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
