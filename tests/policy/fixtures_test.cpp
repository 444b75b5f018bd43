// SPDX-License-Identifier: Apache-2.0
// Every policy on every fixture tree, read by the sysfs reader: properties
// that must hold on any machine, and exact sets on the machines whose layout
// is public (derived in comments from fixtures/README.md).
#include <gpuaff/policy/policy.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/check.hpp"

using namespace gpuaff;

namespace {

VisibleDevices every_gpu() {
  VisibleDevices v;
  v.use_environment = false;  // the test's own CUDA_VISIBLE_DEVICES must not matter
  return v;
}

Topology load(const std::string& name, std::vector<PciAddress> extra = {}) {
  SysfsSource source(SysfsOptions{.root = gpuaff_test::fixture(name), .visible = every_gpu(), .extra_pci = std::move(extra)});
  auto t = source.load();
  REQUIRE_MESSAGE(t, name << ": " << t.error().message());
  return *t;
}

std::vector<std::string> fixture_trees() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(GPUAFF_FIXTURES_DIR))
    if (e.is_directory() && std::filesystem::exists(e.path() / "sys")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_pytorch(PolicyKind k) {
  return k == PolicyKind::node || k == PolicyKind::socket || k == PolicyKind::exclusive || k == PolicyKind::core_complex;
}
bool is_disjoint_kind(PolicyKind k) {
  return k == PolicyKind::exclusive || k == PolicyKind::single_unique || k == PolicyKind::unique_interleaved ||
         k == PolicyKind::unique_contiguous;
}

std::vector<PolicySpec> every_spec() {
  std::vector<PolicySpec> out;
  for (PolicyKind k : all_policy_kinds) {
    if (is_pytorch(k)) {
      out.push_back({k, {}});
      continue;
    }
    for (Scope scope : {Scope::node, Scope::socket})
      for (Smt smt : {Smt::all, Smt::one})
        for (bool balanced : {true, false}) out.push_back({k, {.scope = scope, .smt = smt, .balanced = balanced}});
  }
  return out;
}

std::string describe(const PolicySpec& s, const JobOptions& job) {
  std::string d(to_string(s.kind));
  if (!is_pytorch(s.kind)) {
    d += s.nvidia.scope == Scope::node ? " scope=node" : " scope=socket";
    d += s.nvidia.smt == Smt::all ? " smt=all" : " smt=one";
    d += s.nvidia.balanced ? " balanced" : " unbalanced";
  }
  if (job.unknown_node == UnknownNode::node0) d += " unknown-node=node0";
  return d;
}

/// The properties of one policy over every GPU of one machine.
void check_properties(const std::string& name, const Topology& t, const PolicySpec& spec, const JobOptions& job) {
  INFO(name << ": " << describe(spec, job));
  const CpuSet usable = t.usable();
  const int gpus = static_cast<int>(t.gpus.size());
  std::vector<Result<CpuSet>> results;
  for (int g = 0; g < gpus; ++g) results.push_back(bind(t, g, spec, job));

  for (int g = 0; g < gpus; ++g) {
    INFO("GPU " << g);
    const auto& r = results[static_cast<std::size_t>(g)];
    if (!r) {
      // A typed error with a sentence, never a crash or an empty mask.
      Errc c = r.error().code();
      CHECK_MESSAGE((c == Errc::empty_result || c == Errc::insufficient_cores || c == Errc::unknown_locality),
                    r.error().message());
      CHECK(!r.error().message().empty());
      continue;
    }
    CHECK(r->any());
    CHECK(r->is_subset_of(usable));
    bool one_thread = !is_pytorch(spec.kind) && spec.nvidia.smt == Smt::one;
    for (const Core& core : t.cores) {
      CpuSet mine = core.threads & usable & *r;
      if (mine.empty()) continue;
      if (one_thread) CHECK_MESSAGE(mine.count() == 1, "core " << core.threads.to_list() << " gives " << mine.to_list());
      else CHECK_MESSAGE(mine == (core.threads & usable), "core " << core.threads.to_list() << " is split: " << mine.to_list());
    }
  }

  if (is_disjoint_kind(spec.kind)) {
    for (int a = 0; a < gpus; ++a)
      for (int b = a + 1; b < gpus; ++b) {
        const auto& ra = results[static_cast<std::size_t>(a)];
        const auto& rb = results[static_cast<std::size_t>(b)];
        if (ra && rb) CHECK_MESSAGE(!ra->intersects(*rb), "GPUs " << a << " and " << b << " overlap");
      }
  }

  if (spec.kind == PolicyKind::exclusive) {
    // Every node whose GPUs all bound is covered exactly by their sets.
    for (const NumaNode& n : t.nodes) {
      CpuSet covered;
      bool complete = true;
      int here = 0;
      for (int g = 0; g < gpus; ++g) {
        auto node = resolve_gpu_node(t, g, job);
        if (!node || *node != n.id) continue;
        ++here;
        const auto& r = results[static_cast<std::size_t>(g)];
        if (!r) complete = false;
        else covered |= *r;
      }
      if (here > 0 && complete) CHECK_MESSAGE(covered == (n.cpus & usable), "node " << n.id);
    }
  }
}

}  // namespace

