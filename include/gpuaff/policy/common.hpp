#pragma once
// The vocabulary every binding policy shares: job and NVIDIA options, the
// BindingPolicy concept, and the pure helpers the policies are built from
// (participating GPUs, physical cores, text for error messages).
//
// A policy is a pure function of a Topology, a GPU index and the job: no I/O,
// no current mask (the baseline is always Topology::usable(), the allowed and
// online CPUs), so every policy runs in constant evaluation and two ranks that
// start with different masks still agree.

#include <algorithm>
#include <concepts>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/fixed_string.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// A set of NUMA node ids (for memory binding). Node ids are small integers,
/// so the CPU set type serves.
using NodeSet = CpuSet;

/// What to do with a GPU whose PCI numa_node is -1 and whose node cannot be
/// inferred (see resolve_gpu_node).
enum class UnknownNode {
  error,  ///< Errc::unknown_locality, naming the device and the ways out
  node0,  ///< PyTorch's behaviour: node 0 (or the lowest node with CPUs when there is no node 0)
};

/// The job around one binding: which GPUs take part and how unknown
/// locality is settled.
struct JobOptions {
  int nproc = 0;  ///< 0: every visible GPU takes part; N: GPUs 0..N-1 (the job's processes on this machine)
  UnknownNode unknown_node = UnknownNode::error;
  int assume_node = -1;  ///< node for GPUs whose node is unknown (--unknown-node N); -1: none
};

/// NVIDIA gpu_affinity: which CPUs count as the GPU's.
enum class Scope {
  node,    ///< the GPU's NUMA node
  socket,  ///< the GPU's socket: the node's cores, then the socket's cores local to no GPU
};

/// NVIDIA gpu_affinity: hardware threads per chosen physical core.
enum class Smt {
  all,  ///< every allowed sibling of each chosen core
  one,  ///< the lowest allowed sibling only
};

/// Options of the five NVIDIA modes (all, single, single-unique, unique-interleaved, unique-contiguous).
struct NvidiaOptions {
  Scope scope = Scope::node;
  Smt smt = Smt::all;
  bool balanced = true;  ///< unique-*: every GPU gets the same number of cores
  int min_cores = 0;     ///< fewer physical cores than this is an error (0: at least 1)
  int max_cores = 0;     ///< keep at most this many physical cores (0: no limit)
};

/// A binding policy: a copyable value with
/// `constexpr Result<CpuSet> bind(const Topology&, int gpu, const JobOptions&) const`.
/// User-written policies that satisfy it go through the same gpuaff::bind as
/// the built-in ones (which checks their result).
template <class P>
concept BindingPolicy = std::copy_constructible<P> &&
                        requires(const P& p, const Topology& topo, int gpu, const JobOptions& job) {
                          { p.bind(topo, gpu, job) } -> std::same_as<Result<CpuSet>>;
                        };

