// SPDX-License-Identifier: Apache-2.0
// How many files a load opens: cost must grow with cores (one sibling list per
// core), not with CPUs x GPUs. The formula below is derived from the reading
// plan in sysfs.hpp, for a tree with N SMT2 cores in one package, one L3 over
// all of them, one node, and G NVIDIA GPUs with information files:
//   cpu/online                                   1
//   core_cpus_list of each core's first CPU      N
//   physical_package_id + package_cpus_list      2
//   cpu0 cache index0..3 level+type              8, + index4/level (missing) 1
//   shared_cpu_list of the one L3 group          1
//   node/online, node0/cpulist, node0/distance   3
//   proc/self/status                             1
//   per GPU: class device numa_node local_cpulist information       5G
//     (no `vendor`: the NVIDIA driver lists each GPU, proc/driver/nvidia/gpus/BDF)
//   total = 17 + N + 5G   (16 + N + 5G of them read; index4/level is missing)
#include <gpuaff/policy/dispatch.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::TopologyParts;
using gpuaff_test::add_cpu;
using gpuaff_test::add_node;
using gpuaff_test::add_pci;
using gpuaff_test::cpu_root;
using gpuaff_test::node_root;
using gpuaff_test::TempTree;

namespace {

void machine(TempTree& t, int cores, int gpus) {
  int cpus = 2 * cores;
  std::string all = "0-" + std::to_string(cpus - 1);
  t.write(cpu_root + "online", all + "\n");
  for (int c = 0; c < cpus; ++c) {
    int core = c % cores;
    add_cpu(t, c, std::to_string(core) + "," + std::to_string(core + cores), 0, all, all);
  }
  t.write(node_root + "online", "0\n");
  add_node(t, 0, all, "10");
  for (int g = 0; g < gpus; ++g) {
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "0000:%02x:00.0", 0x10 + g);
    add_pci(t, bdf, "0x030200", "0x10de", "0", all);
    t.write(std::string("proc/driver/nvidia/gpus/") + bdf + "/information", "GPU UUID: \t GPU-" + std::to_string(g) + "\n");
  }
  t.write("proc/self/status", "Cpus_allowed_list:\t" + all + "\n");
}

}  // namespace

TEST_CASE("files opened = 17 + cores + 5 x GPUs: linear in cores, additive in GPUs") {
  for (int n : {1, 4, 16}) {
    for (int g : {0, 1, 8}) {
      CAPTURE(n);
      CAPTURE(g);
      TempTree t;
      machine(t, n, g);
      SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
      auto r = s.load();
      REQUIRE(r);
      CHECK(r->cores.size() == static_cast<std::size_t>(n));
      CHECK(r->gpus.size() == static_cast<std::size_t>(g));
      CHECK(s.files_opened() == 17 + n + 5 * g);
      CHECK(s.files_read().size() == static_cast<std::size_t>(16 + n + 5 * g));
      std::set<std::string> unique(s.files_read().begin(), s.files_read().end());
      CHECK(unique.size() == s.files_read().size());  // each file once
    }
  }
}

TEST_CASE("files_read names root-relative paths as the reader asked for them (through symlinks)") {
  TempTree t;
  machine(t, 1, 1);
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  REQUIRE(s.load());
  const auto& f = s.files_read();
  CHECK(f.front() == "sys/devices/system/cpu/online");
  CHECK(std::find(f.begin(), f.end(), "sys/bus/pci/devices/0000:10:00.0/class") != f.end());
  CHECK(std::find(f.begin(), f.end(), "proc/driver/nvidia/gpus/0000:10:00.0/information") != f.end());
  for (const auto& p : f) CHECK(p.find(t.root()) == std::string::npos);
}

TEST_CASE("a second load starts counting afresh") {
  TempTree t;
  machine(t, 2, 1);
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  REQUIRE(s.load());
  int first = s.files_opened();
  REQUIRE(s.load());
  CHECK(s.files_opened() == first);
}

