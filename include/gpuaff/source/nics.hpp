// SPDX-License-Identifier: Apache-2.0
#pragma once
// What sits near each GPU, read from a root (SysfsSource::load() with full
// detail): the network PCI devices with their kernel names, the PCIe path
// class between every GPU and every NIC, and the GPU's own memory NUMA nodes.
//
// What is read (pci = sys/bus/pci/devices), and what happens when it is absent:
//
// | file                                            | when read                 | if missing                       |
// |-------------------------------------------------|---------------------------|----------------------------------|
// | pci/DEV/numa_node                               | network class (0x02xxxx;  | numa_node -1 (not read again for |
// |                                                 | `class` read by sysfs.hpp)| an extra_pci device)             |
// | pci/DEV (the link's target, resolved in root)   | NICs and GPUs             | path class by NUMA node only     |
// | sys/class/infiniband (listing), NAME/device/class | every entry (the link's   | NAME/device/uevent; neither:     |
// |                                                 | target, or the nearest    | entry skipped (not a PCI device) |
// |                                                 | PCI device above it)      |                                  |
// | sys/class/infiniband/NAME/ports (listing), then | first name of each NIC    | port 1                           |
// | ports/P/link_layer of the lowest port P         |                           |                                  |
// | sys/class/cxi (listing), NAME/device/class      | every entry (Slingshot    | NAME/device/uevent; neither:     |
// |                                                 | NICs: cxi0, ...)          | entry skipped                    |
// | sys/class/net (listing), NAME/device/class      | every entry (virtio-net:  | NAME/device/uevent; neither:     |
// |                                                 | virtio0 below the device) | entry skipped                    |
// | proc/driver/nvidia/gpus/BDF/numa_status         | NVIDIA GPUs, on machines  | no memory nodes                  |
// |                                                 | with a memory-only node   |                                  |
//
// The path class of two devices comes from where their resolved device paths
// (sys/devices/.../pciDDDD:BB/<bridge>/.../<device>) part, as `nvidia-smi topo -m`
// and NCCL reason (docs/nics.md):
//   - different host bridges (the pciDDDD:BB directories): NODE when both
//     devices are on the same NUMA node, SYS otherwise;
//   - the same host bridge, no bridge in common (each under its own root
//     port): PHB;
//   - a bridge in common: the deepest one is the switch both hang below. PIX
//     when each device is at most one bridge (the switch's downstream port)
//     below it, PXB when either is further down (a second switch).
// A device whose path cannot be resolved to a host bridge (a root without the
// links) is classed by NUMA node only: NODE or SYS.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/detail/status_field.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/sysfs_reader.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Where a PCI device hangs: its host bridge and the devices from the root
/// port down to it (the device itself last).
struct PciChain {
  std::string host;                ///< root-relative path of the pciDDDD:BB directory
  std::vector<PciAddress> chain;   ///< root port ... device
};

/// "pci0000:15" -> true: a host bridge directory.
template <class = void>
bool is_host_bridge_name(std::string_view c) {
  if (c.size() < 8 || c.substr(0, 3) != "pci") return false;
  std::string_view rest = c.substr(3);
  std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0 || rest.size() - colon - 1 != 2) return false;
  long long v = 0;
  return leading_number(rest.substr(0, colon), 16, 0xffffffffLL, v) == colon &&
         leading_number(rest.substr(colon + 1), 16, 0xff, v) == 2;
}

/// The chain of a resolved device path, or nullopt when it has no host bridge
/// followed by PCI addresses ending at the device.
template <class = void>
std::optional<PciChain> pci_chain(std::string_view resolved) {
  std::vector<std::string> comps;
  split_path(resolved, comps);
  std::size_t host = comps.size();
  for (std::size_t i = comps.size(); i > 0; --i)
    if (is_host_bridge_name(comps[i - 1])) {
      host = i - 1;
      break;
    }
  if (host + 1 >= comps.size()) return std::nullopt;
  PciChain c;
  c.host = join_path(std::vector<std::string>(comps.begin(), comps.begin() + static_cast<std::ptrdiff_t>(host) + 1));
  for (std::size_t i = host + 1; i < comps.size(); ++i) {
    auto a = PciAddress::parse(comps[i]);
    if (!a) return std::nullopt;
    c.chain.push_back(*a);
  }
  return c;
}

