// SPDX-License-Identifier: Apache-2.0
// SysfsSource on small trees shaped like real machines.
#include <cerrno>

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

namespace {
// Writes every CPU of `groups` (each a core, as a cpulist) with one package and one LLC.
void flat(TempTree& t, const std::string& online, const std::vector<std::string>& cores, const std::string& llc = "") {
  t.write(cpu_root + "online", online + "\n");
  for (const auto& core : cores)
    for (int c : L(core.c_str())) add_cpu(t, c, core, 0, online, llc);
}
}  // namespace

TEST_CASE("sparse node ids and memory-only nodes keep their ids and distances") {
  TempTree t;
  flat(t, "0-7", {"0", "1", "2", "3", "4", "5", "6", "7"});
  t.write(node_root + "online", "0-2,33\n");
  add_node(t, 0, "0-3", "10 20 20 40");
  add_node(t, 1, "4-5", "20 10 20 40");
  add_node(t, 2, "6-7", "20 20 10 40");
  add_node(t, 33, "", "40 40 40 10");
  Topology topo = load_ok(t);
  REQUIRE(topo.nodes.size() == 4);
  CHECK(topo.nodes[3].id == 33);
  CHECK(topo.nodes[3].memory_only());
  CHECK(topo.distance(33, 2) == 40);
  CHECK(topo.distance(2, 2) == 10);
  CHECK(topo.node_of_cpu(5) == 1);
}

TEST_CASE("offline CPUs are in no core, node, package or cache group; their topology may be missing") {
  TempTree t;
  t.write(cpu_root + "online", "0-2,4-7\n");  // cpu3 offline: the kernel removes its topology dir
  for (int c : {0, 1, 2, 4, 5, 6, 7}) {
    int core = c % 4;
    add_cpu(t, c, std::to_string(core) + "," + std::to_string(core + 4), 0, "0-7", "0-7");
  }
  t.write(node_root + "online", "0\n");
  add_node(t, 0, "0-7", "10");
  t.write("proc/self/status", "Cpus_allowed_list:\t0-15\n");  // a recorded set may name absent CPUs
  Topology topo = load_ok(t);
  CHECK(topo.online == L("0-2,4-7"));
  REQUIRE(topo.cores.size() == 4);
  CHECK(topo.cores[3].threads == CpuSet{7});  // "3,7" minus the offline 3
  CHECK(topo.packages[0].cpus == L("0-2,4-7"));
  CHECK(topo.nodes[0].cpus == L("0-2,4-7"));
  CHECK(topo.core_complexes[0].cpus == L("0-2,4-7"));
  // docs/contract.md section 1: bindings are drawn from the allowed CPUs that are online;
  // the recorded set is kept beside it.
  CHECK(topo.allowed == L("0-2,4-7"));
  CHECK(topo.recorded_allowed == L("0-15"));
  CHECK(topo.usable() == L("0-2,4-7"));
}

TEST_CASE("physical_package_id -1 gives one package -1") {
  TempTree t;
  t.write(cpu_root + "online", "0-3\n");
  for (int c = 0; c < 4; ++c) add_cpu(t, c, std::to_string(c), -1, "0-3");
  Topology topo = load_ok(t);
  REQUIRE(topo.packages.size() == 1);
  CHECK(topo.packages[0].id == -1);
  CHECK(topo.packages[0].cpus == L("0-3"));
  CHECK(topo.cores[2].package == -1);
}

TEST_CASE("SMT4 cores with interleaved numbering are taken from the lists") {
  TempTree t;
  flat(t, "0-7", {"0,2,5,7", "1,3-4,6"});
  Topology topo = load_ok(t);
  REQUIRE(topo.cores.size() == 2);
  CHECK(topo.cores[0].threads == CpuSet{0, 2, 5, 7});
  CHECK(topo.cores[1].threads == CpuSet{1, 3, 4, 6});
  CHECK(topo.core_of_cpu(4)->first() == 1);
}

