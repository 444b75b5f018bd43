// SPDX-License-Identifier: Apache-2.0
// Whole machines: DGX H100, DGX A100 and p4d.24xlarge built in code, every
// GPU and every policy. The DGX expectations follow NVIDIA's own published
// test matrix for gpu_affinity (same sets for balanced and unbalanced, for
// SMT all and one); the PyTorch ones are derived from the layout in comments.
#include "policy/machines.hpp"
#include "support/check.hpp"

using namespace gpuaff;
using gpuaff_test::binds;
using gpuaff_test::cpus;
using gpuaff_test::dgx_a100;
using gpuaff_test::dgx_h100;
using gpuaff_test::p4d;

// Binding a 224- or 256-CPU machine takes a few million constexpr steps:
// within GCC's default limit, beyond clang's (1M), where it runs at run time.
#if defined(__clang__)
#define BIG_STATIC_CHECK(...) CHECK(__VA_ARGS__)
#else
#define BIG_STATIC_CHECK(...) GPUAFF_STATIC_CHECK(__VA_ARGS__)
#endif

namespace {
/// Physical cores first, first+step, ... below `end`, with their sibling
/// `offset` (0: no sibling, the smt one case).
constexpr CpuSet span(int first, int end, int step = 1, int offset = 0) {
  CpuSet s;
  for (int c = first; c < end; c += step) {
    s.set(c);
    if (offset > 0) s.set(c + offset);
  }
  return s;
}

/// Checks bind(t, gpu, P{options}) == expected(gpu, offset) for every GPU,
/// balanced and unbalanced, SMT all (offset = sibling offset) and one (offset 0).
template <class P, class Expected>
void check_matrix(const Topology& t, int sibling_offset, Scope scope, Expected expected, NvidiaOptions base = {}) {
  for (bool balanced : {true, false}) {
    for (Smt smt : {Smt::all, Smt::one}) {
      NvidiaOptions o = base;
      o.scope = scope;
      o.balanced = balanced;
      o.smt = smt;
      for (int gpu = 0; gpu < static_cast<int>(t.gpus.size()); ++gpu) {
        CAPTURE(gpu);
        CAPTURE(balanced);
        CAPTURE(static_cast<int>(smt));
        CAPTURE(static_cast<int>(scope));
        auto r = bind(t, gpu, P{o});
        REQUIRE_MESSAGE(r, r.error().message());
        CHECK(r->to_list() == expected(gpu, smt == Smt::all ? sibling_offset : 0).to_list());
      }
    }
  }
}
}  // namespace

// ---- DGX H100: 2 x 56 cores, SMT2 (+112), GPUs 0-3 node 0, 4-7 node 1 -------------------

TEST_CASE("DGX H100: unique-contiguous gives GPU k cores 14k..14k+13 and their siblings") {
  BIG_STATIC_CHECK(binds(dgx_h100(), 0, UniqueContiguousPolicy{}, "0-13,112-125"));
  BIG_STATIC_CHECK(binds(dgx_h100(), 5, UniqueContiguousPolicy{}, "70-83,182-195"));
  Topology t = dgx_h100();
  for (Scope scope : {Scope::node, Scope::socket})
    check_matrix<UniqueContiguousPolicy>(t, 112, scope, [](int g, int off) { return span(14 * g, 14 * g + 14, 1, off); });
}

TEST_CASE("DGX H100: the other NVIDIA modes") {
  Topology t = dgx_h100();
  for (Scope scope : {Scope::node, Scope::socket}) {
    check_matrix<AllPolicy>(t, 112, scope, [](int g, int off) { return g < 4 ? span(0, 56, 1, off) : span(56, 112, 1, off); });
    check_matrix<SinglePolicy>(t, 112, scope, [](int g, int off) { return g < 4 ? span(0, 1, 1, off) : span(56, 57, 1, off); });
    check_matrix<SingleUniquePolicy>(t, 112, scope, [](int g, int off) {
      int c = g < 4 ? g : 56 + g - 4;
      return span(c, c + 1, 1, off);
    });
    check_matrix<UniqueInterleavedPolicy>(t, 112, scope, [](int g, int off) {
      return g < 4 ? span(g, 56, 4, off) : span(56 + g - 4, 112, 4, off);
    });
  }
}

