// SPDX-License-Identifier: Apache-2.0
// PyTorch's four modes (node, socket, exclusive, core-complex): exact sets on
// small machines and on the p4d.24xlarge shape, checked at compile time.
#include "policy/machines.hpp"
#include "support/check.hpp"

using namespace gpuaff;
using gpuaff_test::binds;
using gpuaff_test::cpus;
using gpuaff_test::fails;
using gpuaff_test::MachineSpec;
using gpuaff_test::p4d;
using gpuaff_test::regular_machine;

namespace {
// 2 sockets x 1 node x 4 cores, SMT2 (siblings +8): node0 = 0-3,8-11,
// node1 = 4-7,12-15; GPUs 0,1 on node 0, GPU 2 on node 1.
constexpr Topology two_node() {
  return regular_machine({.packages = 2, .cores_per_node = 4, .smt = 2, .gpus = 3, .gpu_nodes = {0, 0, 1}});
}
// The same with the allowed set of a container: `list`.
constexpr Topology two_node_allowed(std::string_view list) {
  Topology t = two_node();
  t.allowed = cpus(list);
  return t;
}
// GB200-like: 2 sockets x 1 node x 2 cores (no SMT), plus memory-only nodes 2 and 3.
constexpr Topology with_memory_nodes() {
  return regular_machine({.packages = 2, .cores_per_node = 2, .memory_only_nodes = 2, .gpus = 2, .gpu_nodes = {0, 1}});
}
// One socket with 2 nodes of 2 cores (no SMT) and a memory-only node 2; GPU on node 1.
constexpr Topology one_socket_two_nodes() {
  return regular_machine({.nodes_per_package = 2, .cores_per_node = 2, .memory_only_nodes = 1, .gpus = 1, .gpu_nodes = {1}});
}
}  // namespace

// ---- node -------------------------------------------------------------------

TEST_CASE("node: p4d.24xlarge GPUs get their whole node") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, NodePolicy{}, "0-23,48-71"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 3, NodePolicy{}, "0-23,48-71"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 4, NodePolicy{}, "24-47,72-95"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 7, NodePolicy{}, "24-47,72-95"));
}

TEST_CASE("node: a container's allowed set bounds the node") {
  GPUAFF_STATIC_CHECK(binds(two_node_allowed("1-2,9-10,13"), 0, NodePolicy{}, "1-2,9-10"));
  GPUAFF_STATIC_CHECK(binds(two_node_allowed("1-2,9-10,13"), 2, NodePolicy{}, "13"));
}

TEST_CASE("node: offline CPUs are never bound, even when the allowed set names them") {
  constexpr bool ok = [] {
    Topology t = two_node();
    t.allowed = CpuSet::range(0, 63);  // a recorded allowed set naming absent CPUs
    t.online.reset(8);
    return binds(t, 0, NodePolicy{}, "0-3,9-11");
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("node: a node outside the allowed set is an error naming the node and both sets") {
  GPUAFF_STATIC_CHECK(fails(two_node_allowed("0-3"), 2, NodePolicy{}, Errc::empty_result,
                            "GPU 2 (0000:30:00.0) is on NUMA node 1, which has no allowed CPU (node CPUs: 4-7,12-15; "
                            "allowed CPUs: 0-3)"));
}

// ---- socket -----------------------------------------------------------------

TEST_CASE("socket: p4d.24xlarge has one node per socket, so socket equals node") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, SocketPolicy{}, "0-23,48-71"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 6, SocketPolicy{}, "24-47,72-95"));
}

TEST_CASE("socket: every CPU node of the socket, memory-only nodes skipped") {
  // Nodes 0 and 1 share package 0; node 2 has no CPU and no lowest CPU to place.
  GPUAFF_STATIC_CHECK(binds(one_socket_two_nodes(), 0, SocketPolicy{}, "0-3"));
}

TEST_CASE("socket: GB200-like memory-only nodes do not crash it") {
  // Package 0 = node 0 = CPUs 0-1; nodes 2 and 3 hold GPU memory only.
  GPUAFF_STATIC_CHECK(binds(with_memory_nodes(), 0, SocketPolicy{}, "0-1"));
  GPUAFF_STATIC_CHECK(binds(with_memory_nodes(), 1, SocketPolicy{}, "2-3"));
}

