// SPDX-License-Identifier: Apache-2.0
// With `using namespace std;` an unqualified bind(topo, gpu, policy) must be
// gpuaff::bind, never std::bind (whose forwarding references would win over
// a `const Topology&` parameter and silently return a call wrapper).
#include <functional>

#include <gpuaff/policy/policy.hpp>

#include "policy/machines.hpp"
#include "support/check.hpp"

namespace std_only {
using namespace std;  // NOLINT: the point of the test

// Found by argument-dependent lookup beside std::bind, which the
// using-directive brings in.
inline gpuaff::Result<gpuaff::CpuSet> exclusive(gpuaff::Topology& topo, std::size_t gpu, gpuaff::JobOptions& job) {
  return bind(topo, gpu, gpuaff::ExclusivePolicy{}, job);
}
static_assert(std::is_same_v<decltype(bind(std::declval<gpuaff::Topology&>(), 0, gpuaff::ExclusivePolicy{})),
                             gpuaff::Result<gpuaff::CpuSet>>);
static_assert(std::is_same_v<decltype(bind(std::declval<const gpuaff::Topology&>(), 0, gpuaff::PolicySpec{})),
                             gpuaff::Result<gpuaff::CpuSet>>);
}  // namespace std_only

namespace both {
using namespace std;     // NOLINT
using namespace gpuaff;  // NOLINT
static_assert(std::is_same_v<decltype(bind(std::declval<Topology&>(), 0, ExclusivePolicy{})), Result<CpuSet>>);
static_assert(std::is_same_v<decltype(bind(std::declval<Topology&>(), 0, NodePolicy{}, std::declval<JobOptions&>())),
                             Result<CpuSet>>);
// std::bind still binds what is not a topology.
static_assert(!std::is_same_v<decltype(bind([](int) {}, 1)), Result<CpuSet>>);
}  // namespace both

TEST_CASE("an unqualified bind under using namespace std is gpuaff::bind") {
  gpuaff::Topology t = gpuaff_test::regular_machine(
      {.packages = 2, .cores_per_node = 4, .smt = 2, .gpus = 4, .gpu_nodes = {0, 0, 1, 1}});
  gpuaff::JobOptions job;
  // Node 1 (cores 4-7, siblings +8) split between GPUs 2 and 3: GPU 3 gets the upper half.
  auto r = std_only::exclusive(t, 3, job);
  REQUIRE(r);
  CHECK(*r == gpuaff_test::cpus("6-7,14-15"));
}