TEST_CASE("every fixture x every GPU x every policy: inside the allowed set, whole cores, disjoint where promised") {
  auto trees = fixture_trees();
  REQUIRE(trees.size() >= 10);
  const auto specs = every_spec();
  for (const std::string& name : trees) {
    Topology t = load(name);
    for (JobOptions job : {JobOptions{}, JobOptions{.unknown_node = UnknownNode::node0}})
      for (const PolicySpec& spec : specs) check_properties(name, t, spec, job);
    // memory_nodes is the resolved node, one node.
    for (int g = 0; g < static_cast<int>(t.gpus.size()); ++g) {
      auto nodes = memory_nodes(t, g, {.unknown_node = UnknownNode::node0});
      auto node = resolve_gpu_node(t, g, {.unknown_node = UnknownNode::node0});
      REQUIRE(node);
      REQUIRE(nodes);
      CHECK(*nodes == NodeSet::single(*node));
    }
  }
}

// ---- exact sets on the public machines ------------------------------------------------

TEST_CASE("fixture p4d.24xlarge: node, exclusive, unique-contiguous") {
  Topology t = load("p4d.24xlarge");
  CHECK(bind(t, 0, NodePolicy{})->to_list() == "0-23,48-71");
  CHECK(bind(t, 5, NodePolicy{})->to_list() == "24-47,72-95");
  // 24 cores per node, 4 GPUs: 6 each; GPU 1 = cores 6-11 + siblings 54-59.
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "6-11,54-59");
  CHECK(bind(t, 7, ExclusivePolicy{})->to_list() == "42-47,90-95");
  CHECK(bind(t, 1, UniqueContiguousPolicy{})->to_list() == "6-11,54-59");
  CHECK(memory_nodes(t, 6).value() == NodeSet{1});
}

TEST_CASE("fixture p4d.24xlarge: --pci of the EFA binds its node; the ENA without a node asks") {
  auto pci = [](const char* s) { return PciAddress::parse(s).value(); };
  Topology t = load("p4d.24xlarge", {pci("0000:90:1b.0"), pci("0000:00:05.0")});
  int index = -1;
  auto efa = with_pci_target(t, pci("0000:90:1b.0"), &index);
  REQUIRE(efa);
  CHECK(bind(*efa, index, NodePolicy{})->to_list() == "24-47,72-95");
  auto ena = with_pci_target(t, pci("0000:00:05.0"), &index);
  REQUIRE(ena);
  auto r = bind(*ena, index, NodePolicy{});
  REQUIRE(!r);
  CHECK(r.error().code() == Errc::unknown_locality);
  CHECK(r.error().message().find("device 0000:00:05.0") != std::string_view::npos);
  CHECK(bind(*ena, index, NodePolicy{}, {.unknown_node = UnknownNode::node0})->to_list() == "0-23,48-71");
}

