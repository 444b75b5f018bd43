// SPDX-License-Identifier: Apache-2.0
#pragma once
// Topology: what a machine looks like, as plain values. No I/O happens here;
// sources (sysfs, JSON, hwloc) fill it, policies read it. Every type is a
// literal type, so small topologies can be written and bound at compile time.

#include "gpuaff/config.hpp"

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/fixed_string.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// A PCI address, "DDDD:BB:DD.F". Domains above 0xffff exist (Intel VMD).
struct PciAddress {
  std::uint32_t domain = 0;
  std::uint8_t bus = 0;
  std::uint8_t device = 0;
  std::uint8_t function = 0;

  /// Accepts "DDDD:BB:DD.F" (domain of 1 to 8 hex digits) and "BB:DD.F"
  /// (domain 0), any case. Errors: Errc::parse_error naming the text.
  template <class = void>
  static constexpr Result<PciAddress> parse(std::string_view text);

  /// Writes the address as to_string() gives it at the end of `out` (a
  /// message builds its text in one FixedString: benchmarks row 6). Defined
  /// before to_string(): clang 14 does not evaluate a member template
  /// defined below its constexpr caller.
  template <std::size_t N>
  constexpr void append_to(FixedString<N>& out) const {
    out.append_hex(domain, 4).push_back(':');
    out.append_hex(bus, 2).push_back(':');
    out.append_hex(device, 2).push_back('.');
    out.append_hex(function, 1);
  }
  /// "0000:10:1c.0": lower case, the domain with at least 4 digits.
  constexpr FixedString<24> to_string() const {
    FixedString<24> s;
    append_to(s);
    return s;
  }

  friend constexpr auto operator<=>(const PciAddress&, const PciAddress&) = default;
  friend constexpr bool operator==(const PciAddress&, const PciAddress&) = default;
};

namespace pci_vendor {
inline constexpr std::uint16_t nvidia = 0x10de;
inline constexpr std::uint16_t amd = 0x1002;
inline constexpr std::uint16_t intel = 0x8086;
}  // namespace pci_vendor

/// PCI class codes (24 bits: class, subclass, prog-if) of display devices.
constexpr bool is_display_class(std::uint32_t class_code) {
  std::uint32_t cs = (class_code >> 8) & 0xffff;
  return cs == 0x0300 || cs == 0x0302 || cs == 0x0380;
}
constexpr bool is_gpu_vendor(std::uint16_t vendor) {
  return vendor == pci_vendor::nvidia || vendor == pci_vendor::amd || vendor == pci_vendor::intel;
}
/// Class 0x1200, "processing accelerator": AMD Instinct MI200/MI300 enumerate as
/// this, not as a display device. Only AMD's are GPUs (Intel NPUs use it too).
constexpr bool is_accelerator_class(std::uint32_t class_code) { return ((class_code >> 8) & 0xffff) == 0x1200; }
/// Classes whose vendor decides whether the device is a GPU.
constexpr bool is_gpu_candidate_class(std::uint32_t class_code) {
  return is_display_class(class_code) || is_accelerator_class(class_code);
}

struct PciDevice {
  PciAddress address;
  std::uint16_t vendor = 0;
  std::uint16_t device = 0;
  std::uint32_t class_code = 0;  ///< 24-bit class code, e.g. 0x030200
  int numa_node = -1;            ///< -1: the firmware does not say (VMs, single-node boards)
  CpuSet local_cpus;             ///< the device's local_cpulist; meaningful when has_local_cpus
  bool has_local_cpus = false;
  /// AMD compute partitions (`current_compute_partition`: SPX 1, DPX 2, TPX 3,
  /// QPX 4, CPX 8): the GPUs HIP makes of this one device.
  int compute_partitions = 1;

  /// A GPU by docs/contract.md section 2: display class and an NVIDIA, AMD or Intel vendor id;
  /// extended to AMD processing accelerators (class 0x1200: MI200, MI300).
  constexpr bool is_gpu() const {
    return (is_display_class(class_code) && is_gpu_vendor(vendor)) ||
           (is_accelerator_class(class_code) && vendor == pci_vendor::amd);
  }
  friend constexpr bool operator==(const PciDevice&, const PciDevice&) = default;
};

/// Network devices: PCI base class 0x02 (Ethernet 0x0200, InfiniBand 0x0207,
/// fabric 0x0208, ...). RDMA NICs of either link layer are among them.
constexpr bool is_network_class(std::uint32_t class_code) { return (class_code >> 16) == 0x02; }

