// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a Kubernetes pod's DRA claims gave the process (docs/contract.md
// section 7), as the kubelet's device metadata (KEP-5304) says, and how a
// plan uses it: the claimed GPUs by PCI address (never guessed from
// *_VISIBLE_DEVICES), the claimed CPUs as the set every share is drawn from.
// The files are JSON (source/json_dra.hpp reads them); this header holds
// what they say and its checks against the machine, with no JSON dependency.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <string>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// The kubelet's mount point of the device metadata inside a container
/// (kubernetes/website#54716).
inline constexpr const char* dra_metadata_dir = "/var/run/kubernetes.io/dra-device-attributes";

/// What the device metadata files under one directory claim.
struct DraClaims {
  std::string dir{};                    ///< where they were read
  std::vector<std::string> files{};     ///< each file read (relative to `dir`)
  std::vector<PciAddress> pci{};        ///< every device's resource.kubernetes.io/pciBusID
  bool cpu_claim = false;               ///< a CPU driver's device was claimed
  CpuSet cpus{};                        ///< individual mode: each device's dra.cpu/cpuID
  std::vector<int> cpu_nodes{};         ///< grouped by NUMA node: each group's dra.cpu/numaNodeID
  std::vector<int> cpu_sockets{};       ///< grouped by socket: each group's dra.cpu/socketID
};

/// The CPUs a CPU claim gives on `topo`: the claimed CPU ids (individual
/// mode), or the allowed CPUs of the claimed NUMA nodes and sockets (grouped
/// mode: the metadata names the group, the container's cpuset the CPUs).
inline CpuSet dra_claimed_cpus(const Topology& topo, const DraClaims& c) {
  CpuSet out = c.cpus;
  for (int id : c.cpu_nodes)
    if (const NumaNode* n = topo.find_node(id)) out |= n->cpus & topo.usable();
  for (int id : c.cpu_sockets)
    for (const Package& p : topo.packages)
      if (p.id == id) out |= p.cpus & topo.usable();
  return out;
}

/// Makes `topo` what the claims say: its GPUs are the claimed ones (by PCI
/// address, in bus order, numbered from 0), its allowed CPUs the claimed
/// CPUs. Errors (Errc::empty_result) name each mismatch between the metadata
/// and what the process sees: a claimed GPU the process does not see (hidden
/// by CUDA_VISIBLE_DEVICES or the device cgroup), claimed CPUs outside its
/// allowed set, a claim whose CPUs it may not use at all.
inline Result<void> apply_dra_claims(Topology& topo, const DraClaims& c) {
  std::vector<Gpu> claimed;
  for (const PciAddress& a : c.pci) {
    auto seen = std::find_if(topo.gpus.begin(), topo.gpus.end(), [&](const Gpu& g) { return g.address() == a; });
    bool host_gpu = std::any_of(topo.host_gpus.begin(), topo.host_gpus.end(), [&](const Gpu& g) { return g.address() == a; });
    if (seen == topo.gpus.end()) {
      if (!host_gpu) continue;  // a NIC or another claimed PCI device
      std::string seen_list;
      for (const Gpu& g : topo.gpus) seen_list += (seen_list.empty() ? "" : ",") + std::string(g.address().to_string().view());
      return fail(Errc::empty_result, "the DRA device metadata under ", c.dir, " claims GPU ", a.to_string().view(),
                  ", which this process does not see (it sees ", seen_list.empty() ? std::string("none") : seen_list,
                  "): CUDA_VISIBLE_DEVICES or the container's device list disagrees with the claim");
    }
    if (std::none_of(claimed.begin(), claimed.end(), [&](const Gpu& g) { return g.address() == a; })) claimed.push_back(*seen);
  }
  if (!claimed.empty()) {
    std::sort(claimed.begin(), claimed.end(), [](const Gpu& x, const Gpu& y) { return x.address() < y.address(); });
    for (std::size_t i = 0; i < claimed.size(); ++i) claimed[i].index = static_cast<int>(i);
    topo.gpus = std::move(claimed);
  }
  if (!c.cpu_claim) return {};
  CpuSet cpus = dra_claimed_cpus(topo, c);
  if (!c.cpus.empty() && !c.cpus.is_subset_of(topo.usable()))
    return fail(Errc::empty_result, "the DRA device metadata under ", c.dir, " claims CPUs ", c.cpus.to_list(),
                ", and this process may use ", topo.usable().to_list(), ": CPUs ", (c.cpus - topo.usable()).to_list(),
                " of the claim are outside its cpuset (the claim is not what the container got)");
  if (cpus.empty())
    return fail(Errc::empty_result, "the DRA device metadata under ", c.dir, " claims CPUs this process may not use "
                "(allowed: ", topo.usable().to_list(), "); the claim is not what the container got");
  topo.allowed &= cpus;
  return {};
}

}  // namespace v0
}  // namespace gpuaff