TEST_CASE("socket: CPUs of the socket in no node's list (a lost cpulist) are an error, not left out") {
  // Node 0 lost its list: CPUs 0-1 of package 0 are in no node. The socket's
  // share was node 1's alone ("2-3"), the lost CPUs silently left out.
  constexpr bool ok = [] {
    Topology t = one_socket_two_nodes();
    t.nodes[0].cpus = CpuSet{};
    return fails(t, 0, SocketPolicy{}, Errc::parse_error, "CPUs 0-1 of the package of");
  }();
  GPUAFF_STATIC_CHECK(ok);
  // The node policy does not depend on node 0.
  constexpr bool node_ok = [] {
    Topology t = one_socket_two_nodes();
    t.nodes[0].cpus = CpuSet{};
    return binds(t, 0, NodePolicy{}, "2-3");
  }();
  GPUAFF_STATIC_CHECK(node_ok);
}

TEST_CASE("socket: nodes with no allowed CPU (a container pinned to one node) are skipped") {
  constexpr bool ok = [] {
    Topology t = one_socket_two_nodes();
    t.allowed = cpus("2-3");  // node 0 of the same socket is outside the container
    return binds(t, 0, SocketPolicy{}, "2-3");
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("socket: the GPU's own node without allowed CPU is an error") {
  GPUAFF_STATIC_CHECK(fails(two_node_allowed("0-3"), 2, SocketPolicy{}, Errc::empty_result, "NUMA node 1"));
}

TEST_CASE("socket: a topology without packages is an error, not a crash") {
  constexpr bool ok = [] {
    Topology t = two_node();
    t.packages.clear();
    return fails(t, 0, SocketPolicy{}, Errc::not_found, "no package");
  }();
  GPUAFF_STATIC_CHECK(ok);
}

// ---- exclusive ----------------------------------------------------------------

TEST_CASE("exclusive: p4d.24xlarge splits each node's 24 cores 6 per GPU") {
  // Node 0: cores 0-23 (siblings +48), 4 GPUs: per = 24/4 = 6, no remainder.
  // GPU r gets cores 6r..6r+5 with their siblings.
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, ExclusivePolicy{}, "0-5,48-53"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, ExclusivePolicy{}, "6-11,54-59"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 3, ExclusivePolicy{}, "18-23,66-71"));
  // GPU 4 is the first GPU of node 1 (cores 24-47).
  GPUAFF_STATIC_CHECK(binds(p4d(), 4, ExclusivePolicy{}, "24-29,72-77"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 7, ExclusivePolicy{}, "42-47,90-95"));
}

TEST_CASE("exclusive: leftover cores go one each to the lowest GPUs") {
  // One node of 8 cores, 3 GPUs: per = 2, extra = 2 -> GPU0 cores 0-2,
  // GPU1 cores 3-5, GPU2 cores 6-7.
  constexpr auto t = [] { return regular_machine({.cores_per_node = 8, .gpus = 3, .gpu_nodes = {0, 0, 0}}); };
  GPUAFF_STATIC_CHECK(binds(t(), 0, ExclusivePolicy{}, "0-2"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, ExclusivePolicy{}, "3-5"));
  GPUAFF_STATIC_CHECK(binds(t(), 2, ExclusivePolicy{}, "6-7"));
}

TEST_CASE("exclusive: siblings stay together; partly allowed cores count as cores") {
  // Allowed 0-3,8: cores {0,8}, {1}, {2}, {3} on node 0, 2 GPUs -> 2 cores each.
  GPUAFF_STATIC_CHECK(binds(two_node_allowed("0-3,8"), 0, ExclusivePolicy{}, "0-1,8"));
  GPUAFF_STATIC_CHECK(binds(two_node_allowed("0-3,8"), 1, ExclusivePolicy{}, "2-3"));
}

TEST_CASE("exclusive: SMT4 with strided siblings keeps all four threads of a core") {
  // 4 cores, SMT4: core c = {c, c+4, c+8, c+12}; 2 GPUs -> cores 0,1 and 2,3.
  constexpr auto t = [] { return regular_machine({.cores_per_node = 4, .smt = 4, .gpus = 2, .gpu_nodes = {0, 0}}); };
  GPUAFF_STATIC_CHECK(binds(t(), 0, ExclusivePolicy{}, "0-1,4-5,8-9,12-13"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, ExclusivePolicy{}, "2-3,6-7,10-11,14-15"));
}