TEST_CASE("fixture dgx-h100: unique-contiguous gives GPU k cores 14k..14k+13 and siblings +112") {
  Topology t = load("dgx-h100");
  for (int k = 0; k < 8; ++k) {
    CAPTURE(k);
    CpuSet want = CpuSet::range(14 * k, 14 * k + 13) | CpuSet::range(14 * k + 112, 14 * k + 125);
    CHECK(bind(t, k, UniqueContiguousPolicy{}).value() == want);
    CHECK(bind(t, k, ExclusivePolicy{}).value() == want);
  }
  CHECK(bind(t, 0, NodePolicy{})->to_list() == "0-55,112-167");
  CHECK(bind(t, 0, SocketPolicy{})->to_list() == "0-55,112-167");
}

TEST_CASE("fixture dgx-a100: GPU0 and GPU1 share node 3") {
  Topology t = load("dgx-a100");
  CHECK(bind(t, 0, UniqueContiguousPolicy{})->to_list() == "48-55,176-183");
  CHECK(bind(t, 1, UniqueContiguousPolicy{})->to_list() == "56-63,184-191");
  // socket scope adds the round-robin extras 32-39 / 40-47 (see machines_test).
  CHECK(bind(t, 0, UniqueContiguousPolicy{{.scope = Scope::socket}})->to_list() == "32-39,48-55,160-167,176-183");
  // core-complex: node 3's first CCX (4 cores) for GPU 0, the second for GPU 1.
  CHECK(bind(t, 0, CoreComplexPolicy{})->to_list() == "48-51,176-179");
  CHECK(bind(t, 1, CoreComplexPolicy{})->to_list() == "52-55,180-183");
  CHECK(bind(t, 0, SocketPolicy{})->to_list() == "0-63,128-191");
}

TEST_CASE("fixture container-half-node: the cpuset bounds everything; node-1 GPUs get an error") {
  // Host node0 = 0-15,32-47; the container allows 8-15,40-47 (8 cores of node 0).
  Topology t = load("container-half-node");
  CHECK(bind(t, 0, NodePolicy{})->to_list() == "8-15,40-47");
  // 8 allowed cores, GPUs 0 and 1: 4 each.
  CHECK(bind(t, 0, ExclusivePolicy{})->to_list() == "8-11,40-43");
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "12-15,44-47");
  // Socket mode skips node 1, which has no allowed CPU.
  CHECK(bind(t, 0, SocketPolicy{})->to_list() == "8-15,40-47");
  auto r = bind(t, 2, UniqueContiguousPolicy{});
  REQUIRE(!r);
  CHECK(r.error().code() == Errc::empty_result);
  CHECK(r.error().message().find("NUMA node 1") != std::string_view::npos);
  // Balanced: node 1 is left out of the minimum, so GPU 0 still gets 8/2 = 4 cores.
  CHECK(bind(t, 0, UniqueContiguousPolicy{})->to_list() == "8-11,40-43");
  // Memory goes to the GPU's node; Mems_allowed_list (0) is the apply layer's concern.
  CHECK(memory_nodes(t, 0).value() == NodeSet{0});
}

TEST_CASE("fixture cloud-vm-numa-unknown: local_cpulist settles GPU 0, GPU 1 needs a flag") {
  Topology t = load("cloud-vm-numa-unknown");
  CHECK(resolve_gpu_node(t, 0).value() == 1);
  CHECK(bind(t, 0, NodePolicy{})->to_list() == "16-31");
  auto r = bind(t, 1, NodePolicy{});
  REQUIRE(!r);
  CHECK(r.error().code() == Errc::unknown_locality);
  CHECK(r.error().message().find("unknown_node=") != std::string_view::npos);
  CHECK(bind(t, 1, NodePolicy{}, {.assume_node = 1})->to_list() == "16-31");
  CHECK(bind(t, 1, NodePolicy{}, {.unknown_node = UnknownNode::node0})->to_list() == "0-15");
}

