#pragma once
// Several ranks on one GPU (`ranks_per_gpu=N`: MPS colocation,
// NCCL_MULTI_RANK_GPU_ENABLE): the GPU's share cut into N disjoint parts that
// together are the whole share (docs/contract.md section 3).
//
// The share's physical cores, in order (lowest thread first), are cut into N
// runs whose sizes differ by at most one core, the larger runs first, so
// ranks that share a core's caches are neighbours and no core is split while
// whole ones remain. A share with fewer cores than N is cut by hardware
// threads the same way (core by core), which keeps the parts disjoint.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <cstddef>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// `units` cut into `parts` runs in order, sizes differing by at most one, the
/// larger first; each run the union of its units.
inline std::vector<CpuSet> cut_in_runs(const std::vector<CpuSet>& units, int parts) {
  std::vector<CpuSet> out(static_cast<std::size_t>(parts));
  std::size_t n = units.size();
  std::size_t p = static_cast<std::size_t>(parts);
  std::size_t base = n / p, extra = n % p, at = 0;
  for (std::size_t i = 0; i < p; ++i) {
    std::size_t size = base + (i < extra ? 1 : 0);
    for (std::size_t k = 0; k < size; ++k) out[i] |= units[at + k];
    at += size;
  }
  return out;
}

}  // namespace detail

/// The `parts` parts of `share` on `topo` (whose cores must have been read),
/// in order. A CPU of the share that no core lists counts as a core of its own.
/// Errors: Errc::invalid_argument for parts < 1; Errc::insufficient_cores when
/// the share has fewer hardware threads than parts.
inline Result<std::vector<CpuSet>> split_share(const Topology& topo, const CpuSet& share, int parts) {
  if (parts < 1) return fail(Errc::invalid_argument, "ranks_per_gpu=", parts, " is not a positive number of parts");
  std::vector<CpuSet> cores;
  CpuSet seen;
  for (int cpu : share) {
    if (seen.test(cpu)) continue;
    const Core* c = topo.core_of_cpu(cpu);
    CpuSet threads = c != nullptr ? c->threads & share : CpuSet{cpu};
    seen |= threads;
    cores.push_back(threads);
  }
  if (cores.size() >= static_cast<std::size_t>(parts)) return detail::cut_in_runs(cores, parts);
  std::vector<CpuSet> threads;
  for (const auto& c : cores)
    for (int cpu : c) threads.push_back(CpuSet{cpu});
  if (threads.size() < static_cast<std::size_t>(parts))
    return fail(Errc::insufficient_cores, "ranks_per_gpu=", parts, ": the share ", share.to_list(), " has ",
                threads.size(), " CPU(s), fewer than the ranks that would share it; run at most ", threads.size(),
                " rank(s) on this GPU, or give it more CPUs (another policy, share=machine)");
  return detail::cut_in_runs(threads, parts);
}

}  // namespace v0
}  // namespace gpuaff
