#pragma once
// The RDMA NIC for each GPU, and the variables that tell the communication
// libraries (`--nic-env`, docs/nics.md).
//
// The rule: GPUs are taken in index order; each gets, among the RDMA NICs
// (those with a sys/class/infiniband name) on its nearest path class, the one
// the fewest GPUs before it got, the lowest PCI address on a tie. So every GPU
// under its own switch gets its own NIC, GPUs that share their closest NICs
// spread over them evenly, and the answer depends only on GPU indexes and
// addresses: servers of one shape give GPU k the same NIC (the same rail).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// The NIC chosen for a GPU and how far it is.
struct NicChoice {
  const Nic* nic = nullptr;
  PciPath path = PciPath::sys;
};

/// The choice for every GPU of `topo`, by index; nullopt for a GPU with no
/// RDMA NIC in its nics list.
inline std::vector<std::optional<NicChoice>> choose_nics(const Topology& topo) {
  std::vector<int> uses(topo.nics.size(), 0);
  std::vector<std::optional<NicChoice>> out;
  for (const auto& g : topo.gpus) {
    std::optional<NicChoice> best;
    std::size_t best_index = 0;
    for (const auto& np : g.nics) {  // nearest first, then by address
      const Nic* n = topo.find_nic(np.nic);
      if (n == nullptr || !n->rdma()) continue;
      if (best && np.path != best->path) break;  // only the nearest class competes
      auto i = static_cast<std::size_t>(n - topo.nics.data());
      if (!best || uses[i] < uses[best_index]) {
        best = NicChoice{n, np.path};
        best_index = i;
      }
    }
    if (best) ++uses[best_index];
    out.push_back(best);
  }
  return out;
}

/// The variables that point NCCL, UCX and NVSHMEM at the NIC chosen for GPU
/// `gpu` (an index into topo.gpus): NCCL_IB_HCA ("=mlx5_0:1": "=" makes NCCL
/// match the name exactly, not as a prefix of mlx5_10), UCX_NET_DEVICES and
/// NVSHMEM_HCA_LIST ("mlx5_0:1").
/// Errors: Errc::not_found when the GPU has no RDMA NIC (or the topology
/// lists no NIC at all), naming where it was read.
inline Result<std::vector<std::pair<std::string, std::string>>> nic_environment(const Topology& topo, int gpu) {
  auto chosen = choose_nics(topo);
  if (gpu < 0 || static_cast<std::size_t>(gpu) >= chosen.size())
    return fail(Errc::not_found, "nic_env=true: no GPU ", gpu, " in ", topo.origin.view());
  const Gpu& g = topo.gpus[static_cast<std::size_t>(gpu)];
  if (!chosen[static_cast<std::size_t>(gpu)]) {
    if (topo.nics.empty())
      return fail(Errc::not_found, "nic_env=true: ", topo.origin.view(),
                  " lists no network device (read it from sysfs: root=DIR or this machine, or a JSON topology "
                  "that has \"nics\"); leave out nic_env=true");
    return fail(Errc::not_found, "nic_env=true: no RDMA NIC (sys/class/infiniband) reaches GPU ", g.index, " (",
                g.address().to_string().view(), ") in ", topo.origin.view(), "; leave out nic_env=true");
  }
  const Nic& n = *chosen[static_cast<std::size_t>(gpu)]->nic;
  std::string port = std::string(n.rdma_names.front().view()) + ":" + std::to_string(n.rdma_port);
  return std::vector<std::pair<std::string, std::string>>{
      {"NCCL_IB_HCA", "=" + port}, {"UCX_NET_DEVICES", port}, {"NVSHMEM_HCA_LIST", port}};
}

}  // namespace v0
}  // namespace gpuaff
