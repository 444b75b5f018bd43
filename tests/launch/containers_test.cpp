// SPDX-License-Identifier: Apache-2.0
// Containers and one-GPU processes: the process's GPUs from the driver's
// list, --share machine, the warnings of a plan, and recording a container
// (docs/contract.md sections 2 and 3, docs/containers.md).
//
// Machine facts (fixtures/README.md):
//   dgx-h100: 224 CPUs, SMT2 (core c = CPUs c and c+112); node 0 = cores 0-55,
//     node 1 = cores 56-111; GPUs 0-3 (1b, 43, 52, 61:00.0) on node 0, 4-7 (9d,
//     c3, d1, df:00.0) on node 1; one L3 per socket (= node).
//   dgx-h100-container-gpus45: that machine seen from a container given host
//     GPUs 4 and 5: the driver lists 0000:9d:00.0 and 0000:c3:00.0 only.
//   dgx-h100-mig-container: the driver lists host GPU 2 (0000:52:00.0) only.
//   dgx-a100: 256 CPUs, SMT2 (core c = CPUs c and c+128), NPS4: node k = cores
//     16k..16k+15, a 4-core L3 (CCX) each; GPUs 0,1 on node 3, 2,3 on node 1,
//     4,5 on node 7, 6,7 on node 5.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gpuaff/launch/plan.hpp"
#include "gpuaff/record/record.hpp"
#include "gpuaff/source/json.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::LaunchContext;
using gpuaff::LaunchOptions;
using gpuaff::PolicyKind;
using gpuaff::Share;
using gpuaff::VisibleDevices;

namespace {

gpuaff::Topology load(const std::string& root, VisibleDevices visible = {.use_environment = false}) {
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{.root = root, .visible = visible});
  auto t = source.load();
  REQUIRE_MESSAGE(t, (t ? "" : std::string(t.error().message())));
  return *t;
}

gpuaff::Topology fixture(const char* name, VisibleDevices visible = {.use_environment = false}) {
  return load(gpuaff_test::fixture(name), visible);
}

VisibleDevices cuda(std::string value) {
  return VisibleDevices{.use_environment = false, .cuda_visible_devices = std::move(value)};
}

CpuSet cpus(std::string_view list) { return *CpuSet::parse_list(list); }

/// Cores first..first+n-1 with their SMT siblings `sibling` CPUs up.
CpuSet cores(int first, int n, int sibling) {
  return CpuSet::range(first, first + n - 1) | CpuSet::range(first + sibling, first + sibling + n - 1);
}

gpuaff::LaunchPlan plan(gpuaff::Topology t, const LaunchOptions& o, const LaunchContext& c = {}) {
  auto p = gpuaff::make_plan(std::move(t), o, c);
  REQUIRE_MESSAGE(p, (p ? "" : std::string(p.error().message())));
  return *p;
}

std::string bdf(const gpuaff::Gpu& g) { return std::string(g.address().to_string().view()); }

void check_pairwise_disjoint(const std::vector<CpuSet>& slices) {
  for (std::size_t i = 0; i < slices.size(); ++i)
    for (std::size_t j = i + 1; j < slices.size(); ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK_FALSE(slices[i].intersects(slices[j]));
    }
}

}  // namespace

TEST_CASE("a container given host GPUs 4 and 5: its GPU 0 is host GPU 4, on node 1") {
  gpuaff::Topology t = fixture("dgx-h100-container-gpus45");
  REQUIRE(t.gpus.size() == 2);
  CHECK(bdf(t.gpus[0]) == "0000:9d:00.0");
  CHECK(bdf(t.gpus[1]) == "0000:c3:00.0");
  CHECK(t.host_gpus.size() == 8);  // sysfs still lists every GPU of the host
  CHECK(t.hidden_gpus.size() == 6);
  auto p = plan(t, LaunchOptions{.gpu = 0});
  CHECK(p.node == 1);
  CHECK(p.cpus == cpus("56-111,168-223"));  // node 1, not node 0 where host GPU 0 is
  CHECK(p.warnings.empty());

  // The container's two GPUs share node 1 (56 cores): 28 each under exclusive.
  auto e0 = plan(t, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::exclusive}});
  auto e1 = plan(t, LaunchOptions{.gpu = 1, .policy = {.kind = PolicyKind::exclusive}});
  CHECK(e0.cpus == cores(56, 28, 112));
  CHECK(e1.cpus == cores(84, 28, 112));
  // Among the host's GPUs node 1 has four (GPUs 4-7): 14 cores each, and GPUs 4
  // and 5 are the first two of them.
  auto m0 = plan(t, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::exclusive}, .share = Share::machine});
  auto m1 = plan(t, LaunchOptions{.gpu = 1, .policy = {.kind = PolicyKind::exclusive}, .share = Share::machine});
  CHECK(m0.cpus == cores(56, 14, 112));
  CHECK(m1.cpus == cores(70, 14, 112));
  CHECK(m0.visible_gpu == 0);
  CHECK(bdf(m0.target()) == "0000:9d:00.0");

  // No GPU 2 in the container.
  auto none = gpuaff::make_plan(t, LaunchOptions{.gpu = 2});
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == Errc::not_found);
}