TEST_CASE("SMT8 cores (POWER-style strided lists) are taken from the lists") {
  TempTree t;
  flat(t, "0-15", {"0-14:1/2", "1-15:1/2"});  // even and odd threads
  Topology topo = load_ok(t);
  REQUIRE(topo.cores.size() == 2);
  CHECK(topo.cores[0].threads.count() == 8);
  CHECK(topo.cores[1].threads == CpuSet{1, 3, 5, 7, 9, 11, 13, 15});
}

TEST_CASE("hybrid machines mix SMT2 performance cores and single-thread efficiency cores") {
  TempTree t;
  flat(t, "0-7", {"0-1", "2-3", "4", "5", "6", "7"}, "0-7");
  Topology topo = load_ok(t);
  REQUIRE(topo.cores.size() == 6);
  CHECK(topo.cores[1].threads == CpuSet{2, 3});
  CHECK(topo.cores[2].threads == CpuSet{4});
  REQUIRE(topo.core_complexes.size() == 1);
}

TEST_CASE("last-level caches smaller than a node (AMD CCX) give several groups per node") {
  TempTree t;
  t.write(cpu_root + "online", "0-15\n");
  for (int c = 0; c < 16; ++c) {
    int first = c / 4 * 4;
    add_cpu(t, c, std::to_string(c), 0, "0-15", std::to_string(first) + "-" + std::to_string(first + 3));
  }
  t.write(node_root + "online", "0\n");
  add_node(t, 0, "0-15", "10");
  Topology topo = load_ok(t);
  REQUIRE(topo.core_complexes.size() == 4);
  CHECK(topo.core_complexes[2].cpus == L("8-11"));
  CHECK(topo.core_complexes[2].level == 3);
}

TEST_CASE("a last-level cache larger than a node (sub-NUMA clustering) gives one group over two nodes") {
  TempTree t;
  flat(t, "0-7", {"0", "1", "2", "3", "4", "5", "6", "7"}, "0-7");
  t.write(node_root + "online", "0-1\n");
  add_node(t, 0, "0-3", "10 11");
  add_node(t, 1, "4-7", "11 10");
  Topology topo = load_ok(t);
  REQUIRE(topo.core_complexes.size() == 1);
  CHECK(topo.core_complexes[0].cpus == L("0-7"));
  CHECK(topo.nodes.size() == 2);
}

TEST_CASE("no cache information at all (some VMs) leaves core_complexes empty") {
  TempTree t;
  flat(t, "0-3", {"0", "1", "2", "3"});
  Topology topo = load_ok(t);
  CHECK(topo.core_complexes.empty());
  CHECK(topo.cores.size() == 4);
}

TEST_CASE("a kernel without NUMA (no node directory) has one node 0 with every online CPU") {
  TempTree t;
  flat(t, "0-3", {"0-1", "2-3"});
  Topology topo = load_ok(t);
  REQUIRE(topo.nodes.size() == 1);
  CHECK(topo.nodes[0].id == 0);
  CHECK(topo.nodes[0].cpus == L("0-3"));
  CHECK(topo.allowed == L("0-3"));  // no proc/self/status in the recording: allowed = online
  CHECK(topo.mems_allowed.empty());
}