TEST_CASE("exclusive: SMT4 with adjacent numbering groups by the topology's cores") {
  // POWER-style: core k = CPUs 4k..4k+3, 3 cores, 2 GPUs: per 1, extra 1.
  constexpr auto t = [] {
    Topology x = regular_machine({.cores_per_node = 12, .gpus = 2, .gpu_nodes = {0, 0}});
    x.cores = {{cpus("0-3"), 0}, {cpus("4-7"), 0}, {cpus("8-11"), 0}};
    return x;
  };
  GPUAFF_STATIC_CHECK(binds(t(), 0, ExclusivePolicy{}, "0-7"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, ExclusivePolicy{}, "8-11"));
}

TEST_CASE("exclusive: only the job's GPUs (--nproc) share the node") {
  // p4d with nproc 2: GPUs 0 and 1 take node 0's 24 cores, 12 each.
  constexpr JobOptions two{.nproc = 2};
  GPUAFF_STATIC_CHECK(binds(p4d(), 0, ExclusivePolicy{}, "0-11,48-59", two));
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, ExclusivePolicy{}, "12-23,60-71", two));
  GPUAFF_STATIC_CHECK(fails(p4d(), 2, ExclusivePolicy{}, Errc::invalid_argument, "nproc=2", two));
}

TEST_CASE("exclusive: fewer cores than GPUs names both counts") {
  // Node 0 of two_node with only CPUs 0 and 8 allowed: 1 core, 2 GPUs.
  GPUAFF_STATIC_CHECK(fails(two_node_allowed("0,8,4-7"), 0, ExclusivePolicy{}, Errc::insufficient_cores,
                            "only 1 physical cores on node 0 but 2 GPUs"));
  constexpr auto t = [] { return regular_machine({.cores_per_node = 2, .gpus = 3, .gpu_nodes = {0, 0, 0}}); };
  GPUAFF_STATIC_CHECK(fails(t(), 2, ExclusivePolicy{}, Errc::insufficient_cores, "only 2 physical cores on node 0 but 3 GPUs"));
}

// ---- core-complex -------------------------------------------------------------

TEST_CASE("core-complex: p4d.24xlarge has one L3 per socket, so every GPU gets its node") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 2, CoreComplexPolicy{}, "0-23,48-71"));
  GPUAFF_STATIC_CHECK(binds(p4d(), 5, CoreComplexPolicy{}, "24-47,72-95"));
}

TEST_CASE("core-complex: one cache group per GPU, shared round-robin when GPUs outnumber groups") {
  // One node of 8 cores, 4-core complexes {0-3}, {4-7}; 3 GPUs: r % 2.
  constexpr auto t = [] {
    return regular_machine({.cores_per_node = 8, .cores_per_complex = 4, .gpus = 3, .gpu_nodes = {0, 0, 0}});
  };
  GPUAFF_STATIC_CHECK(binds(t(), 0, CoreComplexPolicy{}, "0-3"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, CoreComplexPolicy{}, "4-7"));
  GPUAFF_STATIC_CHECK(binds(t(), 2, CoreComplexPolicy{}, "0-3"));
}

TEST_CASE("core-complex: groups with more allowed CPUs come first") {
  // A container removes CPU 0: group {1-3} (3 CPUs) sorts after {4-7} (4 CPUs).
  constexpr auto t = [] {
    Topology x = regular_machine({.cores_per_node = 8, .cores_per_complex = 4, .gpus = 2, .gpu_nodes = {0, 0}});
    x.allowed = cpus("1-7");
    return x;
  };
  GPUAFF_STATIC_CHECK(binds(t(), 0, CoreComplexPolicy{}, "4-7"));
  GPUAFF_STATIC_CHECK(binds(t(), 1, CoreComplexPolicy{}, "1-3"));
}

TEST_CASE("core-complex: a node without allowed CPU is an error, not a division by zero") {
  GPUAFF_STATIC_CHECK(fails(two_node_allowed("0-3"), 2, CoreComplexPolicy{}, Errc::empty_result,
                            "NUMA node 1, which has no allowed CPU (node CPUs: 4-7,12-15; allowed CPUs: 0-3)"));
}

TEST_CASE("core-complex: without cache information the node is one group") {
  constexpr auto t = [] {
    Topology x = two_node();
    x.core_complexes.clear();
    return x;
  };
  GPUAFF_STATIC_CHECK(binds(t(), 1, CoreComplexPolicy{}, "0-3,8-11"));
}
