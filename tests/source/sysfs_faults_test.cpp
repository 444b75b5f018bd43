// Every required file x every way it can be broken gives an Error naming that
// file (root included) and pointing at `gpuaff record`. The table is generated:
// one base tree that loads, one mutation at a time.
#include <gpuaff/source/sysfs.hpp>

#include <optional>
#include <string>
#include <vector>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
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
};

const std::optional<std::string> missing = std::nullopt;

std::vector<Row> table() {
  std::string c0 = cpu_root + "cpu0/";
  std::string c1 = cpu_root + "cpu1/";
  auto row = [](std::string p, std::vector<Fault> f) { return Row{p, p, std::move(f)}; };
  return {
      // cpu/online missing: online CPUs come from the cpuN directories (docs/contract.md section 1).
      row(cpu_root + "online", {{"empty", ""}, {"garbage", "zero-3"}, {"garbage", "3-1"},
                                {"beyond-capacity", "0-8192"}, {"out-of-range", "0-99999999999"}}),
      row(c0 + "topology/core_cpus_list", {{"missing", missing}, {"empty", ""}, {"garbage", "0;2"},
                                           {"beyond-capacity", "0,2,9000"}, {"inconsistent", "1,3"}}),
      row(c1 + "topology/core_cpus_list", {{"missing", missing}, {"empty", "\n"}, {"garbage", "x"},
                                           {"beyond-capacity", "1,3,8192"}, {"inconsistent", "0-3"}}),
      // physical_package_id missing: package unknown (-1), not an error.
      row(c0 + "topology/physical_package_id", {{"empty", ""}, {"garbage", "zero"},
                                                {"out-of-range", "-2"}, {"out-of-range", "99999999999"}}),
      row(c0 + "topology/package_cpus_list", {{"empty", ""}, {"garbage", "0-3x"}, {"beyond-capacity", "0-3,8191-8192"},
                                              {"inconsistent", "1-3"}}),
      row(c0 + "cache/index1/level", {{"empty", ""}, {"garbage", "one"}, {"out-of-range", "0"}, {"out-of-range", "99"}}),
      row(c0 + "cache/index3/type", {{"missing", missing}, {"empty", ""}}),
      row(c0 + "cache/index3/shared_cpu_list", {{"empty", ""}, {"garbage", "0-"}, {"beyond-capacity", "0-9000"},
                                                {"inconsistent", "1-3"}}),
      row(node_root + "online", {{"missing", missing}, {"empty", ""}, {"garbage", "0-1-2"},
                                 {"beyond-capacity", "0-1,8192"}}),
      row(node_root + "node0/cpulist", {{"missing", missing}, {"garbage", "0-3,a"}, {"beyond-capacity", "0-3,10000"}}),
      row(node_root + "node1/cpulist", {{"missing", missing}, {"garbage", "?"}}),
      row(node_root + "node0/distance", {{"empty", ""}, {"garbage", "10 twenty"}, {"out-of-range", "10 256"},
                                         {"out-of-range", "10 -1"}, {"inconsistent", "10"}}),
      row("proc/self/status", {{"garbage", "Cpus_allowed_list:\t0-3x\n"}, {"empty", "Cpus_allowed_list:\t\n"},
                               {"beyond-capacity", "Cpus_allowed_list:\t0-8192\n"},
                               {"garbage", "Cpus_allowed:\tq\n"},
                               {"garbage", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\tnone\n"},
                               {"beyond-capacity", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0,9000\n"}}),
      Row{gpu + "class", gpu_real + "class", {{"empty", ""}, {"garbage", "display"}, {"out-of-range", "0x1000000"}}},
      Row{gpu + "vendor", gpu_real + "vendor",
          // missing: the device is not a GPU (left out, noted), not an error
          {{"empty", ""}, {"garbage", "0xnvda"}, {"out-of-range", "0x110de"}}},
      Row{gpu + "device", gpu_real + "device", {{"empty", ""}, {"garbage", "0x23g0"}}},
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
        SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
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
  CHECK(cases >= 114);
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
  for (const char* bad : {"", "yes", "2", "-1"}) {
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

TEST_CASE("a node list naming a node without a directory is an error") {
  TempTree t;
  base(t);
  t.write(node_root + "online", "0-2\n");
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(std::string(r.error().message()).find(t.path(node_root + "node2/cpulist")) != std::string::npos);
}

TEST_CASE("a node directory without node/online or node/possible is an error") {
  TempTree t;
  base(t);
  t.remove(node_root + "online");
  SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false}});
  auto r = s.load();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == gpuaff::Errc::not_found);
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
