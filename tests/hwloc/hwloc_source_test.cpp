// SPDX-License-Identifier: Apache-2.0
// HwlocSource: the Topology hwloc gives for the live machine, an XML file and a
// recorded root; clear errors for inputs hwloc cannot use.
#include <gpuaff/source/hwloc.hpp>

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "hwloc/temp_root.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::HwlocInput;
using gpuaff::HwlocOptions;
using gpuaff::HwlocSource;
using gpuaff::PciAddress;
using gpuaff::Topology;
using gpuaff_test::TempDir;

namespace {

gpuaff::VisibleDevices no_env() { return gpuaff::VisibleDevices{.use_environment = false}; }

// A two-socket machine written the way Linux lays out sysfs (lists and their
// hex-mask twins): 8 CPUs, SMT2 with siblings n and n+4; package 0 holds cores
// {0,4},{1,5} and node 0; package 1 holds {2,6},{3,7} and node 1; node 2 is
// memory only. Each core has its own L2, each package one L3. GPU 0000:17:00.0
// sits on node 0, GPU 0000:40:00.0 and a NIC 0000:41:00.0 on node 1. The
// recorded process was allowed CPUs 0-5 and nodes 0-1.
void write_two_socket(const TempDir& r, bool masks = true) {
  const std::string cpu = "sys/devices/system/cpu/";
  r.write(cpu + "online", "0-7\n");
  r.write(cpu + "possible", "0-7\n");
  r.write(cpu + "present", "0-7\n");
  for (int i = 0; i < 8; ++i) {
    int core = i % 4;
    int pkg = core / 2;
    std::string d = cpu + "cpu" + std::to_string(i) + "/";
    std::string sib_list = std::to_string(core) + "," + std::to_string(core + 4);
    std::string pkg_list = pkg == 0 ? "0-1,4-5" : "2-3,6-7";
    const char* sib_mask[] = {"11", "22", "44", "88"};
    const char* pkg_mask = pkg == 0 ? "33" : "cc";
    if (i != 0) r.write(d + "online", "1\n");
    r.write(d + "topology/physical_package_id", std::to_string(pkg) + "\n");
    r.write(d + "topology/core_id", std::to_string(core % 2) + "\n");
    r.write(d + "topology/thread_siblings_list", sib_list + "\n");
    r.write(d + "topology/core_cpus_list", sib_list + "\n");
    r.write(d + "topology/core_siblings_list", pkg_list + "\n");
    r.write(d + "topology/package_cpus_list", pkg_list + "\n");
    r.write(d + "cache/index2/level", "2\n");
    r.write(d + "cache/index2/type", "Unified\n");
    r.write(d + "cache/index2/size", "1024K\n");
    r.write(d + "cache/index2/shared_cpu_list", sib_list + "\n");
    r.write(d + "cache/index3/level", "3\n");
    r.write(d + "cache/index3/type", "Unified\n");
    r.write(d + "cache/index3/size", "32768K\n");
    r.write(d + "cache/index3/shared_cpu_list", pkg_list + "\n");
    if (masks) {
      r.write(d + "topology/thread_siblings", std::string(sib_mask[core]) + "\n");
      r.write(d + "topology/core_cpus", std::string(sib_mask[core]) + "\n");
      r.write(d + "topology/core_siblings", std::string(pkg_mask) + "\n");
      r.write(d + "topology/package_cpus", std::string(pkg_mask) + "\n");
      r.write(d + "cache/index2/shared_cpu_map", std::string(sib_mask[core]) + "\n");
      r.write(d + "cache/index3/shared_cpu_map", std::string(pkg_mask) + "\n");
    }
  }
  const std::string node = "sys/devices/system/node/";
  r.write(node + "possible", "0-2\n");
  r.write(node + "online", "0-2\n");
  r.write(node + "has_cpu", "0-1\n");
  r.write(node + "node0/cpulist", "0-1,4-5\n");
  r.write(node + "node1/cpulist", "2-3,6-7\n");
  r.write(node + "node2/cpulist", "\n");
  r.write(node + "node0/distance", "10 21 40\n");
  r.write(node + "node1/distance", "21 10 40\n");
  r.write(node + "node2/distance", "40 40 10\n");
  if (masks) {
    r.write(node + "node0/cpumap", "33\n");
    r.write(node + "node1/cpumap", "cc\n");
    r.write(node + "node2/cpumap", "0\n");
  }
  struct Dev {
    const char* bdf;
    const char* host;
    const char* vendor;
    const char* cls;
    int node;
  };
  for (Dev d : {Dev{"0000:17:00.0", "pci0000:17", "0x10de", "0x030200", 0},
                Dev{"0000:40:00.0", "pci0000:40", "0x10de", "0x030200", 1},
                Dev{"0000:41:00.0", "pci0000:41", "0x15b3", "0x020000", 1}}) {
    std::string real = std::string("sys/devices/") + d.host + "/" + d.bdf + "/";
    r.write(real + "vendor", std::string(d.vendor) + "\n");
    r.write(real + "device", "0x2330\n");
    r.write(real + "class", std::string(d.cls) + "\n");
    r.write(real + "numa_node", std::to_string(d.node) + "\n");
    r.write(real + "local_cpulist", d.node == 0 ? "0-1,4-5\n" : "2-3,6-7\n");
    if (masks) r.write(real + "local_cpus", d.node == 0 ? "33\n" : "cc\n");
    r.link(std::string("sys/bus/pci/devices/") + d.bdf, std::string("../../../devices/") + d.host + "/" + d.bdf);
  }
  // The driver lists both GPUs (a GPU it does not list is not the process's);
  // only the second one's file has a UUID line.
  r.write("proc/driver/nvidia/gpus/0000:17:00.0/information", "Model: \t\t NVIDIA H100\n");
  r.write("proc/driver/nvidia/gpus/0000:40:00.0/information",
          "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-40400000-0000-0000-0000-000000000000\nBus Location: \t 0000:40:00.0\n");
  r.write("proc/self/status", "Name:\tpython\nCpus_allowed_list:\t0-5\nMems_allowed_list:\t0-1\n");
}

gpuaff::Result<Topology> load_root(const std::string& root, HwlocOptions o = {}) {
  o.input = HwlocInput::root;
  o.path = root;
  if (o.visible.use_environment) o.visible = no_env();
  return HwlocSource(std::move(o)).load();
}

CpuSet list(const char* s) { return CpuSet::parse_list(s).value(); }

}  // namespace

