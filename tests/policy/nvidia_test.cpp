// SPDX-License-Identifier: Apache-2.0
// NVIDIA gpu_affinity's five modes with scope, SMT, balanced and min/max
// options: exact sets derived from the topology, checked at compile time.
#include "policy/machines.hpp"
#include "support/check.hpp"

using namespace gpuaff;
using gpuaff_test::binds;
using gpuaff_test::cpus;
using gpuaff_test::fails;
using gpuaff_test::p4d;
using gpuaff_test::regular_machine;

namespace {
constexpr NvidiaOptions one_thread{.smt = Smt::one};
constexpr NvidiaOptions unbalanced{.balanced = false};
constexpr NvidiaOptions socket_scope{.scope = Scope::socket};

// 2 sockets x 1 node x 6 cores, no SMT: node0 = 0-5, node1 = 6-11; GPUs 0,1
// on node 0, GPUs 2,3 on node 1; the allowed set hides CPUs 10-11, so node 1
// has 4 allowed cores and node 0 has 6.
constexpr Topology uneven() {
  Topology t = regular_machine({.packages = 2, .cores_per_node = 6, .gpus = 4, .gpu_nodes = {0, 0, 1, 1}});
  t.allowed = cpus("0-9");
  return t;
}
constexpr Topology uneven_allowed(std::string_view list) {
  Topology t = uneven();
  t.allowed = cpus(list);
  return t;
}

// One socket, 3 nodes x 2 cores, no SMT: node0 = 0-1, node1 = 2-3, node2 = 4-5.
constexpr Topology three_nodes(int gpus, std::array<int, 16> nodes, std::string_view allowed = "0-5") {
  Topology t = regular_machine({.nodes_per_package = 3, .cores_per_node = 2, .gpus = gpus, .gpu_nodes = nodes});
  t.allowed = cpus(allowed);
  return t;
}
}  // namespace

// ---- p4d.24xlarge, every mode ---------------------------------------------------

TEST_CASE("unique-contiguous (the default mode): p4d GPUs get 6 consecutive cores of their node") {
  // per = min over nodes of 24 cores / 4 GPUs = 6; GPU1 is GPU 1 of node 0.
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, UniqueContiguousPolicy{}, "6-11,54-59"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 6, UniqueContiguousPolicy{}, "36-41,84-89"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, UniqueContiguousPolicy{one_thread}, "6-11"));
}

TEST_CASE("unique-interleaved: p4d GPU j of 4 takes cores j, j+4, ...") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, UniqueInterleavedPolicy{}, "1,5,9,13,17,21,49,53,57,61,65,69"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 4, UniqueInterleavedPolicy{one_thread}, "24,28,32,36,40,44"));
}

TEST_CASE("single: the node's GPUs share its first core") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, SinglePolicy{}, "0,48"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 3, SinglePolicy{}, "0,48"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 5, SinglePolicy{one_thread}, "24"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 3, SinglePolicy{socket_scope}, "0,48"));
}

TEST_CASE("single-unique: the first core no lower GPU took") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, SingleUniquePolicy{}, "0,48"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 3, SingleUniquePolicy{}, "3,51"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 6, SingleUniquePolicy{}, "26,74"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 6, SingleUniquePolicy{socket_scope}, "26,74"));
}

TEST_CASE("all: every core of the node, max_cores keeps the first") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 5, AllPolicy{}, "24-47,72-95"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, AllPolicy{{.smt = Smt::one, .max_cores = 2}}, "0-1"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, AllPolicy{{.max_cores = 2}}, "0-1,48-49"));
}

// ---- balanced and unbalanced ------------------------------------------------------

TEST_CASE("balanced: every GPU gets the smallest share of any node") {
  // node0: 6 cores / 2 GPUs = 3, node1: 4 allowed cores / 2 GPUs = 2 -> per = 2.
  GPUAFF_STATIC_CHECK(binds(uneven(), 0, UniqueContiguousPolicy{}, "0-1"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 1, UniqueContiguousPolicy{}, "2-3"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 2, UniqueContiguousPolicy{}, "6-7"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 3, UniqueContiguousPolicy{}, "8-9"));
  // Interleaved deals only the first 2*2 cores of node 0: 0,2 and 1,3.
  GPUAFF_STATIC_CHECK(binds(uneven(), 0, UniqueInterleavedPolicy{}, "0,2"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 1, UniqueInterleavedPolicy{}, "1,3"));
}

TEST_CASE("unbalanced: each node splits all its cores") {
  GPUAFF_STATIC_CHECK(binds(uneven(), 0, UniqueContiguousPolicy{unbalanced}, "0-2"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 1, UniqueContiguousPolicy{unbalanced}, "3-5"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 3, UniqueContiguousPolicy{unbalanced}, "8-9"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 0, UniqueInterleavedPolicy{unbalanced}, "0,2,4"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 1, UniqueInterleavedPolicy{unbalanced}, "1,3,5"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 3, UniqueInterleavedPolicy{unbalanced}, "7,9"));
}

