// SPDX-License-Identifier: Apache-2.0
// Where a GPU is: resolve_gpu_node (including numa_node -1), memory_nodes,
// with_pci_target and the GPU/nproc checks every policy shares.
#include "policy/machines.hpp"
#include "support/check.hpp"

using namespace gpuaff;
using gpuaff_test::binds;
using gpuaff_test::cpus;
using gpuaff_test::fails;
using gpuaff_test::p4d;
using gpuaff_test::regular_machine;

namespace {
// 2 sockets x 1 node x 2 cores, no SMT: node0 = 0-1, node1 = 2-3. Both GPUs
// report numa_node -1 and, as the kernel does then, every online CPU as local.
constexpr Topology unknown_two_nodes() {
  return regular_machine({.packages = 2, .cores_per_node = 2, .gpus = 2, .gpu_nodes = {-1, -1}});
}
// A VM with one CPU node and a memory-only node; its GPU says numa_node -1.
constexpr Topology unknown_one_cpu_node() {
  return regular_machine({.cores_per_node = 4, .memory_only_nodes = 1, .gpus = 1, .gpu_nodes = {-1}});
}

constexpr bool node_is(const Topology& t, int gpu, int node, const JobOptions& job = {}) {
  auto r = resolve_gpu_node(t, gpu, job);
  return r && *r == node;
}
constexpr bool node_fails(const Topology& t, int gpu, Errc code, std::string_view needle, const JobOptions& job = {}) {
  auto r = resolve_gpu_node(t, gpu, job);
  return !r && r.error().code() == code && r.error().message().find(needle) != std::string_view::npos;
}
}  // namespace

TEST_CASE("a known numa_node is the GPU's node") {
  GPUAFF_STATIC_CHECK(node_is(p4d(), 0, 0));
  GPUAFF_STATIC_CHECK(node_is(p4d(), 7, 1));
}

TEST_CASE("a numa_node the topology does not list is an error") {
  constexpr auto t = [] {
    Topology x = p4d();
    x.gpus[2].pci.numa_node = 5;
    return x;
  };
  GPUAFF_STATIC_CHECK(node_fails(t(), 2, Errc::not_found, "GPU 2 (0000:30:00.0) reports NUMA node 5, which the topology does not have (nodes: 0-1)"));
}

TEST_CASE("numa_node -1 on a machine with one CPU node: that node") {
  GPUAFF_STATIC_CHECK(node_is(unknown_one_cpu_node(), 0, 0));
  GPUAFF_STATIC_CHECK(binds(unknown_one_cpu_node(), 0, NodePolicy{}, "0-3"));
}

TEST_CASE("numa_node -1 whose local_cpulist is exactly one node: that node") {
  constexpr auto t = [] {
    Topology x = unknown_two_nodes();
    x.gpus[0].pci.local_cpus = cpus("2-3");
    return x;
  };
  GPUAFF_STATIC_CHECK(node_is(t(), 0, 1));
  GPUAFF_STATIC_CHECK(binds(t(), 0, NodePolicy{}, "2-3", {.nproc = 1}));
}

TEST_CASE("numa_node -1: local_cpulist is compared on online CPUs") {
  // CPU 3 is offline: node 1 lists 2 only, the device still lists 2-3.
  constexpr auto t = [] {
    Topology x = unknown_two_nodes();
    x.online = cpus("0-2");
    x.nodes[1].cpus = cpus("2");
    x.gpus[0].pci.local_cpus = cpus("2-3");
    return x;
  };
  GPUAFF_STATIC_CHECK(node_is(t(), 0, 1));
}

TEST_CASE("numa_node -1 that nothing settles is an error naming the device and the ways out") {
  GPUAFF_STATIC_CHECK(node_fails(unknown_two_nodes(), 0, Errc::unknown_locality,
                                 "GPU 0 (0000:10:00.0) does not say which NUMA node it is on (numa_node -1, "
                                 "local_cpulist 0-3 matches no single node of 2)"));
  GPUAFF_STATIC_CHECK(node_fails(unknown_two_nodes(), 0, Errc::unknown_locality,
                                 "pass unknown_node=N to name its node, unknown_node=node0 for PyTorch's "
                                 "behaviour, or fallback=unbound"));
  GPUAFF_STATIC_CHECK(fails(unknown_two_nodes(), 1, NodePolicy{}, Errc::unknown_locality, "GPU 1"));
}