TEST_CASE("a recorded root gives its packages, nodes, cores and caches") {
  TempDir r;
  write_two_socket(r);
  auto t = load_root(r.path());
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->online == CpuSet::range(0, 7));
  REQUIRE(t->packages.size() == 2);
  CHECK(t->packages[0].id == 0);
  CHECK(t->packages[0].cpus == list("0-1,4-5"));
  CHECK(t->packages[1].id == 1);
  CHECK(t->packages[1].cpus == list("2-3,6-7"));
  REQUIRE(t->cores.size() == 4);
  CHECK(t->cores[0].threads == CpuSet{0, 4});
  CHECK(t->cores[0].package == 0);
  CHECK(t->cores[3].threads == CpuSet{3, 7});
  CHECK(t->cores[3].package == 1);
  // the last level is the package-wide L3, not the per-core L2
  REQUIRE(t->core_complexes.size() == 2);
  CHECK(t->core_complexes[0].level == 3);
  CHECK(t->core_complexes[0].cpus == list("0-1,4-5"));
  CHECK(t->core_complexes[1].cpus == list("2-3,6-7"));
}

TEST_CASE("memory-only nodes keep no CPUs and distances follow node order") {
  TempDir r;
  write_two_socket(r);
  auto t = load_root(r.path());
  REQUIRE_MESSAGE(t, t.error().message());
  REQUIRE(t->nodes.size() == 3);
  CHECK(t->nodes[0].cpus == list("0-1,4-5"));
  CHECK(t->nodes[1].cpus == list("2-3,6-7"));
  CHECK(t->nodes[2].id == 2);
  CHECK(t->nodes[2].memory_only());
  CHECK(t->distance(0, 1) == 21);
  CHECK(t->distance(1, 0) == 21);
  CHECK(t->distance(2, 0) == 40);
  CHECK(t->distance(2, 2) == 10);
}

TEST_CASE("GPUs get their node and local CPUs from where hwloc attaches them") {
  TempDir r;
  write_two_socket(r);
  auto t = load_root(r.path());
  REQUIRE_MESSAGE(t, t.error().message());
  REQUIRE(t->gpus.size() == 2);
  CHECK(t->gpus[0].index == 0);
  CHECK(t->gpus[0].address() == PciAddress{0, 0x17, 0, 0});
  CHECK(t->gpus[0].numa_node() == 0);
  CHECK(t->gpus[0].pci.local_cpus == list("0-1,4-5"));
  CHECK(t->gpus[1].address() == PciAddress{0, 0x40, 0, 0});
  CHECK(t->gpus[1].numa_node() == 1);
  CHECK(t->gpus[1].pci.class_code == 0x030200);
  CHECK(t->gpus[1].pci.vendor == 0x10de);
  // the UUID comes from the driver's information file in the root
  CHECK(t->gpus[1].uuid.view() == "GPU-40400000-0000-0000-0000-000000000000");
  CHECK(t->gpus[0].uuid.view().empty());
  // the NIC is not a GPU and was not asked for
  CHECK(t->pci_devices.size() == 2);
}