TEST_CASE("min_cores and max_cores act on physical cores") {
  GPUAFF_STATIC_CHECK(fails(uneven(), 0, UniqueContiguousPolicy{{.min_cores = 3}}, Errc::insufficient_cores,
                            "gets 2 physical cores, fewer than the minimum of 3"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 0, UniqueContiguousPolicy{{.balanced = false, .min_cores = 3}}, "0-2"));
  GPUAFF_STATIC_CHECK(fails(uneven(), 2, UniqueContiguousPolicy{{.balanced = false, .min_cores = 3}},
                            Errc::insufficient_cores, "GPU 2"));
  GPUAFF_STATIC_CHECK(binds(uneven(), 1, UniqueContiguousPolicy{{.balanced = false, .max_cores = 1}}, "3"));
  GPUAFF_STATIC_CHECK(fails(p4d(), 0, AllPolicy{{.min_cores = 25}}, Errc::insufficient_cores, "minimum of 25"));
}

TEST_CASE("bad NVIDIA options are errors") {
  GPUAFF_STATIC_CHECK(fails(p4d(), 0, AllPolicy{{.min_cores = -1}}, Errc::invalid_argument, "min_cores=-1"));
  GPUAFF_STATIC_CHECK(fails(p4d(), 0, UniqueContiguousPolicy{{.max_cores = -2}}, Errc::invalid_argument, "max_cores=-2"));
  GPUAFF_STATIC_CHECK(fails(p4d(), 0, UniqueInterleavedPolicy{{.min_cores = 3, .max_cores = 2}}, Errc::invalid_argument,
                            "above max_cores=2"));
  GPUAFF_STATIC_CHECK(fails(p4d(), 0, SinglePolicy{{.min_cores = 2}}, Errc::invalid_argument, "min_cores=2"));
}

// ---- a GPU's node without allowed CPU ---------------------------------------------

TEST_CASE("a node without allowed CPU fails its own GPUs only, naming GPU and node") {
  // Allowed 0-5: node 1 has none. Balanced per ignores node 1: 6/2 = 3.
  GPUAFF_STATIC_CHECK(binds(uneven_allowed("0-5"), 0, UniqueContiguousPolicy{}, "0-2"));
  GPUAFF_STATIC_CHECK(binds(uneven_allowed("0-5"), 1, UniqueContiguousPolicy{}, "3-5"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-5"), 2, UniqueContiguousPolicy{}, Errc::empty_result,
                            "GPU 2 (0000:30:00.0) is on NUMA node 1, which has no allowed CPU"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-5"), 3, UniqueInterleavedPolicy{}, Errc::empty_result, "NUMA node 1"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-5"), 2, SinglePolicy{}, Errc::empty_result, "NUMA node 1"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-5"), 2, SingleUniquePolicy{}, Errc::empty_result, "NUMA node 1"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-5"), 2, AllPolicy{}, Errc::empty_result, "NUMA node 1"));
}

TEST_CASE("a node with fewer cores than GPUs fails its own GPUs only") {
  // Node 1 keeps one allowed core (6) for 2 GPUs; node 0 keeps per = 3.
  GPUAFF_STATIC_CHECK(binds(uneven_allowed("0-6"), 0, UniqueContiguousPolicy{}, "0-2"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-6"), 2, UniqueContiguousPolicy{}, Errc::insufficient_cores,
                            "only 1 physical cores on node 1 but 2 GPUs"));
  // Unbalanced interleaved deals core 6 to GPU 2; GPU 3 gets nothing.
  GPUAFF_STATIC_CHECK(binds(uneven_allowed("0-6"), 2, UniqueInterleavedPolicy{unbalanced}, "6"));
  GPUAFF_STATIC_CHECK(fails(uneven_allowed("0-6"), 3, UniqueInterleavedPolicy{unbalanced}, Errc::insufficient_cores,
                            "only 1 physical cores on node 1"));
}

TEST_CASE("single-unique: more GPUs than cores is an error, not a crash") {
  constexpr auto t = [] { return regular_machine({.cores_per_node = 2, .gpus = 3, .gpu_nodes = {0, 0, 0}}); };
  GPUAFF_STATIC_CHECK(binds(t(), 1, SingleUniquePolicy{}, "1"));
  GPUAFF_STATIC_CHECK(fails(t(), 2, SingleUniquePolicy{}, Errc::insufficient_cores,
                            "only 2 physical cores on node 0 but 3 GPUs"));
}

// ---- SMT ------------------------------------------------------------------------