TEST_CASE("DGX H100: PyTorch's modes") {
  Topology t = dgx_h100();
  for (int g = 0; g < 8; ++g) {
    CAPTURE(g);
    CpuSet node = g < 4 ? cpus("0-55,112-167") : cpus("56-111,168-223");
    CHECK(*bind(t, g, NodePolicy{}) == node);
    CHECK(*bind(t, g, SocketPolicy{}) == node);        // one node per socket
    CHECK(*bind(t, g, CoreComplexPolicy{}) == node);   // one L3 per socket
    CHECK(*bind(t, g, ExclusivePolicy{}) == span(14 * g, 14 * g + 14, 1, 112));  // 56 cores / 4 GPUs
  }
}

// ---- DGX A100: 8 NPS4 nodes x 16 cores, SMT2 (+128), GPU pairs on nodes 3, 1, 7, 5 -------

namespace {
// First core of each GPU's node: GPUs 0,1 -> node 3 (48), 2,3 -> node 1 (16),
// 4,5 -> node 7 (112), 6,7 -> node 5 (80).
constexpr int a100_node_first(int g) {
  constexpr int first[] = {48, 48, 16, 16, 112, 112, 80, 80};
  return first[g];
}
}  // namespace

TEST_CASE("DGX A100: unique-contiguous, node scope: 8 cores of the GPU's node each") {
  BIG_STATIC_CHECK(binds(dgx_a100(), 0, UniqueContiguousPolicy{}, "48-55,176-183"));
  BIG_STATIC_CHECK(binds(dgx_a100(), 1, UniqueContiguousPolicy{}, "56-63,184-191"));
  Topology t = dgx_a100();
  check_matrix<UniqueContiguousPolicy>(t, 128, Scope::node, [](int g, int off) {
    int first = a100_node_first(g) + 8 * (g % 2);
    return span(first, first + 8, 1, off);
  });
}

TEST_CASE("DGX A100: unique-contiguous, socket scope: the node cores plus their round-robin extras") {
  // Socket 0: GPU-local cores 16-31 (node 1) and 48-63 (node 3), spare 0-15
  // and 32-47; spare k goes to local k, so core 48+i carries 32+i and core
  // 16+i carries i. Socket 1 likewise: 80+i carries 64+i, 112+i carries 96+i.
  Topology t = dgx_a100();
  check_matrix<UniqueContiguousPolicy>(t, 128, Scope::socket, [](int g, int off) {
    int first = a100_node_first(g) + 8 * (g % 2);
    return span(first, first + 8, 1, off) | span(first - 16, first - 8, 1, off);
  });
}

TEST_CASE("DGX A100: unique-interleaved, both scopes") {
  Topology t = dgx_a100();
  check_matrix<UniqueInterleavedPolicy>(t, 128, Scope::node, [](int g, int off) {
    int n = a100_node_first(g);
    return span(n + g % 2, n + 16, 2, off);
  });
  check_matrix<UniqueInterleavedPolicy>(t, 128, Scope::socket, [](int g, int off) {
    int n = a100_node_first(g);
    return span(n + g % 2, n + 16, 2, off) | span(n - 16 + g % 2, n, 2, off);
  });
}

TEST_CASE("DGX A100: all, single, single-unique") {
  Topology t = dgx_a100();
  check_matrix<AllPolicy>(t, 128, Scope::node, [](int g, int off) {
    int n = a100_node_first(g);
    return span(n, n + 16, 1, off);
  });
  check_matrix<AllPolicy>(t, 128, Scope::socket, [](int g, int off) {
    return g < 4 ? span(0, 64, 1, off) : span(64, 128, 1, off);
  });
  // max 63 physical cores: GPU-local cores (32) first, then spare in order,
  // so the last spare core of the socket (47 or 111) is dropped.
  check_matrix<AllPolicy>(
      t, 128, Scope::socket,
      [](int g, int off) { return g < 4 ? span(0, 47, 1, off) | span(48, 64, 1, off) : span(64, 111, 1, off) | span(112, 128, 1, off); },
      {.max_cores = 63});
  for (Scope scope : {Scope::node, Scope::socket}) {
    check_matrix<SinglePolicy>(t, 128, scope, [](int g, int off) {
      int n = a100_node_first(g);
      return span(n, n + 1, 1, off);
    });
    check_matrix<SingleUniquePolicy>(t, 128, scope, [](int g, int off) {
      int c = a100_node_first(g) + g % 2;
      return span(c, c + 1, 1, off);
    });
  }
}

