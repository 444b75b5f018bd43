// SPDX-License-Identifier: Apache-2.0
// The NICs in `gpuaff topo`'s text report: the network devices, each GPU's
// nearest ones by PCIe path class and its NIC set (--nic-env), which NICs are
// rails and why the others are not, each GPU's own
// memory nodes, and the NICs of each node beside the picture.
#include <span>
#include <string>
#include <vector>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/launch/nics.hpp"
#include "report.hpp"

namespace gpuaff::cli {
namespace {

/// The name people use for a NIC: its RDMA name, else its interface, else its address.
std::string nic_name(const Topology& topo, const PciAddress& a) {
  const Nic* n = topo.find_nic(a);
  // Names come from a recording: escaped, so that a crafted one cannot drive the terminal.
  if (n != nullptr && !n->rdma_names.empty()) return detail::escape_control(n->rdma_names.front().view());
  if (n != nullptr && n->cxi()) return detail::escape_control(n->cxi_names.front().view());
  if (n != nullptr && !n->net_names.empty()) return detail::escape_control(n->net_names.front().view());
  return std::string(a.to_string().view());
}

/// "PIX: mlx5_0; NODE: mlx5_1 mlx5_2": the NICs of a GPU grouped by path class.
std::string by_class(const Topology& topo, const Gpu& g) {
  std::string out;
  for (std::size_t i = 0; i < g.nics.size(); ++i) {
    bool first_of_class = i == 0 || g.nics[i - 1].path != g.nics[i].path;
    if (first_of_class) out += std::string(i == 0 ? "" : "; ") + std::string(to_string(g.nics[i].path)) + ":";
    out += " " + nic_name(topo, g.nics[i].nic);
  }
  return out.empty() ? std::string("-") : out;
}

/// The rail column: the GPUs whose set holds `n` ("GPU 0", "GPUs 0 1"; a GPU
/// this process does not see by its address), or why it is in no set.
std::string rail_of(const Topology& topo, const std::vector<NicSet>& sets, const Nic& n) {
  std::span<const Gpu> all = nic_set_gpus(topo);
  std::string gpus;
  int count = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!sets[i].holds(&n)) continue;
    ++count;
    gpus += ' ';
    const Gpu* seen = nullptr;
    for (const auto& g : topo.gpus)
      if (g.address() == all[i].address()) seen = &g;
    if (seen != nullptr) {
      gpus += std::to_string(seen->index);
    } else {
      gpus += all[i].address().to_string().view();
      gpus += " (not this process's)";
    }
  }
  if (count == 0) return std::string(not_a_rail(topo, n));
  return (count == 1 ? "GPU" : "GPUs") + gpus;
}

}  // namespace

std::string nics_section(const Topology& topo, const std::function<std::string(const std::vector<std::vector<std::string>>&)>& table) {
  std::string out;
  if (topo.nics.empty()) return out;
  auto sets = nic_sets(topo, nic_set_gpus(topo));
  out += "\nNICs (" + std::to_string(topo.nics.size()) + "; a rail is in some GPU's NIC set):\n";
  std::vector<std::vector<std::string>> rows{{"pci", "node", "rdma", "names", "rail"}};
  for (const auto& n : topo.nics) {
    std::string names;
    auto add = [&](const auto& x) {  // appended: `"literal" + std::string` trips GCC 12's -Wrestrict at -O3
      if (!names.empty()) names += ' ';
      names += detail::escape_control(x.view());
    };
    for (const auto& x : n.rdma_names) add(x);
    for (const auto& x : n.cxi_names) add(x);
    for (const auto& x : n.net_names) add(x);
    rows.push_back({std::string(n.address.to_string().view()),
                    n.numa_node < 0 ? std::string("unknown (-1)") : std::to_string(n.numa_node),
                    n.rdma() ? "port " + std::to_string(n.rdma_port) : n.cxi() ? std::string("cxi") : std::string("-"),
                    names.empty() ? std::string("-") : names, rail_of(topo, sets, n)});
  }
  out += table(rows);
  out += "NICs by GPU, nearest first (PIX: one PCIe switch, PXB: several switches, PHB: the host bridge, "
         "NODE: another host bridge of the node, SYS: across nodes); the set is what --nic-env exports:\n";
  rows = {{"gpu", "set", "nics"}};
  for (const auto& g : topo.gpus) {
    NicSet set = nic_set_of(topo, g);
    std::string names;
    for (const Nic* n : set.nics) {
      if (!names.empty()) names += ' ';
      names += nic_name(topo, n->address);
    }
    rows.push_back({std::to_string(g.index), set.empty() ? std::string("-") : names, by_class(topo, g)});
  }
  out += table(rows);
  return out;
}

std::string memory_nodes_line(const Topology& topo) {
  std::string out;
  for (const auto& g : topo.gpus) {
    if (g.memory_nodes.empty()) continue;
    // Appended piece by piece: `"literal" + std::string` draws GCC 12's false
    // -Wrestrict/-Wstringop-overflow at -O3.
    out += out.empty() ? "GPU memory nodes: " : "; ";
    out += "GPU ";
    out += std::to_string(g.index);
    out += ": ";
    for (std::size_t i = 0; i < g.memory_nodes.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(g.memory_nodes[i]);
    }
  }
  return out.empty() ? out : out + '\n';
}

std::string nics_of_node(const Topology& topo, int node) {
  std::string names;
  for (const auto& n : topo.nics)
    if (n.numa_node == node && n.rail_capable()) names += " " + nic_name(topo, n.address);
  return names.empty() ? names : "; RDMA NICs:" + names;
}

}  // namespace gpuaff::cli
