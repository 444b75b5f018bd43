// SPDX-License-Identifier: Apache-2.0
#pragma once
// Binding a PCI device that is not a visible GPU (a NIC, a GPU hidden by
// CUDA_VISIBLE_DEVICES): with_pci_target. Its own header because it builds a
// whole Topology, which a TU that only binds GPUs need not compile.

#include "gpuaff/config.hpp"

#include <cstddef>

#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// with_pci_target on `topo` in place (make_plan's path: a Topology is some
/// 5 KB, and each copy of one is stack a plan touches).
template <class = void>
constexpr Result<void> target_pci(Topology& topo, PciAddress address, int* gpu_index) {
  for (std::size_t i = 0; i < topo.gpus.size(); ++i) {
    if (topo.gpus[i].address() == address) {
      if (gpu_index != nullptr) *gpu_index = static_cast<int>(i);
      return {};
    }
  }
  const PciDevice* d = topo.find_pci(address);
  if (d == nullptr)
    return fail(Errc::not_found, "PCI device ", address.to_string(), " is not in the topology of ", topo.origin.view(),
                "; check the address with lspci -D");
  Gpu g;
  g.index = 0;
  g.pci = *d;
  topo.gpus.assign(1, g);
  if (gpu_index != nullptr) *gpu_index = 0;
  return {};
}

}  // namespace detail

/// Makes PCI device `address` bindable. A visible GPU keeps the topology as
/// it is (so the GPUs sharing its node still count) and `*gpu_index` becomes
/// its index (a partitioned device's first partition). Any other device the
/// topology holds (a NIC, a GPU hidden by CUDA_VISIBLE_DEVICES) becomes its
/// single GPU, with index 0: bind it with JobOptions::nproc 0 or 1. The
/// topology is taken by value: pass std::move(t) where t is not needed after,
/// and nothing is copied.
/// Errors: Errc::not_found when the topology does not hold the device (the
/// reader loads non-GPU devices only when asked: SysfsOptions::extra_pci).
template <class = void>
constexpr Result<Topology> with_pci_target(Topology topo, PciAddress address, int* gpu_index) {
  GPUAFF_TRY_VOID(detail::target_pci(topo, address, gpu_index));
  return topo;
}

}  // namespace v0
}  // namespace gpuaff