TEST_CASE("smt one takes the lowest allowed thread of each core") {
  // two sockets x 4 cores, SMT2 (siblings +8); CPU 0 is not allowed, so core
  // {0,8} is the allowed thread 8 and stays the first core of node 0.
  constexpr auto t = [] {
    Topology x = regular_machine({.packages = 2, .cores_per_node = 4, .smt = 2, .gpus = 1, .gpu_nodes = {0}});
    x.allowed = cpus("1-15");
    return x;
  };
  GPUAFF_STATIC_CHECK(binds(t(), 0, SinglePolicy{one_thread}, "8"));
  GPUAFF_STATIC_CHECK(binds(t(), 0, AllPolicy{one_thread}, "1-3,8"));
}

TEST_CASE("SMT4 with strided siblings: four threads per core, or the lowest with smt one") {
  // 4 cores, core c = {c, c+4, c+8, c+12}; 2 GPUs -> 2 cores each.
  constexpr auto t = [] { return regular_machine({.cores_per_node = 4, .smt = 4, .gpus = 2, .gpu_nodes = {0, 0}}); };
  GPUAFF_STATIC_CHECK(binds(t(), 1, UniqueContiguousPolicy{}, "2-3,6-7,10-11,14-15"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, UniqueContiguousPolicy{one_thread}, "2-3"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, SingleUniquePolicy{}, "1,5,9,13"));
}

// ---- socket scope -------------------------------------------------------------------

TEST_CASE("socket scope: spare cores go round-robin to the socket's GPU-local cores, in ascending order") {
  // Two GPUs on node 0 (cores 0,1); the socket's spare allowed cores are 2,3,4
  // (core 5 not allowed): 2 -> core 0, 3 -> core 1, 4 -> core 0.
  constexpr std::array<int, 16> on_node0{0, 0};
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, on_node0, "0-4"), 0, UniqueContiguousPolicy{socket_scope}, "0,2,4"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, on_node0, "0-4"), 1, UniqueContiguousPolicy{socket_scope}, "1,3"));
  // Node scope drops the extras.
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, on_node0, "0-4"), 0, UniqueContiguousPolicy{}, "0"));
  // Node core first, then its extras in order: max 2 keeps 0 and 2.
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, on_node0, "0-4"), 0,
                            UniqueContiguousPolicy{{.scope = Scope::socket, .max_cores = 2}}, "0,2"));
  // single / single-unique keep one core: the node core.
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, on_node0, "0-4"), 0, SinglePolicy{socket_scope}, "0"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, on_node0, "0-4"), 1, SingleUniquePolicy{socket_scope}, "1"));
}

TEST_CASE("socket scope: the result lists all node cores, then the first extras, then the second") {
  // One GPU on node 0: core 0 carries 2 and 4, core 1 carries 3 and 5.
  // Order: 0, 1, 2, 3, 4, 5; max_cores cuts that order.
  constexpr std::array<int, 16> one_gpu{0};
  GPUAFF_STATIC_CHECK(binds(three_nodes(1, one_gpu), 0, UniqueContiguousPolicy{socket_scope}, "0-5"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(1, one_gpu), 0,
                            UniqueContiguousPolicy{{.scope = Scope::socket, .max_cores = 3}}, "0-2"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(1, one_gpu), 0,
                            UniqueContiguousPolicy{{.scope = Scope::socket, .max_cores = 5}}, "0-4"));
  // Every extra is kept when some cores carry more than others (allowed 0-4:
  // core 0 carries 2,4 and core 1 carries 3): 0,1,2,3,4.
  GPUAFF_STATIC_CHECK(binds(three_nodes(1, one_gpu, "0-4"), 0, UniqueContiguousPolicy{socket_scope}, "0-4"));
}

TEST_CASE("socket scope: the round-robin runs over every GPU node of the socket") {
  // GPUs on nodes 0 and 2: local cores 0,1,4,5 (ascending); spare 2,3 go to
  // cores 0 and 1; the node-2 GPU gets no extras.
  constexpr std::array<int, 16> nodes02{0, 2};
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, nodes02), 0, UniqueContiguousPolicy{socket_scope}, "0-3"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, nodes02), 1, UniqueContiguousPolicy{socket_scope}, "4-5"));
  // all: the socket, GPU-local cores first (0,1,4,5), then 2,3.
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, nodes02), 1, AllPolicy{socket_scope}, "0-5"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, nodes02), 1, AllPolicy{{.scope = Scope::socket, .max_cores = 3}}, "0-1,4"));
  GPUAFF_STATIC_CHECK(binds(three_nodes(2, nodes02), 1, AllPolicy{{.scope = Scope::socket, .max_cores = 5}}, "0-2,4-5"));
}

TEST_CASE("socket scope needs package information") {
  constexpr auto t = [] {
    Topology x = three_nodes(1, {0});
    x.packages.clear();
    return x;
  };
  GPUAFF_STATIC_CHECK(fails(t(), 0, UniqueContiguousPolicy{socket_scope}, Errc::not_found, "use scope=node"));
  GPUAFF_STATIC_CHECK(binds(t(), 0, UniqueContiguousPolicy{}, "0-1"));
}
