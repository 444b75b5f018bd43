// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small constexpr machine builders for the policy tests. A "regular" machine:
// P packages, each with N NUMA nodes of C cores; core c has `smt` threads
// numbered c, c + T, c + 2T, ... (T = all cores: the x86 numbering, siblings
// by offset); node k holds cores k*C .. k*C + C-1 and their siblings;
// last-level caches group `cores_per_complex` consecutive cores of a node;
// memory-only nodes follow the CPU nodes; GPU i sits on node gpu_nodes[i].

#include <gpuaff/policy/policy.hpp>

#include <array>
#include <string_view>

namespace gpuaff_test {

using gpuaff::CpuSet;
using gpuaff::Topology;

struct MachineSpec {
  int packages = 1;
  int nodes_per_package = 1;
  int cores_per_node = 4;
  int smt = 1;
  int cores_per_complex = 0;  ///< 0: one last-level cache per node
  int memory_only_nodes = 0;
  int gpus = 0;
  std::array<int, 16> gpu_nodes{};  ///< PCI numa_node of each GPU (-1: unknown)
};

/// A cpulist literal as a set ("0-23,48-71"); malformed text fails constant evaluation.
constexpr CpuSet cpus(std::string_view list) { return CpuSet::parse_list(list).value(); }

constexpr gpuaff::PciDevice gpu_device(int i, int numa_node, const CpuSet& local) {
  gpuaff::PciDevice d;
  d.address.bus = static_cast<std::uint8_t>(0x10 + 0x10 * i);
  d.vendor = gpuaff::pci_vendor::nvidia;
  d.device = 0x2330;
  d.class_code = 0x030200;
  d.numa_node = numa_node;
  d.local_cpus = local;
  d.has_local_cpus = true;
  return d;
}

constexpr Topology regular_machine(const MachineSpec& m) {
  Topology t;
  t.origin = "test machine";
  const int nodes = m.packages * m.nodes_per_package;
  const int cores = nodes * m.cores_per_node;
  t.online = CpuSet::range(0, cores * m.smt - 1);
  t.allowed = t.online;
  for (int p = 0; p < m.packages; ++p) t.packages.push_back({p, {}});
  for (int n = 0; n < nodes + m.memory_only_nodes; ++n) t.nodes.push_back({n, {}, {}});
  for (int c = 0; c < cores; ++c) {
    int node = c / m.cores_per_node;
    int package = node / m.nodes_per_package;
    gpuaff::Core core;
    core.package = package;
    for (int s = 0; s < m.smt; ++s) core.threads.set(c + s * cores);
    t.nodes[static_cast<std::size_t>(node)].cpus |= core.threads;
    t.packages[static_cast<std::size_t>(package)].cpus |= core.threads;
    int per_complex = m.cores_per_complex > 0 ? m.cores_per_complex : m.cores_per_node;
    if ((c % m.cores_per_node) % per_complex == 0) t.core_complexes.push_back({3, {}});
    t.core_complexes.back().cpus |= core.threads;
    t.cores.push_back(core);
  }
  for (int i = 0; i < m.gpus; ++i) {
    int n = m.gpu_nodes[static_cast<std::size_t>(i)];
    CpuSet local = n >= 0 && n < nodes ? t.nodes[static_cast<std::size_t>(n)].cpus : t.online;
    gpuaff::Gpu g;
    g.index = i;
    g.pci = gpu_device(i, n, local);
    t.gpus.push_back(g);
    t.pci_devices.push_back(g.pci);
  }
  return t;
}

/// p4d.24xlarge: 2 sockets x 24 cores, SMT2 (siblings +48), one node per
/// socket (node0 = 0-23,48-71), one L3 per socket, GPUs 0-3 on node 0, 4-7 on node 1.
constexpr Topology p4d() {
  return regular_machine({.packages = 2, .cores_per_node = 24, .smt = 2, .gpus = 8, .gpu_nodes = {0, 0, 0, 0, 1, 1, 1, 1}});
}

/// DGX H100: 2 sockets x 56 cores, SMT2 (siblings +112), one node per socket
/// (node0 = 0-55,112-167), GPUs 0-3 on node 0, 4-7 on node 1.
constexpr Topology dgx_h100() {
  return regular_machine({.packages = 2, .cores_per_node = 56, .smt = 2, .gpus = 8, .gpu_nodes = {0, 0, 0, 0, 1, 1, 1, 1}});
}

/// DGX A100: 2 sockets in NPS4, 8 nodes of 16 cores (node k = cores 16k..16k+15),
/// SMT2 (siblings +128), 4-core CCXs, GPU pairs on nodes 3, 1, 7, 5.
constexpr Topology dgx_a100() {
  return regular_machine({.packages = 2,
                          .nodes_per_package = 4,
                          .cores_per_node = 16,
                          .smt = 2,
                          .cores_per_complex = 4,
                          .gpus = 8,
                          .gpu_nodes = {3, 3, 1, 1, 7, 7, 5, 5}});
}

/// True when the policy binds `gpu` to exactly `expected`.
template <class P>
constexpr bool binds(const Topology& t, int gpu, const P& policy, std::string_view expected,
                     const gpuaff::JobOptions& job = {}) {
  auto r = gpuaff::bind(t, gpu, policy, job);
  return r && *r == cpus(expected);
}

/// True when binding fails with `code` and a message containing `needle`.
template <class P>
constexpr bool fails(const Topology& t, int gpu, const P& policy, gpuaff::Errc code, std::string_view needle = {},
                     const gpuaff::JobOptions& job = {}) {
  auto r = gpuaff::bind(t, gpu, policy, job);
  return !r && r.error().code() == code && r.error().message().find(needle) != std::string_view::npos;
}

}  // namespace gpuaff_test
