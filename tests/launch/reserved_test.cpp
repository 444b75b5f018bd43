// SPDX-License-Identifier: Apache-2.0
// What the system reserved (docs/contract.md section 7): isolcpus, nohz_full
// and isolated cgroup partitions read from a root; reserve_os_cores=auto
// keeps the housekeeping CPUs for the OS; roles put main and comm on
// isolated cores.
//
// The root: one node, 4 cores of 2 threads, core c = CPUs {c, c+4}, one
// NVIDIA GPU on node 0; policy node gives it every allowed CPU of node 0.

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/source/reserved.hpp"
#include "source/tree.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::LaunchOptions;

namespace {

gpuaff::Environment no_env() {
  return [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
}

void small_machine(gpuaff_test::TempTree& t) {
  t.write("sys/devices/system/cpu/online", "0-7\n");
  t.write("sys/devices/system/cpu/possible", "0-7\n");
  t.write("sys/devices/system/node/online", "0\n");
  gpuaff_test::add_node(t, 0, "0-7", "10");
  for (int c = 0; c < 8; ++c)
    gpuaff_test::add_cpu(t, c, std::to_string(c % 4) + "," + std::to_string(c % 4 + 4), 0, "0-7");
  gpuaff_test::add_pci(t, "0000:17:00.0", "0x030200", "0x10de", "0", "0-7");
  t.write("proc/self/status", "Cpus_allowed_list:\t0-7\nMems_allowed_list:\t0\n");
}

gpuaff::Result<gpuaff::LaunchPlan> plan_on(const gpuaff_test::TempTree& t,
                                           std::map<std::string, std::string> options) {
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "root", t.root()));
  REQUIRE(gpuaff::set_option(o, "gpu", "0"));
  for (const auto& [k, v] : options) REQUIRE(gpuaff::set_option(o, k, v));
  return gpuaff::plan(o, no_env());
}

}  // namespace

TEST_CASE("the reader takes isolcpus, nohz_full and an isolated cgroup partition from the root") {
  gpuaff_test::TempTree t;
  small_machine(t);
  auto none = gpuaff::read_system_reservations(t.root());  // no file at all: nothing declared
  REQUIRE(none);
  CHECK_FALSE(none->declared());
  // A kernel built with NO_HZ_FULL and booted without it shows "(null)"; an empty isolated file is none too.
  t.write("sys/devices/system/cpu/isolated", "\n");
  t.write("sys/devices/system/cpu/nohz_full", "(null)\n");
  auto empty = gpuaff::read_system_reservations(t.root());
  REQUIRE(empty);
  CHECK_FALSE(empty->declared());
  t.write("sys/devices/system/cpu/isolated", "2-3,6-7\n");
  t.write("sys/devices/system/cpu/nohz_full", "3,7\n");
  auto both = gpuaff::read_system_reservations(t.root());
  REQUIRE(both);
  CHECK(both->isolated.to_list() == "2-3,6-7");
  CHECK(both->nohz_full.to_list() == "3,7");
  // Housekeeping: the online CPUs 0-7 less 2-3,6-7.
  CHECK(both->housekeeping(CpuSet::parse_list("0-7").value()).to_list() == "0-1,4-5");
  // The process in /job/step, a member of the isolated partition /job (CPUs 1,5).
  t.write("proc/self/cgroup", "0::/job/step\n");
  t.write("sys/fs/cgroup/job/cpuset.cpus.partition", "isolated\n");
  t.write("sys/fs/cgroup/job/cpuset.cpus.effective", "1,5\n");
  t.write("sys/fs/cgroup/job/step/cpuset.cpus.partition", "member\n");
  auto part = gpuaff::read_system_reservations(t.root());
  REQUIRE(part);
  CHECK(part->partition == "isolated");
  CHECK(part->partition_file == "sys/fs/cgroup/job/cpuset.cpus.partition");
  CHECK(part->partition_cpus.to_list() == "1,5");
  CHECK(part->reserved().to_list() == "1-3,5-7");
  // A garbled list is an error naming the file.
  t.write("sys/devices/system/cpu/isolated", "two-three\n");
  auto bad = gpuaff::read_system_reservations(t.root());
  REQUIRE_FALSE(bad);
  CHECK(std::string(bad.error().message()).find("sys/devices/system/cpu/isolated") != std::string::npos);
}

