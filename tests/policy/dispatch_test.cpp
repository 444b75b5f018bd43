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

TEST_CASE("policy names round-trip, in CONTRACT.md's spelling") {
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