TEST_CASE("numa_node -1 with --unknown-node N: node N, which must exist") {
  GPUAFF_STATIC_CHECK(node_is(unknown_two_nodes(), 0, 1, {.assume_node = 1}));
  GPUAFF_STATIC_CHECK(binds(unknown_two_nodes(), 1, NodePolicy{}, "2-3", {.assume_node = 1}));
  GPUAFF_STATIC_CHECK(node_fails(unknown_two_nodes(), 0, Errc::invalid_argument,
                                 "unknown_node=5 names a NUMA node this machine does not have (nodes: 0-1)",
                                 {.assume_node = 5}));
  GPUAFF_STATIC_CHECK(node_fails(unknown_two_nodes(), 0, Errc::invalid_argument, "unknown_node=-3",
                                 {.assume_node = -3}));
}

TEST_CASE("numa_node -1 with --unknown-node node0: PyTorch's node 0") {
  GPUAFF_STATIC_CHECK(node_is(unknown_two_nodes(), 1, 0, {.unknown_node = UnknownNode::node0}));
  // Both GPUs land on node 0, so exclusive splits node 0 between them.
  GPUAFF_STATIC_CHECK(binds(unknown_two_nodes(), 1, ExclusivePolicy{}, "1", {.unknown_node = UnknownNode::node0}));
}

TEST_CASE("--unknown-node node0 without a node 0: the lowest node with CPUs") {
  // Sparse ids: node 1 is memory-only, nodes 2 and 3 have the CPUs.
  constexpr auto t = [] {
    Topology x = unknown_two_nodes();
    x.nodes[0].id = 2;
    x.nodes[1].id = 3;
    x.nodes.insert(x.nodes.begin(), NumaNode{1, {}, {}});
    return x;
  };
  GPUAFF_STATIC_CHECK(node_is(t(), 0, 2, {.unknown_node = UnknownNode::node0}));
}

TEST_CASE("GPU indices outside the visible GPUs or the job are errors") {
  GPUAFF_STATIC_CHECK(node_fails(p4d(), 8, Errc::not_found, "GPU 8 does not exist: 8 GPUs are visible (indices 0-7)"));
  GPUAFF_STATIC_CHECK(node_fails(p4d(), -1, Errc::not_found, "GPU -1 does not exist"));
  GPUAFF_STATIC_CHECK(node_fails(p4d(), 4, Errc::invalid_argument,
                                 "GPU 4 does not take part in the job: nproc=4 makes GPUs 0-3 the job's GPUs",
                                 {.nproc = 4}));
  GPUAFF_STATIC_CHECK(node_fails(p4d(), 0, Errc::invalid_argument, "nproc=9 is more than the 8 visible GPUs",
                                 {.nproc = 9}));
  GPUAFF_STATIC_CHECK(node_fails(p4d(), 0, Errc::invalid_argument, "nproc=-1 is negative", {.nproc = -1}));
  constexpr auto none = [] { return regular_machine({}); };
  GPUAFF_STATIC_CHECK(node_fails(none(), 0, Errc::not_found, "no GPU is visible"));
}

TEST_CASE("a peer of unknown locality stops policies that split a node, not the node policy") {
  constexpr auto t = [] {
    Topology x = unknown_two_nodes();
    x.gpus[0].pci.numa_node = 0;
    x.gpus[0].pci.local_cpus = cpus("0-1");
    return x;
  };
  GPUAFF_STATIC_CHECK(binds(t(), 0, NodePolicy{}, "0-1"));
  GPUAFF_STATIC_CHECK(fails(t(), 0, ExclusivePolicy{}, Errc::unknown_locality,
                            "to split node 0 among its GPUs, every GPU of the job needs a known node: GPU 1"));
  GPUAFF_STATIC_CHECK(fails(t(), 0, UniqueContiguousPolicy{}, Errc::unknown_locality, "GPU 1 (0000:20:00.0)"));
  // With --nproc 1, GPU 1 is not part of the job.
  GPUAFF_STATIC_CHECK(binds(t(), 0, ExclusivePolicy{}, "0-1", {.nproc = 1}));
}

