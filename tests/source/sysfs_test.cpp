// SysfsSource on small trees shaped like real machines.
#include <gpuaff/source/sysfs.hpp>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::Topology;
using gpuaff_test::add_cpu;
using gpuaff_test::add_node;
using gpuaff_test::add_pci;
using gpuaff_test::cpu_root;
using gpuaff_test::node_root;
using gpuaff_test::TempTree;

namespace {

SysfsOptions opts(const TempTree& t) { return SysfsOptions{.root = t.root(), .visible = {.use_environment = false}}; }

Topology load_ok(const TempTree& t) {
  SysfsSource s(opts(t));
  auto r = s.load();
  if (!r) FAIL(r.error().message());
  return *r;
}

CpuSet L(const char* list) { return CpuSet::parse_list(list).value(); }

// 2 packages x 2 cores x SMT2, siblings n and n+4; node 0 = package 0, node 1 =
// package 1, node 2 memory-only; one L3 per package; NVIDIA GPUs on each node.
void two_socket(TempTree& t) {
  t.write(cpu_root + "online", "0-7\n");
  for (int c = 0; c < 8; ++c) {
    int core = c % 4;
    int pkg = core / 2;
    std::string sib = std::to_string(core) + "," + std::to_string(core + 4);
    std::string pk = pkg == 0 ? "0-1,4-5" : "2-3,6-7";
    add_cpu(t, c, sib, pkg, pk, pk);
  }
  t.write(node_root + "online", "0-2\n");
  add_node(t, 0, "0-1,4-5", "10 21 30");
  add_node(t, 1, "2-3,6-7", "21 10 30");
  add_node(t, 2, "", "30 30 10");
  add_pci(t, "0000:10:00.0", "0x030200", "0x10de", "0", "0-1,4-5");
  add_pci(t, "0000:90:00.0", "0x030200", "0x10de", "1", "2-3,6-7");
  add_pci(t, "0000:05:00.0", "0x020000", "0x15b3", "0", "0-1,4-5");  // a NIC: not read in full
  t.write("proc/self/status", "Name:\tx\nCpus_allowed:\tff\nCpus_allowed_list:\t0-7\nMems_allowed_list:\t0-2\n");
}

}  // namespace

TEST_CASE("a two-socket SMT2 machine with a memory-only node loads as the files say") {
  TempTree t;
  two_socket(t);
  Topology topo = load_ok(t);
  CHECK(topo.origin == t.root());
  CHECK(topo.online == L("0-7"));
  CHECK(topo.allowed == L("0-7"));
  CHECK(topo.mems_allowed == L("0-2"));
  REQUIRE(topo.packages.size() == 2);
  CHECK(topo.packages[0].cpus == L("0-1,4-5"));
  CHECK(topo.packages[1].id == 1);
  REQUIRE(topo.cores.size() == 4);
  CHECK(topo.cores[0].threads == CpuSet{0, 4});
  CHECK(topo.cores[3].threads == CpuSet{3, 7});
  CHECK(topo.cores[3].package == 1);
  REQUIRE(topo.core_complexes.size() == 2);
  CHECK(topo.core_complexes[1].level == 3);
  CHECK(topo.core_complexes[1].cpus == L("2-3,6-7"));
  REQUIRE(topo.nodes.size() == 3);
  CHECK(topo.nodes[2].memory_only());
  CHECK(topo.nodes[1].distances == std::vector<int>{21, 10, 30});
  // Only GPU-class devices are kept; sorted by address.
  REQUIRE(topo.pci_devices.size() == 2);
  CHECK(topo.pci_devices[0].address.bus == 0x10);
  CHECK(topo.pci_devices[1].numa_node == 1);
  CHECK(topo.pci_devices[1].local_cpus == L("2-3,6-7"));
  REQUIRE(topo.gpus.size() == 2);
  CHECK(topo.gpus[1].index == 1);
  CHECK(topo.gpus[1].pci.address.bus == 0x90);
}