TEST_CASE("GPUs with numa_node -1, in domains above 0xffff, and their UUIDs") {
  TempTree t;
  flat(t, "0-3", {"0", "1", "2", "3"});
  add_pci(t, "10000:e1:00.0", "0x030200", "0x10de", "-1", "0-3");  // behind Intel VMD
  add_pci(t, "0000:17:00.0", "0x030000", "0x1002", "-1", "");      // AMD, no local_cpulist
  add_pci(t, "0000:18:00.0", "0x038000", "0x8086", "0", "0-1");    // Intel display class
  add_pci(t, "0000:19:00.0", "0x030200", "0x1234", "0", "0-1");    // display class, unknown vendor: not a GPU
  t.write("proc/driver/nvidia/gpus/10000:e1:00.0/information",
          "Model: \t\t NVIDIA H100\nIRQ:   \t\t 1\nGPU UUID: \t\t GPU-5f3ee7a0-1111-2222-3333-444455556666\n");
  // Each GPU index counts one runtime's GPUs (contract section 6): CUDA's,
  // as the host has an NVIDIA GPU; the AMD and Intel ones stay PCI devices.
  Topology topo = load_ok(t);
  REQUIRE(topo.pci_devices.size() == 3);
  REQUIRE(topo.gpus.size() == 1);
  CHECK(topo.gpus[0].pci.address.domain == 0x10000);
  CHECK(topo.gpus[0].numa_node() == -1);
  CHECK(topo.gpus[0].uuid == "GPU-5f3ee7a0-1111-2222-3333-444455556666");
  CHECK(topo.gpus[0].index == 0);
  CHECK(topo.gpu_vendor() == gpuaff::pci_vendor::nvidia);
  // HIP's numbering, and Level Zero's: the other vendor's GPU alone, index 0.
  for (auto [vendor, id] : {std::pair{gpuaff::GpuVendor::amd, gpuaff::pci_vendor::amd},
                            std::pair{gpuaff::GpuVendor::intel, gpuaff::pci_vendor::intel}}) {
    auto o = opts(t);
    o.vendor = vendor;
    auto other = SysfsSource(o).load();
    REQUIRE(other);
    REQUIRE(other->gpus.size() == 1);
    CHECK(other->gpus[0].pci.vendor == id);
    CHECK(other->gpus[0].index == 0);
    if (id == gpuaff::pci_vendor::amd) CHECK_FALSE(other->gpus[0].pci.has_local_cpus);
  }
}

TEST_CASE("1280 CPUs (beyond cpu_set_t) load with SMT2 siblings 640 apart") {
  TempTree t;
  t.write(cpu_root + "online", "0-1279\n");
  for (int c = 0; c < 1280; ++c) {
    int core = c % 640;
    int pkg = core / 320;
    std::string pk = pkg == 0 ? "0-319,640-959" : "320-639,960-1279";
    add_cpu(t, c, std::to_string(core) + "," + std::to_string(core + 640), pkg, pk);
  }
  t.write(node_root + "online", "0-1\n");
  add_node(t, 0, "0-319,640-959", "10 20");
  add_node(t, 1, "320-639,960-1279", "20 10");
  t.write("proc/self/status", "Cpus_allowed_list:\t0-1279\n");
  Topology topo = load_ok(t);
  CHECK(topo.online.count() == 1280);
  CHECK(topo.allowed.last() == 1279);
  REQUIRE(topo.cores.size() == 640);
  CHECK(topo.cores[639].threads == CpuSet{639, 1279});
  CHECK(topo.package_of_cpu(1279)->id == 1);
  CHECK(topo.node_of_cpu(1100) == 1);
}

TEST_CASE("trailing NUL bytes and whitespace in files are ignored") {
  TempTree t;
  t.write(cpu_root + "online", std::string("0-3\n\0\0\0", 7));
  for (int c = 0; c < 4; ++c) add_cpu(t, c, std::to_string(c) + "  \t", 0, std::string("0-3\0", 4));
  t.write(cpu_root + "cpu0/topology/physical_package_id", std::string("0\n\0\0", 4));
  t.write(node_root + "online", "0 \n\n");
  add_node(t, 0, std::string("0-3\0", 4), std::string("10\0\0\0\0", 6));
  add_pci(t, "0000:10:00.0", std::string("0x030200\n\0", 10), "0x10de \n", std::string("0\0", 2), "0-3\n\n");
  Topology topo = load_ok(t);
  CHECK(topo.online == L("0-3"));
  CHECK(topo.nodes[0].distances == std::vector<int>{10});
  REQUIRE(topo.gpus.size() == 1);
  CHECK(topo.gpus[0].numa_node() == 0);
}