/// The PCIe path between two devices, in the classes `nvidia-smi topo -m`
/// prints, nearest first (docs/nics.md defines each on the bridge hierarchy).
enum class PciPath : std::uint8_t {
  pix,   ///< through at most one PCIe switch (both below the same switch)
  pxb,   ///< through several switches, not through the host bridge
  phb,   ///< through the host bridge (same root complex)
  node,  ///< between host bridges of one NUMA node
  sys,   ///< across NUMA nodes (the SMP interconnect between sockets)
};
inline constexpr std::string_view pci_path_names[] = {"PIX", "PXB", "PHB", "NODE", "SYS"};
constexpr std::string_view to_string(PciPath p) { return pci_path_names[static_cast<std::size_t>(p)]; }

/// A network PCI device and the names the kernel gives it.
struct Nic {
  PciAddress address;
  int numa_node = -1;
  std::vector<FixedString<64>> rdma_names{};  ///< sys/class/infiniband entries (mlx5_0, efa_0): RDMA-capable
  std::vector<FixedString<64>> net_names{};   ///< sys/class/net entries (ibp28s0, eth0)
  int rdma_port = 1;                        ///< the first port of the first RDMA name (sys/class/infiniband/X/ports)
  /// sys/class/cxi entries (cxi0): HPE Slingshot (Cassini) NICs, named as
  /// libfabric's cxi provider names its domains
  std::vector<FixedString<64>> cxi_names{};

  constexpr bool rdma() const { return !rdma_names.empty(); }
  constexpr bool cxi() const { return !cxi_names.empty(); }
  /// A NIC GPU traffic can use: an RDMA device or a Slingshot NIC.
  constexpr bool rail_capable() const { return rdma() || cxi(); }
  friend constexpr bool operator==(const Nic&, const Nic&) = default;
};

/// One NIC as seen from one GPU.
struct NicPath {
  PciAddress nic;
  PciPath path = PciPath::sys;
  friend constexpr bool operator==(const NicPath&, const NicPath&) = default;
};

/// The partition count of a `current_compute_partition` word, or 0 for a
/// word that is none of them.
constexpr int compute_partition_count(std::string_view word) {
  constexpr std::pair<std::string_view, int> modes[] = {{"SPX", 1}, {"DPX", 2}, {"TPX", 3}, {"QPX", 4}, {"CPX", 8}};
  for (const auto& [name, n] : modes)
    if (word == name) return n;
  return 0;
}

/// A GPU as the job sees it: `index` is its position after CUDA_VISIBLE_DEVICES /
/// HIP_VISIBLE_DEVICES / --visible-devices were applied.
struct Gpu {
  int index = 0;
  PciDevice pci;
  FixedString<96> uuid;  ///< "GPU-..." when known (NVIDIA), else empty
  std::vector<NicPath> nics{};      ///< every NIC of Topology::nics, nearest first (path, then address)
  std::vector<int> memory_nodes{};  ///< the GPU's own memory NUMA nodes (coherent GH200/GB200); usually none
  /// Which of its device's pci.compute_partitions this GPU is (0 for an
  /// unpartitioned one): HIP numbers a partitioned device's GPUs in a row.
  int partition = 0;

  constexpr int numa_node() const { return pci.numa_node; }
  constexpr const PciAddress& address() const { return pci.address; }
  friend constexpr bool operator==(const Gpu&, const Gpu&) = default;
};

/// Each GPU whose device is partitioned (PciDevice::compute_partitions N > 1)
/// as N GPUs in a row, partitions 0..N-1, as HIP numbers them; indexes are
/// renumbered from 0.
template <class = void>
std::vector<Gpu> expand_partitions(std::vector<Gpu> gpus) {
  bool partitioned = false;
  for (const auto& g : gpus) partitioned = partitioned || g.pci.compute_partitions > 1;
  if (!partitioned) {
    for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].index = static_cast<int>(i);
    return gpus;  // nothing partitioned: the same GPUs, renumbered, not copied
  }
  std::vector<Gpu> out;
  for (const auto& g : gpus) {
    for (int k = 0; k < (g.pci.compute_partitions > 1 ? g.pci.compute_partitions : 1); ++k) {
      Gpu part = g;
      part.partition = k;
      part.index = static_cast<int>(out.size());
      out.push_back(std::move(part));
    }
  }
  return out;
}

struct Package {
  int id = 0;  ///< physical_package_id; -1 when the firmware gives none
  CpuSet cpus;
  friend constexpr bool operator==(const Package&, const Package&) = default;
};

struct NumaNode {
  int id = 0;
  CpuSet cpus;                 ///< empty for memory-only nodes (GB200 GPU memory, HBM, CXL)
  std::vector<int> distances;  ///< SLIT distances to Topology::nodes, in the same order; may be empty

  constexpr bool memory_only() const { return cpus.empty(); }
  friend constexpr bool operator==(const NumaNode&, const NumaNode&) = default;
};

