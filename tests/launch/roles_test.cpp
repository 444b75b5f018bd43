// SPDX-License-Identifier: Apache-2.0
// Roles inside a rank (docs/contract.md section 3, "Roles"): parse_roles,
// split_roles on a rank's cores, priority classes with a tolerance, the
// sysfs reader's core priorities, and the plan's OMP variables.
//
// fixtures/dgx-h100: core c = CPUs {c, c+112}; policy exclusive gives GPU 3
// cores 42-55 (node 0's 56 cores split among its 4 GPUs, 14 each).

#include <sys/stat.h>

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/policy/roles.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::LaunchOptions;
using gpuaff::RoleSizes;

namespace {

CpuSet dgx_cores(int a, int b) { return CpuSet::range(a, b) | CpuSet::range(a + 112, b + 112); }

gpuaff::Environment no_env() {
  return [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
}

gpuaff::LaunchPlan dgx_plan(std::map<std::string, std::string> options) {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("dgx-h100")));
  for (const auto& kv : options) REQUIRE_MESSAGE(gpuaff::set_option(o, kv.first, kv.second), kv.first);
  auto p = gpuaff::plan(o, no_env());
  REQUIRE_MESSAGE(p.has_value(), p.error().message());
  return *p;
}

/// Eight cores without SMT (core c = CPU c), each with `priority`.
gpuaff::Topology eight_cores(const std::vector<long long>& priority) {
  gpuaff::Topology t;
  for (int c = 0; c < 8; ++c) {
    gpuaff::Core core{CpuSet{c}, 0};
    core.priority = priority[static_cast<std::size_t>(c)];
    t.cores.push_back(core);
    t.online.set(c);
  }
  return t;
}

}  // namespace

TEST_CASE("parse_roles reads sizes and names each mistake") {
  auto r = gpuaff::parse_roles("main=1,comm=1,data=4");
  REQUIRE(r.has_value());
  CHECK(*r == RoleSizes{1, 1, 4});
  CHECK(gpuaff::roles_text(*r) == "main=1,comm=1,data=4");
  CHECK(gpuaff::roles_text(RoleSizes{0, 2, 0}) == "comm=2");
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"mian=1", "'mian' is not a role; did you mean main?"},
           {"compute=4", "compute takes the cores the other roles leave"},
           {"main=1,main=2", "'main' is named twice"},
           {"data=-1", "'data=-1' needs a number of cores from 0 to 4096"},
           {"data=4097", "needs a number of cores from 0 to 4096"},
           {"data", "'data' needs a number of cores"},
           {"main=0", "no role takes a core"},
           {"", "'' is not a role"},
       }) {
    CAPTURE(c.text);
    auto bad = gpuaff::parse_roles(c.text);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().code() == Errc::invalid_argument);
    CHECK(bad.error().message().find(c.says) != std::string::npos);
  }
}

TEST_CASE("roles on a rank's 14 cores: main, comm and data from the lowest cores, compute the rest") {
  // GPU 3 under exclusive: cores 42-55. main=1 -> core 42, comm=1 -> 43,
  // data=4 -> 44-47, compute -> 48-55 (8 cores: OMP_NUM_THREADS 8).
  auto p = dgx_plan({{"gpu", "3"}, {"policy", "exclusive"}, {"roles", "main=1,comm=1,data=4"}});
  REQUIRE(p.roles.has_value());
  CHECK(p.cpus == dgx_cores(42, 55));  // the process keeps the whole share
  CHECK(p.roles->main == dgx_cores(42, 42));
  CHECK(p.roles->comm == dgx_cores(43, 43));
  CHECK(p.roles->data == dgx_cores(44, 47));
  CHECK(p.roles->compute == dgx_cores(48, 55));
  CHECK(gpuaff::omp_thread_count(p) == 8);
  std::map<std::string, std::string> env(p.env.begin(), p.env.end());
  CHECK(env["OMP_PLACES"] == "{48,160},{49,161},{50,162},{51,163},{52,164},{53,165},{54,166},{55,167}");
  CHECK(env["OMP_PROC_BIND"] == "close");
  // The plan variable carries the roles, and reads back.
  auto back = gpuaff::parse_plan_variable(gpuaff::plan_variable_value(p));
  REQUIRE(back.has_value());
  REQUIRE(back->roles.has_value());
  CHECK(*back->roles == *p.roles);
  // Without roles: no roles, no OMP variables, OMP_NUM_THREADS counts the share (14 cores).
  auto plain = dgx_plan({{"gpu", "3"}, {"policy", "exclusive"}});
  CHECK_FALSE(plain.roles.has_value());
  CHECK(plain.env.empty());
  CHECK(gpuaff::omp_thread_count(plain) == 14);
}

