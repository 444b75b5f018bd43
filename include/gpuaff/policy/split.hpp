// SPDX-License-Identifier: Apache-2.0
#pragma once
// Several ranks on one GPU (`ranks_per_gpu=N`: MPS colocation,
// NCCL_MULTI_RANK_GPU_ENABLE): the GPU's share cut into N disjoint parts that
// together are the whole share (docs/contract.md section 3).
//
// The share's physical cores, in order (lowest thread first), are cut into N
// runs whose sizes differ by at most one core, the larger runs first, so
// ranks that share a core's caches are neighbours. A core is never split
// between parts: two parts on one core's hardware threads (SMT siblings)
// would compete for its execution units and caches, which is what cutting a
// share was meant to prevent. A share with fewer cores than N is an error
// that names what asked for the N parts and how many the share can take.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// `units` cut into `parts` runs in order, sizes differing by at most one, the
/// larger first; each run the union of its units.
template <class = void>
std::vector<CpuSet> cut_in_runs(const std::vector<CpuSet>& units, int parts) {
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
/// in order, each of whole cores. A CPU of the share that no core lists counts
/// as a core of its own. `asked` names what cut the share, for errors:
/// "ranks_per_gpu=28" (the default), "domains_per_gpu=4", "GPU 0000:..."'s
/// compute partitions.
/// Errors: Errc::invalid_argument for parts < 1; Errc::insufficient_cores when
/// the share has fewer physical cores than parts (no core is split between parts).
template <class = void>
Result<std::vector<CpuSet>> split_share(const Topology& topo, const CpuSet& share, int parts,
                                        std::string_view asked = {}) {
  std::string what = asked.empty() ? "ranks_per_gpu=" + std::to_string(parts) : std::string(asked);
  if (parts < 1) return fail(Errc::invalid_argument, what, " is not a positive number of parts");
  std::vector<CpuSet> cores = topo.cores_within(share);
  if (cores.size() >= static_cast<std::size_t>(parts)) return detail::cut_in_runs(cores, parts);
  std::string why = static_cast<std::size_t>(share.count()) > cores.size()
                        ? "; a part of one core's hardware threads (SMT siblings) would make two parts compete for "
                          "that core, so no core is split"
                        : "";
  return fail(Errc::insufficient_cores, what, ": the share ", share.to_list(), " has ", cores.size(),
              " physical core(s), fewer than the ", parts, " parts it would be cut in", why, "; cut it in at most ",
              cores.size(), " part(s), or give the GPU more CPUs (another policy, share=machine)");
}

/// A topology whose AMD partitions (Gpu::partition, PciDevice::compute_partitions)
/// are folded back into their devices: what the policies split a node among.
struct DeviceView {
  Topology topo;                ///< one GPU per device, in the order first seen, indexed 0..
  std::vector<int> device_of{}; ///< per GPU of the original topology: its device's index in `topo`
  int nproc = 0;                ///< JobOptions::nproc (counted in partitions) as the devices they are on
};

/// `topo` by device; `nproc` as JobOptions::nproc counts (0: all).
template <class = void>
DeviceView by_device(const Topology& topo, int nproc) {
  DeviceView v;
  v.topo = topo;
  v.topo.gpus.clear();
  for (std::size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& g = topo.gpus[i];
    int at = -1;
    for (const auto& d : v.topo.gpus)
      if (d.address() == g.address()) at = d.index;
    if (at < 0) {
      Gpu d = g;
      d.partition = 0;
      d.index = at = static_cast<int>(v.topo.gpus.size());
      v.topo.gpus.push_back(std::move(d));
    }
    v.device_of.push_back(at);
    if (nproc > 0 && static_cast<int>(i) < nproc) v.nproc = std::max(v.nproc, at + 1);
  }
  return v;
}

/// bind_table where GPUs may be AMD partitions: each policy binds the devices
/// (it splits a node among devices), and partition k of a device with N gets
/// part k of N of the device's result (split_share). Equal to bind_table when
/// no GPU is partitioned.
/// `asked` names what made the partitions when an option did (topo's
/// "ranks_per_gpu=2", "domains_per_gpu=4"); "" for the devices' own.
template <class = void>
std::vector<std::vector<Result<CpuSet>>> bind_table_by_device(const Topology& topo,
                                                              const std::vector<PolicySpec>& specs,
                                                              const JobOptions& job,
                                                              std::string_view asked = {}) {
  bool partitioned = false;
  for (const auto& g : topo.gpus) partitioned = partitioned || g.pci.compute_partitions > 1;
  if (!partitioned) return bind_table(topo, specs, job);
  DeviceView v = by_device(topo, job.nproc);
  JobOptions devices = job;
  devices.nproc = v.nproc;
  auto table = bind_table(v.topo, specs, devices);
  std::vector<std::vector<Result<CpuSet>>> out(specs.size());
  for (std::size_t k = 0; k < specs.size(); ++k) {
    for (std::size_t g = 0; g < topo.gpus.size(); ++g) {
      const Result<CpuSet>& whole = table[k][static_cast<std::size_t>(v.device_of[g])];
      int n = topo.gpus[g].pci.compute_partitions;
      if (!whole || n <= 1) {
        out[k].push_back(whole);
        continue;
      }
      std::string cause = !asked.empty() ? std::string(asked)
                                         : "GPU " + std::string(topo.gpus[g].address().to_string().view()) + "'s " +
                                               std::to_string(n) + " compute partitions (current_compute_partition)";
      auto parts = split_share(v.topo, *whole, n, cause);
      if (!parts) {
        out[k].push_back(Unexpected<Error>(parts.error()));
      } else {
        out[k].push_back((*parts)[static_cast<std::size_t>(topo.gpus[g].partition)]);
      }
    }
  }
  return out;
}

}  // namespace v0
}  // namespace gpuaff