TEST_CASE("binding detail skips device, distance, information and local_cpulist where numa_node is known") {
  // The tree above with SysfsDetail::binding: node0/distance goes (17 + N - 1 =
  // 16 + N), and each GPU, whose numa_node is 0, keeps class and numa_node
  // and loses device, local_cpulist and information: 2 files per GPU.
  for (int g : {1, 8}) {
    CAPTURE(g);
    TempTree t;
    machine(t, 4, g);
    SysfsSource s(SysfsOptions{
        .root = t.root(), .visible = {.use_environment = false}, .detail = gpuaff::SysfsDetail::binding});
    auto r = s.load();
    REQUIRE(r);
    CHECK(s.files_opened() == 16 + 4 + 2 * g);
    CHECK(s.files_read().size() == static_cast<std::size_t>(15 + 4 + 2 * g));  // index4/level is missing
    CHECK(r->nodes[0].distances.empty());
    CHECK(r->gpus[0].uuid.empty());
    CHECK(r->gpus[0].pci.device == 0);
    CHECK(r->gpus[0].pci.numa_node == 0);
    CHECK_FALSE(r->gpus[0].pci.has_local_cpus);
    CHECK(r->gpus[0].pci.local_cpus.empty());
    // UUID entries in the visibility list bring the information files back: + G.
    SysfsSource u(SysfsOptions{.root = t.root(),
                               .visible = {.use_environment = false, .cuda_visible_devices = "GPU-0"},
                               .detail = gpuaff::SysfsDetail::binding});
    auto ru = u.load();
    REQUIRE(ru);
    CHECK(u.files_opened() == 16 + 4 + 3 * g);
    REQUIRE(ru->gpus.size() == 1);
    CHECK(ru->gpus[0].uuid == "GPU-0");
  }
}

TEST_CASE("binding detail reads UUIDs for a visibility list applied later, and does not apply it") {
  TempTree t;
  machine(t, 2, 4);
  auto load = [&](std::optional<gpuaff::VisibleDevices> later) {
    SysfsSource s(SysfsOptions{.root = t.root(),
                               .visible = {.use_environment = false},
                               .detail = gpuaff::SysfsDetail::binding,
                               .visible_later = std::move(later)});
    auto r = s.load();
    REQUIRE(r);
    CHECK(r->gpus.size() == 4);  // every GPU: the caller selects
    return std::make_pair(s.files_opened(), r->gpus[3].uuid.empty() ? std::string() : std::string(r->gpus[3].uuid.view()));
  };
  // 16 + 2 cores + 2 per GPU; + 1 information file per GPU when the later list names a UUID.
  CHECK(load(std::nullopt) == std::make_pair(16 + 2 + 8, std::string()));
  CHECK(load(gpuaff::VisibleDevices{.list = "3,1", .use_environment = false}) == std::make_pair(26, std::string()));
  CHECK(load(gpuaff::VisibleDevices{.list = "GPU-3", .use_environment = false}) == std::make_pair(30, std::string("GPU-3")));
  CHECK(load(gpuaff::VisibleDevices{.use_environment = false, .cuda_visible_devices = "1, GPU-3"}) ==
        std::make_pair(30, std::string("GPU-3")));
  // MIG entries name UUIDs too.
  CHECK(load(gpuaff::VisibleDevices{.list = "MIG-GPU-3/1/0", .use_environment = false}).first == 30);
  // HIP and ROCR lists take indices only: they never need NVIDIA UUIDs.
  CHECK(load(gpuaff::VisibleDevices{.use_environment = false, .hip_visible_devices = "GPU-3"}).first == 26);
}

TEST_CASE("binding detail keeps local_cpulist where numa_node is -1 or missing") {
  // One node with CPUs, 2 cores; GPU 0 reports numa_node -1, GPU 1 has no numa_node
  // file (also -1), GPU 2 reports node 0. Binding detail: 16 + 2 + class, vendor,
  // numa_node and local_cpulist for the first two (8), class, vendor, numa_node for
  // the third (3) = 29 opened, the missing numa_node file included.
  TempTree t;
  machine(t, 2, 0);
  add_pci(t, "0000:10:00.0", "0x030200", "0x10de", "-1", "0-3");
  add_pci(t, "0000:11:00.0", "0x030200", "0x10de", "", "1,3");
  add_pci(t, "0000:12:00.0", "0x030200", "0x10de", "0", "0-3");
  SysfsSource s(SysfsOptions{
      .root = t.root(), .visible = {.use_environment = false}, .detail = gpuaff::SysfsDetail::binding});
  auto r = s.load();
  REQUIRE(r);
  CHECK(s.files_opened() == 29);
  REQUIRE(r->gpus.size() == 3);
  CHECK(r->gpus[0].pci.has_local_cpus);
  CHECK(r->gpus[0].pci.local_cpus.to_list() == "0-3");
  CHECK(r->gpus[1].pci.numa_node == -1);
  CHECK(r->gpus[1].pci.local_cpus.to_list() == "1,3");
  CHECK_FALSE(r->gpus[2].pci.has_local_cpus);
  const auto& f = s.files_read();
  CHECK(std::find(f.begin(), f.end(), "sys/bus/pci/devices/0000:10:00.0/local_cpulist") != f.end());
  CHECK(std::find(f.begin(), f.end(), "sys/bus/pci/devices/0000:12:00.0/local_cpulist") == f.end());
}

