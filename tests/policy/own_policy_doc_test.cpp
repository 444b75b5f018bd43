// SPDX-License-Identifier: Apache-2.0
// The "Writing your own policy" example of docs/policies.md, extracted at
// configure time, compiled and checked.
#include "own_policy_doc.inc"

#include "policy/machines.hpp"
#include "support/check.hpp"

namespace {
// 2 sockets x 1 node x 4 cores, SMT2 (siblings +8): node0 = 0-3,8-11,
// node1 = 4-7,12-15; GPUs 0,1 on node 0 and 2,3 on node 1.
constexpr gpuaff::Topology small() {
  return gpuaff_test::regular_machine({.packages = 2, .cores_per_node = 4, .smt = 2, .gpus = 4, .gpu_nodes = {0, 0, 1, 1}});
}
}  // namespace

TEST_CASE("the documented policy: exclusive's cut, one thread per core") {
  // Node 1's cores 4-7 cut in two: GPU 2 gets 4-5, GPU 3 gets 6-7, without siblings 12-15.
  GPUAFF_STATIC_CHECK(gpuaff_test::binds(small(), 2, ExclusiveOneThreadPolicy{}, "4-5"));
  GPUAFF_STATIC_CHECK(gpuaff_test::binds(small(), 3, ExclusiveOneThreadPolicy{}, "6-7"));
  // Alone on node 0 (--nproc 1), GPU 0 takes all four cores.
  GPUAFF_STATIC_CHECK(*gpuaff::bind(small(), 0, ExclusiveOneThreadPolicy{}, {.nproc = 1}) == gpuaff_test::cpus("0-3"));
  // gpuaff::bind's own checks run first.
  GPUAFF_STATIC_CHECK(gpuaff_test::fails(small(), 4, ExclusiveOneThreadPolicy{}, gpuaff::Errc::not_found, "GPU 4 does not exist"));
}