TEST_CASE("fixture single-node-numa-minus1: the only node, without any flag") {
  Topology t = load("single-node-numa-minus1");
  REQUIRE(t.gpus.size() == 4);
  // 16 cores SMT2 on one node, 4 GPUs: exclusive gives 4 cores each.
  for (int g = 0; g < 4; ++g) CHECK(bind(t, g, NodePolicy{}).value() == t.usable());
  CHECK(bind(t, 0, ExclusivePolicy{})->count() == 8);
}

TEST_CASE("fixture gb200-tray: memory-only GPU nodes neither crash socket mode nor take the memory binding") {
  // Grace 0 = node 0 = CPUs 0-71, Grace 1 = node 1 = 72-143; GPU memory on nodes 2, 10, 18, 26.
  Topology t = load("gb200-tray");
  CHECK(bind(t, 0, SocketPolicy{})->to_list() == "0-71");
  CHECK(bind(t, 3, SocketPolicy{})->to_list() == "72-143");
  CHECK(memory_nodes(t, 0).value() == NodeSet{0});
  CHECK(memory_nodes(t, 2).value() == NodeSet{1});
  // 72 cores, 2 GPUs per Grace, no SMT: 36 each.
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "36-71");
}

TEST_CASE("fixture smt4: adjacent SMT4 siblings stay together") {
  // POWER9: node 0 = CPUs 0-63 (16 cores of 4 adjacent threads), 2 GPUs there.
  Topology t = load("smt4");
  CHECK(bind(t, 0, ExclusivePolicy{})->to_list() == "0-31");
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "32-63");
  CHECK(bind(t, 1, UniqueContiguousPolicy{{.smt = Smt::one}})->to_list() == "32,36,40,44,48,52,56,60");
}

TEST_CASE("fixture smt4-strided: strided SMT4 siblings stay together") {
  // Knights Landing: core c = {c, c+64, c+128, c+192}, one GPU on node 0.
  Topology t = load("smt4-strided");
  REQUIRE(t.gpus.size() >= 1);
  CHECK(bind(t, 0, SingleUniquePolicy{})->to_list() == "0,64,128,192");
  CHECK(bind(t, 0, UniqueContiguousPolicy{{.smt = Smt::one}}, {.nproc = 1})->to_list() == "0-63");
}

TEST_CASE("fixture azure-ndv4: GPU order is not node order") {
  // 4 nodes of 24 vCPUs without SMT, 2 per socket; GPUs 0,1 on node 1 (24-47),
  // 2,3 on node 0; the last-level caches hold 3 vCPUs each.
  Topology t = load("azure-ndv4");
  CHECK(bind(t, 0, NodePolicy{})->to_list() == "24-47");
  CHECK(bind(t, 2, NodePolicy{})->to_list() == "0-23");
  CHECK(bind(t, 0, ExclusivePolicy{})->to_list() == "24-35");
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "36-47");
  CHECK(bind(t, 0, SocketPolicy{})->to_list() == "0-47");  // nodes 0 and 1 share socket 0
  CHECK(bind(t, 0, CoreComplexPolicy{})->to_list() == "24-26");
  CHECK(bind(t, 1, CoreComplexPolicy{})->to_list() == "27-29");
  CHECK(bind(t, 1, UniqueInterleavedPolicy{{.max_cores = 3}})->to_list() == "25,27,29");
}

TEST_CASE("fixture mi300x: AMD GPUs, 8-core CCDs") {
  // 2 nodes of 96 cores, SMT2 (+192), 4 GPUs per node: 24 cores each;
  // CCDs of 8 cores: GPU 1 takes node 0's second CCD.
  Topology t = load("mi300x");
  REQUIRE(t.gpus.size() == 8);
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "24-47,216-239");
  CHECK(bind(t, 1, CoreComplexPolicy{})->to_list() == "8-15,200-207");
  CHECK(bind(t, 5, UniqueContiguousPolicy{{.smt = Smt::one}})->to_list() == "120-143");
}