TEST_CASE("an extra_pci device keeps device; its local_cpulist only where numa_node is -1 (binding)") {
  // Two NICs (class 0x020000, not display: without extra_pci only `class` is read,
  // and in full detail their numa_node for the NIC list, source/nics.hpp).
  // Named in extra_pci, each also gets vendor, device, numa_node and local_cpulist
  // in full detail (5 files; the NIC list reuses that numa_node); binding detail
  // drops local_cpulist of the one on node 0.
  TempTree t;
  machine(t, 2, 0);
  add_pci(t, "0000:20:00.0", "0x020000", "0x15b3", "0", "0-3");
  add_pci(t, "0000:21:00.0", "0x020000", "0x15b3", "-1", "0-3");
  auto a = gpuaff::PciAddress::parse("0000:20:00.0");
  auto b = gpuaff::PciAddress::parse("0000:21:00.0");
  REQUIRE(a);
  REQUIRE(b);
  int base_full = 17 + 2;
  int base_binding = 16 + 2;
  for (auto detail : {gpuaff::SysfsDetail::full, gpuaff::SysfsDetail::binding}) {
    bool full = detail == gpuaff::SysfsDetail::full;
    CAPTURE(full);
    SysfsSource plain(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}, .detail = detail});
    REQUIRE(plain.load());
    CHECK(plain.files_opened() == (full ? base_full + 2 : base_binding) + 2);  // one class each (+ numa_node: full)
    SysfsSource s(SysfsOptions{
        .root = t.root(), .visible = {.use_environment = false}, .extra_pci = {*a, *b}, .detail = detail});
    auto r = s.load();
    REQUIRE(r);
    CHECK(s.files_opened() == (full ? base_full + 10 : base_binding + 9));
    const gpuaff::PciDevice* on0 = r->find_pci(*a);
    const gpuaff::PciDevice* unknown = r->find_pci(*b);
    REQUIRE(on0 != nullptr);
    REQUIRE(unknown != nullptr);
    CHECK(on0->device == 0x2330);
    CHECK(on0->numa_node == 0);
    CHECK(on0->has_local_cpus == full);
    CHECK(unknown->device == 0x2330);
    CHECK(unknown->has_local_cpus);
    CHECK(unknown->local_cpus.to_list() == "0-3");
  }
}