TEST_CASE("old kernels with only hex masks are read through the mask twins") {
  TempTree t;
  t.write(cpu_root + "online", "0-3\n");
  for (int c = 0; c < 4; ++c) {
    std::string d = cpu_root + "cpu" + std::to_string(c) + "/";
    t.write(d + "topology/thread_siblings", c < 2 ? "3\n" : "c\n");
    t.write(d + "topology/physical_package_id", "0\n");
    t.write(d + "topology/core_siblings", "0000000f\n");
    t.write(d + "cache/index0/level", "2\n");
    t.write(d + "cache/index0/type", "Unified\n");
    t.write(d + "cache/index0/shared_cpu_map", "0000000f\n");
  }
  t.write(node_root + "possible", "0\n");
  t.write(node_root + "node0/cpumap", "00000000,0000000f\n");
  add_pci(t, "0000:10:00.0", "0x030200", "0x10de", "0", "");
  t.write("sys/devices/pci0000:10/0000:10:00.0/local_cpus", "00000003\n");
  t.write("proc/self/status", "Cpus_allowed:\t00000000,00000006\nMems_allowed:\t1\n");
  Topology topo = load_ok(t);
  REQUIRE(topo.cores.size() == 2);
  CHECK(topo.cores[1].threads == CpuSet{2, 3});
  CHECK(topo.packages[0].cpus == L("0-3"));
  REQUIRE(topo.core_complexes.size() == 1);
  CHECK(topo.core_complexes[0].level == 2);
  CHECK(topo.nodes[0].cpus == L("0-3"));
  CHECK(topo.nodes[0].distances.empty());
  CHECK(topo.gpus[0].pci.local_cpus == CpuSet{0, 1});
  CHECK(topo.allowed == CpuSet{1, 2});
  CHECK(topo.mems_allowed == CpuSet{0});
}

TEST_CASE("without cpu/online, present CPUs and their per-CPU online files decide") {
  TempTree t;
  t.write(cpu_root + "present", "0-3\n");
  for (int c : {0, 2, 3}) add_cpu(t, c, std::to_string(c), 0, "0,2-3");
  t.write(cpu_root + "cpu1/online", "0\n");  // cpu0 has no online file: it cannot go offline
  t.write(cpu_root + "cpu2/online", "1\n");
  Topology topo = load_ok(t);
  CHECK(topo.online == L("0,2-3"));
}

TEST_CASE("without package lists, each core's physical_package_id decides") {
  TempTree t;
  t.write(cpu_root + "online", "0-3\n");
  for (int c = 0; c < 4; ++c) {
    std::string d = cpu_root + "cpu" + std::to_string(c) + "/topology/";
    t.write(d + "core_cpus_list", c < 2 ? "0-1\n" : "2-3\n");
    t.write(d + "physical_package_id", c < 2 ? "0\n" : "1\n");
  }
  Topology topo = load_ok(t);
  REQUIRE(topo.packages.size() == 2);
  CHECK(topo.packages[1].cpus == L("2-3"));
  CHECK(topo.cores[1].package == 1);
}

// Both resolvers: the kernel's (openat2 RESOLVE_IN_ROOT) and RootResolver, which
// kernels before 5.6 and seccomp filters that refuse openat2 get.
struct UserSpaceResolution {
  explicit UserSpaceResolution(bool on) { gpuaff::detail::sysfs_force_user_space_resolution = on; }
  ~UserSpaceResolution() { gpuaff::detail::sysfs_force_user_space_resolution = false; }
  UserSpaceResolution(const UserSpaceResolution&) = delete;
  UserSpaceResolution& operator=(const UserSpaceResolution&) = delete;
};

