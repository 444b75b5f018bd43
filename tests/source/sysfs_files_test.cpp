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
//   per GPU: class vendor device numa_node local_cpulist information   6G
//   total = 17 + N + 6G   (16 + N + 6G of them read; index4/level is missing)
#include <gpuaff/source/sysfs.hpp>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

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

TEST_CASE("files opened = 17 + cores + 6 x GPUs: linear in cores, additive in GPUs") {
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
      CHECK(s.files_opened() == 17 + n + 6 * g);
      CHECK(s.files_read().size() == static_cast<std::size_t>(16 + n + 6 * g));
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

TEST_CASE("binding detail skips device, distance and information: 16 + cores + 4 x GPUs") {
  for (int g : {1, 8}) {
    CAPTURE(g);
    TempTree t;
    machine(t, 4, g);
    SysfsSource s(SysfsOptions{
        .root = t.root(), .visible = {.use_environment = false}, .detail = gpuaff::SysfsDetail::binding});
    auto r = s.load();
    REQUIRE(r);
    CHECK(s.files_opened() == 16 + 4 + 4 * g);
    CHECK(r->nodes[0].distances.empty());
    CHECK(r->gpus[0].uuid.empty());
    CHECK(r->gpus[0].pci.local_cpus.count() == 8);
    // UUID entries in the visibility list bring the information files back: + G.
    SysfsSource u(SysfsOptions{.root = t.root(),
                               .visible = {.use_environment = false, .cuda_visible_devices = "GPU-0"},
                               .detail = gpuaff::SysfsDetail::binding});
    auto ru = u.load();
    REQUIRE(ru);
    CHECK(u.files_opened() == 16 + 4 + 5 * g);
    REQUIRE(ru->gpus.size() == 1);
    CHECK(ru->gpus[0].uuid == "GPU-0");
  }
}