TEST_CASE("fixtures/dgx-h100: 287 files in full detail, 211 in binding detail") {
  // The machine (fixtures/README.md): 2 sockets x 56 cores x SMT2 = 224 CPUs, one
  // node and one L3 per socket, 8 H100 (class 0x0302, NVIDIA, 4 per node, each with
  // an information file), an ASPEED BMC VGA (class 0x0300, vendor 0x1a03) and 61
  // other PCI devices: 70 in all. Each GPU and its compute NIC sit below a switch
  // (root port, upstream port, two downstream ports: 4 bridges), 8 x 6 = 48; the
  // two storage slots' root ports and their 4 functions 6; every other device
  // (management NIC, 2 NVMe, 4 NVSwitches, the VGA) with a root port of its own 16.
  //   cpu/online                                         1
  //   one sibling list per core                        112
  //   physical_package_id + package_cpus_list x 2        4
  //   cpu0 cache index0..3 level+type, index4/level      9 (the last one missing)
  //   one shared_cpu_list per L3                         2
  //   node/online, node0..1/cpulist                      3
  //   node0..1/distance                                  2  (full only)
  //   proc/self/status                                   1
  //   class of every PCI device                         70
  //   vendor of the display-class device the NVIDIA      1
  //   driver does not list (the BMC VGA)
  //   device, numa_node, local_cpulist per GPU          24  (binding: numa_node only, 8;
  //                                                          every GPU has a node)
  //   information per GPU                                8  (full only)
  //   NICs (full only: the NIC list, source/nics.hpp): 50
  //     numa_node of the 13 network devices (8 compute ConnectX-7, 4 storage
  //     functions, the onboard port) 13; sys/class/infiniband/NAME/device/class of
  //     the 12 RDMA names 12 and ports/1/link_layer of each 12; sys/class/net/
  //     NAME/device/class of the 13 interfaces 13 (no memory-only node: no numa_status)
  // full: 1+112+4+9+2+3+2+1+70+1+24+8+50 = 287; binding: 287 - 2 - 16 - 8 - 50 = 211.
  auto count = [](gpuaff::SysfsDetail d) {
    SysfsSource s(SysfsOptions{.root = gpuaff_test::fixture("dgx-h100"), .visible = {.use_environment = false},
                               .detail = d});
    REQUIRE(s.load());
    return std::make_pair(s.files_opened(), s.files_read());
  };
  auto [full_opened, full_read] = count(gpuaff::SysfsDetail::full);
  auto [bind_opened, bind_read] = count(gpuaff::SysfsDetail::binding);
  CHECK(full_opened == 287);
  CHECK(full_read.size() == 286);
  CHECK(bind_opened == 211);
  CHECK(bind_read.size() == 210);
  // What binding leaves out, by name.
  std::set<std::string> left;
  for (const auto& f : full_read)
    if (std::find(bind_read.begin(), bind_read.end(), f) == bind_read.end()) left.insert(f.substr(f.rfind('/') + 1));
  // (a NIC's "class" is read again through its sys/class entry: another path)
  CHECK(left == std::set<std::string>{"class", "device", "distance", "information", "link_layer", "local_cpulist",
                                      "numa_node"});
  for (const auto& f : bind_read) CHECK(std::find(full_read.begin(), full_read.end(), f) != full_read.end());
}

TEST_CASE("fixtures/h100-vm-1gpu (recorded): the GPU's numa_node is -1, so binding detail keeps its local_cpulist") {
  // 16 vCPUs without SMT (16 cores), one package, one L3, one node, 7 PCI devices
  // of which one display-class (the H100, numa_node -1, with a driver information file).
  //   1 + 16 + 2 + cache probe 9 + 1 L3 + node/online, node0/cpulist 2 + status 1 = 32
  //   + 7 class + numa_node, local_cpulist of the H100 2 = 41 in binding detail (its
  //   vendor is known: the NVIDIA driver lists it); full detail adds node0/distance,
  //   the H100's device and information, and the numa_node of the one network
  //   device (virtio-net at 00:03.0) for the NIC list: 45.
  for (auto d : {gpuaff::SysfsDetail::full, gpuaff::SysfsDetail::binding}) {
    SysfsSource s(SysfsOptions{.root = gpuaff_test::fixture("h100-vm-1gpu"), .visible = {.use_environment = false},
                               .detail = d});
    auto r = s.load();
    REQUIRE(r);
    CHECK(s.files_opened() == (d == gpuaff::SysfsDetail::full ? 45 : 41));
    REQUIRE(r->gpus.size() == 1);
    CHECK(r->gpus[0].pci.numa_node == -1);
    CHECK(r->gpus[0].pci.local_cpus.to_list() == "0-15");
    CHECK(r->gpus[0].uuid.empty() == (d == gpuaff::SysfsDetail::binding));
  }
}

