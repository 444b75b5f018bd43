// SPDX-License-Identifier: Apache-2.0
// The plan of one binding: the target by GPU index, local rank or PCI
// address, the policy's CPUs, the memory nodes and policy; the check that a
// plan from another machine fits this one.
//
// p4d.24xlarge (fixtures/p4d.24xlarge): 96 CPUs, SMT2; node 0 = 0-23,48-71
// with GPUs 0-3, node 1 = 24-47,72-95 with GPUs 4-7 (GPU 4 is 0000:90:1c.0);
// the NVMe drive 0000:90:1e.0 is on node 1. Exclusive gives each of a node's
// four GPUs 24 / 4 = 6 cores with their siblings (+48).
#include <doctest/doctest.h>

#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/plan.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::LaunchContext;
using gpuaff::LaunchOptions;
using gpuaff::PciAddress;
using gpuaff::PolicyKind;

namespace {

const PciAddress nvme = *PciAddress::parse("0000:90:1e.0");
const PciAddress gpu4 = *PciAddress::parse("0000:90:1c.0");

gpuaff::Topology p4d(std::vector<PciAddress> extra_pci = {}) {
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{
      .root = gpuaff_test::fixture("p4d.24xlarge"),
      .visible = gpuaff::VisibleDevices{.list = std::nullopt, .use_environment = false},
      .extra_pci = std::move(extra_pci)});
  auto t = source.load();
  REQUIRE_MESSAGE(t, (t ? "" : std::string(t.error().message())));
  return *t;
}

CpuSet cpus(std::string_view list) { return *CpuSet::parse_list(list); }

}  // namespace

TEST_CASE("a GPU by index is planned with its policy, node and memory nodes") {
  auto plan = gpuaff::make_plan(p4d(), LaunchOptions{.gpu = 5, .policy = {.kind = PolicyKind::exclusive}});
  REQUIRE_MESSAGE(plan, (plan ? "" : std::string(plan.error().message())));
  CHECK(plan->gpu == 5);
  CHECK(plan->visible_gpu == 5);
  CHECK(plan->cpus == cpus("30-35,78-83"));  // the second of node 1's four GPUs
  CHECK(plan->node == 1);
  CHECK(plan->memory_nodes == cpus("1"));
  CHECK(plan->policy.kind == PolicyKind::exclusive);
  CHECK(plan->target().address() == plan->topo.gpus[5].address());
}

TEST_CASE("a GPU index beyond the visible GPUs names them and where the index came from") {
  auto by_flag = gpuaff::make_plan(p4d(), LaunchOptions{.gpu = 8});
  REQUIRE(!by_flag);
  CHECK(by_flag.error().code() == Errc::not_found);
  std::string m(by_flag.error().message());
  CHECK(m.find("no GPU 8 (gpu=8): 8 visible in ") == 0);
  CHECK(m.find("7 0000:a0:1d.0") != std::string::npos);
  CHECK(m.find("pick one of them") != std::string::npos);

  auto by_rank = gpuaff::make_plan(p4d(), LaunchOptions{.local_rank = true},
                                   LaunchContext{.local_rank = gpuaff::LauncherValue{"LOCAL_RANK", "9", 9}});
  REQUIRE(!by_rank);
  std::string r(by_rank.error().message());
  CHECK(r.find("no GPU 9 (LOCAL_RANK=9)") == 0);
  CHECK(r.find("use gpu=0") != std::string::npos);

  gpuaff::Topology none = p4d();
  none.gpus.clear();
  auto empty = gpuaff::make_plan(none, LaunchOptions{.gpu = 0});
  REQUIRE(!empty);
  CHECK(empty.error().code() == Errc::not_found);
  CHECK(std::string(empty.error().message()).find("no GPU is visible in ") == 0);
}

TEST_CASE("a PCI device that is not a GPU is planned as the only GPU of its node") {
  auto plan = gpuaff::make_plan(p4d({nvme}), LaunchOptions{.pci = nvme, .policy = {.kind = PolicyKind::exclusive}});
  REQUIRE_MESSAGE(plan, (plan ? "" : std::string(plan.error().message())));
  CHECK(plan->visible_gpu == -1);
  CHECK(plan->gpu == 0);
  CHECK(plan->target().address() == nvme);
  CHECK(plan->cpus == cpus("24-47,72-95"));  // alone on node 1, it gets the whole node
  CHECK(plan->node == 1);
}

TEST_CASE("a visible GPU named by PCI address keeps its index and shares its node") {
  auto plan = gpuaff::make_plan(p4d(), LaunchOptions{.pci = gpu4, .policy = {.kind = PolicyKind::exclusive}});
  REQUIRE(plan);
  CHECK(plan->visible_gpu == 4);
  CHECK(plan->gpu == 4);
  CHECK(plan->cpus == cpus("24-29,72-77"));  // the first of node 1's four GPUs

  // With only GPUs 4 and 5 visible, GPU 4 is visible GPU 0, and node 1's
  // cores are split between two GPUs: 12 cores each.
  gpuaff::Topology two = p4d();
  auto visible = gpuaff::select_visible_gpus(two.gpus, gpuaff::VisibleDevices{.list = "4,5", .use_environment = false});
  REQUIRE(visible);
  two.gpus = *visible;
  auto narrowed = gpuaff::make_plan(two, LaunchOptions{.pci = gpu4, .policy = {.kind = PolicyKind::exclusive}});
  REQUIRE(narrowed);
  CHECK(narrowed->visible_gpu == 0);
  CHECK(narrowed->cpus == cpus("24-35,72-83"));
}

