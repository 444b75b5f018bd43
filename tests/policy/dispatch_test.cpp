// SPDX-License-Identifier: Apache-2.0
// Choosing a policy by name, the BindingPolicy concept (with negative
// models), user-written policies through gpuaff::bind, and bind_all.
#include "policy/machines.hpp"
#include "support/check.hpp"

using namespace gpuaff;
using gpuaff_test::binds;
using gpuaff_test::cpus;
using gpuaff_test::fails;
using gpuaff_test::p4d;
using gpuaff_test::regular_machine;

namespace {
// 2 sockets x 1 node x 4 cores, SMT2 (siblings +8): node0 = 0-3,8-11,
// node1 = 4-7,12-15; GPUs 0,1 on node 0 and 2,3 on node 1. Small enough for
// clang's constexpr step limit across many binds.
constexpr Topology small() {
  return regular_machine({.packages = 2, .cores_per_node = 4, .smt = 2, .gpus = 4, .gpu_nodes = {0, 0, 1, 1}});
}
}  // namespace

// ---- the concept: models and non-models ----------------------------------------

static_assert(BindingPolicy<NodePolicy> && BindingPolicy<SocketPolicy> && BindingPolicy<ExclusivePolicy> &&
              BindingPolicy<CoreComplexPolicy> && BindingPolicy<AllPolicy> && BindingPolicy<SinglePolicy> &&
              BindingPolicy<SingleUniquePolicy> && BindingPolicy<UniqueInterleavedPolicy> &&
              BindingPolicy<UniqueContiguousPolicy>);

namespace {
struct NoBind {};
struct ReturnsBareSet {
  constexpr CpuSet bind(const Topology&, int, const JobOptions&) const { return {}; }
};
struct NonConstBind {
  constexpr Result<CpuSet> bind(const Topology&, int, const JobOptions&) { return CpuSet{}; }
};
struct NoJobParameter {
  constexpr Result<CpuSet> bind(const Topology&, int) const { return CpuSet{}; }
};
struct NotCopyable {
  NotCopyable() = default;
  NotCopyable(const NotCopyable&) = delete;
  constexpr Result<CpuSet> bind(const Topology&, int, const JobOptions&) const { return CpuSet{}; }
};
static_assert(!BindingPolicy<NoBind>);
static_assert(!BindingPolicy<ReturnsBareSet>);
static_assert(!BindingPolicy<NonConstBind>);
static_assert(!BindingPolicy<NoJobParameter>);
static_assert(!BindingPolicy<NotCopyable>);
static_assert(!BindingPolicy<PolicySpec>);

// User-written policies.
struct FirstUsableCpu {  // the lowest usable CPU of the machine
  constexpr Result<CpuSet> bind(const Topology& t, int, const JobOptions&) const {
    return CpuSet::single(t.usable().first());
  }
};
struct OutsideAllowed {
  constexpr Result<CpuSet> bind(const Topology&, int, const JobOptions&) const { return CpuSet{0, 500}; }
};
struct Nothing {
  constexpr Result<CpuSet> bind(const Topology&, int, const JobOptions&) const { return CpuSet{}; }
};
static_assert(BindingPolicy<FirstUsableCpu> && BindingPolicy<OutsideAllowed> && BindingPolicy<Nothing>);
}  // namespace

TEST_CASE("a user-written policy goes through the same bind, which checks its result") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 3, FirstUsableCpu{}, "0"));
  GPUAFF_STATIC_CHECK(fails(p4d(), 3, OutsideAllowed{}, Errc::invalid_argument,
                            "the policy gives GPU 3 (0000:40:00.0) CPUs 500 that are not allowed and online"));
  GPUAFF_STATIC_CHECK(fails(p4d(), 3, Nothing{}, Errc::empty_result, "no CPU"));
  // The shared GPU checks come first.
  GPUAFF_STATIC_CHECK(fails(p4d(), 8, FirstUsableCpu{}, Errc::not_found, "GPU 8 does not exist"));
}

// ---- names ------------------------------------------------------------------------