TEST_CASE("symlinks are resolved inside the root: absolute targets are re-rooted, '..' cannot escape") {
  for (bool user_space : {false, true}) {
    CAPTURE(user_space);
    UserSpaceResolution mode(user_space);
    TempTree t;
    flat(t, "0-1", {"0", "1"});
    // An absolute link, as a recording copied with absolute links would have.
    t.write("sys/devices/pci0000:10/0000:10:00.0/class", "0x030200\n");
    t.write("sys/devices/pci0000:10/0000:10:00.0/vendor", "0x10de\n");
    t.write("sys/devices/pci0000:10/0000:10:00.0/numa_node", "0\n");
    t.link("sys/bus/pci/devices/0000:10:00.0", "/sys/devices/pci0000:10/0000:10:00.0");
    // Too many '..' stop at the root and still land in the tree.
    t.write("sys/devices/pci0000:20/0000:20:00.0/class", "0x030200\n");
    t.write("sys/devices/pci0000:20/0000:20:00.0/vendor", "0x1002\n");
    t.link("sys/bus/pci/devices/0000:20:00.0", "../../../../../../../../../../sys/devices/pci0000:20/0000:20:00.0");
    // A link to the tree's own host path must not be followed on the host: re-rooted, it does not exist.
    TempTree outside;
    outside.write("dev/class", "0x030200\n").write("dev/vendor", "0x10de\n");
    t.link("sys/bus/pci/devices/0000:30:00.0", outside.path("dev"));
    // A file that is itself a symlink.
    // Nodes 0 and 1, so that the node the link names exists.
    t.write(node_root + "online", "0-1\n");
    add_node(t, 0, "0", "10 20");
    add_node(t, 1, "1", "20 10");
    t.write("elsewhere/numa_node", "1\n");
    t.remove("sys/devices/pci0000:10/0000:10:00.0/numa_node");
    t.link("sys/devices/pci0000:10/0000:10:00.0/numa_node", "/elsewhere/numa_node");
    Topology topo = load_ok(t);
    REQUIRE(topo.gpus.size() == 1);  // CUDA's numbering: the AMD GPU is HIP's (contract section 6)
    CHECK(topo.gpus[0].pci.address.bus == 0x10);
    CHECK(topo.gpus[0].numa_node() == 1);
    const gpuaff::PciDevice* amd = topo.find_pci(*gpuaff::PciAddress::parse("0000:20:00.0"));
    REQUIRE(amd != nullptr);
    CHECK(amd->vendor == gpuaff::pci_vendor::amd);
  }
}

TEST_CASE("user-space resolution: a folder swapped for a link after it was resolved is not followed out") {
  // RootResolver resolves a folder once and caches it; the open then walks the
  // resolved path from the root's descriptor without following links. A folder
  // replaced by a link to outside the root between the two (here: after the
  // first read, so the cache holds the old answer) fails the open instead of
  // reading the outside file.
  UserSpaceResolution mode(true);
  TempTree t;
  t.write("sys/a/b/file", "inside\n");
  TempTree outside;
  outside.write("b/file", "outside\n");
  gpuaff::detail::RootDir dir(t.root(), false);
  std::string out;
  REQUIRE(dir.read("sys/a/b/file", out) == 0);
  CHECK(out == "inside\n");
  t.remove("sys/a");
  t.link("sys/a", outside.root());
  int err = dir.read("sys/a/b/file", out);
  CHECK((err == ENOTDIR || err == ELOOP));
  CHECK(out.find("outside") == std::string::npos);
  // A file swapped for a link to outside is resolved again, inside the root: missing there.
  t.remove("sys/a");
  t.write("sys/a/b/file", "inside\n");
  REQUIRE(dir.read("sys/a/b/file", out) == 0);
  t.remove("sys/a/b/file");
  t.link("sys/a/b/file", outside.path("b/file"));
  CHECK(dir.read("sys/a/b/file", out) == ENOENT);
  CHECK(out.find("outside") == std::string::npos);
}

TEST_CASE("a symlink loop is an error naming the file, not a hang") {
  for (bool user_space : {false, true}) {
    CAPTURE(user_space);
    UserSpaceResolution mode(user_space);
    TempTree t;
    flat(t, "0", {"0"});
    t.link("sys/bus/pci/devices/0000:10:00.0", "../../../bus/pci/devices/0000:10:00.0");
    SysfsSource s(opts(t));
    auto r = s.load();
    REQUIRE_FALSE(r);
    CHECK(std::string(r.error().message()).find("0000:10:00.0") != std::string::npos);
  }
}