TEST_CASE("extra PCI devices are reported with their locality") {
  TempDir r;
  write_two_socket(r);
  auto t = load_root(r.path(), HwlocOptions{.extra_pci = {PciAddress{0, 0x41, 0, 0}}});
  REQUIRE_MESSAGE(t, t.error().message());
  const auto* nic = t->find_pci(PciAddress{0, 0x41, 0, 0});
  REQUIRE(nic != nullptr);
  CHECK(nic->vendor == 0x15b3);
  CHECK(nic->class_code == 0x020000);
  CHECK(nic->numa_node == 1);
  CHECK(!nic->is_gpu());
  CHECK(t->gpus.size() == 2);
}

TEST_CASE("visible devices reorder and filter the GPUs") {
  TempDir r;
  write_two_socket(r);
  gpuaff::VisibleDevices v = no_env();
  v.cuda_visible_devices = "1";
  auto t = load_root(r.path(), HwlocOptions{.visible = v});
  REQUIRE_MESSAGE(t, t.error().message());
  REQUIRE(t->gpus.size() == 1);
  CHECK(t->gpus[0].index == 0);
  CHECK(t->gpus[0].address() == PciAddress{0, 0x40, 0, 0});

  v.cuda_visible_devices = "7";
  auto bad = load_root(r.path(), HwlocOptions{.visible = v});
  REQUIRE(!bad);
  CHECK(bad.error().code() == Errc::invalid_argument);
}

TEST_CASE("the recorded allowed set bounds hwloc's allowed set") {
  TempDir r;
  write_two_socket(r);
  auto t = load_root(r.path());
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->allowed == CpuSet::range(0, 5));
  CHECK(t->mems_allowed == CpuSet{0, 1});
  CHECK(t->usable() == CpuSet::range(0, 5));
}

TEST_CASE("a recorded cgroup v2 cpuset restricts the allowed set without dropping CPUs") {
  TempDir r;
  write_two_socket(r);
  r.write("proc/self/status", "Name:\tx\n");  // no recorded affinity: hwloc's cgroup view alone
  r.write("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n");
  r.write("proc/self/cgroup", "0::/slurm/job7\n");
  r.write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  r.write("sys/fs/cgroup/slurm/job7/cpuset.cpus.effective", "2-3,6\n");
  r.write("sys/fs/cgroup/slurm/job7/cpuset.mems.effective", "1\n");
  auto t = load_root(r.path());
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->allowed == list("2-3,6"));
  CHECK(t->mems_allowed == CpuSet{1});
  CHECK(t->online == CpuSet::range(0, 7));  // disallowed CPUs stay in the topology
  CHECK(t->cores.size() == 4);
}

TEST_CASE("a root with only cpulists (no hex masks) is refused, naming the root") {
  TempDir r;
  write_two_socket(r, /*masks=*/false);
  auto t = load_root(r.path());
  REQUIRE(!t);
  CHECK(t.error().code() == Errc::unsupported);
  CHECK(t.error().message().find(r.path()) != std::string_view::npos);
  CHECK(t.error().message().find("thread_siblings") != std::string_view::npos);
}

TEST_CASE("a missing root, a missing XML file and a garbage XML file are clear errors") {
  TempDir r;
  auto no_root = load_root(r / "absent");
  REQUIRE(!no_root);
  CHECK(no_root.error().code() == Errc::io_error);
  CHECK(no_root.error().message().find(r / "absent") != std::string_view::npos);

  auto not_root = load_root(r.path());  // a directory, but no sys/ in it
  REQUIRE(!not_root);
  CHECK(not_root.error().message().find("sys/devices/system/cpu") != std::string_view::npos);

  auto no_xml = HwlocSource(HwlocOptions{.input = HwlocInput::xml, .path = r / "absent.xml"}).load();
  REQUIRE(!no_xml);
  CHECK(no_xml.error().code() == Errc::io_error);
  CHECK(no_xml.error().message().find("absent.xml") != std::string_view::npos);

  r.write("garbage.xml", "<topology version=\"2.0\"><object type=\"Machine\"");
  auto bad_xml = HwlocSource(HwlocOptions{.input = HwlocInput::xml, .path = r / "garbage.xml"}).load();
  REQUIRE(!bad_xml);
  CHECK(bad_xml.error().code() == Errc::parse_error);
  CHECK(bad_xml.error().message().find("garbage.xml") != std::string_view::npos);
}

TEST_CASE("a malformed recorded allowed set names the file") {
  TempDir r;
  write_two_socket(r);
  r.write("proc/self/status", "Cpus_allowed_list:\t0-x\n");
  auto t = load_root(r.path());
  REQUIRE(!t);
  CHECK(t.error().code() == Errc::parse_error);
  CHECK(t.error().message().find("proc/self/status") != std::string_view::npos);
}