namespace detail {

/// A cpulist for error messages ("0-23,48-71"; "none" for the empty set);
/// long lists are cut and end in "...".
using CpuListText = FixedString<160>;

constexpr CpuListText cpulist_text(const CpuSet& s) {
  CpuListText out;
  if (s.empty()) {
    out.append("none");
    return out;
  }
  bool first = true;
  for (int id = s.first(); id >= 0;) {
    int end = id;
    while (s.test(end + 1)) ++end;
    if (!first) out.push_back(',');
    first = false;
    out.append_int(id);
    if (end > id) out.push_back('-').append_int(end);
    id = s.next(end);
  }
  return out;
}

/// The node ids of a topology as a list, for messages ("0-1", "0,1,2,33").
constexpr CpuListText node_ids_text(const Topology& topo) {
  NodeSet ids;
  for (const auto& n : topo.nodes)
    if (NodeSet::valid_id(n.id)) ids.set(n.id);
  return cpulist_text(ids);
}

/// "GPU 3 (0000:10:1c.0)", or "device 0000:17:00.0" for a non-GPU --pci target.
constexpr FixedString<48> gpu_label(const Topology& topo, int gpu) {
  FixedString<48> out;
  const PciDevice& d = topo.gpus[static_cast<std::size_t>(gpu)].pci;
  if (d.is_gpu() || d.class_code == 0) {
    out.append("GPU ").append_int(gpu).append(" (").append(d.address.to_string().view()).push_back(')');
  } else {
    out.append("device ").append(d.address.to_string().view());
  }
  return out;
}

/// How many GPUs take part in the job (GPUs 0..n-1).
/// Errors: Errc::invalid_argument for a negative nproc or one above the visible GPU count.
constexpr Result<int> participating_gpus(const Topology& topo, const JobOptions& job) {
  int visible = static_cast<int>(topo.gpus.size());
  if (job.nproc < 0)
    return fail(Errc::invalid_argument, "--nproc ", job.nproc,
                " is negative; give the number of processes of the job on this machine, or 0 for every visible GPU");
  if (job.nproc > visible)
    return fail(Errc::invalid_argument, "--nproc ", job.nproc, " is more than the ", visible,
                " visible GPUs; check CUDA_VISIBLE_DEVICES / --visible-devices, or lower --nproc");
  return job.nproc == 0 ? visible : job.nproc;
}

/// Checks that `gpu` exists and takes part; returns the number of participating GPUs.
/// Errors: Errc::not_found (no such GPU), Errc::invalid_argument (beyond --nproc, bad nproc).
constexpr Result<int> check_gpu(const Topology& topo, int gpu, const JobOptions& job) {
  int visible = static_cast<int>(topo.gpus.size());
  if (visible == 0)
    return fail(Errc::not_found, "no GPU is visible in ", topo.origin.view(),
                "; check CUDA_VISIBLE_DEVICES / --visible-devices, or name a device with --pci");
  if (gpu < 0 || gpu >= visible)
    return fail(Errc::not_found, "GPU ", gpu, " does not exist: ", visible, " GPUs are visible (indices 0-", visible - 1,
                "); check --gpu / the local rank and CUDA_VISIBLE_DEVICES");
  GPUAFF_TRY(int n, participating_gpus(topo, job));
  if (gpu >= n)
    return fail(Errc::invalid_argument, "GPU ", gpu, " does not take part in the job: --nproc ", n, " makes GPUs 0-",
                n - 1, " the job's GPUs; raise --nproc or pick a lower GPU");
  return n;
}

/// The allowed (usable) CPUs of node `id`; empty when the node does not exist,
/// is memory-only, or lies wholly outside the allowed set.
constexpr CpuSet node_allowed(const Topology& topo, int id) {
  const NumaNode* n = topo.find_node(id);
  return n == nullptr ? CpuSet{} : n->cpus & topo.usable();
}

/// A physical core as the policies see it: the allowed threads of one core,
/// keyed by the lowest thread of the whole core (allowed or not), as both
/// PyTorch and NVIDIA key them.
struct PhysicalCore {
  int key = -1;
  CpuSet threads;
  friend constexpr bool operator==(const PhysicalCore&, const PhysicalCore&) = default;
};

/// The CPUs of `cpus` grouped by Topology::cores (any sibling count: SMT2,
/// SMT4, SMT8, strided or adjacent numbering; never parsed from two numbers),
/// sorted by key. A CPU that belongs to no listed core is a core by itself.
constexpr std::vector<PhysicalCore> physical_cores(const Topology& topo, const CpuSet& cpus) {
  std::vector<PhysicalCore> out;
  if (cpus.empty()) return out;
  std::size_t most = static_cast<std::size_t>(cpus.count());  // at most one core per CPU
  out.reserve(most < topo.cores.size() ? most : topo.cores.size());
  CpuSet left = cpus;
  for (const Core& c : topo.cores) {
    if (!c.threads.intersects(left)) continue;
    out.push_back(PhysicalCore{c.threads.first(), c.threads});  // one copy per core: sets are 1 KiB
    out.back().threads &= left;
    left -= out.back().threads;
  }
  if (left.any()) {
    for (int id : left) out.push_back(PhysicalCore{id, CpuSet::single(id)});
    std::sort(out.begin(), out.end(), [](const PhysicalCore& a, const PhysicalCore& b) { return a.key < b.key; });
  }
  return out;
}

/// How many entries physical_cores(topo, cpus) would have, without building them.
constexpr int count_physical_cores(const Topology& topo, const CpuSet& cpus) {
  int n = 0;
  CpuSet left = cpus;
  for (const Core& c : topo.cores) {
    if (!c.threads.intersects(left)) continue;
    ++n;
    left -= c.threads;
  }
  return n + left.count();  // CPUs of no listed core count as cores of their own
}

/// The union of the threads of cores [first, first + count).
constexpr CpuSet threads_of(const std::vector<PhysicalCore>& cores, std::size_t first, std::size_t count) {
  CpuSet out;
  for (std::size_t i = first; i < first + count && i < cores.size(); ++i) out |= cores[i].threads;
  return out;
}

/// The error of a GPU whose node has no allowed CPU (memory-only node, or a
/// container/cgroup that excludes the node): names the GPU, the node and both sets.
constexpr Unexpected<Error> no_allowed_cpu(const Topology& topo, int gpu, int node, std::string_view policy) {
  const NumaNode* n = topo.find_node(node);
  CpuSet node_cpus = n == nullptr ? CpuSet{} : n->cpus;
  return fail(Errc::empty_result, policy, ": ", gpu_label(topo, gpu), " is on NUMA node ", node,
              ", which has no allowed CPU (node CPUs: ", cpulist_text(node_cpus),
              "; allowed CPUs: ", cpulist_text(topo.usable()),
              "); allow some CPUs of that node (taskset, cgroup cpuset) or use --fallback unbound");
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