TEST_CASE("eight one-GPU processes on a DGX H100 with --share machine get the full job's disjoint slices") {
  // Process i runs with CUDA_VISIBLE_DEVICES=i and sees one GPU, its GPU 0.
  // Exclusive among the host's GPUs: node n's 56 cores split 4 ways, 14 each;
  // GPU i is rank i % 4 of node i / 4.
  std::vector<CpuSet> slices;
  gpuaff::Topology full = fixture("dgx-h100");
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    gpuaff::Topology one = fixture("dgx-h100", cuda(std::to_string(i)));
    REQUIRE(one.gpus.size() == 1);
    auto p = plan(one, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::exclusive}, .share = Share::machine});
    CHECK(p.cpus == cores(56 * (i / 4) + 14 * (i % 4), 14, 112));
    // The same as GPU i's share when all eight take part.
    CHECK(p.cpus == plan(full, LaunchOptions{.gpu = i, .policy = {.kind = PolicyKind::exclusive}}).cpus);
    CHECK(p.warnings.empty());
    // Without --share machine each would get its whole node, and is warned.
    auto alone = plan(one, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::exclusive}});
    CHECK(alone.cpus == cores(56 * (i / 4), 56, 112));
    REQUIRE(alone.warnings.size() == 1);
    CHECK(alone.warnings[0].find("share=machine") != std::string::npos);
    slices.push_back(p.cpus);
  }
  check_pairwise_disjoint(slices);

  // core-complex: one L3 per socket, so each node's GPUs share the node's one
  // group, with --share machine as in the full job (not disjoint: there is
  // nothing smaller to give).
  for (int i : {0, 5}) {
    gpuaff::Topology one = fixture("dgx-h100", cuda(std::to_string(i)));
    auto p = plan(one, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::core_complex}, .share = Share::machine});
    CHECK(p.cpus == cores(56 * (i / 4), 56, 112));
    CHECK(p.cpus == plan(full, LaunchOptions{.gpu = i, .policy = {.kind = PolicyKind::core_complex}}).cpus);
  }
}