TEST_CASE("fixtures/dgx-h100: a binding load reads the parts its policy needs, and no others") {
  // What every answer reads on this machine (see the full count above): cpu/online 1,
  // node/online and two cpulists 3, proc/self/status 1, 70 class, the BMC VGA's
  // vendor 1, the 8 GPUs' numa_node 8: 84. Then per part: core siblings, one list
  // per core, 112; packages, physical_package_id and package_cpus_list of each
  // package's first CPU, 4; caches, cpu0's index0..3 level+type and the missing
  // index4/level 9, and one shared_cpu_list per L3 2: 11.
  auto opened = [](TopologyParts needs) {
    SysfsSource s(SysfsOptions{.root = gpuaff_test::fixture("dgx-h100"),
                               .visible = {.use_environment = false},
                               .detail = gpuaff::SysfsDetail::binding,
                               .needs = needs});
    auto r = s.load();
    REQUIRE(r);
    CHECK(r->gpus.size() == 8);
    return s.files_opened();
  };
  using gpuaff::PolicyKind;
  using gpuaff::PolicySpec;
  CHECK(opened(gpuaff::policy_needs(PolicySpec{.kind = PolicyKind::node})) == 84);
  CHECK(opened(gpuaff::policy_needs(PolicySpec{.kind = PolicyKind::socket})) == 84 + 4);
  CHECK(opened(gpuaff::policy_needs(PolicySpec{.kind = PolicyKind::exclusive})) == 84 + 112);
  CHECK(opened(gpuaff::policy_needs(PolicySpec{.kind = PolicyKind::core_complex})) == 84 + 11);
  CHECK(opened(gpuaff::policy_needs(PolicySpec{.kind = PolicyKind::unique_contiguous})) == 84 + 112);
  // scope=socket adds the packages to an NVIDIA mode.
  PolicySpec socket_scope{.kind = PolicyKind::unique_contiguous};
  socket_scope.nvidia.scope = gpuaff::Scope::socket;
  CHECK(opened(gpuaff::policy_needs(socket_scope)) == 84 + 112 + 4);
  CHECK(opened(TopologyParts::policies()) == 84 + 112 + 4 + 11);
}

// A focused load of a device on node N asks the lower nodes whether one lists
// the same CPUs (they are then one node, the lowest id). They are tried by id
// (node 1 of a two-socket machine: node0/cpulist, no listing of the node
// folder); a lower id with neither cpulist nor cpumap is a node that does not
// exist (sparse ids) or a folder without its files, which only the listing
// tells apart: the second is noted, once, and the first is not.
TEST_CASE("a focused load finds a lower node with the same CPUs by id, and by the listing where ids are sparse") {
  // 8 CPUs without SMT; the GPU 0000:20:00.0 is on the highest node.
  auto tree = [](TempTree& t, const std::vector<std::pair<int, std::string>>& nodes, int gpu_node) {
    t.write(cpu_root + "online", "0-7\n");
    for (int c = 0; c < 8; ++c) add_cpu(t, c, std::to_string(c), 0, "0-7");
    for (const auto& [id, cpus] : nodes) add_node(t, id, cpus, "10");
    add_pci(t, "0000:20:00.0", "0x030200", "0x10de", std::to_string(gpu_node), "");
    t.write("proc/driver/nvidia/gpus/0000:20:00.0/information", "GPU UUID: \t GPU-0\n");
    t.write("proc/self/status", "Cpus_allowed_list:\t0-7\n");
  };
  auto focused = [](const TempTree& t) {
    SysfsOptions o;
    o.root = t.root();
    o.detail = gpuaff::SysfsDetail::binding;
    o.needs = TopologyParts::none();
    o.focus = gpuaff::LoadFocus{.gpu = std::nullopt, .pci = gpuaff::PciAddress::parse("0000:20:00.0").value(), .peers = false};
    SysfsSource s(o);
    auto topo = s.load();
    REQUIRE_MESSAGE(topo, topo.error().message());
    return *topo;
  };
  struct Case {
    const char* what;
    std::vector<std::pair<int, std::string>> nodes;  ///< id, cpulist
    int gpu_node;
    bool bare_node0;   ///< a node0 folder without cpulist or cpumap
    int want_node;     ///< the GPU's node after the load
    const char* note;  ///< the one note expected, or nullptr for none
  };
  const Case cases[] = {
      {"node 1 of two, apart", {{0, "0-3"}, {1, "4-7"}}, 1, false, 1, nullptr},
      {"node 1 listing node 0's CPUs: one node 0, said in a note", {{0, "0-7"}, {1, "0-7"}}, 1, false, 0,
       "nodes 0 and 1 read as one node 0"},
      {"sparse ids 0 and 2: node 2 apart, and no note of the node 1 that does not exist", {{0, "0-3"}, {2, "4-7"}}, 2,
       false, 2, nullptr},
      {"sparse ids, node 2 listing node 0's CPUs: one node 0", {{0, "0-7"}, {2, "0-7"}}, 2, false, 0,
       "nodes 0 and 2 read as one node 0"},
      {"node 0's folder without cpulist or cpumap: noted once, node 1 stays apart", {{1, "4-7"}, {2, "0-3"}}, 2, true,
       2, "node0/cpulist is missing (and so is cpumap)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    TempTree t;
    tree(t, c.nodes, c.gpu_node);
    if (c.bare_node0) t.write(node_root + "node0/distance", "10\n");  // the folder, without its CPU files
    auto topo = focused(t);
    REQUIRE(topo.gpus.size() == 1);
    CHECK(topo.gpus[0].numa_node() == c.want_node);
    if (c.note == nullptr) {
      CHECK(topo.notes.empty());
    } else {
      REQUIRE(topo.notes.size() == 1);
      CHECK(topo.notes[0].find(c.note) != std::string::npos);
    }
  }
}

namespace {

/// The descriptors this process holds now (/proc/self/fd, less the one that lists it).
int open_descriptors() {
  std::vector<std::string> names;
  REQUIRE(gpuaff::detail::list_directory("/proc/self/fd", names) == 0);
  return static_cast<int>(names.size()) - 1;
}

}  // namespace

TEST_CASE("a folder of more names than one read of the folder returns is listed whole") {
  // list_directory_fd reads a page of entries per getdents64 call: 1,500
  // names of 12 characters (the length of a PCI address; 32-byte records)
  // take a dozen calls, and each name must come back once.
  TempTree t;
  std::set<std::string> want;
  for (int i = 0; i < 1500; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "0000:%02x:%02x.%x", i / 256, i % 256 / 8, i % 8);
    t.write(std::string("devices/") + name, "");
    want.insert(name);
  }
  std::vector<std::string> names;
  REQUIRE(gpuaff::detail::list_directory(t.path("devices"), names) == 0);
  CHECK(names.size() == want.size());
  CHECK(std::set<std::string>(names.begin(), names.end()) == want);
}

