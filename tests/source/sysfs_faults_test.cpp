// SPDX-License-Identifier: Apache-2.0
// Every required file x every way it can be broken gives an Error naming that
// file (root included) and pointing at `gpuaff record`. The table is generated:
// one base tree that loads, one mutation at a time.
#include <gpuaff/bindings.hpp>
#include <gpuaff/launch/front.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <optional>
#include <string>
#include <vector>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::Topology;
using gpuaff::TopologyParts;
using gpuaff_test::add_cpu;
using gpuaff_test::add_node;
using gpuaff_test::add_pci;
using gpuaff_test::cpu_root;
using gpuaff_test::node_root;
using gpuaff_test::TempTree;

namespace {

const std::string gpu = "sys/bus/pci/devices/0000:10:00.0/";
const std::string gpu_real = "sys/devices/pci0000:10/0000:10:00.0/";

// 4 CPUs, cores {0,2} {1,3}, one package, one L3, nodes 0 (CPUs) and 1 (memory),
// one NVIDIA GPU, a recorded allowed set.
void base(TempTree& t) {
  t.write(cpu_root + "online", "0-3\n");
  for (int c = 0; c < 4; ++c) add_cpu(t, c, c % 2 == 0 ? "0,2" : "1,3", 0, "0-3", "0-3");
  t.write(node_root + "online", "0-1\n");
  add_node(t, 0, "0-3", "10 20");
  add_node(t, 1, "", "20 10");
  add_pci(t, "0000:10:00.0", "0x030200", "0x10de", "0", "0-3");
  t.write("proc/self/status", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0-1\n");
}

struct Fault {
  std::string kind;                    // missing, empty, garbage, out-of-range, beyond-capacity, inconsistent
  std::optional<std::string> content;  // nullopt: remove the file
};

struct Row {
  std::string shown;  // the root-relative path the error must name
  std::string real;   // where the file lives (differs behind a symlink)
  std::vector<Fault> faults;
  TopologyParts needs = TopologyParts::policies();  // what the load's answer needs
};

const std::optional<std::string> missing = std::nullopt;

std::vector<Row> table() {
  std::string c0 = cpu_root + "cpu0/";
  std::string c1 = cpu_root + "cpu1/";
  auto row = [](std::string p, std::vector<Fault> f) { return Row{p, p, std::move(f), TopologyParts::policies()}; };
  return {
      // cpu/online missing or empty: online CPUs come from the cpuN directories (docs/contract.md section 1).
      row(cpu_root + "online", {{"garbage", "zero-3"}, {"garbage", "3-1"},
                                {"beyond-capacity", "0-8192"}, {"out-of-range", "0-99999999999"}}),
      // A core's missing list is covered by its sibling's (cpu2 names 0,2): not an error.
      row(c0 + "topology/core_cpus_list", {{"empty", ""}, {"garbage", "0;2"},
                                           {"beyond-capacity", "0,2,9000"}, {"inconsistent", "1,3"}}),
      row(c1 + "topology/core_cpus_list", {{"empty", "\n"}, {"garbage", "x"},
                                           {"beyond-capacity", "1,3,8192"}, {"inconsistent", "0-3"}}),
      // physical_package_id missing: package unknown (-1), not an error.
      row(c0 + "topology/physical_package_id", {{"empty", ""}, {"garbage", "zero"},
                                                {"out-of-range", "-2"}, {"out-of-range", "99999999999"}}),
      row(c0 + "topology/package_cpus_list", {{"empty", ""}, {"garbage", "0-3x"}, {"beyond-capacity", "0-3,8191-8192"},
                                              {"inconsistent", "1-3"}}),
      // A broken index level or type, or a group that does not name its CPU:
      // that level ignored, noted (the degradation tests below).
      row(c0 + "cache/index3/shared_cpu_list", {{"garbage", "0-"}, {"beyond-capacity", "0-9000"}}),
      // node/online missing or empty: the nodeN directories.
      row(node_root + "online", {{"garbage", "0-1-2"}, {"beyond-capacity", "0-1,8192"}}),
      row(node_root + "node0/cpulist", {{"missing", missing}, {"garbage", "0-3,a"}, {"beyond-capacity", "0-3,10000"}}),
      row(node_root + "node1/cpulist", {{"missing", missing}, {"garbage", "?"}}),
      // Distances are required only by an answer that needs them (the nearest reachable node).
      Row{node_root + "node0/distance", node_root + "node0/distance",
          {{"empty", ""}, {"garbage", "10 twenty"}, {"out-of-range", "10 256"}, {"out-of-range", "10 -1"},
           {"inconsistent", "10"}},
          TopologyParts::all()},
      row("proc/self/status", {{"garbage", "Cpus_allowed_list:\t0-3x\n"}, {"empty", "Cpus_allowed_list:\t\n"},
                               {"beyond-capacity", "Cpus_allowed_list:\t0-8192\n"},
                               {"garbage", "Cpus_allowed:\tq\n"},
                               {"garbage", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\tnone\n"},
                               {"beyond-capacity", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0,9000\n"}}),
      Row{gpu + "class", gpu_real + "class", {{"empty", ""}, {"garbage", "display"}, {"out-of-range", "0x1000000"}}},
      Row{gpu + "vendor", gpu_real + "vendor",
          // missing: the device is not a GPU (left out, noted), not an error
          {{"empty", ""}, {"garbage", "0xnvda"}, {"out-of-range", "0x110de"}}},
      // `device` feeds no binding: a broken one is a note (below).
      Row{gpu + "numa_node", gpu_real + "numa_node",
          {{"empty", ""}, {"garbage", "zero"}, {"out-of-range", "-2"}, {"beyond-capacity", "8192"}}},
      Row{gpu + "local_cpulist", gpu_real + "local_cpulist", {{"garbage", "0-3!"}, {"beyond-capacity", "0-3,8200"}}},
  };
}

}  // namespace

TEST_CASE("the base tree of the fault table loads") {
  TempTree t;
  base(t);
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE(r);
  CHECK(r->gpus.size() == 1);
  CHECK(r->nodes.size() == 2);
}

TEST_CASE("every required file, broken every way, gives an error naming it") {
  int cases = 0;
  // Once with the kernel resolving paths in the root (openat2), once with RootResolver.
  for (bool user_space : {false, true}) {
    struct Mode {  // restored even when a REQUIRE leaves the loop
      explicit Mode(bool on) { gpuaff::detail::sysfs_force_user_space_resolution = on; }
      ~Mode() { gpuaff::detail::sysfs_force_user_space_resolution = false; }
      Mode(const Mode&) = delete;
      Mode& operator=(const Mode&) = delete;
    } mode(user_space);
    for (const Row& row : table()) {
      for (const Fault& f : row.faults) {
        CAPTURE(row.shown);
        CAPTURE(f.kind);
        CAPTURE(f.content.value_or("<removed>"));
        TempTree t;
        base(t);
        if (f.content) t.write(row.real, *f.content);
        else t.remove(row.real);
        SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}, .needs = row.needs});
        auto r = s.load();
        REQUIRE_FALSE(r);
        std::string msg(r.error().message());
        CAPTURE(msg);
        CHECK(msg.find(t.path(row.shown)) != std::string::npos);
        CHECK(msg.find("gpuaff record") != std::string::npos);
        if (f.kind == "beyond-capacity" || f.kind == "out-of-range")
          CHECK(r.error().code() == gpuaff::Errc::out_of_range);
        if (f.kind == "missing") CHECK(r.error().code() == gpuaff::Errc::not_found);
        if (f.kind == "garbage" || f.kind == "empty" || f.kind == "inconsistent")
          CHECK(r.error().code() == gpuaff::Errc::parse_error);
        ++cases;
      }
    }
  }
  CHECK(cases >= 98);
}

TEST_CASE("optional files may be missing: the load still succeeds") {
  const std::vector<std::string> optional_files = {
      cpu_root + "cpu0/topology/package_cpus_list",  // per-core package ids instead
      cpu_root + "cpu0/cache/index3/shared_cpu_list",
      cpu_root + "cpu0/cache/index0/level",  // no level: the caches end there
      node_root + "node0/distance",
      gpu_real + "numa_node",
      gpu_real + "local_cpulist",
      gpu_real + "device",
      gpu_real + "class",  // a device without class is skipped
      gpu_real + "vendor",  // a device without vendor is not a GPU
      cpu_root + "online",  // online CPUs from the cpuN directories
      cpu_root + "cpu0/topology/physical_package_id",  // package unknown
      "proc/self/status",
  };
  for (const auto& rel : optional_files) {
    CAPTURE(rel);
    TempTree t;
    base(t);
    t.remove(rel);
    SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
    auto r = s.load();
    CHECK(r);
  }
}

TEST_CASE("per-CPU online files (read when cpu/online is missing) must be 0 or 1") {
  for (const char* bad : {"yes", "2", "-1"}) {
    CAPTURE(bad);
    TempTree t;
    base(t);
    t.remove(cpu_root + "online");
    t.write(cpu_root + "present", "0-3\n");
    t.write(cpu_root + "cpu1/online", bad);
    SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
    auto r = s.load();
    REQUIRE_FALSE(r);
    CHECK(std::string(r.error().message()).find(t.path(cpu_root + "cpu1/online")) != std::string::npos);
  }
}

namespace {

/// Loads `t` with the parts every policy reads (the distances too) and
/// requires it to succeed with a note naming `file`.
Topology degraded(const TempTree& t, const std::string& file, TopologyParts needs = TopologyParts::policies()) {
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}, .needs = needs});
  auto r = s.load();
  REQUIRE_MESSAGE(r, r.error().message());
  bool noted = false;
  for (const auto& n : r->notes) noted = noted || n.find(file) != std::string::npos;
  CHECK_MESSAGE(noted, "no note names ", file);
  return *r;
}

}  // namespace