/// The path class between two devices (chains may be absent: NUMA node only).
template <class = void>
PciPath classify_path(const std::optional<PciChain>& a, int node_a, const std::optional<PciChain>& b,
                      int node_b) {
  if (!a || !b || a->host != b->host) return node_a == node_b ? PciPath::node : PciPath::sys;
  // Bridges in common: the longest common prefix of the two chains without their devices.
  std::size_t na = a->chain.size() - 1;
  std::size_t nb = b->chain.size() - 1;
  std::size_t common = 0;
  while (common < na && common < nb && a->chain[common] == b->chain[common]) ++common;
  if (common == 0) return PciPath::phb;
  return na - common <= 1 && nb - common <= 1 ? PciPath::pix : PciPath::pxb;
}

/// The chain of sys/bus/pci/devices/BDF, resolved inside the root.
template <class = void>
std::optional<PciChain> device_chain(SysfsReader& r, const PciAddress& a) {
  std::string rel = std::string("sys/bus/pci/devices/") + std::string(a.to_string().view());
  return pci_chain(r.resolve(rel));
}

/// The PCI address a class entry (sys/class/net/eth0) belongs to: the device
/// its `device` link leads to, resolved inside the root, or the nearest PCI
/// device above it (virtio-net's link leads to virtio0 below the PCI device).
/// Its `class` file (or, for a device that has none, its `uevent`) is read, so
/// that a recording keeps the links. nullopt for an entry without a PCI device
/// (lo, bridges, soft RoCE).
template <class = void>
Result<std::optional<PciAddress>> class_entry_device(SysfsReader& r, const std::string& entry) {
  std::string s;
  GPUAFF_TRY(int which, r.first_of({entry + "/device/class", entry + "/device/uevent"}, s));
  if (which < 0) return std::optional<PciAddress>();
  std::vector<std::string> comps;
  split_path(r.resolve(entry + "/device"), comps);
  for (std::size_t i = comps.size(); i > 0; --i) {
    if (is_host_bridge_name(comps[i - 1])) break;
    if (auto a = PciAddress::parse(comps[i - 1])) return std::optional<PciAddress>(*a);
  }
  return std::optional<PciAddress>();
}

/// Adds the names of sys/class/CLASS entries to the NICs they belong to:
/// RDMA names (infiniband), CXI names (cxi) or interfaces (net).
template <class = void>
Result<void> read_class_names(SysfsReader& r, Topology& t, std::string_view cls, bool rdma) {
  std::string s;
  std::string dir = std::string("sys/class/") + std::string(cls);
  GPUAFF_TRY(auto names, r.list(dir));
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (name.size() > FixedString<64>::capacity) continue;
    if (!interface_name_ok(name)) {
      t.notes.push_back(dir + "/" + escape_control(name) +
                        ": not a name the kernel gives an interface (only letters, digits, '_', '.', '-'); left out");
      continue;
    }
    GPUAFF_TRY(auto a, class_entry_device(r, dir + "/" + name));
    if (!a) continue;
    auto nic = std::find_if(t.nics.begin(), t.nics.end(), [&](const Nic& n) { return n.address == *a; });
    if (nic == t.nics.end()) continue;
    if (!rdma) {
      (cls == "cxi" ? nic->cxi_names : nic->net_names).emplace_back(std::string_view(name));
      continue;
    }
    if (nic->rdma_names.empty()) {
      GPUAFF_TRY(auto ports, r.list(dir + "/" + name + "/ports"));
      int first = 0;
      for (const auto& p : ports) {
        long long v = 0;
        // InfiniBand port numbers are 1-255 (an 8-bit field); others are not ports.
        if (!p.empty() && leading_number(p, 10, 1 << 20, v) == p.size() && v > 0 && v <= 255 && (first == 0 || v < first))
          first = static_cast<int>(v);
      }
      if (first > 0) {
        nic->rdma_port = first;
        // read, so that a recording keeps the port directory the listing found
        GPUAFF_TRY(bool have_layer, r.get(dir + "/" + name + std::string("/ports/") + std::to_string(first) + "/link_layer", s));
        (void)have_layer;
      }
    }
    nic->rdma_names.emplace_back(std::string_view(name));
  }
  return {};
}

