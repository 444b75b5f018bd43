// SPDX-License-Identifier: Apache-2.0
// hwloc XML files written by Debian's lstopo (hwloc 2.9) from recorded roots
// (see docs/hwloc.md): HwlocSource must read from them the machines the
// fixtures model.
//
// fixtures/dgx-h100.xml: a DGX H100,
// 2x Xeon Platinum 8480C (56 cores each, SMT2, siblings n and n+112), one NUMA
// node and one L3 per socket, SLIT 10/21, eight H100 SXM GPUs, four per
// socket, with ConnectX-7 NICs beside them.
#include <gpuaff/policy/policy.hpp>
#include <gpuaff/source/hwloc.hpp>

#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::HwlocInput;
using gpuaff::HwlocOptions;
using gpuaff::HwlocSource;
using gpuaff::PciAddress;

namespace {

gpuaff::Result<gpuaff::Topology> load(std::vector<PciAddress> extra = {}, const char* file = "dgx-h100.xml") {
  return HwlocSource(HwlocOptions{.input = HwlocInput::xml,
                                  .path = gpuaff_test::fixture(file),
                                  .visible = {.use_environment = false},
                                  .extra_pci = std::move(extra)})
      .load();
}

// Socket s holds cores s*56 .. s*56+55 and their siblings 112 higher.
CpuSet socket_cpus(int s) { return CpuSet::range(s * 56, s * 56 + 55) | CpuSet::range(112 + s * 56, 112 + s * 56 + 55); }

}  // namespace

TEST_CASE("the DGX H100 XML has 224 CPUs in two sockets of 56 SMT2 cores") {
  auto t = load();
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->online == CpuSet::range(0, 223));
  CHECK(t->allowed == CpuSet::range(0, 223));
  REQUIRE(t->packages.size() == 2);
  CHECK(t->packages[0].cpus == socket_cpus(0));
  CHECK(t->packages[1].cpus == socket_cpus(1));
  REQUIRE(t->cores.size() == 112);
  CHECK(t->cores[0].threads == CpuSet{0, 112});
  CHECK(t->cores[0].package == 0);
  CHECK(t->cores[111].threads == CpuSet{111, 223});
  CHECK(t->cores[111].package == 1);
  REQUIRE(t->core_complexes.size() == 2);  // one L3 per socket
  CHECK(t->core_complexes[0].level == 3);
  CHECK(t->core_complexes[1].cpus == socket_cpus(1));
}

TEST_CASE("the DGX H100 XML has one node per socket at SLIT distance 21") {
  auto t = load();
  REQUIRE_MESSAGE(t, t.error().message());
  REQUIRE(t->nodes.size() == 2);
  CHECK(t->nodes[0].cpus == socket_cpus(0));
  CHECK(t->nodes[1].cpus == socket_cpus(1));
  CHECK(t->distance(0, 0) == 10);
  CHECK(t->distance(0, 1) == 21);
  CHECK(t->mems_allowed == CpuSet{0, 1});
}

TEST_CASE("the DGX H100 XML has eight H100 GPUs, four per socket, and no UUIDs") {
  auto t = load();
  REQUIRE_MESSAGE(t, t.error().message());
  const char* bdfs[] = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
                        "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"};
  REQUIRE(t->gpus.size() == 8);
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    const auto& g = t->gpus[static_cast<std::size_t>(i)];
    CHECK(g.index == i);
    CHECK(g.address() == PciAddress::parse(bdfs[i]).value());
    CHECK(g.pci.vendor == 0x10de);
    CHECK(g.pci.device == 0x2330);
    CHECK(g.pci.class_code == 0x030200);
    CHECK(g.numa_node() == i / 4);
    CHECK(g.pci.local_cpus == socket_cpus(i / 4));
    CHECK(g.uuid.view().empty());  // hwloc XML carries no driver UUIDs without the NVML plugin
  }
  // the BMC's ASPEED VGA (vendor 0x1a03) and the NVSwitches are not GPUs
  CHECK(t->pci_devices.size() == 8);
}