TEST_CASE("policy names round-trip, in docs/contract.md section 3's spelling") {
  constexpr bool ok = [] {
    for (PolicyKind k : all_policy_kinds) {
      auto r = parse_policy(to_string(k));
      if (!r || *r != k) return false;
    }
    return true;
  }();
  GPUAFF_STATIC_CHECK(ok);
  GPUAFF_STATIC_CHECK(to_string(PolicyKind::core_complex) == "core-complex");
  GPUAFF_STATIC_CHECK(to_string(PolicyKind::unique_contiguous) == "unique-contiguous");
  GPUAFF_STATIC_CHECK(*parse_policy("single-unique") == PolicyKind::single_unique);
  GPUAFF_STATIC_CHECK(*parse_policy("unique_interleaved") == PolicyKind::unique_interleaved);
}

TEST_CASE("an unknown policy name is an error listing the valid names") {
  constexpr bool ok = [] {
    for (std::string_view bad : {"", "Node", "numa", "core complex", "exclusive ", "unique-contiguous-x"}) {
      auto r = parse_policy(bad);
      if (r || r.error().code() != Errc::invalid_argument) return false;
      if (r.error().message().find("valid policies: node, socket, exclusive, core-complex, all, single, "
                                   "single-unique, unique-interleaved, unique-contiguous") == std::string_view::npos)
        return false;
    }
    return true;
  }();
  GPUAFF_STATIC_CHECK(ok);
  CHECK(parse_policy("numa").error().message().find("'numa'") != std::string_view::npos);
}

TEST_CASE("bind by PolicySpec matches the policy object") {
  constexpr bool ok = [] {
    Topology t = small();
    NvidiaOptions o{.smt = Smt::one, .max_cores = 3};
    struct Case {
      PolicyKind kind;
      Result<CpuSet> direct;
    };
    Case cases[] = {
        {PolicyKind::node, bind(t, 3, NodePolicy{})},
        {PolicyKind::socket, bind(t, 3, SocketPolicy{})},
        {PolicyKind::exclusive, bind(t, 3, ExclusivePolicy{})},
        {PolicyKind::core_complex, bind(t, 3, CoreComplexPolicy{})},
        {PolicyKind::all, bind(t, 3, AllPolicy{o})},
        {PolicyKind::single, bind(t, 3, SinglePolicy{o})},
        {PolicyKind::single_unique, bind(t, 3, SingleUniquePolicy{o})},
        {PolicyKind::unique_interleaved, bind(t, 3, UniqueInterleavedPolicy{o})},
        {PolicyKind::unique_contiguous, bind(t, 3, UniqueContiguousPolicy{o})},
    };
    for (const Case& c : cases) {
      auto r = bind(t, 3, PolicySpec{c.kind, o});
      if (!r || !c.direct || *r != *c.direct) return false;
    }
    // And a spot check of the dispatch itself: exclusive GPU 3 = node 1's cores 6-7 (+8).
    return *bind(t, 3, PolicySpec{.kind = PolicyKind::exclusive}) == cpus("6-7,14-15");
  }();
  GPUAFF_STATIC_CHECK(ok);
}

// ---- bind_all ------------------------------------------------------------------------

TEST_CASE("bind_all: one set per participating GPU; exclusive sets tile the machine") {
  constexpr bool ok = [] {
    auto all = bind_all(small(), {.kind = PolicyKind::exclusive});
    if (!all || all->size() != 4) return false;
    CpuSet seen;
    for (const CpuSet& s : *all) {
      if (s.intersects(seen)) return false;
      seen |= s;
    }
    return seen == cpus("0-15") && (*all)[1] == cpus("2-3,10-11");
  }();
  GPUAFF_STATIC_CHECK(ok);
  constexpr bool nproc3 = [] {
    auto all = bind_all(small(), {.kind = PolicyKind::unique_contiguous}, {.nproc = 3});
    // GPUs 0,1 share node 0 (4 cores: 2 each), GPU 2 is alone on node 1 (4
    // cores); balanced per = min(2, 4) = 2, so GPU 2 gets cores 4-5 (+8).
    return all && all->size() == 3 && (*all)[2] == cpus("4-5,12-13");
  }();
  GPUAFF_STATIC_CHECK(nproc3);
}

