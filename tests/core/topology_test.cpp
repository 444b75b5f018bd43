// SPDX-License-Identifier: Apache-2.0
// Topology is plain data: constructible and queryable at compile time.
#include <gpuaff/topology.hpp>

#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::PciAddress;
using gpuaff::Topology;

namespace {
// Two packages, two nodes, SMT2 (siblings n and n+4), and a memory-only node 2.
constexpr Topology two_socket() {
  Topology t;
  t.online = CpuSet::range(0, 7);
  t.allowed = t.online;
  t.packages = {{0, CpuSet{0, 1, 4, 5}}, {1, CpuSet{2, 3, 6, 7}}};
  t.nodes = {{0, CpuSet{0, 1, 4, 5}, {10, 21, 30}}, {1, CpuSet{2, 3, 6, 7}, {21, 10, 30}}, {2, CpuSet{}, {30, 30, 10}}};
  t.cores = {{CpuSet{0, 4}, 0}, {CpuSet{1, 5}, 0}, {CpuSet{2, 6}, 1}, {CpuSet{3, 7}, 1}};
  t.core_complexes = {{3, CpuSet{0, 1, 4, 5}}, {3, CpuSet{2, 3, 6, 7}}};
  return t;
}
}  // namespace

TEST_CASE("lookups find the node, package, core and cache group of a CPU") {
  GPUAFF_STATIC_CHECK(two_socket().node_of_cpu(6) == 1);
  GPUAFF_STATIC_CHECK(two_socket().node_of_cpu(9) == -1);
  GPUAFF_STATIC_CHECK(two_socket().package_of_cpu(5)->id == 0);
  GPUAFF_STATIC_CHECK(two_socket().core_of_cpu(7)->first() == 3);
  GPUAFF_STATIC_CHECK(two_socket().core_complex_of_cpu(2)->cpus == CpuSet{2, 3, 6, 7});
  GPUAFF_STATIC_CHECK(two_socket().find_node(2)->memory_only());
  GPUAFF_STATIC_CHECK(!two_socket().find_node(0)->memory_only());
  GPUAFF_STATIC_CHECK(two_socket().find_node(3) == nullptr);
}

TEST_CASE("distances are looked up by node id") {
  GPUAFF_STATIC_CHECK(two_socket().distance(0, 1) == 21);
  GPUAFF_STATIC_CHECK(two_socket().distance(2, 2) == 10);
  GPUAFF_STATIC_CHECK(two_socket().distance(0, 5) == -1);
}

TEST_CASE("usable CPUs are allowed and online") {
  constexpr bool ok = [] {
    Topology x = two_socket();
    x.allowed = CpuSet::range(0, 15);  // a recorded allowed set may name absent CPUs
    x.online.reset(3);
    return x.usable() == CpuSet{0, 1, 2, 4, 5, 6, 7};
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("topologies compare equal field by field") {
  GPUAFF_STATIC_CHECK(two_socket() == two_socket());
  constexpr bool differs = [] {
    Topology a = two_socket();
    a.nodes[2].distances[0] = 31;
    return a != two_socket();
  }();
  GPUAFF_STATIC_CHECK(differs);
}

TEST_CASE("PCI addresses parse, order by domain/bus/device/function and print") {
  GPUAFF_STATIC_CHECK(PciAddress::parse("0000:10:1c.0")->bus == 0x10);
  GPUAFF_STATIC_CHECK(PciAddress::parse("0000:10:1c.0")->device == 0x1c);
  GPUAFF_STATIC_CHECK(PciAddress::parse("10:1C.3")->function == 3);
  GPUAFF_STATIC_CHECK(PciAddress::parse("10000:e1:00.0")->domain == 0x10000);
  GPUAFF_STATIC_CHECK(PciAddress::parse("0000:10:1c.0").value() < PciAddress::parse("0001:00:00.0").value());
  GPUAFF_STATIC_CHECK(PciAddress::parse("0000:10:1c.0").value() < PciAddress::parse("0000:10:1d.0").value());
  GPUAFF_STATIC_CHECK(PciAddress::parse("0000:10:1c.0")->to_string() == "0000:10:1c.0");
  GPUAFF_STATIC_CHECK(PciAddress::parse("10000:e1:00.0")->to_string() == "10000:e1:00.0");
  for (const char* bad : {"", "0000:10:1c", "0000:10.0", "zz:00.0", "0000:10:20.0", "0000:10:00.8", "123456789:00:00.0",
                          "0000:100:00.0"}) {
    CAPTURE(bad);
    auto r = PciAddress::parse(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == gpuaff::Errc::parse_error);
  }
}

TEST_CASE("GPU classes and vendors follow docs/contract.md section 2") {
  gpuaff::PciDevice d;
  d.vendor = gpuaff::pci_vendor::nvidia;
  d.class_code = 0x030200;
  CHECK(d.is_gpu());
  d.class_code = 0x030000;
  CHECK(d.is_gpu());
  d.class_code = 0x038000;
  CHECK(d.is_gpu());
  d.class_code = 0x020000;  // a NIC
  CHECK_FALSE(d.is_gpu());
  d.class_code = 0x030200;
  d.vendor = 0x1af4;  // virtio
  CHECK_FALSE(d.is_gpu());
  // AMD Instinct MI200/MI300 enumerate as processing accelerators (0x1200) ...
  d.vendor = gpuaff::pci_vendor::amd;
  d.class_code = 0x120000;
  CHECK(d.is_gpu());
  // ... and so do Intel NPUs, which are not GPUs.
  d.vendor = gpuaff::pci_vendor::intel;
  CHECK_FALSE(d.is_gpu());
}