TEST_CASE("reserve_os_cores=auto keeps the housekeeping CPUs for the OS, and is an error where none are declared") {
  gpuaff_test::TempTree t;
  small_machine(t);
  // Nothing declared: never a silent N=0.
  auto undeclared = plan_on(t, {{"reserve_os_cores", "auto"}});
  REQUIRE_FALSE(undeclared);
  CHECK(undeclared.error().code() == Errc::not_found);
  CHECK(std::string(undeclared.error().message()).find("declares no reserved CPU") != std::string::npos);
  // isolcpus=2-3,6-7: housekeeping 0-1,4-5; the GPU's node share is what is left.
  t.write("sys/devices/system/cpu/isolated", "2-3,6-7\n");
  auto p = plan_on(t, {{"reserve_os_cores", "auto"}});
  REQUIRE_MESSAGE(p, p.error().message());
  CHECK(p->cpus.to_list() == "2-3,6-7");
  CHECK(p->os_cores.to_list() == "0-1,4-5");
  // nohz_full=3,7 alone: housekeeping 0-2,4-6, the share 3,7.
  t.write("sys/devices/system/cpu/isolated", "\n");
  t.write("sys/devices/system/cpu/nohz_full", "3,7\n");
  auto nohz = plan_on(t, {{"reserve_os_cores", "auto"}});
  REQUIRE(nohz);
  CHECK(nohz->cpus.to_list() == "3,7");
  // A process allowed the housekeeping CPUs only: an error naming both.
  t.write("proc/self/status", "Cpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n");
  auto only_hk = plan_on(t, {{"reserve_os_cores", "auto"}});
  REQUIRE_FALSE(only_hk);
  CHECK(std::string(only_hk.error().message()).find("all housekeeping CPUs") != std::string::npos);
  // The option's words: auto or a count, nothing else.
  LaunchOptions o;
  REQUIRE(gpuaff::set_option(o, "reserve_os_cores", "auto"));
  CHECK(o.reserve_os_auto);
  REQUIRE(gpuaff::set_option(o, "reserve_os_cores", "2"));
  CHECK_FALSE(o.reserve_os_auto);
  CHECK(o.reserve_os_cores == 2);
  auto word = gpuaff::set_option(o, "reserve_os_cores", "automatic");
  REQUIRE_FALSE(word);
  CHECK(std::string(word.error().message()).find("a non-negative integer or auto") != std::string::npos);
}

TEST_CASE("roles put main and comm on the cores the system isolated") {
  gpuaff_test::TempTree t;
  small_machine(t);
  // No reservation: main and comm take cores 0 and 1 in CPU order.
  auto plain = plan_on(t, {{"roles", "main=1,comm=1"}});
  REQUIRE(plain);
  REQUIRE(plain->roles);
  CHECK(plain->roles->main.to_list() == "0,4");
  CHECK(plain->roles->comm.to_list() == "1,5");
  // isolcpus=2-3,6-7 (cores 2 and 3): main on core 2, comm on core 3; compute keeps 0 and 1.
  t.write("sys/devices/system/cpu/isolated", "2-3,6-7\n");
  auto iso = plan_on(t, {{"roles", "main=1,comm=1"}});
  REQUIRE(iso);
  REQUIRE(iso->roles);
  CHECK(iso->roles->main.to_list() == "2,6");
  CHECK(iso->roles->comm.to_list() == "3,7");
  CHECK(iso->roles->compute.to_list() == "0-1,4-5");
  CHECK(iso->isolated.to_list() == "2-3,6-7");
  // Only one thread of core 1 isolated (3 is a sibling of 7: nohz_full=7): not a whole core, not preferred.
  t.write("sys/devices/system/cpu/isolated", "\n");
  t.write("sys/devices/system/cpu/nohz_full", "7\n");
  auto half = plan_on(t, {{"roles", "main=1"}});
  REQUIRE(half);
  CHECK(half->roles->main.to_list() == "0,4");
}