/// A physical core: its hardware threads (1 without SMT; 2, 4, 8 with SMT).
struct Core {
  CpuSet threads;
  int package = -1;  ///< physical_package_id of its threads
  /// How fast the platform says the core is, in the units of the one source
  /// the reader found (Topology::priority_source); -1: not read or unknown.
  /// Read only when asked (priority cores: policy/roles.hpp).
  long long priority = -1;
  constexpr int first() const { return threads.first(); }
  friend constexpr bool operator==(const Core&, const Core&) = default;
};

/// CPUs that share a last-level unified/data cache: an AMD CCX, an Intel socket.
struct CacheGroup {
  int level = 0;
  CpuSet cpus;
  friend constexpr bool operator==(const CacheGroup&, const CacheGroup&) = default;
};

/// The parts of a Topology that only some answers need. A source asked for
/// fewer parts may leave the others empty, and reads less: `gpuaff bind
/// --policy node` needs no core siblings, caches or packages (docs/contract.md
/// section 1, "what each answer reads"). The online CPUs, the nodes, the
/// allowed sets and the GPUs are in every Topology.
struct TopologyParts {
  bool cores = true;      ///< Topology::cores: exclusive, the NVIDIA modes, reserving OS cores
  bool packages = true;   ///< Topology::packages: socket, NVIDIA scope=socket, memory nodes of the socket
  bool caches = true;     ///< Topology::core_complexes: core-complex
  bool distances = true;  ///< NumaNode::distances: the nearest node of an unreachable one
  bool nics = true;       ///< Topology::nics, Gpu::nics and Gpu::memory_nodes: NIC variables, GPU memory nodes

  /// The parts no answer needs more than: online CPUs, nodes, allowed sets, GPUs.
  static constexpr TopologyParts none() { return {false, false, false, false, false}; }
  static constexpr TopologyParts all() { return {}; }
  /// What some policy reads: cores, packages, caches (no distances, no NICs).
  static constexpr TopologyParts policies() { return {true, true, true, false, false}; }
  /// One part alone: TopologyParts::only(&TopologyParts::cores).
  static constexpr TopologyParts only(bool TopologyParts::*part) {
    TopologyParts p = none();
    p.*part = true;
    return p;
  }
  constexpr TopologyParts operator|(const TopologyParts& o) const {
    return {cores || o.cores, packages || o.packages, caches || o.caches, distances || o.distances, nics || o.nics};
  }
  friend constexpr bool operator==(const TopologyParts&, const TopologyParts&) = default;
};

struct Topology {
  FixedString<256> origin;  ///< where it came from: a root, a JSON file, "hwloc"
  CpuSet online;                    ///< online CPUs
  CpuSet allowed;                   ///< the process's allowed set, kept to online CPUs: what bindings use
  CpuSet recorded_allowed;          ///< the allowed set as recorded, when it names CPUs that are not
                                    ///< online (offline or absent); empty when it equals `allowed`
  CpuSet mems_allowed;              ///< allowed NUMA node ids (Mems_allowed_list); empty: unknown
  std::vector<Package> packages;    ///< sorted by id
  std::vector<NumaNode> nodes;      ///< sorted by id; ids may be sparse
  std::vector<Core> cores;          ///< online cores, sorted by lowest thread
  std::vector<CacheGroup> core_complexes;  ///< last-level cache groups, sorted by lowest CPU
  /// The per-CPU file Core::priority was read from ("cpufreq/base_frequency",
  /// "acpi_cppc/highest_perf", "cpu_capacity"); empty when none was read.
  FixedString<32> priority_source;
  std::vector<PciDevice> pci_devices;      ///< sorted by address
  std::vector<Gpu> gpus;                   ///< visible GPUs, by index
  /// Every GPU of the host (sys/bus/pci/devices), in bus-id order, index = position,
  /// whatever a container or *_VISIBLE_DEVICES hide: what `--share machine` splits
  /// among. The sources fill it; empty in a Topology built by hand (then unknown).
  std::vector<Gpu> host_gpus;
  /// Host GPUs that are not this process's: NVIDIA GPUs missing from the driver's
  /// list proc/driver/nvidia/gpus/ (a container given some of the host's GPUs).
  std::vector<PciAddress> hidden_gpus;
  /// What the source assumed where the machine did not say (a file missing on
  /// this kernel, a value it could not give): one line each, naming the file and
  /// the assumption. Empty when nothing was assumed.
  std::vector<std::string> notes;
  std::vector<Nic> nics{};                 ///< network devices, sorted by address (full reads only)

  /// The PCI vendor whose GPUs `gpus` and `host_gpus` are: a GPU index counts
  /// one runtime's GPUs (CUDA, HIP, Level Zero; docs/contract.md section 6).
  /// 0 when there is no GPU.
  constexpr std::uint16_t gpu_vendor() const {
    return !host_gpus.empty() ? host_gpus.front().pci.vendor : !gpus.empty() ? gpus.front().pci.vendor : 0;
  }