TEST_CASE("loading a root leaves hwloc's environment variables as they were") {
  TempDir r;
  write_two_socket(r);
  ::unsetenv("HWLOC_FSROOT");
  ::setenv("HWLOC_THISSYSTEM", "1", 1);
  auto t = load_root(r.path());
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(std::getenv("HWLOC_FSROOT") == nullptr);
  REQUIRE(std::getenv("HWLOC_THISSYSTEM") != nullptr);
  CHECK(std::string(std::getenv("HWLOC_THISSYSTEM")) == "1");
  ::unsetenv("HWLOC_THISSYSTEM");
}

TEST_CASE("the live machine: every online CPU in one core and one node; allowed is this thread's affinity") {
  auto t = HwlocSource(HwlocOptions{.visible = no_env()}).load();
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->online.count() == static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  CpuSet in_cores;
  for (const auto& c : t->cores) {
    CHECK(!in_cores.intersects(c.threads));
    in_cores |= c.threads;
  }
  CHECK(in_cores == t->online);
  CpuSet in_nodes;
  for (const auto& n : t->nodes) in_nodes |= n.cpus;
  CHECK(in_nodes == t->online);
  for (const auto& n : t->nodes) CHECK(n.distances.size() == t->nodes.size());
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  CHECK(t->allowed == CpuSet::from_cpu_set_t(mine));
}

TEST_CASE("an XML export of the live machine loads back to the same topology") {
  auto live = HwlocSource(HwlocOptions{.visible = no_env()}).load();
  REQUIRE_MESSAGE(live, live.error().message());
  // write the XML with hwloc itself, as lstopo would
  TempDir r;
  hwloc_topology_t t;
  REQUIRE(hwloc_topology_init(&t) == 0);
  hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  for (const char* c : {"opencl", "gl", "pci"})  // as HwlocSource does (libpciaccess leaks)
    (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
  REQUIRE(hwloc_topology_load(t) == 0);
  REQUIRE(hwloc_topology_export_xml(t, (r / "live.xml").c_str(), 0) == 0);
  hwloc_topology_destroy(t);
  auto xml = HwlocSource(HwlocOptions{.input = HwlocInput::xml, .path = r / "live.xml", .visible = no_env()}).load();
  REQUIRE_MESSAGE(xml, xml.error().message());
  Topology a = *live;
  Topology b = *xml;
  // the XML holds hwloc's allowed set (the cgroup's); live also bounds it by this thread
  CHECK(a.allowed.is_subset_of(b.allowed));
  b.allowed = a.allowed;
  b.origin = a.origin;
  for (auto& g : a.gpus) g.uuid = std::string_view{};  // the XML carries no driver files
  CHECK(a == b);
}

// hwloc's HWLOC_FSROOT prefixes the paths it opens, but the kernel follows
// the links below: an absolute link (or one climbing above the root) read the
// host's file. The root is checked first: such a link, or a FIFO hwloc would
// block on, is refused, naming it.
TEST_CASE("a root whose links lead out of it, or with a FIFO, is refused before hwloc reads it") {
  TempDir outside;
  outside.write("online", "0-3\n");  // what hwloc would report if it followed the link
  const std::string online = "sys/devices/system/cpu/online";
  // Climbs from sys/devices/system/cpu/ to the root's parent directory and into `outside`.
  std::string climb = "../../../../../" + outside.path().substr(outside.path().rfind('/') + 1) + "/online";
  for (const std::string& target : {outside / "online", climb}) {
    CAPTURE(target);
    TempDir r;
    write_two_socket(r);
    REQUIRE(::unlink((r / online).c_str()) == 0);
    r.link(online, target);
    auto t = load_root(r.path());
    REQUIRE_FALSE(t);
    CHECK(t.error().message().find("the symlink " + online + " leads out of it") != std::string_view::npos);
    CHECK(t.error().message().find(r.path()) != std::string_view::npos);
  }
  // A link that stays inside the root is fine.
  TempDir inside;
  write_two_socket(inside);
  inside.write("sys/devices/system/cpu/online-copy", "0-7\n");
  REQUIRE(::unlink((inside / online).c_str()) == 0);
  inside.link(online, "online-copy");
  auto fine = load_root(inside.path());
  REQUIRE_MESSAGE(fine, fine.error().message());
  CHECK(fine->online == CpuSet::range(0, 7));

  TempDir with_fifo;
  write_two_socket(with_fifo);
  REQUIRE(::unlink((with_fifo / online).c_str()) == 0);
  REQUIRE(::mkfifo((with_fifo / online).c_str(), 0644) == 0);
  auto blocked = load_root(with_fifo.path());
  REQUIRE_FALSE(blocked);
  CHECK(blocked.error().message().find(online + " is not a regular file") != std::string_view::npos);
}