TEST_CASE("extra_pci devices are read in full whatever their class; unknown ones are an error") {
  TempTree t;
  two_socket(t);
  auto nic = gpuaff::PciAddress::parse("0000:05:00.0").value();
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}, .extra_pci = {nic}});
  auto r = s.load();
  REQUIRE(r);
  const gpuaff::PciDevice* d = r->find_pci(nic);
  REQUIRE(d != nullptr);
  CHECK(d->vendor == 0x15b3);
  CHECK(d->local_cpus == L("0-1,4-5"));
  CHECK(r->gpus.size() == 2);  // the NIC is not a GPU

  SysfsSource missing(SysfsOptions{.root = t.root(), .extra_pci = {gpuaff::PciAddress::parse("0000:06:00.0").value()}});
  auto m = missing.load();
  REQUIRE_FALSE(m);
  CHECK(m.error().code() == gpuaff::Errc::not_found);
  CHECK(std::string(m.error().message()).find("0000:06:00.0") != std::string::npos);
}

TEST_CASE("visibility options apply to the loaded GPUs") {
  TempTree t;
  two_socket(t);
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.list = "1", .use_environment = false}});
  auto r = s.load();
  REQUIRE(r);
  REQUIRE(r->gpus.size() == 1);
  CHECK(r->gpus[0].index == 0);
  CHECK(r->gpus[0].pci.address.bus == 0x90);
  CHECK(r->pci_devices.size() == 2);  // every GPU-class device stays in pci_devices
}

TEST_CASE("a root that is not a directory is an error that says what --root wants") {
  SysfsSource s(SysfsOptions{.root = "/nonexistent/gpuaff-root"});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == gpuaff::Errc::not_found);
  CHECK(std::string(r.error().message()).find("/nonexistent/gpuaff-root") != std::string::npos);
}

TEST_CASE("AMD processing accelerators (class 0x1200, MI300X) are GPUs; an Intel NPU of that class is not") {
  TempTree t;
  flat(t, "0-3", {"0", "1", "2", "3"});
  add_pci(t, "0000:05:00.0", "0x120000", "0x1002", "0", "0-1");
  add_pci(t, "0000:06:00.0", "0x120000", "0x8086", "0", "0-1");
  Topology topo = load_ok(t);
  REQUIRE(topo.gpus.size() == 1);
  CHECK(topo.gpus[0].pci.address.bus == 0x05);
  CHECK(topo.gpus[0].pci.local_cpus == CpuSet{0, 1});
  CHECK(topo.find_pci(gpuaff::PciAddress::parse("0000:06:00.0").value()) == nullptr);
}

// Cores, packages and cache groups are each read once per group, for the group's
// first CPU; the file must list that CPU and no CPU of a group read before. The
// error names the file that was read, which is the hex-mask twin on old kernels.
TEST_CASE("a sibling mask that leaves out its own CPU is an error naming the mask file") {
  TempTree t;
  t.write(cpu_root + "online", "0-1\n");
  t.write(cpu_root + "cpu0/topology/thread_siblings", "2\n");  // CPU 1 only
  auto r = SysfsSource(opts(t)).load();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == gpuaff::Errc::parse_error);
  std::string msg(r.error().message());
  CHECK(msg.find(t.path(cpu_root + "cpu0/topology/thread_siblings") + ": does not list cpu0 itself") !=
        std::string::npos);
}

TEST_CASE("cache groups that overlap are an error naming the later file and the earlier CPU") {
  TempTree t;
  t.write(cpu_root + "online", "0-1\n");
  add_cpu(t, 0, "0", 0, "0-1", "0");  // cpu0's L3 holds cpu0 alone
  add_cpu(t, 1, "1", 0, "0-1", "0");
  t.remove(cpu_root + "cpu1/cache/index3/shared_cpu_list");
  t.write(cpu_root + "cpu1/cache/index3/shared_cpu_map", "3\n");  // cpu1's says cpu0 and cpu1
  add_node(t, 0, "0-1", "10");
  t.write(node_root + "online", "0\n");
  auto r = SysfsSource(opts(t)).load();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == gpuaff::Errc::parse_error);
  std::string msg(r.error().message());
  CHECK(msg.find(t.path(cpu_root + "cpu1/cache/index3/shared_cpu_map") + ": disagrees with the cache group of cpu0") !=
        std::string::npos);
}
