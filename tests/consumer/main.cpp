// SPDX-License-Identifier: Apache-2.0
// Built against an installed gpuaff by tests/run.sh: proves find_package works.
#include <gpuaff/gpuaff.hpp>

#include <cstdio>

int main() {
  auto set = gpuaff::CpuSet::parse_list("0-3,8");
  if (!set || set->count() != 5) return 1;
  std::printf("gpuaff %s: %s\n", gpuaff::version_string, set->to_list().c_str());
  return 0;
}