  /// CPUs a binding may use: allowed and online.
  constexpr CpuSet usable() const { return allowed & online; }

  constexpr const NumaNode* find_node(int id) const {
    for (const auto& n : nodes)
      if (n.id == id) return &n;
    return nullptr;
  }
  constexpr int node_index(int id) const {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].id == id) return static_cast<int>(i);
    return -1;
  }
  /// The node whose cpulist holds `cpu`, or -1.
  constexpr int node_of_cpu(int cpu) const {
    for (const auto& n : nodes)
      if (n.cpus.test(cpu)) return n.id;
    return -1;
  }
  /// The package holding `cpu`, or nullptr.
  constexpr const Package* package_of_cpu(int cpu) const {
    for (const auto& p : packages)
      if (p.cpus.test(cpu)) return &p;
    return nullptr;
  }
  constexpr const Core* core_of_cpu(int cpu) const {
    for (const auto& c : cores)
      if (c.threads.test(cpu)) return &c;
    return nullptr;
  }
  /// The physical cores `cpus` touches, each as its threads within `cpus`, in
  /// CPU order; a CPU no core lists counts as a core of its own (cores unread).
  template <class = void>
  constexpr std::vector<CpuSet> cores_within(const CpuSet& cpus) const {
    std::vector<CpuSet> out;
    CpuSet seen;
    for (int cpu : cpus) {
      if (seen.test(cpu)) continue;
      const Core* c = core_of_cpu(cpu);
      CpuSet threads = c != nullptr ? c->threads & cpus : CpuSet{cpu};
      seen |= threads;
      out.push_back(threads);
    }
    return out;
  }
  constexpr const CacheGroup* core_complex_of_cpu(int cpu) const {
    for (const auto& g : core_complexes)
      if (g.cpus.test(cpu)) return &g;
    return nullptr;
  }
  constexpr const PciDevice* find_pci(const PciAddress& a) const {
    for (const auto& d : pci_devices)
      if (d.address == a) return &d;
    return nullptr;
  }
  constexpr const Nic* find_nic(const PciAddress& a) const {
    for (const auto& n : nics)
      if (n.address == a) return &n;
    return nullptr;
  }
  /// SLIT distance between two node ids, or -1 when unknown.
  constexpr int distance(int from, int to) const {
    const NumaNode* n = find_node(from);
    int j = node_index(to);
    if (n == nullptr || j < 0 || static_cast<std::size_t>(j) >= n->distances.size()) return -1;
    return n->distances[static_cast<std::size_t>(j)];
  }

  friend constexpr bool operator==(const Topology&, const Topology&) = default;
};

// ---- implementation ---------------------------------------------------------

template <class>
constexpr Result<PciAddress> PciAddress::parse(std::string_view full) {
  std::string_view s = detail::trim(full);
  auto bad = [&](std::string_view why) -> Unexpected<Error> {
    return fail(Errc::parse_error, "malformed PCI address '", full.substr(0, 40), "': ", why,
                " (expected DDDD:BB:DD.F, e.g. 0000:17:00.0)");
  };
  auto field = [&](std::string_view f, int max_digits, std::uint32_t& out) -> bool {
    if (f.empty() || f.size() > static_cast<std::size_t>(max_digits)) return false;
    long long v = 0;
    if (detail::leading_number(f, 16, 0xffffffffLL, v) != f.size()) return false;
    out = static_cast<std::uint32_t>(v);
    return true;
  };
  std::size_t dot = s.rfind('.');
  if (dot == std::string_view::npos) return bad("no '.' before the function");
  std::size_t c2 = s.rfind(':', dot);
  if (c2 == std::string_view::npos) return bad("no ':' before the device");
  std::size_t c1 = c2 == 0 ? std::string_view::npos : s.rfind(':', c2 - 1);
  PciAddress a;
  std::uint32_t dom = 0;
  std::uint32_t bus = 0;
  std::uint32_t dev = 0;
  std::uint32_t fn = 0;
  std::string_view bus_text = c1 == std::string_view::npos ? s.substr(0, c2) : s.substr(c1 + 1, c2 - c1 - 1);
  if (c1 != std::string_view::npos && !field(s.substr(0, c1), 8, dom)) return bad("bad domain");
  if (!field(bus_text, 2, bus)) return bad("bad bus");
  if (!field(s.substr(c2 + 1, dot - c2 - 1), 2, dev) || dev > 0x1f) return bad("bad device (00-1f)");
  if (!field(s.substr(dot + 1), 1, fn) || fn > 7) return bad("bad function (0-7)");
  a.domain = dom;
  a.bus = static_cast<std::uint8_t>(bus);
  a.device = static_cast<std::uint8_t>(dev);
  a.function = static_cast<std::uint8_t>(fn);
  return a;
}

}  // namespace v0
}  // namespace gpuaff
