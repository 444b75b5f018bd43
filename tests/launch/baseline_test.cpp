// SPDX-License-Identifier: Apache-2.0
// Launchers that bind first and pods whose CPUs are not the GPU's:
// --baseline (the allowed set or the cgroup cpuset), --unreachable, the
// launcher's local size standing for --nproc, and flags that do not apply.
//
// dgx-h100 (fixtures/dgx-h100): 2 sockets x 56 cores, SMT2 with split
// numbering; node 0 = 0-55,112-167 holds GPUs 0-3, node 1 = 56-111,168-223
// holds GPUs 4-7; distances 10 local, 21 remote.
// mpirun-narrowed-h100: that machine, the recorded process allowed core 0
// only (0,112) by mpirun, its cgroup v2 cpuset (at the cgroup root) the
// whole machine 0-223, memory nodes 0-1.
// pod-far-socket-h100: that machine, a pod allowed 56-63,168-175 (socket 1)
// and memory node 1 by its cgroup v1 cpuset.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "gpuaff/launch/plan.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "support/check.hpp"

using gpuaff::Baseline;
using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::LaunchContext;
using gpuaff::LaunchOptions;
using gpuaff::PolicyKind;
using gpuaff::Unreachable;

namespace {

gpuaff::Topology load(const std::string& root) {
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{
      .root = root, .visible = gpuaff::VisibleDevices{.list = std::nullopt, .use_environment = false}});
  auto t = source.load();
  REQUIRE_MESSAGE(t, (t ? "" : std::string(t.error().message())));
  return *t;
}

gpuaff::CgroupCpuset cgroup(const std::string& root) {
  auto c = gpuaff::read_cgroup_cpuset(root);
  REQUIRE_MESSAGE(c, (c ? "" : std::string(c.error().message())));
  return *c;
}

CpuSet cpus(std::string_view list) { return *CpuSet::parse_list(list); }

std::string message(const gpuaff::Error& e) { return std::string(e.message()); }