TEST_CASE("a NIC named as an extra device comes with its socket's locality") {
  auto t = load({PciAddress::parse("0000:18:00.0").value(), PciAddress::parse("0000:dc:00.0").value()});
  REQUIRE_MESSAGE(t, t.error().message());
  const auto* cx7 = t->find_pci(PciAddress::parse("0000:18:00.0").value());
  REQUIRE(cx7 != nullptr);
  CHECK(cx7->vendor == 0x15b3);
  CHECK(cx7->numa_node == 0);
  const auto* last = t->find_pci(PciAddress::parse("0000:dc:00.0").value());
  REQUIRE(last != nullptr);
  CHECK(last->numa_node == 1);
}

TEST_CASE("bindings from the DGX H100 XML follow the sockets") {
  auto t = load();
  REQUIRE_MESSAGE(t, t.error().message());
  // node policy: the GPU's whole socket
  CHECK(gpuaff::bind(*t, 5, gpuaff::PolicySpec{}).value() == socket_cpus(1));
  // exclusive: 56 cores of a node split among its 4 GPUs, 14 each; GPU 1 (second on
  // node 0) gets cores 14..27 with their siblings 126..139
  CHECK(gpuaff::bind(*t, 1, gpuaff::PolicySpec{.kind = gpuaff::PolicyKind::exclusive}).value() ==
        (CpuSet::range(14, 27) | CpuSet::range(126, 139)));
}

// fixtures/gb200-tray.xml: a GB200 compute tray, 2 Grace CPUs (72 cores each, no
// SMT, CPUs 0-71 and 72-143, nodes 0 and 1 at distance 40) and 4 GPUs (two per
// Grace). Each GPU's memory is a CPU-less node: 2, 10 (near node 0, distance 80)
// and 18, 26 (near node 1); other distances 120. hwloc gives CPU-less nodes the
// CPUs near them; gpuaff must still report them without CPUs.
TEST_CASE("the GB200 XML keeps GPU-memory nodes, without CPUs") {
  auto t = load({}, "gb200-tray.xml");
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->online == CpuSet::range(0, 143));
  REQUIRE(t->packages.size() == 2);
  CHECK(t->packages[1].cpus == CpuSet::range(72, 143));
  CHECK(t->cores.size() == 144);
  CHECK(t->cores[5].threads == CpuSet{5});
  REQUIRE(t->nodes.size() == 6);
  const int ids[] = {0, 1, 2, 10, 18, 26};
  for (std::size_t i = 0; i < 6; ++i) CHECK(t->nodes[i].id == ids[i]);
  CHECK(t->find_node(0)->cpus == CpuSet::range(0, 71));
  CHECK(t->find_node(1)->cpus == CpuSet::range(72, 143));
  for (int id : {2, 10, 18, 26}) CHECK(t->find_node(id)->memory_only());
  CHECK(t->distance(0, 1) == 40);
  CHECK(t->distance(0, 2) == 80);
  CHECK(t->distance(0, 18) == 120);
  CHECK(t->distance(1, 26) == 80);
  CHECK(t->distance(2, 10) == 120);
}

TEST_CASE("the GB200 XML's GPUs sit on their Grace and bind to it") {
  auto t = load({}, "gb200-tray.xml");
  REQUIRE_MESSAGE(t, t.error().message());
  const char* bdfs[] = {"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"};
  REQUIRE(t->gpus.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    const auto& g = t->gpus[static_cast<std::size_t>(i)];
    CHECK(g.address() == PciAddress::parse(bdfs[i]).value());
    CHECK(g.pci.device == 0x2941);
    CHECK(g.numa_node() == i / 2);
  }
  // socket: the Grace holding node 1; the CPU-less nodes add no CPU (and must not fail)
  CHECK(gpuaff::bind(*t, 2, gpuaff::PolicySpec{.kind = gpuaff::PolicyKind::socket}).value() == CpuSet::range(72, 143));
  // exclusive: node 0's 72 cores split between its two GPUs
  CHECK(gpuaff::bind(*t, 1, gpuaff::PolicySpec{.kind = gpuaff::PolicyKind::exclusive}).value() == CpuSet::range(36, 71));
}