TEST_CASE("roles with the OS reserve and several ranks per GPU: cut from what is left") {
  // reserve_os_cores=2 takes cores 0-1 (and 56-57) out first; policy node gives
  // GPU 0 node 0's cores 2-55; main=2 -> cores 2-3, compute 4-55.
  auto p = dgx_plan({{"gpu", "0"}, {"reserve_os_cores", "2"}, {"roles", "main=2"}});
  REQUIRE(p.roles.has_value());
  CHECK(p.roles->main == dgx_cores(2, 3));
  CHECK(p.roles->compute == dgx_cores(4, 55));
  // Two ranks on GPU 3 (exclusive): part 1 is cores 49-55; data=2 -> 49-50, compute 51-55.
  auto half = dgx_plan({{"gpu", "3"}, {"policy", "exclusive"}, {"ranks_per_gpu", "2"}, {"part", "1"},
                        {"roles", "data=2"}});
  REQUIRE(half.roles.has_value());
  CHECK(half.roles->data == dgx_cores(49, 50));
  CHECK(half.roles->compute == dgx_cores(51, 55));
}

TEST_CASE("roles that do not fit the share are refused, naming both") {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", gpuaff_test::fixture("dgx-h100")));
  REQUIRE(gpuaff::set_option(o, "gpu", "3"));
  REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
  REQUIRE(gpuaff::set_option(o, "roles", "main=1,comm=1,data=12"));
  auto p = gpuaff::plan(o, no_env());
  REQUIRE_FALSE(p.has_value());
  CHECK(p.error().code() == Errc::insufficient_cores);
  CHECK(p.error().message() ==
        "roles=main=1,comm=1,data=12 need 15 physical cores (one at least for compute), and the share 42-55,154-167 "
        "has 14; give smaller roles, or the rank more CPUs (another policy, fewer ranks per GPU)");
  LaunchOptions q;
  REQUIRE(gpuaff::set_option(q, "priority_cores", "true"));
  auto alone = gpuaff::check_options(q);
  REQUIRE_FALSE(alone.has_value());
  CHECK(alone.error().message().find("add roles=main=1,comm=1") != std::string::npos);
}

TEST_CASE("priority classes: values within 2% are one class, highest first, unknown last") {
  // Grace reports 996-1013 for identical cores: one class.
  CHECK(gpuaff::priority_classes({1000, 1005, 996, 1013, 1010, 998, 1002, 1001}) ==
        std::vector<int>{0, 0, 0, 0, 0, 0, 0, 0});
  // SST-BF: high-priority cores at 2.7 GHz base, the others at 2.0 GHz.
  CHECK(gpuaff::priority_classes({2000000, 2700000, 2000000, 2700000}) == std::vector<int>{1, 0, 1, 0});
  // Three levels, and an unknown core: 1024 (big), 768 and 760 (within 2% of 768), -1.
  CHECK(gpuaff::priority_classes({768, 1024, -1, 760}) == std::vector<int>{1, 0, 2, 1});
  CHECK(gpuaff::priority_classes({-1, -1}) == std::vector<int>{0, 0});
}

TEST_CASE("priority cores: main and comm take the fastest cores; jitter changes nothing") {
  RoleSizes sizes{1, 1, 2};
  // Cores 3 and 6 are the high-priority ones (base 2.7 GHz): main 3, comm 6; data
  // and compute take the rest in CPU order: data 0-1, compute 2,4,5,7.
  auto t = eight_cores({2000000, 2000000, 2000000, 2700000, 2000000, 2000000, 2700000, 2000000});
  auto r = gpuaff::split_roles(t, CpuSet::range(0, 7), sizes, true);
  REQUIRE(r.has_value());
  CHECK(r->main == CpuSet{3});
  CHECK(r->comm == CpuSet{6});
  CHECK(r->data == (CpuSet{0} | CpuSet{1}));
  CHECK(r->compute == (CpuSet{2} | CpuSet{4} | CpuSet{5} | CpuSet{7}));
  // Without asking, CPU order: main 0, comm 1, data 2-3, compute 4-7.
  auto plain = gpuaff::split_roles(t, CpuSet::range(0, 7), sizes, false);
  REQUIRE(plain.has_value());
  CHECK(plain->main == CpuSet{0});
  CHECK(plain->compute == CpuSet::range(4, 7));
  // Capacities that only jitter (one class): the same as CPU order, whatever the highest value.
  auto jitter = gpuaff::split_roles(eight_cores({1000, 1005, 996, 1013, 1010, 998, 1002, 1001}),
                                    CpuSet::range(0, 7), sizes, true);
  REQUIRE(jitter.has_value());
  CHECK(*jitter == *plain);
}