void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::filesystem::path temp_root(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("gpuaff-baseline-test-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("the cgroup v2 cpuset is read where the controller is enabled, walking up from the process's cgroup") {
  auto c = cgroup(gpuaff_test::fixture("mpirun-narrowed-h100"));
  CHECK(c.has_cpus);
  CHECK(c.has_mems);
  CHECK(c.cpus == cpus("0-223"));
  CHECK(c.mems == cpus("0-1"));
  // The session scope has no cpuset files; its root ancestor does.
  CHECK(c.cpus_file == "sys/fs/cgroup/cpuset.cpus.effective");
  CHECK(c.mems_file == "sys/fs/cgroup/cpuset.mems.effective");
}

TEST_CASE("the cgroup v1 cpuset line wins over the v2 line, and a host path missing in the container walks up") {
  auto c = cgroup(gpuaff_test::fixture("pod-far-socket-h100"));
  CHECK(c.cpus == cpus("56-63,168-175"));
  CHECK(c.mems == cpus("1"));
  CHECK(c.cpus_file == "sys/fs/cgroup/cpuset/cpuset.effective_cpus");
}

TEST_CASE("a root without proc/self/cgroup has no cgroup cpuset") {
  auto c = cgroup(gpuaff_test::fixture("dgx-h100"));
  CHECK_FALSE(c.has_cpus);
  CHECK_FALSE(c.has_mems);
}

TEST_CASE("the cgroup's own files win over its parent's; v1 falls back to cpuset.cpus") {
  auto root = temp_root("leaf");
  write(root / "proc/self/cgroup", "0::/job/step_0\n");
  write(root / "sys/fs/cgroup/cpuset.cpus.effective", "0-7\n");
  write(root / "sys/fs/cgroup/job/step_0/cpuset.cpus.effective", "2-3\n");
  write(root / "sys/fs/cgroup/job/step_0/cpuset.mems.effective", "0\n");
  auto c = cgroup(root.string());
  CHECK(c.cpus == cpus("2-3"));
  CHECK(c.mems == cpus("0"));

  auto v1 = temp_root("v1");
  write(v1 / "proc/self/cgroup", "3:cpuset:/slurm/uid_1000/job_7 (deleted)\n");
  write(v1 / "sys/fs/cgroup/cpuset/slurm/uid_1000/job_7/cpuset.cpus", "4-5\n");
  auto d = cgroup(v1.string());
  CHECK(d.cpus == cpus("4-5"));
  CHECK(d.cpus_file == "sys/fs/cgroup/cpuset/slurm/uid_1000/job_7/cpuset.cpus");
  CHECK_FALSE(d.has_mems);  // no cpuset.mems anywhere on the way up
}

TEST_CASE("a malformed proc/self/cgroup or cpuset file is an error naming the file") {
  auto root = temp_root("bad-line");
  write(root / "proc/self/cgroup", "garbage\n");
  auto a = gpuaff::read_cgroup_cpuset(root.string());
  REQUIRE(!a);
  CHECK(a.error().code() == Errc::parse_error);
  CHECK(message(a.error()).find("proc/self/cgroup") != std::string::npos);

  auto up = temp_root("dotdot");
  write(up / "proc/self/cgroup", "0::/../../etc\n");
  auto b = gpuaff::read_cgroup_cpuset(up.string());
  REQUIRE(!b);
  CHECK(b.error().code() == Errc::parse_error);

  auto empty = temp_root("empty-cpus");
  write(empty / "proc/self/cgroup", "0::/\n");
  write(empty / "sys/fs/cgroup/cpuset.cpus.effective", "\n");
  auto c = gpuaff::read_cgroup_cpuset(empty.string());
  REQUIRE(!c);
  CHECK(message(c.error()).find("cpuset.cpus.effective") != std::string::npos);

  // A malformed memory-node list is called one, not a list of CPUs.
  auto mems = temp_root("bad-mems");
  write(mems / "proc/self/cgroup", "0::/\n");
  write(mems / "sys/fs/cgroup/cpuset.cpus.effective", "0-3\n");
  write(mems / "sys/fs/cgroup/cpuset.mems.effective", "node0\n");
  auto m = gpuaff::read_cgroup_cpuset(mems.string());
  REQUIRE(!m);
  CHECK(m.error().code() == Errc::parse_error);
  CHECK(message(m.error()).find("cpuset.mems.effective: is not a list of NUMA node ids such as 0-1 (found 'node0')") !=
        std::string::npos);
  CHECK(message(m.error()).find("CPU") == std::string::npos);
}

TEST_CASE("this machine's cgroup cpuset, when there is one, holds the CPUs this thread may run on") {
  auto c = cgroup("/");
  auto mine = gpuaff::thread_affinity();
  REQUIRE(mine);
  if (c.has_cpus) CHECK(mine->is_subset_of(c.cpus));
}

TEST_CASE("--baseline affinity keeps the launcher's narrow mask and warns; cgroup draws from the whole cpuset") {
  std::string root = gpuaff_test::fixture("mpirun-narrowed-h100");
  LaunchOptions r{.gpu = 0, .policy = {.kind = PolicyKind::node}};
  LaunchContext c{.cgroup = cgroup(root)};
  auto narrow = gpuaff::make_plan(load(root), r, c);
  REQUIRE_MESSAGE(narrow, (narrow ? "" : message(narrow.error())));
  CHECK(narrow->cpus == cpus("0,112"));  // the one core mpirun left
  REQUIRE(narrow->warnings.size() == 1);
  CHECK(narrow->warnings[0].find("baseline=cgroup") != std::string::npos);
  CHECK(narrow->warnings[0].find("--bind-to none") != std::string::npos);

  r.baseline = Baseline::cgroup;
  auto wide = gpuaff::make_plan(load(root), r, c);
  REQUIRE_MESSAGE(wide, (wide ? "" : message(wide.error())));
  CHECK(wide->cpus == cpus("0-55,112-167"));  // node 0, as on an unbound process
  CHECK(wide->warnings.empty());
  // exclusive: node 0's 56 cores among its 4 GPUs, 14 each; GPU 1 gets cores 14-27 and their siblings.
  r.gpu = 1;
  r.policy.kind = PolicyKind::exclusive;
  auto share = gpuaff::make_plan(load(root), r, c);
  REQUIRE(share);
  CHECK(share->cpus == cpus("14-27,126-139"));
}

TEST_CASE("a rank pre-bound away from its GPU's node fails under affinity and binds under cgroup") {
  std::string root = gpuaff_test::fixture("mpirun-narrowed-h100");
  LaunchOptions r{.gpu = 5, .policy = {.kind = PolicyKind::node}};
  LaunchContext c{.cgroup = cgroup(root)};
  auto fails = gpuaff::make_plan(load(root), r, c);
  REQUIRE(!fails);
  CHECK(message(fails.error()).find("unreachable=nearest") != std::string::npos);
  r.baseline = Baseline::cgroup;
  auto ok = gpuaff::make_plan(load(root), r, c);
  REQUIRE(ok);
  CHECK(ok->cpus == cpus("56-111,168-223"));
}

TEST_CASE("--baseline cgroup without a cgroup cpuset is a usage error; a root without one uses every online CPU") {
  std::string root = gpuaff_test::fixture("mpirun-narrowed-h100");
  auto none = gpuaff::make_plan(load(root), LaunchOptions{.gpu = 0, .baseline = Baseline::cgroup});
  REQUIRE(!none);
  CHECK(none.error().code() == Errc::invalid_argument);

  // container-half-node: allowed 8-15,40-47 by docker, no cgroup files: every online CPU.
  std::string half = gpuaff_test::fixture("container-half-node");
  auto all = gpuaff::make_plan(load(half), LaunchOptions{.gpu = 0, .baseline = Baseline::cgroup},
                               LaunchContext{.cgroup = cgroup(half)});
  REQUIRE(all);
  CHECK(all->cpus == cpus("0-15,32-47"));  // the whole of node 0
}

TEST_CASE("--unreachable nearest gives a pod on the far socket the allowed CPUs of the closest node") {
  std::string root = gpuaff_test::fixture("pod-far-socket-h100");
  LaunchOptions r{.gpu = 0, .policy = {.kind = PolicyKind::node}};
  auto refused = gpuaff::make_plan(load(root), r);
  REQUIRE(!refused);
  CHECK(message(refused.error()).find("unreachable=nearest") != std::string::npos);

  r.unreachable = Unreachable::nearest;
  for (PolicyKind k : {PolicyKind::node, PolicyKind::exclusive, PolicyKind::unique_contiguous}) {
    r.policy.kind = k;
    auto plan = gpuaff::make_plan(load(root), r);
    REQUIRE_MESSAGE(plan, (plan ? "" : message(plan.error())));
    // Node 1 is the only node with allowed CPUs (distance 21 from node 0).
    CHECK(plan->cpus == cpus("56-63,168-175"));
    CHECK(plan->nearest_nodes == std::vector<int>{1});
    CHECK(plan->memory_nodes == cpus("1"));
    CHECK(plan->node == 0);
  }
  // A GPU of node 1 is reachable: nearest changes nothing.
  r.gpu = 4;
  r.policy.kind = PolicyKind::node;
  auto near = gpuaff::make_plan(load(root), r);
  REQUIRE(near);
  CHECK(near->nearest_nodes.empty());
  CHECK(near->cpus == cpus("56-63,168-175"));
}

TEST_CASE("--unreachable nearest includes every node at the smallest distance") {
  // Four nodes of 2 CPUs on a ring: node 0 is 20 from nodes 1 and 3, 30 from node 2.
  // Only nodes 1, 2 and 3 are allowed: nodes 1 and 3 tie.
  gpuaff::Topology t;
  t.origin = std::string_view("ring");
  t.online = cpus("0-7");
  t.allowed = cpus("2-7");
  const int d[4][4] = {{10, 20, 30, 20}, {20, 10, 20, 30}, {30, 20, 10, 20}, {20, 30, 20, 10}};
  for (int n = 0; n < 4; ++n) {
    gpuaff::NumaNode node{.id = n, .cpus = CpuSet::single(2 * n) | CpuSet::single(2 * n + 1), .distances = {}};
    for (int m = 0; m < 4; ++m) node.distances.push_back(d[n][m]);
    t.nodes.push_back(node);
    gpuaff::Core core{.threads = node.cpus, .package = 0};
    t.cores.push_back(core);
  }
  t.packages.push_back(gpuaff::Package{.id = 0, .cpus = cpus("0-7")});
  gpuaff::Gpu g;
  g.pci.address = *gpuaff::PciAddress::parse("0000:01:00.0");
  g.pci.vendor = 0x10de;
  g.pci.class_code = 0x030200;
  g.pci.numa_node = 0;
  t.gpus.push_back(g);
  auto plan = gpuaff::make_plan(t, LaunchOptions{.gpu = 0, .unreachable = Unreachable::nearest});
  REQUIRE_MESSAGE(plan, (plan ? "" : message(plan.error())));
  CHECK(plan->nearest_nodes == std::vector<int>{1, 3});
  CHECK(plan->cpus == cpus("2-3,6-7"));
}

TEST_CASE("the launcher's local size stands for nproc when nproc is not given") {
  std::string root = gpuaff_test::fixture("dgx-h100");
  gpuaff::LauncherValue two{"LOCAL_WORLD_SIZE", "2", 2};
  // torchrun --nproc-per-node 2 on 8 GPUs: GPUs 0 and 1 take part; exclusive
  // splits node 0's 56 cores between them, 28 each.
  LaunchOptions r{.gpu = 0, .policy = {.kind = PolicyKind::exclusive}};
  LaunchContext c{.local_size = two};
  auto plan = gpuaff::make_plan(load(root), r, c);
  REQUIRE(plan);
  CHECK(plan->cpus == cpus("0-27,112-139"));
  CHECK(plan->job.nproc == 2);
  CHECK(plan->nproc_source == "LOCAL_WORLD_SIZE=2");
  // An explicit nproc wins: 4 GPUs on node 0, 14 cores each.
  r.job.nproc = 4;
  auto given = gpuaff::make_plan(load(root), r, c);
  REQUIRE(given);
  CHECK(given->cpus == cpus("0-13,112-125"));
  CHECK(given->nproc_source.empty());
  // More local processes than visible GPUs: an error naming the variable.
  r.job.nproc = 0;
  c.local_size = gpuaff::LauncherValue{"OMPI_COMM_WORLD_LOCAL_SIZE", "9", 9};
  auto over = gpuaff::make_plan(load(root), r, c);
  REQUIRE(!over);
  CHECK(over.error().code() == Errc::invalid_argument);
  CHECK(message(over.error()).find("OMPI_COMM_WORLD_LOCAL_SIZE=9") != std::string::npos);
}