TEST_CASE("bind_all: the first failing GPU's error, with its index") {
  constexpr bool ok = [] {
    Topology t = small();
    t.allowed = cpus("0-3,8-11");
    auto all = bind_all(t, {.kind = PolicyKind::node});
    return !all && all.error().code() == Errc::empty_result &&
           all.error().message().find("GPU 2: node: GPU 2 (0000:30:00.0) is on NUMA node 1") != std::string_view::npos;
  }();
  GPUAFF_STATIC_CHECK(ok);
}

// ---- bind_table ----------------------------------------------------------------------
// One row per spec, one cell per visible GPU; each cell is what bind() gives
// that GPU (the fixture test checks that cell by cell on every machine); the
// expected sets below come from the machines' layouts.

namespace {
constexpr bool is(const Result<CpuSet>& r, std::string_view list) { return r && *r == cpus(list); }
constexpr bool is_error(const Result<CpuSet>& r, Errc code, std::string_view needle) {
  return !r && r.error().code() == code && r.error().message().find(needle) != std::string_view::npos;
}
// small() with GPU 1 reporting numa_node -1 and no local_cpulist: two nodes
// have CPUs and no flag is given, so nothing settles its node.
constexpr Topology lost() {
  Topology t = small();
  t.gpus[1].pci.numa_node = -1;
  t.gpus[1].pci.has_local_cpus = false;
  return t;
}
}  // namespace