TEST_CASE("fixture granite-rapids-snc3: the GPU's node is a third of a socket; exclusive splits it, socket spans three") {
  // fixtures/README.md: 2 sockets x 128 cores, SMT2 (siblings +256), SNC3:
  // node 3s+d = compute die d of socket s, of 43, 43 and 42 cores; GPUs 0,1 on
  // node 0, 2,3 on node 2, 4,5 on node 3, 6,7 on node 5; one L3 per socket.
  Topology t = load("granite-rapids-snc3");
  REQUIRE(t.gpus.size() == 8);
  REQUIRE(t.nodes.size() == 6);
  // node: the die's cores and their siblings, the same for both GPUs of a node.
  CHECK(bind(t, 0, NodePolicy{})->to_list() == "0-42,256-298");
  CHECK(bind(t, 1, NodePolicy{})->to_list() == "0-42,256-298");
  CHECK(bind(t, 2, NodePolicy{})->to_list() == "86-127,342-383");
  CHECK(bind(t, 7, NodePolicy{})->to_list() == "214-255,470-511");
  // socket: the three nodes of the package, the GPU-less middle node 1 (or 4) included.
  CHECK(bind(t, 0, SocketPolicy{})->to_list() == "0-127,256-383");
  CHECK(bind(t, 6, SocketPolicy{})->to_list() == "128-255,384-511");
  // exclusive: node 0 has 43 cores for 2 GPUs: 21 each, the odd one to GPU 0
  // (cores 0-21, then 22-42); node 2 has 42: 21 each (86-106, 107-127).
  CHECK(bind(t, 0, ExclusivePolicy{})->to_list() == "0-21,256-277");
  CHECK(bind(t, 1, ExclusivePolicy{})->to_list() == "22-42,278-298");
  CHECK(bind(t, 2, ExclusivePolicy{})->to_list() == "86-106,342-362");
  CHECK(bind(t, 3, ExclusivePolicy{})->to_list() == "107-127,363-383");
  CHECK(bind(t, 4, ExclusivePolicy{})->to_list() == "128-149,384-405");
  CHECK(bind(t, 7, ExclusivePolicy{})->to_list() == "235-255,491-511");
  // core-complex: the socket's one L3 meets node 0 in the whole node, so each
  // GPU of the node gets all of it (one group for two GPUs).
  CHECK(bind(t, 0, CoreComplexPolicy{})->to_list() == "0-42,256-298");
  CHECK(bind(t, 1, CoreComplexPolicy{})->to_list() == "0-42,256-298");
  // unique-contiguous, balanced: every GPU gets the smallest per-GPU count of
  // any node with GPUs, min(43/2, 42/2) = 21 cores, from the node's first core.
  CHECK(bind(t, 0, UniqueContiguousPolicy{})->to_list() == "0-20,256-276");
  CHECK(bind(t, 1, UniqueContiguousPolicy{})->to_list() == "21-41,277-297");
  CHECK(bind(t, 3, UniqueContiguousPolicy{})->to_list() == "107-127,363-383");
  // memory: the GPU's own node under node and exclusive.
  CHECK(memory_nodes(t, 2).value() == NodeSet{2});
  // distances: 12 within the socket, 21 across (the SLIT modelled).
  const NumaNode* n0 = t.find_node(0);
  REQUIRE(n0 != nullptr);
  CHECK(n0->distances == std::vector<int>{10, 12, 12, 21, 21, 21});
}