TEST_CASE("DGX A100: PyTorch's modes") {
  Topology t = dgx_a100();
  // node: the GPU's 16-core node; socket: the 4 nodes of its socket.
  CHECK(*bind(t, 2, NodePolicy{}) == cpus("16-31,144-159"));
  CHECK(*bind(t, 0, SocketPolicy{}) == cpus("0-63,128-191"));
  CHECK(*bind(t, 4, SocketPolicy{}) == cpus("64-127,192-255"));
  // exclusive: 16 cores / 2 GPUs per node.
  CHECK(*bind(t, 1, ExclusivePolicy{}) == cpus("56-63,184-191"));
  CHECK(*bind(t, 6, ExclusivePolicy{}) == cpus("80-87,208-215"));
  // core-complex: node 3 has four 4-core CCXs (48-51, 52-55, ...), equal in
  // size, so by key: GPU 0 (rank 0) the first, GPU 1 the second.
  CHECK(*bind(t, 0, CoreComplexPolicy{}) == cpus("48-51,176-179"));
  CHECK(*bind(t, 1, CoreComplexPolicy{}) == cpus("52-55,180-183"));
  CHECK(*bind(t, 3, CoreComplexPolicy{}) == cpus("20-23,148-151"));
}

// ---- p4d.24xlarge: 2 x 24 cores, SMT2 (+48), GPUs 0-3 node 0, 4-7 node 1 ------------------

TEST_CASE("p4d.24xlarge: exclusive and unique-contiguous agree (24 cores / 4 GPUs = 6)") {
  GPUAFF_STATIC_CHECK(binds(p4d(), 1, ExclusivePolicy{}, "6-11,54-59"));
  Topology t = p4d();
  for (int g = 0; g < 8; ++g) {
    CAPTURE(g);
    CHECK(*bind(t, g, ExclusivePolicy{}) == span(6 * g, 6 * g + 6, 1, 48));
    CHECK(*bind(t, g, UniqueContiguousPolicy{}) == span(6 * g, 6 * g + 6, 1, 48));
    CHECK(*bind(t, g, NodePolicy{}) == (g < 4 ? cpus("0-23,48-71") : cpus("24-47,72-95")));
  }
}

// ---- DGX-1V (2 x 20 cores, SMT2 +40, 4 GPUs per socket) and DGX-2H (2 x 24 cores,
// SMT2 +48, 8 GPUs per socket): one node per socket, so both scopes agree ----------

namespace {
/// A two-socket DGX with C cores per socket and G GPUs per socket: GPU g is
/// GPU j = g % G of node n = g / G, whose cores are n*C .. n*C + C-1.
void check_two_socket_dgx(int cores, int gpus_per_socket) {
  const int G = gpus_per_socket;
  const int C = cores;
  std::array<int, 16> nodes{};
  for (int g = 0; g < 2 * G; ++g) nodes[static_cast<std::size_t>(g)] = g / G;
  Topology t = gpuaff_test::regular_machine(
      {.packages = 2, .cores_per_node = C, .smt = 2, .gpus = 2 * G, .gpu_nodes = nodes});
  const int off = 2 * C;  // sibling offset
  for (Scope scope : {Scope::node, Scope::socket}) {
    check_matrix<AllPolicy>(t, off, scope, [=](int g, int o) { return span(g / G * C, g / G * C + C, 1, o); });
    check_matrix<SinglePolicy>(t, off, scope, [=](int g, int o) { return span(g / G * C, g / G * C + 1, 1, o); });
    check_matrix<SingleUniquePolicy>(t, off, scope, [=](int g, int o) {
      int c = g / G * C + g % G;
      return span(c, c + 1, 1, o);
    });
    check_matrix<UniqueContiguousPolicy>(t, off, scope, [=](int g, int o) {
      int per = C / G;
      int c = g / G * C + g % G * per;
      return span(c, c + per, 1, o);
    });
    check_matrix<UniqueInterleavedPolicy>(t, off, scope, [=](int g, int o) {
      return span(g / G * C + g % G, g / G * C + C, G, o);
    });
  }
}
}  // namespace

TEST_CASE("DGX-1V: NVIDIA's expectations, every mode and option") {
  // unique-contiguous: 20 cores / 4 GPUs = 5 each (GPU 1 = cores 5-9).
  check_two_socket_dgx(20, 4);
}

TEST_CASE("DGX-2H: NVIDIA's expectations, every mode and option") {
  // unique-contiguous: 24 cores / 8 GPUs = 3 each; interleaved: stride 8.
  check_two_socket_dgx(24, 8);
}