TEST_CASE("degraded: an empty cpu/online or cpuN/online is read as the kernel means it") {
  // cpu/online empty: the online CPUs are cpu/present's (0-3), as when it is missing.
  TempTree t;
  base(t);
  t.write(cpu_root + "online", "");
  t.write(cpu_root + "present", "0-3\n");
  t.write(cpu_root + "cpu1/online", "0\n");
  CHECK(degraded(t, cpu_root + "online").online.to_list() == "0,2-3");  // cpu1 reads 0
  // cpuN/online empty: hot-pluggable but saying nothing; the CPU counts as online.
  t.write(cpu_root + "cpu1/online", "");
  CHECK(degraded(t, cpu_root + "online").online.to_list() == "0-3");
}

TEST_CASE("degraded: CPUs without any sibling list are cores of their own") {
  // Every topology/ sibling file of all four CPUs removed: four cores of one thread.
  TempTree t;
  base(t);
  for (int c = 0; c < 4; ++c)
    for (const char* f : {"core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"})
      t.remove(cpu_root + "cpu" + std::to_string(c) + "/topology/" + f);
  Topology topo = degraded(t, "core_cpus_list");
  REQUIRE(topo.cores.size() == 4);
  for (int c = 0; c < 4; ++c) CHECK(topo.cores[static_cast<std::size_t>(c)].threads == CpuSet::single(c));
  // Only cpu0's list gone: cpu2's list "0,2" still names it, nothing is assumed.
  TempTree u;
  base(u);
  for (const char* f : {"core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"})
    u.remove(cpu_root + "cpu0/topology/" + f);
  SysfsSource s(SysfsOptions{.root = u.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE(r);
  REQUIRE(r->cores.size() == 2);
  CHECK(r->cores[0].threads.to_list() == "0,2");
  CHECK(r->notes.empty());
}

TEST_CASE("degraded: a broken cache index is skipped, and the last level is kept only when it is sure") {
  const std::string idx = cpu_root + "cpu0/cache/index";
  // index1 (L1i) level garbled: below the L3, so the L3 groups stay.
  for (const char* bad : {"", "one", "0", "99"}) {
    CAPTURE(bad);
    TempTree t;
    base(t);
    t.write(idx + "1/level", bad);
    CHECK(degraded(t, idx + "1/").core_complexes.size() == 1);
  }
  // index3 (the L3) without type, or with an empty one: the last level is not known,
  // so there is no core complex (core-complex then binds the node as one group).
  for (const std::optional<std::string>& type : {std::optional<std::string>(), std::optional<std::string>("")}) {
    TempTree t;
    base(t);
    if (type) t.write(idx + "3/type", *type);
    else t.remove(idx + "3/type");
    CHECK(degraded(t, idx + "3/").core_complexes.empty());
  }
  // An L3 shared_cpu_list that does not name cpu0 itself (empty, or another CPU's):
  // that level says nothing true, and is ignored.
  for (const char* list : {"", "1-3"}) {
    CAPTURE(list);
    TempTree t;
    base(t);
    t.write(idx + "3/shared_cpu_list", list);
    CHECK(degraded(t, idx + "3/shared_cpu_list").core_complexes.empty());
  }
}

TEST_CASE("degraded: nodes from the nodeN directories when node/online says nothing") {
  for (const std::optional<std::string>& online : {std::optional<std::string>(), std::optional<std::string>("\n")}) {
    TempTree t;
    base(t);
    if (online) t.write(node_root + "online", *online);
    else t.remove(node_root + "online");
    Topology topo = degraded(t, node_root);
    REQUIRE(topo.nodes.size() == 2);
    CHECK(topo.nodes[0].cpus.to_list() == "0-3");
    CHECK(topo.nodes[1].memory_only());
  }
}

TEST_CASE("degraded: nodes listing the same CPUs are one node, and a device on another is placed there") {
  // Node 1 lists node 0's CPUs (a firmware table that split one domain); the GPU says node 1.
  TempTree t;
  base(t);
  t.write(node_root + "node1/cpulist", "0-3\n");
  t.write(gpu_real + "numa_node", "1\n");
  Topology topo = degraded(t, node_root + "node1/cpulist", TopologyParts::all());
  REQUIRE(topo.nodes.size() == 1);
  CHECK(topo.nodes[0].id == 0);
  REQUIRE(topo.gpus.size() == 1);
  CHECK(topo.gpus[0].numa_node() == 0);
  // The distance rows (two entries each) are picked by node id.
  CHECK(topo.nodes[0].distances == std::vector<int>{10});
  auto b = gpuaff::bind(topo, 0, gpuaff::NodePolicy{});
  REQUIRE(b);
  CHECK(b->to_list() == "0-3");
  // A partial overlap has no such reading: still an error naming both files.
  t.write(node_root + "node1/cpulist", "2-3\n");
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(std::string(r.error().message()).find("node1/cpulist") != std::string::npos);
}

TEST_CASE("degraded: what no answer asked for needs is left out with a note (full detail)") {
  // node0/distance garbled: the default parts (the policies') do not need distances.
  TempTree t;
  base(t);
  t.write(node_root + "node0/distance", "10 twenty");
  Topology topo = degraded(t, node_root + "node0/distance");
  for (const auto& n : topo.nodes) CHECK(n.distances.empty());
  // A GPU's device id garbled: noted, read as 0.
  TempTree u;
  base(u);
  u.write(gpu_real + "device", "0x23g0");
  CHECK(degraded(u, gpu + "device").gpus[0].pci.device == 0);
  // A broken sibling list with a load for `node` only (TopologyParts::none()): full
  // detail reads it, fails, and leaves the cores out.
  TempTree v;
  base(v);
  v.write(cpu_root + "cpu0/topology/core_cpus_list", "x");
  Topology none = degraded(v, cpu_root + "cpu0/topology/core_cpus_list", TopologyParts::none());
  CHECK(none.cores.empty());
  CHECK(none.gpus.size() == 1);
}

TEST_CASE("a node list naming a node without a directory is an error") {
  TempTree t;
  base(t);
  t.write(node_root + "online", "0-2\n");
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(std::string(r.error().message()).find(t.path(node_root + "node2/cpulist")) != std::string::npos);
}

TEST_CASE("GPU selection errors from the environment stop the load") {
  TempTree t;
  base(t);
  SysfsSource s(SysfsOptions{.root = t.root(),
                             .visible = {.use_environment = false, .cuda_visible_devices = "0,abc"}});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(std::string(r.error().message()).find("CUDA_VISIBLE_DEVICES") != std::string::npos);
  CHECK(std::string(r.error().message()).find("abc") != std::string::npos);
}

TEST_CASE("a node directory without its CPU list is an error, also when the nodes come from the directories") {
  // node/online gone (nodes from the nodeN directories) and node0 lost its cpulist:
  // node0 exists, so its devices cannot be placed; not read as an absent node.
  TempTree t;
  base(t);
  t.remove(node_root + "online");
  t.remove(node_root + "node0/cpulist");
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(std::string(r.error().message()).find(t.path(node_root + "node0/cpulist")) != std::string::npos);
}

TEST_CASE("an older NVIDIA driver's proc list (0, 1, ...) hides no GPU, with a note") {
  // Entries named by index say nothing about which GPUs are the process's.
  TempTree t;
  base(t);
  t.write("proc/driver/nvidia/gpus/0/information", "Model: Tesla M2090\n");
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE(r);
  CHECK(r->gpus.size() == 1);
  CHECK(r->hidden_gpus.empty());
  bool noted = false;
  for (const auto& n : r->notes) noted = noted || n.find("proc/driver/nvidia/gpus names no GPU by PCI address") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("a GPU whose numa_node names a memory-only node is noted") {
  // Node 1 of the base tree lists no CPU; the GPU says it is there.
  TempTree t;
  base(t);
  t.write(gpu_real + "numa_node", "1\n");
  Topology topo = degraded(t, gpu + "numa_node");
  CHECK(topo.gpus[0].numa_node() == 1);
}

TEST_CASE("a GPU on a node whose cpulist was lost: loaded with notes; its plan is an error naming that list") {
  // Node 1 lists no CPU while CPUs 2-3 are in no node's list: node 1 lost its
  // list. The GPU was placed as one on a memory-only node.
  TempTree t;
  base(t);
  t.write(node_root + "node0/cpulist", "0-1\n");
  t.write(gpu_real + "numa_node", "1\n");
  Topology topo = degraded(t, node_root + "node1/cpulist");
  CHECK(topo.gpus[0].numa_node() == 1);
  gpuaff::LaunchOptions o;
  o.machine.root = t.root();
  REQUIRE(gpuaff::set_option(o, "gpu", "0"));
  for (const char* unreachable : {"error", "nearest"}) {
    REQUIRE(gpuaff::set_option(o, "unreachable", unreachable));
    auto p = gpuaff::plan(o, [](std::string_view) { return std::optional<std::string>(); });
    REQUIRE_FALSE(p.has_value());
    CHECK(p.error().code() == gpuaff::Errc::parse_error);
    std::string m(p.error().message());
    INFO(m);
    CHECK(m.find("is on NUMA node 1, whose cpulist (sys/devices/system/node/node1/cpulist) in ") != std::string::npos);
    CHECK(m.find("lists no CPU while online CPUs 2-3 are in no node's cpulist: that list was lost") != std::string::npos);
  }
  // A GPU on node 0 does not depend on node 1.
  t.write(gpu_real + "numa_node", "0\n");
  REQUIRE(gpuaff::set_option(o, "unreachable", "error"));
  auto p = gpuaff::plan(o, [](std::string_view) { return std::optional<std::string>(); });
  REQUIRE_MESSAGE(p.has_value(), p.error().message());
  CHECK(p->cpus.to_list() == "0-1");
}