TEST_CASE("memory_nodes: the GPU's resolved node") {
  constexpr auto nodes_of = [](const Topology& t, int gpu, const JobOptions& job = {}) {
    auto r = memory_nodes(t, gpu, job);
    return r ? *r : NodeSet{999};
  };
  GPUAFF_STATIC_CHECK(nodes_of(p4d(), 5) == NodeSet{1});
  GPUAFF_STATIC_CHECK(nodes_of(p4d(), 0) == NodeSet{0});
  GPUAFF_STATIC_CHECK(nodes_of(unknown_two_nodes(), 0, {.assume_node = 1}) == NodeSet{1});
  // GB200-like: GPU memory nodes 2 and 3 exist, but the GPU's node is its CPU node.
  constexpr auto gb = [] {
    return regular_machine({.packages = 2, .cores_per_node = 2, .memory_only_nodes = 2, .gpus = 2, .gpu_nodes = {0, 1}});
  };
  GPUAFF_STATIC_CHECK(nodes_of(gb(), 1) == NodeSet{1});
}

TEST_CASE("memory_nodes does not depend on Mems_allowed_list (applying reports that)") {
  constexpr bool ok = [] {
    Topology t = p4d();
    t.mems_allowed = NodeSet{0};
    auto r = memory_nodes(t, 5);
    return r && *r == NodeSet{1};
  }();
  GPUAFF_STATIC_CHECK(ok);
}

namespace {
// p4d plus a NIC (not a GPU) on node 1.
constexpr Topology p4d_with_nic() {
  Topology t = p4d();
  PciDevice nic;
  nic.address = PciAddress::parse("0000:a0:00.0").value();
  nic.vendor = 0x15b3;
  nic.class_code = 0x020000;
  nic.numa_node = 1;
  nic.local_cpus = cpus("24-47,72-95");
  nic.has_local_cpus = true;
  t.pci_devices.push_back(nic);
  return t;
}
}  // namespace

TEST_CASE("with_pci_target: a non-GPU device becomes the single GPU") {
  constexpr bool ok = [] {
    int index = -1;
    auto t = with_pci_target(p4d_with_nic(), PciAddress::parse("0000:a0:00.0").value(), &index);
    return t && index == 0 && t->gpus.size() == 1 && binds(*t, index, NodePolicy{}, "24-47,72-95") &&
           binds(*t, index, ExclusivePolicy{}, "24-47,72-95") && binds(*t, index, UniqueContiguousPolicy{}, "24-47,72-95");
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("with_pci_target: a visible GPU keeps the topology and its index") {
  constexpr bool ok = [] {
    int index = -1;
    auto t = with_pci_target(p4d_with_nic(), PciAddress::parse("0000:30:00.0").value(), &index);
    return t && index == 2 && t->gpus.size() == 8 && binds(*t, index, ExclusivePolicy{}, "12-17,60-65");
  }();
  GPUAFF_STATIC_CHECK(ok);
}

TEST_CASE("with_pci_target: an unknown device is an error, and errors name the device") {
  constexpr bool ok = [] {
    auto missing = with_pci_target(p4d(), PciAddress::parse("0000:ee:00.0").value(), nullptr);
    Topology base = p4d_with_nic();
    base.allowed = cpus("0-23");
    int index = -1;
    auto t = with_pci_target(base, PciAddress::parse("0000:a0:00.0").value(), &index);
    return !missing && missing.error().code() == Errc::not_found &&
           missing.error().message().find("0000:ee:00.0") != std::string_view::npos && t &&
           fails(*t, index, NodePolicy{}, Errc::empty_result, "device 0000:a0:00.0 is on NUMA node 1");
  }();
  GPUAFF_STATIC_CHECK(ok);
}