TEST_CASE("eight one-GPU processes on a DGX A100 (NPS4), by CUDA_VISIBLE_DEVICES and by a driver list of one") {
  // GPU i is on node k(i) with one other GPU; rank r = i % 2 on that node.
  // exclusive: 16 cores / 2 = 8 each, from core 16k + 8r; core-complex: the
  // node's four 4-core CCXs, CCX r, from core 16k + 4r. Siblings +128.
  const int node_of[8] = {3, 3, 1, 1, 7, 7, 5, 5};
  const char* bdfs[8] = {"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0",
                         "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"};
  gpuaff::Topology full = fixture("dgx-a100");

  // A copy of the machine whose driver list the test shrinks to one GPU per process.
  gpuaff_test::TempTree tree;
  namespace fs = std::filesystem;
  fs::copy(gpuaff_test::fixture("dgx-a100"), tree.root(), fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::path driver = fs::path(tree.root()) / "proc/driver/nvidia/gpus";
  fs::path stash = fs::path(tree.root()) / "stash";
  fs::create_directory(stash);

  for (PolicyKind kind : {PolicyKind::exclusive, PolicyKind::core_complex}) {
    bool exclusive = kind == PolicyKind::exclusive;
    std::vector<CpuSet> by_variable;
    std::vector<CpuSet> by_driver;
    for (int i = 0; i < 8; ++i) {
      CAPTURE(i);
      CAPTURE(exclusive);
      int r = i % 2;
      CpuSet want = exclusive ? cores(16 * node_of[i] + 8 * r, 8, 128) : cores(16 * node_of[i] + 4 * r, 4, 128);
      CHECK(want == plan(full, LaunchOptions{.gpu = i, .policy = {.kind = kind}}).cpus);

      gpuaff::Topology one = fixture("dgx-a100", cuda(std::to_string(i)));
      auto p = plan(one, LaunchOptions{.gpu = 0, .policy = {.kind = kind}, .share = Share::machine});
      CHECK(p.cpus == want);
      by_variable.push_back(p.cpus);

      for (int j = 0; j < 8; ++j)
        if (j != i) fs::rename(driver / bdfs[j], stash / bdfs[j]);
      gpuaff::Topology contained = load(tree.root());
      for (int j = 0; j < 8; ++j)
        if (j != i) fs::rename(stash / bdfs[j], driver / bdfs[j]);
      REQUIRE(contained.gpus.size() == 1);
      CHECK(bdf(contained.gpus[0]) == bdfs[i]);
      auto q = plan(contained, LaunchOptions{.gpu = 0, .policy = {.kind = kind}, .share = Share::machine});
      CHECK(q.cpus == want);
      by_driver.push_back(q.cpus);
    }
    check_pairwise_disjoint(by_variable);
    check_pairwise_disjoint(by_driver);
  }
}

TEST_CASE("--share machine applies to the splitting policies only, without --nproc") {
  gpuaff::Topology t = fixture("dgx-h100", cuda("3"));
  for (PolicyKind kind : {PolicyKind::node, PolicyKind::socket, PolicyKind::all, PolicyKind::single}) {
    CAPTURE(gpuaff::to_string(kind));
    auto p = gpuaff::make_plan(t, LaunchOptions{.gpu = 0, .policy = {.kind = kind}, .share = Share::machine});
    REQUIRE_FALSE(p);
    CHECK(p.error().code() == Errc::invalid_argument);
    std::string m(p.error().message());
    CHECK(m.find("exclusive, core-complex, single-unique, unique-interleaved or unique-contiguous") !=
          std::string::npos);
  }
  for (PolicyKind kind : {PolicyKind::single_unique, PolicyKind::unique_interleaved, PolicyKind::unique_contiguous}) {
    CAPTURE(gpuaff::to_string(kind));
    // NVIDIA's modes among the host's 8 GPUs: GPU 3 is the fourth of node 0's.
    auto p = gpuaff::make_plan(t, LaunchOptions{.gpu = 0, .policy = {.kind = kind}, .share = Share::machine});
    REQUIRE_MESSAGE(p, (p ? "" : std::string(p.error().message())));
    gpuaff::Topology full = fixture("dgx-h100");
    CHECK(p->cpus == plan(full, LaunchOptions{.gpu = 3, .policy = {.kind = kind}}).cpus);
  }
  // single-unique: one core per GPU, GPU 3 of node 0 takes its node's fourth core.
  CHECK(plan(t, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::single_unique}, .share = Share::machine}).cpus ==
        cpus("3,115"));
  auto n = gpuaff::make_plan(
      t, LaunchOptions{.gpu = 0, .policy = {.kind = PolicyKind::exclusive}, .job = {.nproc = 1}, .share = Share::machine});
  REQUIRE_FALSE(n);
  CHECK(n.error().code() == Errc::invalid_argument);
  CHECK(std::string(n.error().message()).find("nproc=1") != std::string::npos);
}

TEST_CASE("a MIG container: CUDA_VISIBLE_DEVICES=MIG-<uuid> is the one GPU the driver lists") {
  gpuaff::Topology t = fixture("dgx-h100-mig-container", cuda("MIG-7d1e1a1c-2b2b-3c3c-4d4d-5e5e6f6f7a7a"));
  REQUIRE(t.gpus.size() == 1);
  CHECK(bdf(t.gpus[0]) == "0000:52:00.0");
  auto p = plan(t, LaunchOptions{.gpu = 0});
  CHECK(p.node == 0);
  CHECK(p.cpus == cpus("0-55,112-167"));
  // On the whole machine the same value cannot say which of 8 GPUs holds the instance.
  gpuaff::SysfsSource whole(gpuaff::SysfsOptions{.root = gpuaff_test::fixture("dgx-h100"),
                                                 .visible = cuda("MIG-7d1e1a1c-2b2b-3c3c-4d4d-5e5e6f6f7a7a")});
  auto bad = whole.load();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == Errc::invalid_argument);
  CHECK(std::string(bad.error().message()).find("8 NVIDIA GPUs") != std::string::npos);
}

TEST_CASE("Slurm's every-vendor variables on a DGX H100 and on an MI300X machine") {
  // CUDA ignores ROCR_/HIP_VISIBLE_DEVICES: GPU 0 is host GPU 0, node 0.
  gpuaff::Topology h = fixture("dgx-h100", VisibleDevices{.use_environment = false,
                                                          .cuda_visible_devices = "0",
                                                          .rocr_visible_devices = "0"});
  REQUIRE(h.gpus.size() == 1);
  CHECK(bdf(h.gpus[0]) == "0000:1b:00.0");
  CHECK(plan(h, LaunchOptions{.gpu = 0}).cpus == cpus("0-55,112-167"));
  // MI300X: ROCr keeps GPU 0 (0000:05:00.0, node 0 = cores 0-95, siblings +192),
  // HIP reads CUDA_VISIBLE_DEVICES=0 as index 0 of that.
  gpuaff::Topology a = fixture("mi300x", VisibleDevices{.use_environment = false,
                                                        .cuda_visible_devices = "0",
                                                        .rocr_visible_devices = "0"});
  REQUIRE(a.gpus.size() == 1);
  CHECK(bdf(a.gpus[0]) == "0000:05:00.0");
  CHECK(plan(a, LaunchOptions{.gpu = 0}).cpus == cores(0, 96, 192));
}

