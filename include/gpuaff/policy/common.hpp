// SPDX-License-Identifier: Apache-2.0
#pragma once
// The vocabulary every binding policy shares: job and NVIDIA options, and
// the pure helpers the policies are built from (participating GPUs, text for
// error messages).
//
// A policy is a pure function of a Topology, a GPU index and the job: no I/O,
// no current mask (the baseline is always Topology::usable(), the allowed and
// online CPUs), so every policy runs in constant evaluation and two ranks that
// start with different masks still agree.

#include "gpuaff/config.hpp"

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/fixed_string.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

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

namespace detail {

/// A cpulist for error messages ("0-23,48-71"; "none" for the empty set);
/// long lists are cut and end in "...". This and the labels below are
/// written only on errors: out of line and cold, so that no path that
/// succeeds carries (and no TU that binds optimizes) a copy of them.
using CpuListText = FixedString<160>;

[[gnu::cold, gnu::noinline]] constexpr CpuListText cpulist_text(const CpuSet& s) {
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
[[gnu::cold, gnu::noinline]] constexpr CpuListText node_ids_text(const Topology& topo) {
  NodeSet ids;
  for (const auto& n : topo.nodes)
    if (NodeSet::valid_id(n.id)) ids.set(n.id);
  return cpulist_text(ids);
}

/// "GPU 3 (0000:10:1c.0)", or "device 0000:17:00.0" for a non-GPU --pci target.
/// Written as a CpuListText, the address appended to it rather than made by
/// PciAddress::to_string(): each FixedString size a TU uses is compiled
/// again, and cpulist_text() already compiles this one (benchmarks row 6).
[[gnu::cold, gnu::noinline]] constexpr CpuListText gpu_label(const Topology& topo, int gpu) {
  CpuListText out;
  const PciDevice& d = topo.gpus[static_cast<std::size_t>(gpu)].pci;
  bool is_gpu = d.is_gpu() || d.class_code == 0;
  if (is_gpu) out.append("GPU ").append_int(gpu).append(" (");
  else out.append("device ");
  d.address.append_to(out);
  if (is_gpu) out.push_back(')');
  return out;
}

/// How many GPUs take part in the job (GPUs 0..n-1).
/// Errors: Errc::invalid_argument for a negative nproc or one above the visible GPU count.
constexpr Result<int> participating_gpus(const Topology& topo, const JobOptions& job) {
  int visible = static_cast<int>(topo.gpus.size());
  if (job.nproc < 0)
    return fail(Errc::invalid_argument, "nproc=", job.nproc,
                " is negative; give the number of processes of the job on this machine, or 0 for every visible GPU");
  if (job.nproc > visible)
    return fail(Errc::invalid_argument, "nproc=", job.nproc, " is more than the ", visible,
                " visible GPUs; check CUDA_VISIBLE_DEVICES / visible_devices=LIST, or lower nproc=N");
  return job.nproc == 0 ? visible : job.nproc;
}

/// Checks that `gpu` exists and takes part; returns the number of participating GPUs.
/// Errors: Errc::not_found (no such GPU), Errc::invalid_argument (beyond --nproc, bad nproc).
constexpr Result<int> check_gpu(const Topology& topo, int gpu, const JobOptions& job) {
  int visible = static_cast<int>(topo.gpus.size());
  if (visible == 0)
    return fail(Errc::not_found, "no GPU is visible in ", topo.origin.view(),
                "; check CUDA_VISIBLE_DEVICES / visible_devices=LIST, or name a device with pci=BDF");
  if (gpu < 0 || gpu >= visible)
    return fail(Errc::not_found, "GPU ", gpu, " does not exist: ", visible, " GPUs are visible (indices 0-", visible - 1,
                "); check gpu=N / the local rank and CUDA_VISIBLE_DEVICES");
  GPUAFF_TRY(int n, participating_gpus(topo, job));
  if (gpu >= n)
    return fail(Errc::invalid_argument, "GPU ", gpu, " does not take part in the job: nproc=", n, " makes GPUs 0-",
                n - 1, " the job's GPUs; raise nproc=N or pick a lower GPU");
  return n;
}

/// Words of a CpuSet (64 CPUs each).
inline constexpr int cpu_set_words = CpuSet::capacity / 64;

/// The CPUs of a set not yet taken by cores, kept as the list of the set's
/// non-zero words, for testing many cores against it: a test reads only
/// those words of a core (6 of 18 for a node of a 1152-CPU machine), in one
/// loop, with no copy of the set. The set must outlive the SparseSet.
class SparseSet {
 public:
  constexpr explicit SparseSet(const CpuSet& s) : full_(&s) {
    std::uint64_t all = 0;
    for (int i = 0, top = s.last() / 64; i <= top; ++i) {
      std::uint64_t x = s.word_at(i);
      if (x == 0) continue;
      at_[static_cast<std::size_t>(n_)] = i;
      left_[static_cast<std::size_t>(n_)] = x;
      ++n_;
      all |= x;
    }
    any_ = all != 0;
  }
  SparseSet(const SparseSet&) = delete;
  SparseSet& operator=(const SparseSet&) = delete;

  /// Whether no CPU is left.
  constexpr bool empty() const { return !any_; }
  /// Whether `c` holds a CPU that is left.
  constexpr bool hits(const CpuSet& c) const {
    std::uint64_t acc = 0;
    for (int j = 0; j < n_; ++j) acc |= c.word_at(at_[static_cast<std::size_t>(j)]) & left_[static_cast<std::size_t>(j)];
    return acc != 0;
  }
  /// Removes the CPUs of `c`; true when `c` also holds CPUs of the set that
  /// were removed before (two cores sharing a CPU: malformed, but handled).
  constexpr bool remove(const CpuSet& c) {
    std::uint64_t taken_before = 0;
    std::uint64_t rest = 0;
    for (int j = 0; j < n_; ++j) {
      int k = at_[static_cast<std::size_t>(j)];
      std::uint64_t& l = left_[static_cast<std::size_t>(j)];
      std::uint64_t cw = c.word_at(k);
      taken_before |= cw & full_->word_at(k) & ~l;
      l &= ~cw;
      rest |= l;
    }
    any_ = rest != 0;
    return taken_before != 0;
  }
  /// The CPUs left, in ascending order, passed to `f`.
  template <class F>
  constexpr void for_each_left(F&& f) const {
    for (int j = 0; j < n_; ++j) {
      for (std::uint64_t w = left_[static_cast<std::size_t>(j)]; w != 0; w &= w - 1)
        f(at_[static_cast<std::size_t>(j)] * 64 + std::countr_zero(w));
    }
  }
  /// The lowest CPU left, or -1.
  constexpr int first_left() const {
    for (int j = 0; j < n_; ++j) {
      std::uint64_t w = left_[static_cast<std::size_t>(j)];
      if (w != 0) return at_[static_cast<std::size_t>(j)] * 64 + std::countr_zero(w);
    }
    return -1;
  }
  /// How many CPUs are left.
  constexpr int count_left() const {
    int n = 0;
    for_each_left([&n](int) { ++n; });
    return n;
  }
  /// Non-zero words of the set: an upper bound on CPUs / 64.
  constexpr int words() const { return n_; }

 private:
  const CpuSet* full_;
  int n_ = 0;
  bool any_ = false;
  // [0, n_) are set by the constructor; the rest is never read.
  std::array<int, cpu_set_words> at_;
  std::array<std::uint64_t, cpu_set_words> left_;
};

}  // namespace detail

/// The error of a GPU whose node has no allowed CPU (memory-only node, or a
/// container/cgroup that excludes the node): names the policy, the GPU, the
/// node and both sets.
constexpr Unexpected<Error> no_allowed_cpu(const Topology& topo, int gpu, int node, std::string_view policy) {
  const NumaNode* n = topo.find_node(node);
  CpuSet node_cpus = n == nullptr ? CpuSet{} : n->cpus;
  return fail(Errc::empty_result, policy, ": ", detail::gpu_label(topo, gpu), " is on NUMA node ", node,
              ", which has no allowed CPU (node CPUs: ", detail::cpulist_text(node_cpus),
              "; allowed CPUs: ", detail::cpulist_text(topo.usable()),
              "); allow some CPUs of that node (taskset, cgroup cpuset) or use fallback=unbound");
}

}  // namespace v0
}  // namespace gpuaff