TEST_CASE("the reader takes core priorities from the first per-CPU file that tells cores apart") {
  // Four cores (no SMT), one node. cpu_capacity jitters (one class) and
  // base_frequency is the same everywhere; acpi_cppc/highest_perf marks cores
  // 1 and 2 as preferred: that is the source read.
  gpuaff_test::TempTree t;
  t.write("sys/devices/system/cpu/online", "0-3\n");
  t.write("sys/devices/system/cpu/possible", "0-3\n");
  t.write("sys/devices/system/node/online", "0\n");
  gpuaff_test::add_node(t, 0, "0-3", "10");
  const long long perf[] = {166, 196, 196, 166};
  const long long capacity[] = {1000, 1013, 996, 1005};
  for (int c = 0; c < 4; ++c) {
    gpuaff_test::add_cpu(t, c, std::to_string(c), 0, "0-3");
    std::string d = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/";
    t.write(d + "cpufreq/base_frequency", "2100000\n");
    t.write(d + "acpi_cppc/highest_perf", std::to_string(perf[c]) + "\n");
    t.write(d + "cpu_capacity", std::to_string(capacity[c]) + "\n");
  }
  t.write("proc/self/status", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0\n");
  auto load = [&](bool priorities) {
    gpuaff::SysfsOptions o{.root = t.root(), .priorities = priorities};
    auto topo = gpuaff::SysfsSource(o).load();
    REQUIRE_MESSAGE(topo.has_value(), topo.error().message());
    return *topo;
  };
  auto topo = load(true);
  CHECK(topo.priority_source.view() == "acpi_cppc/highest_perf");
  REQUIRE(topo.cores.size() == 4);
  for (int c = 0; c < 4; ++c) CHECK(topo.cores[static_cast<std::size_t>(c)].priority == perf[c]);
  // Not asked: nothing read.
  auto plain = load(false);
  CHECK(plain.priority_source.empty());
  CHECK(plain.cores[1].priority == -1);
  // highest_perf garbled on core 1: a note naming it, that core unknown; the others still tell 2 from 0 and 3.
  t.write("sys/devices/system/cpu/cpu1/acpi_cppc/highest_perf", "fast\n");
  auto garbled = load(true);
  CHECK(garbled.priority_source.view() == "acpi_cppc/highest_perf");
  CHECK(garbled.cores[1].priority == -1);
  CHECK(garbled.cores[2].priority == 196);
  bool named = false;
  for (const auto& n : garbled.notes) named = named || n.find("cpu1/acpi_cppc/highest_perf") != std::string::npos;
  CHECK(named);
  // highest_perf unreadable on core 1 (a folder, a FIFO): the
  // same note, never a failed binding; the other cores keep their values.
  for (bool folder : {true, false}) {
    t.remove("sys/devices/system/cpu/cpu1/acpi_cppc/highest_perf");
    if (folder) t.mkdir("sys/devices/system/cpu/cpu1/acpi_cppc/highest_perf");
    else REQUIRE(::mkfifo(t.path("sys/devices/system/cpu/cpu1/acpi_cppc/highest_perf").c_str(), 0644) == 0);
    auto unreadable = load(true);
    CHECK(unreadable.priority_source.view() == "acpi_cppc/highest_perf");
    CHECK(unreadable.cores[1].priority == -1);
    CHECK(unreadable.cores[2].priority == 196);
    bool said = false;
    for (const auto& n : unreadable.notes)
      said = said || (n.find("cpu1/acpi_cppc/highest_perf") != std::string::npos &&
                      n.find("that core's priority is unknown") != std::string::npos);
    CHECK(said);
  }
  // No source tells cores apart: the first present (base_frequency), all alike.
  for (int c = 0; c < 4; ++c)
    t.remove("sys/devices/system/cpu/cpu" + std::to_string(c) + "/acpi_cppc/highest_perf");
  auto alike = load(true);
  CHECK(alike.priority_source.view() == "cpufreq/base_frequency");
  // Nothing at all: a note, no source.
  for (int c = 0; c < 4; ++c) {
    std::string d = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/";
    t.remove(d + "cpufreq/base_frequency");
    t.remove(d + "cpu_capacity");
  }
  auto none = load(true);
  CHECK(none.priority_source.empty());
  bool noted = false;
  for (const auto& n : none.notes) noted = noted || n.find("every core counts as one priority class") != std::string::npos;
  CHECK(noted);
}
