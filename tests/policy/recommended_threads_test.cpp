// SPDX-License-Identifier: Apache-2.0
// recommended_threads: physical cores covered by a binding.
#include <gpuaff/policy/threads.hpp>

#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Topology;

namespace {
// 4 cores with SMT2: core k has threads k and k+4 (the common Intel numbering).
Topology smt2() {
  Topology t;
  for (int k = 0; k < 4; ++k) t.cores.push_back(gpuaff::Core{.threads = CpuSet{k, k + 4}, .package = 0});
  t.online = CpuSet::range(0, 7);
  t.allowed = t.online;
  return t;
}
}  // namespace

TEST_CASE("siblings of one core count once") {
  CHECK(gpuaff::recommended_threads(smt2(), CpuSet{0, 4}) == 1);
  CHECK(gpuaff::recommended_threads(smt2(), CpuSet::range(0, 7)) == 4);
  // Threads 0,1 (cores 0 and 1) and 5 (core 1 again): two cores.
  CHECK(gpuaff::recommended_threads(smt2(), CpuSet{0, 1, 5}) == 2);
}

TEST_CASE("CPUs without core data count one each, and the answer is at least 1") {
  CHECK(gpuaff::recommended_threads(Topology{}, CpuSet{3, 9, 10}) == 3);
  CHECK(gpuaff::recommended_threads(smt2(), CpuSet{}) == 1);
  CHECK(gpuaff::recommended_threads(smt2(), CpuSet{2, 12}) == 2);  // core 2 plus unknown CPU 12
}