TEST_CASE("bind_table: a row per policy, a cell per visible GPU; GPUs beyond --nproc get bind's error") {
  constexpr bool ok = [] {
    auto table = bind_table(small(), {{.kind = PolicyKind::exclusive}, {.kind = PolicyKind::unique_contiguous}}, {.nproc = 3});
    if (table.size() != 2 || table[0].size() != 4 || table[1].size() != 4) return false;
    // exclusive: node 0 (cores 0-3) split between GPUs 0 and 1; GPU 2 is node
    // 1's only participating GPU (GPU 3 is beyond --nproc 3), so all 4 cores.
    bool exclusive = is(table[0][0], "0-1,8-9") && is(table[0][1], "2-3,10-11") && is(table[0][2], "4-7,12-15") &&
                     is_error(table[0][3], Errc::invalid_argument, "GPU 3 does not take part in the job");
    // unique-contiguous, balanced: per = min(4 cores / 2 GPUs, 4 / 1) = 2.
    bool unique = is(table[1][0], "0-1,8-9") && is(table[1][1], "2-3,10-11") && is(table[1][2], "4-5,12-13") &&
                  is_error(table[1][3], Errc::invalid_argument, "GPU 3 does not take part in the job");
    return exclusive && unique;
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("bind_table: a GPU whose node is unknown fails itself and every GPU whose policy needs it as a peer") {
  constexpr bool ok = [] {
    auto table = bind_table(lost(), {{.kind = PolicyKind::node}, {.kind = PolicyKind::exclusive}});
    // node needs only the GPU's own node; exclusive splits a node among its
    // GPUs, so it needs every participating GPU's node, whatever its own.
    bool node = is(table[0][0], "0-3,8-11") &&
                is_error(table[0][1], Errc::unknown_locality, "GPU 1 (0000:20:00.0) does not say which NUMA node") &&
                is(table[0][2], "4-7,12-15") && is(table[0][3], "4-7,12-15");
    bool exclusive = is_error(table[1][0], Errc::unknown_locality, "to split node 0 among its GPUs") &&
                     is_error(table[1][1], Errc::unknown_locality, "GPU 1 (0000:20:00.0) does not say") &&
                     is_error(table[1][2], Errc::unknown_locality, "to split node 1 among its GPUs") &&
                     is_error(table[1][3], Errc::unknown_locality, "to split node 1 among its GPUs");
    // The other order of rows gives the same cells (facts are shared, not results).
    auto swapped = bind_table(lost(), {{.kind = PolicyKind::exclusive}, {.kind = PolicyKind::node}});
    bool same = true;
    for (std::size_t g = 0; g < 4; ++g) {
      same = same && swapped[0][g].has_value() == table[1][g].has_value() &&
             swapped[1][g].has_value() == table[0][g].has_value();
      if (table[0][g]) same = same && *swapped[1][g] == *table[0][g];
      if (!table[1][g]) same = same && swapped[0][g].error() == table[1][g].error();
    }
    // With node0 for unknown nodes GPU 1 joins node 0 and the split is whole again.
    auto settled = bind_table(lost(), {{.kind = PolicyKind::exclusive}}, {.unknown_node = UnknownNode::node0});
    bool node0 = is(settled[0][0], "0-1,8-9") && is(settled[0][1], "2-3,10-11") && is(settled[0][2], "4-5,12-13") &&
                 is(settled[0][3], "6-7,14-15");
    return node && exclusive && same && node0;
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("bind_table: balanced shares count every node's cores, in one table with unbalanced rows") {
  // GPUs 0-2 on node 0 (cores 0-3, siblings +8), GPU 3 alone on node 1 (cores 4-7).
  constexpr bool ok = [] {
    Topology t = regular_machine({.packages = 2, .cores_per_node = 4, .smt = 2, .gpus = 4, .gpu_nodes = {0, 0, 0, 1}});
    auto table = bind_table(t, {{.kind = PolicyKind::unique_contiguous},
                                {.kind = PolicyKind::unique_contiguous, .nvidia = {.balanced = false}},
                                {.kind = PolicyKind::unique_interleaved}});
    // Balanced: per = min(4 / 3, 4 / 1) = 1 core each, GPU 3 too.
    bool balanced = is(table[0][0], "0,8") && is(table[0][1], "1,9") && is(table[0][2], "2,10") && is(table[0][3], "4,12");
    // Unbalanced: node 0 still gives 4 / 3 = 1 each; GPU 3 takes all of node 1.
    bool unbalanced = is(table[1][0], "0,8") && is(table[1][1], "1,9") && is(table[1][2], "2,10") &&
                      is(table[1][3], "4-7,12-15");
    // Interleaved, balanced: the first 3 * 1 cores of node 0 dealt by stride 3,
    // the first 1 * 1 of node 1 to GPU 3.
    bool interleaved = is(table[2][0], "0,8") && is(table[2][1], "1,9") && is(table[2][2], "2,10") &&
                       is(table[2][3], "4,12");
    return balanced && unbalanced && interleaved;
  }();
  GPUAFF_STATIC_CHECK(ok);
}

// ---- the registry --------------------------------------------------------------------

TEST_CASE("the registry: one row per PolicyKind, from which names and parse errors come") {
  GPUAFF_STATIC_CHECK(policy_registry.size() == 9);
  GPUAFF_STATIC_CHECK(policy_names() ==
                      std::string_view("node, socket, exclusive, core-complex, all, single, single-unique, "
                                       "unique-interleaved, unique-contiguous"));
  constexpr bool rows = [] {
    for (const PolicyInfo& p : policy_registry) {
      if (policy_info(p.kind).name != p.name || to_string(p.kind) != p.name) return false;
      if (!p.alternate.empty() && parse_policy(p.alternate) != p.kind) return false;
      // The five NVIDIA modes, and only they, read NvidiaOptions.
      if (p.nvidia_options != (p.origin == "NVIDIA")) return false;
      if (p.description.empty()) return false;
    }
    return true;
  }();
  GPUAFF_STATIC_CHECK(rows);
  GPUAFF_STATIC_CHECK(!policy_info(PolicyKind::exclusive).nvidia_options);
  GPUAFF_STATIC_CHECK(policy_info(PolicyKind::unique_contiguous).nvidia_options);
  GPUAFF_STATIC_CHECK(parse_policy("core_complex") == PolicyKind::core_complex);
  // Help: a line per row, in registry order; the NVIDIA rows say their options apply.
  GPUAFF_STATIC_CHECK(policy_help().view().starts_with("  node                the allowed CPUs of the GPU's NUMA node\n"
                                                       "  socket              "));
  GPUAFF_STATIC_CHECK(policy_help().view().ends_with(
      "  unique-contiguous   the node's cores cut into one contiguous run per GPU (NVIDIA's default) (NVIDIA options apply)\n"));
  // A row's binding is gpuaff::bind's: exclusive GPU 3 = node 1's cores 6-7 (+8).
  constexpr bool row_binds = [] {
    Topology t = small();
    BindingContext ctx(t);
    return policy_info(PolicyKind::exclusive).bind(ctx, 3, {}) == cpus("6-7,14-15");
  }();
  GPUAFF_STATIC_CHECK(row_binds);
}

// ---- the toolkit for own policies ------------------------------------------------------

TEST_CASE("BindingContext: a GPU's node, its share of the node, the node's CPUs and cores") {
  constexpr bool ok = [] {
    Topology t = small();
    BindingContext ctx(t, {.nproc = 3});
    bool nodes = ctx.gpu_node(1) == 0 && ctx.gpu_node(2) == 1 && ctx.check_gpu(2) == 3 &&
                 ctx.check_gpu(3).error().code() == Errc::invalid_argument;
    // With --nproc 3, node 1 holds GPU 2 only; node 0 holds GPUs 0 and 1.
    auto s1 = ctx.node_share(1);
    auto s2 = ctx.node_share(2);
    bool shares = s1 && s1->node == 0 && s1->rank == 1 && s1->count == 2 && s2 && s2->node == 1 && s2->rank == 0 &&
                  s2->count == 1;
    bool facts = ctx.node_cpus(1) == cpus("4-7,12-15") && ctx.cores(1).size() == 4 && ctx.core_count(0) == 4 &&
                 ctx.cores(1).threads(0) == cpus("4,12") && ctx.cores(1).threads(2, 2, Smt::one) == cpus("6-7") &&
                 ctx.node_cpus(9).empty();
    bool all = ctx.all_gpu_nodes("test") == 3 && ctx.known_node(2) == 1;
    return nodes && shares && facts && all;
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("physical_cores: CPUs of no listed core are entries of their own, in key order among the cores") {
  constexpr bool ok = [] {
    // 1 package, 4 cores, SMT2: cores {0,4} {1,5} {2,6} {3,7}. Drop {1,5} and
    // {3,7} from the core list (a topology whose sibling files were missing
    // for them): CPUs 1, 3, 5 and 7 are then cores by themselves, and sorted
    // by key the entries are 0 {0,4}, 1, 2 {2,6}, 3, 5, 7.
    Topology t = regular_machine({.packages = 1, .cores_per_node = 4, .smt = 2, .gpus = 1, .gpu_nodes = {0}});
    t.cores.erase(t.cores.begin() + 3);
    t.cores.erase(t.cores.begin() + 1);
    CoreList c = physical_cores(t, cpus("0-7"));
    bool keys = c.size() == 6 && c.key(0) == 0 && c.key(1) == 1 && c.key(2) == 2 && c.key(3) == 3 && c.key(4) == 5 &&
                c.key(5) == 7;
    bool threads = c.threads(0) == cpus("0,4") && c.threads(1) == cpus("1") && c.threads(2) == cpus("2,6") &&
                   c.threads(4) == cpus("5") && c.threads(0, 3, Smt::one) == cpus("0-2");
    // Only CPUs 5 and 7 asked for: the lone CPUs come after the cores' key 2.
    CoreList d = physical_cores(t, cpus("2,5-7"));
    bool some = d.size() == 3 && d.key(0) == 2 && d.key(1) == 5 && d.key(2) == 7 && d.threads(0) == cpus("2,6");
    return keys && threads && some;
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("share: contiguous parts, the remainder one core more each to the lowest parts") {
  constexpr bool ok = [] {
    // 2 sockets x 5 cores, SMT2: node 0 = cores 0-4 (siblings 10-14).
    Topology t = regular_machine({.packages = 2, .cores_per_node = 5, .smt = 2, .gpus = 1, .gpu_nodes = {0}});
    CoreList cores = physical_cores(t, cpus("0-4,10-14"));
    // 5 cores in 3 parts: 2, 2, 1.
    return cores.size() == 5 && share(cores, 3, 0) == cpus("0-1,10-11") && share(cores, 3, 1) == cpus("2-3,12-13") &&
           share(cores, 3, 2) == cpus("4,14") && share(cores, 3, 2, Smt::one) == cpus("4") && share(cores, 3, 3).empty() &&
           share(cores, 0, 0).empty() && share(cores, 6, 5).empty();
  }();
  GPUAFF_STATIC_CHECK(ok);
}