TEST_CASE("the root is opened once: is_live_root hands its descriptor to the reader, and no load keeps one") {
  TempTree t;
  machine(t, 2, 1);
  // A folder that is not "/": its descriptor, of that very folder.
  int fd = -2;
  auto live = gpuaff::detail::is_live_root(t.root(), &fd);
  REQUIRE(live);
  CHECK_FALSE(*live);
  REQUIRE(fd >= 0);
  struct stat by_fd {}, by_path {};
  REQUIRE(::fstat(fd, &by_fd) == 0);
  REQUIRE(::stat(t.root().c_str(), &by_path) == 0);
  CHECK(by_fd.st_ino == by_path.st_ino);
  CHECK(by_fd.st_dev == by_path.st_dev);
  ::close(fd);
  // "/" and a link to it are the live root: no descriptor (the live root is read by path).
  fd = -2;
  REQUIRE(gpuaff::detail::is_live_root("/", &fd).value_or(false));
  CHECK(fd == -1);
  std::string link = t.root() + "/to-top";
  REQUIRE(::symlink("/", link.c_str()) == 0);
  fd = -2;
  REQUIRE(gpuaff::detail::is_live_root(link, &fd).value_or(false));
  CHECK(fd == -1);
  // A file (a tar root) and a missing path: none either.
  fd = -2;
  auto file = gpuaff::detail::is_live_root(t.root() + "/proc/self/status", &fd);
  REQUIRE(file);
  CHECK_FALSE(*file);
  CHECK(fd == -1);
  fd = -2;
  auto missing = gpuaff::detail::is_live_root(t.root() + "/nothing-here", &fd);
  REQUIRE_FALSE(missing);
  CHECK(std::string(missing.error().message()).find("nothing-here") != std::string::npos);
  CHECK(fd == -1);

  // Loads, whole and focused, successful or not, leave the descriptors as they were.
  int before = open_descriptors();
  REQUIRE(before > 0);
  for (int i = 0; i < 20; ++i) {
    SysfsSource whole(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
    REQUIRE(whole.load());
    SysfsSource focused(SysfsOptions{.root = t.root(),
                                     .visible = {.use_environment = false},
                                     .detail = gpuaff::SysfsDetail::binding,
                                     .needs = TopologyParts{},
                                     .focus = gpuaff::LoadFocus{.pci = *gpuaff::PciAddress::parse("0000:10:00.0")}});
    auto one = focused.load();
    REQUIRE(one);
    CHECK(one->gpus.size() == 1);
    SysfsSource gone(SysfsOptions{.root = t.root() + "/nothing-here", .visible = {.use_environment = false}});
    REQUIRE_FALSE(gone.load());
    SysfsSource top(SysfsOptions{.root = link, .visible = {.use_environment = false}});
    (void)top.load();  // this machine's own root: whatever it holds, no descriptor stays
  }
  CHECK(open_descriptors() == before);
}