TEST_CASE("a PCI device the topology does not hold is not found") {
  auto plan = gpuaff::make_plan(p4d(), LaunchOptions{.pci = nvme});  // not read: no extra_pci
  REQUIRE(!plan);
  CHECK(plan.error().code() == Errc::not_found);
}

TEST_CASE("the plan's memory options are its memory policy over the GPU's nodes") {
  auto plan = gpuaff::make_plan(p4d(), LaunchOptions{.gpu = 2, .membind = *gpuaff::parse_membind("local")});
  REQUIRE(plan);
  gpuaff::MemoryOptions m = plan->memory(gpuaff::OnRefused::cpu_only);
  CHECK(m.policy == gpuaff::MemPolicy::bind);
  CHECK(m.nodes == cpus("0"));
  CHECK(m.on_refused == gpuaff::OnRefused::cpu_only);
  auto none = gpuaff::make_plan(p4d(), LaunchOptions{.gpu = 6});
  REQUIRE(none);
  CHECK(none->memory().policy == gpuaff::MemPolicy::none);
  CHECK(none->memory().nodes == cpus("1"));
  CHECK(none->memory().on_refused == gpuaff::OnRefused::error);
}

TEST_CASE("a plan from another machine must name CPUs that are online here") {
  auto plan = gpuaff::make_plan(p4d(), LaunchOptions{.gpu = 4});
  REQUIRE(plan);
  CHECK(gpuaff::check_cpus_exist(*plan, cpus("0-127")));
  auto missing = gpuaff::check_cpus_exist(*plan, cpus("0-63"));
  REQUIRE(!missing);
  CHECK(missing.error().code() == Errc::empty_result);
  std::string m(missing.error().message());
  CHECK(m.find("CPUs 72-95 of the binding (planned from ") == 0);
  CHECK(m.find("do not exist here (online: 0-63)") != std::string::npos);
}

TEST_CASE("this machine's online CPUs include every CPU this thread may run on") {
  auto online = gpuaff::live_online_cpus();
  REQUIRE_MESSAGE(online, (online ? "" : std::string(online.error().message())));
  auto mine = gpuaff::thread_affinity();
  REQUIRE(mine);
  CHECK(!online->empty());
  CHECK(mine->is_subset_of(*online));
}

TEST_CASE("applying a plan from another machine whose CPUs are not here changes nothing") {
  auto plan = gpuaff::make_plan(p4d(), LaunchOptions{.gpu = 7});  // node 1: 24-47,72-95
  REQUIRE(plan);
  auto online = gpuaff::live_online_cpus();
  REQUIRE(online);
  if (plan->cpus.is_subset_of(*online)) return;  // a machine with 96 CPUs or more: nothing to show
  auto before = gpuaff::thread_affinity();
  REQUIRE(before);
  auto applied = gpuaff::apply_plan(*plan, gpuaff::OnRefused::error, gpuaff::PlannedOn::another_machine);
  REQUIRE(!applied);
  CHECK(applied.error().code() == Errc::empty_result);
  CHECK(gpuaff::thread_affinity().value() == *before);
}

TEST_CASE("host_nodes: the GPU's node, or a memory-only node's nearest CPU node(s)") {
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{
      .root = gpuaff_test::fixture("gb200-tray"),
      .visible = gpuaff::VisibleDevices{.list = std::nullopt, .use_environment = false}});
  auto t = source.load();
  REQUIRE_MESSAGE(t, (t ? "" : std::string(t.error().message())));
  // gb200-tray (fixtures/gb200-tray.json): CPU nodes 0 (0-71) and 1 (72-143); the
  // CPU-less HBM nodes 2 and 10 are 80 from node 0 and 120 from node 1, 18 and 26
  // the other way round. GPU 2 (0018:01:00.0) has PCI numa_node 1, its Grace.
  auto plan = gpuaff::make_plan(*t, LaunchOptions{.gpu = 2});
  REQUIRE_MESSAGE(plan, (plan ? "" : std::string(plan.error().message())));
  CHECK(plan->host_nodes == cpus("1"));
  // Firmware that names the HBM node as the PCI numa_node: the nearest CPU node.
  CHECK(gpuaff::detail::host_nodes_for(*t, 2) == cpus("0"));
  CHECK(gpuaff::detail::host_nodes_for(*t, 26) == cpus("1"));
  CHECK(gpuaff::detail::host_nodes_for(*t, 1) == cpus("1"));
  // Several GPUs per process: the union of their nodes (GPU 0 on Grace 0, GPU 3 on Grace 1).
  auto both = gpuaff::make_plan(*t, LaunchOptions{.gpu = 0, .more_gpus = {3}});
  REQUIRE_MESSAGE(both, (both ? "" : std::string(both.error().message())));
  CHECK(both->host_nodes == cpus("0-1"));
}