// ---- bind_table and bind_all against bind, GPU by GPU ------------------------------
// bind_table derives the facts the bindings share (nodes, allowed CPUs,
// physical cores, cache groups, sockets) once for every GPU and policy;
// bind derives them for one binding. Sharing must change nothing: every cell,
// error or set, equals the binding of that GPU alone, and bind_all is the
// per-GPU bindings of the participating GPUs or the first one's error with
// its index. Checked on every fixture and on variants that make bindings
// fail in different ways: a node outside the allowed set (empty_result for
// its GPUs only), GPU 0's node unknown (unknown_locality for GPU 0, and for
// every GPU whose policy needs its peers' nodes), --nproc below and above
// the GPU count, and node0 for unknown nodes.

namespace {

std::string show(const Result<CpuSet>& r) {
  if (r) return r->to_list();
  return "error " + std::to_string(static_cast<int>(r.error().code())) + ": " + std::string(r.error().message());
}

void check_table_against_bind(const std::string& name, const Topology& t) {
  int n = static_cast<int>(t.gpus.size());
  std::vector<PolicySpec> specs = every_spec();
  specs.push_back({PolicyKind::unique_contiguous, {.max_cores = 3}});
  specs.push_back({PolicyKind::all, {.smt = Smt::one, .min_cores = 2}});
  std::vector<JobOptions> jobs = {{}, {.nproc = 1}, {.nproc = n > 1 ? n - 1 : 1}, {.nproc = n + 1},
                                  {.unknown_node = UnknownNode::node0}};
  for (const JobOptions& job : jobs) {
    auto table = bind_table(t, specs, job);
    REQUIRE(table.size() == specs.size());
    for (std::size_t s = 0; s < specs.size(); ++s) {
      INFO(name << ": " << describe(specs[s], job) << " nproc=" << job.nproc);
      REQUIRE(table[s].size() == t.gpus.size());
      // Each GPU's answer alone, computed once for both comparisons.
      std::vector<decltype(bind(t, 0, specs[s], job))> alone;
      for (int g = 0; g < n; ++g) alone.push_back(bind(t, g, specs[s], job));
      for (int g = 0; g < n; ++g)
        CHECK(show(table[s][static_cast<std::size_t>(g)]) == show(alone[static_cast<std::size_t>(g)]));
      // bind_all: the participating GPUs' sets, or the first failure "GPU g: ...".
      auto all = bind_all(t, specs[s], job);
      auto participating = job.nproc == 0 ? n : job.nproc;
      if (participating > n) {
        CHECK(!all);
        continue;
      }
      std::string expected;
      int failed = -1;
      for (int g = 0; g < participating && failed < 0; ++g) {
        const auto& r = alone[static_cast<std::size_t>(g)];
        if (!r) {
          failed = g;
          expected = "error " + std::to_string(static_cast<int>(r.error().code())) + ": GPU " + std::to_string(g) +
                     ": " + std::string(r.error().message());
        } else {
          expected += r->to_list() + ";";
        }
      }
      std::string got;
      if (!all)
        got = "error " + std::to_string(static_cast<int>(all.error().code())) + ": " + std::string(all.error().message());
      else
        for (const CpuSet& c : *all) got += c.to_list() + ";";
      // An error message is cut at Error::max_message; compare what fits.
      CHECK(got.substr(0, 600) == expected.substr(0, 600));
    }
  }
}

}  // namespace

TEST_CASE("every fixture: bind_table and bind_all give exactly what bind gives GPU by GPU, errors included") {
  for (const auto& name : fixture_trees()) {
    Topology t = load(name);
    if (t.gpus.empty()) continue;
    check_table_against_bind(name, t);
    if (!t.nodes.empty() && t.nodes.size() > 1) {
      Topology cut = t;
      cut.allowed -= t.nodes[0].cpus;  // GPUs of node 0: empty_result; the rest still bind
      check_table_against_bind(name + " without node 0", cut);
      Topology lost = t;
      lost.gpus[0].pci.numa_node = -1;  // GPU 0's node unknown: it fails, and so do policies that need it as a peer
      lost.gpus[0].pci.has_local_cpus = false;
      check_table_against_bind(name + " with GPU 0's node unknown", lost);
    }
  }
}