/// Topology::nics from the network-class devices the PCI section found
/// (address, entry name in sys/bus/pci/devices), and every GPU's nics list,
/// nearest first.
template <class = void>
Result<void> read_nics(SysfsReader& r, Topology& t, const std::vector<std::pair<PciAddress, std::string>>& network) {
  std::string s;
  for (const auto& [address, name] : network) {
    std::string dir = "sys/bus/pci/devices/" + name + "/";
    Nic n;
    n.address = address;
    if (const PciDevice* known = t.find_pci(address)) {  // read already (an extra_pci target)
      n.numa_node = known->numa_node;
      t.nics.push_back(std::move(n));
      continue;
    }
    GPUAFF_TRY(bool have_node, r.get(dir + "numa_node", s));
    if (have_node) {
      GPUAFF_TRY(long long v, r.integer(dir + "numa_node", s, -1, CpuSet::capacity - 1));
      n.numa_node = static_cast<int>(v);
    }
    t.nics.push_back(std::move(n));
  }
  std::sort(t.nics.begin(), t.nics.end(), [](const Nic& x, const Nic& y) { return x.address < y.address; });
  GPUAFF_TRY_VOID(read_class_names(r, t, "infiniband", true));
  GPUAFF_TRY_VOID(read_class_names(r, t, "cxi", false));
  GPUAFF_TRY_VOID(read_class_names(r, t, "net", false));

  std::vector<std::optional<PciChain>> nic_chains;
  for (const auto& n : t.nics) nic_chains.push_back(device_chain(r, n.address));
  // The host's GPUs too: under --share machine a process's one GPU is bound
  // (and given its NIC) as one of them.
  for (auto* gpus : {&t.gpus, &t.host_gpus}) {
    for (auto& g : *gpus) {
      auto gc = device_chain(r, g.address());
      g.nics.clear();
      for (std::size_t i = 0; i < t.nics.size(); ++i)
        g.nics.push_back(
            NicPath{t.nics[i].address, classify_path(gc, g.numa_node(), nic_chains[i], t.nics[i].numa_node)});
      std::stable_sort(g.nics.begin(), g.nics.end(), [](const NicPath& x, const NicPath& y) { return x.path < y.path; });
    }
  }
  return {};
}

/// read_gpu_memory_nodes for one list of GPUs (the process's, or the host's).
template <class = void>
Result<void> read_gpu_memory_nodes_of(SysfsReader& r, const Topology& t, std::vector<Gpu>& gpus) {
  std::string s;
  for (auto& g : gpus) {
    if (g.pci.vendor != pci_vendor::nvidia) continue;
    std::string rel = std::string("proc/driver/nvidia/gpus/") + std::string(g.address().to_string().view()) + "/numa_status";
    GPUAFF_TRY(bool have, r.get(rel, s));
    if (!have) continue;
    auto node = status_field(s, "Node");
    if (!node) continue;
    GPUAFF_TRY(long long id, r.integer(rel, *node, -1, CpuSet::capacity - 1));
    auto status = status_field(s, "Status");
    bool online = !status || trim(*status) == "online";
    const NumaNode* own = id >= 0 ? t.find_node(static_cast<int>(id)) : nullptr;
    if (online && own != nullptr && own->memory_only()) g.memory_nodes.push_back(static_cast<int>(id));
  }
  return {};
}

/// Each NVIDIA GPU's own memory node, from the driver's numa_status ("Node: 2",
/// "Status: online" on GH200/GB200 in coherent mode): kept when the node is
/// one of the topology's memory-only nodes (GPU memory has no CPUs) and the
/// driver does not call it offline. Without a memory-only node nothing is read.
template <class = void>
Result<void> read_gpu_memory_nodes(SysfsReader& r, Topology& t) {
  if (std::none_of(t.nodes.begin(), t.nodes.end(), [](const NumaNode& n) { return n.memory_only(); })) return {};
  for (auto* gpus : {&t.gpus, &t.host_gpus}) {
    GPUAFF_TRY_VOID(read_gpu_memory_nodes_of(r, t, *gpus));
  }
  return {};
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