TEST_CASE("unlike NVIDIA GPUs under CUDA's default order are warned about, naming the variable") {
  // workstation-mixed-gpus: an RTX A6000 (0x2230) and an RTX 4090 (0x2684).
  gpuaff::SysfsSource s(gpuaff::SysfsOptions{.root = gpuaff_test::fixture("workstation-mixed-gpus"),
                                             .visible = {.use_environment = false, .cuda_device_order = ""},
                                             .detail = gpuaff::SysfsDetail::binding});
  auto t = s.load();
  REQUIRE(t);
  auto p = plan(*t, LaunchOptions{.gpu = 0}, LaunchContext{.cuda_device_order = std::string()});
  REQUIRE(p.warnings.size() == 1);
  CHECK(p.warnings[0].find("CUDA_DEVICE_ORDER=PCI_BUS_ID") != std::string::npos);
  CHECK(plan(*t, LaunchOptions{.gpu = 0}, LaunchContext{.cuda_device_order = "PCI_BUS_ID"}).warnings.empty());
  // Binding detail reads the device ids for it only when the order is not PCI_BUS_ID.
  gpuaff::SysfsSource by_bus(gpuaff::SysfsOptions{.root = gpuaff_test::fixture("workstation-mixed-gpus"),
                                                  .visible = {.use_environment = false, .cuda_device_order = "PCI_BUS_ID"},
                                                  .detail = gpuaff::SysfsDetail::binding});
  REQUIRE(by_bus.load());
  CHECK(by_bus.files_opened() + 2 == s.files_opened());
  // Alike GPUs: no warning.
  CHECK(plan(fixture("dgx-h100"), LaunchOptions{.gpu = 0}, LaunchContext{.cuda_device_order = std::string()}).warnings.empty());
}

TEST_CASE("a recording made in a container replays the container, also through JSON") {
  gpuaff_test::TempTree out;
  std::string dir = out.root() + "/rec";
  auto rec = gpuaff::record_topology(
      gpuaff::RecordOptions{.out_dir = dir, .root = gpuaff_test::fixture("dgx-h100-container-gpus45")});
  REQUIRE_MESSAGE(rec, (rec ? "" : std::string(rec.error().message())));
  gpuaff::Topology replay = load(dir);
  gpuaff::Topology original = fixture("dgx-h100-container-gpus45");
  REQUIRE(replay.gpus.size() == 2);
  CHECK(bdf(replay.gpus[0]) == "0000:9d:00.0");
  CHECK(replay.hidden_gpus == original.hidden_gpus);
  CHECK(replay.host_gpus.size() == 8);

  // A container given no NVIDIA GPU: an empty driver list, kept as a directory.
  gpuaff_test::TempTree none;
  namespace fs = std::filesystem;
  fs::copy(gpuaff_test::fixture("dgx-h100-container-gpus45"), none.root(),
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove_all(fs::path(none.root()) / "proc/driver/nvidia/gpus");
  fs::create_directories(fs::path(none.root()) / "proc/driver/nvidia/gpus");
  CHECK(load(none.root()).gpus.empty());
  std::string dir2 = out.root() + "/rec-none";
  REQUIRE(gpuaff::record_topology(gpuaff::RecordOptions{.out_dir = dir2, .root = none.root()}));
  CHECK(fs::is_directory(fs::path(dir2) / "proc/driver/nvidia/gpus"));
  CHECK(load(dir2).gpus.empty());
  CHECK(load(dir2).hidden_gpus.size() == 8);

  // topo --format json keeps the hidden GPUs; reading it back hides them again.
  std::string json = gpuaff::to_json(original);
  CHECK(json.find("\"hidden_gpus\"") != std::string::npos);
  auto parsed = gpuaff::topology_from_json(json, "container.json");
  REQUIRE(parsed);
  CHECK(parsed->hidden_gpus == original.hidden_gpus);
  std::string path = out.root() + "/container.json";
  REQUIRE(gpuaff::detail::write_whole_file(path, json) == 0);
  gpuaff::JsonSource js(gpuaff::JsonSource::Options{.path = path, .visible = {.use_environment = false}});
  auto back = js.load();
  REQUIRE_MESSAGE(back, (back ? "" : std::string(back.error().message())));
  REQUIRE(back->gpus.size() == 2);
  CHECK(bdf(back->gpus[1]) == "0000:c3:00.0");
  CHECK(back->host_gpus.size() == 8);
  // A whole machine's JSON has no hidden_gpus key.
  CHECK(gpuaff::to_json(fixture("dgx-h100")).find("hidden_gpus") == std::string::npos);
}
