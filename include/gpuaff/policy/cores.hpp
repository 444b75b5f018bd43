// SPDX-License-Identifier: Apache-2.0
#pragma once
// Physical cores, the unit every policy hands out: SMT siblings share a
// core's execution units, so two ranks must not get two threads of one core.
// Part of the toolkit for writing a policy (docs/policies.md, "Writing your
// own policy").

#include "gpuaff/config.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/policy/common.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

class CoreList;
template <class = void>
constexpr CoreList physical_cores(const Topology& topo, const CpuSet& cpus);

/// The physical cores of a set of CPUs, sorted by key: each entry is the
/// CPUs of the set that belong to one core of Topology::cores (any sibling
/// count: SMT2, SMT4, SMT8, strided or adjacent numbering). The key of a
/// core is the lowest thread of the whole core (allowed or not), as both
/// PyTorch and NVIDIA key them. A CPU of the set that belongs to no listed
/// core is a core by itself. Made by physical_cores(); it refers to the
/// Topology it was made from, which must outlive it.
class CoreList {
 public:
  constexpr CoreList() = default;

  constexpr std::size_t size() const { return refs_.size(); }
  constexpr bool empty() const { return refs_.empty(); }
  /// The CPUs the list was made from.
  constexpr const CpuSet& cpus() const { return cpus_; }
  /// The key (lowest thread of the whole core) of entry `i`.
  constexpr int key(std::size_t i) const { return refs_[i].key; }

  /// The CPUs of entry `i`: every one of them, or with Smt::one the lowest.
  constexpr CpuSet threads(std::size_t i, Smt smt = Smt::all) const {
    CpuSet out;
    add_threads(i, smt, out);
    return out;
  }
  /// The union of the threads of entries [first, first + count).
  constexpr CpuSet threads(std::size_t first, std::size_t count, Smt smt = Smt::all) const {
    CpuSet out;
    for (std::size_t i = first; i < first + count && i < size(); ++i) add_threads(i, smt, out);
    return out;
  }
  /// Adds the threads of entry `i` (all of them, or the lowest) to `out`.
  constexpr void add_threads(std::size_t i, Smt smt, CpuSet& out) const {
    const Ref& r = refs_[i];
    if (r.core < 0) {
      out.set(r.key);
      return;
    }
    if (r.exact >= 0) {
      const CpuSet& e = exact_[static_cast<std::size_t>(r.exact)];
      if (smt == Smt::all) out |= e;
      else out.set(e.first());
      return;
    }
    // The core's threads that are in the set, visiting only the words they span.
    const CpuSet& threads = topo_->cores[static_cast<std::size_t>(r.core)].threads;
    for (int w = r.key / 64; w <= r.top; ++w) {
      std::uint64_t bits = threads.word_at(w) & cpus_.word_at(w);
      for (; bits != 0; bits &= bits - 1) {
        out.set(w * 64 + std::countr_zero(bits));
        if (smt == Smt::one) return;
      }
    }
  }

  template <class>
  friend constexpr CoreList physical_cores(const Topology& topo, const CpuSet& cpus);

 private:
  // A core kept as an index, not a set (no set per core): its
  // threads are Topology::cores[core].threads & cpus_.
  struct Ref {
    int key = -1;
    int core = -1;   // index into Topology::cores; -1: the lone CPU `key`, in no listed core
    int exact = -1;  // index into exact_ when the core shares CPUs with an earlier core; else -1
    int top = -1;    // the word (CPU / 64) of the core's highest thread
  };

  const Topology* topo_ = nullptr;
  CpuSet cpus_;
  std::vector<Ref> refs_;      // sorted by key
  std::vector<CpuSet> exact_;  // threads of the cores that overlap an earlier core (malformed topologies)
};

/// The physical cores of `cpus` (see CoreList). A core takes the CPUs of
/// `cpus` that no earlier core took.
template <class>
constexpr CoreList physical_cores(const Topology& topo, const CpuSet& cpus) {
  CoreList out;
  out.topo_ = &topo;
  out.cpus_ = cpus;
  if (cpus.empty()) return out;
  detail::SparseSet left(cpus);
  std::size_t most = static_cast<std::size_t>(left.words()) * 64;  // at most one core per CPU
  out.refs_.reserve(most < topo.cores.size() ? most : topo.cores.size());
  for (std::size_t i = 0; i < topo.cores.size() && !left.empty(); ++i) {
    const CpuSet& t = topo.cores[i].threads;
    if (!left.hits(t)) continue;
    CoreList::Ref r{t.first(), static_cast<int>(i), -1, t.last() / 64};
    if (left.remove(t)) {
      // The core shares CPUs with an earlier one, which took them: keep what
      // this one took as a set.
      CpuSet mine = t & cpus;
      for (const CoreList::Ref& prev : out.refs_) mine -= topo.cores[static_cast<std::size_t>(prev.core)].threads;
      r.exact = static_cast<int>(out.exact_.size());
      out.exact_.push_back(mine);
    }
    out.refs_.push_back(r);
  }
  if (!left.empty()) {
    // CPUs of no listed core are cores of their own, put in key order by
    // insertion: the cores' entries are in order already (Topology::cores is
    // sorted by lowest thread), so each moves only past the keys above it.
    left.for_each_left([&](int id) { out.refs_.push_back(CoreList::Ref{id, -1, -1, id / 64}); });
    std::vector<CoreList::Ref>& v = out.refs_;
    for (std::size_t i = 1; i < v.size(); ++i) {
      CoreList::Ref r = v[i];
      std::size_t j = i;
      for (; j > 0 && v[j - 1].key > r.key; --j) v[j] = v[j - 1];
      v[j] = r;
    }
  }
  return out;
}

/// How many entries physical_cores(topo, cpus) would have, without building them.
template <class = void>
constexpr int count_physical_cores(const Topology& topo, const CpuSet& cpus) {
  int n = 0;
  detail::SparseSet left(cpus);
  for (std::size_t i = 0; i < topo.cores.size() && !left.empty(); ++i) {
    const CpuSet& t = topo.cores[i].threads;
    if (!left.hits(t)) continue;
    ++n;
    left.remove(t);
  }
  return n + left.count_left();  // CPUs of no listed core count as cores of their own
}

/// Part `index` of `parts` contiguous runs of `cores`, as PyTorch's
/// exclusive mode cuts a node: each part gets size / parts cores, and the
/// remainder one more each to the lowest parts. Empty when index is not in
/// [0, parts) or the part has no core.
constexpr CpuSet share(const CoreList& cores, int parts, int index, Smt smt = Smt::all) {
  if (parts <= 0 || index < 0 || index >= parts) return {};
  int k = static_cast<int>(cores.size());
  int per = k / parts;
  int extra = k % parts;
  int begin = index * per + (index < extra ? index : extra);
  int len = per + (index < extra ? 1 : 0);
  return cores.threads(static_cast<std::size_t>(begin), static_cast<std::size_t>(len), smt);
}

}  // namespace v0
}  // namespace gpuaff
