// SPDX-License-Identifier: Apache-2.0
#pragma once
// GPUAFF_STATIC_CHECK(expr): a CHECK that is also a static_assert in the
// strict build of a CONSTEXPR test, so constant evaluation is proven at
// compile time and the same expectations still run (and report) at run time.

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#ifdef GPUAFF_TEST_RUNTIME_ONLY
#define GPUAFF_STATIC_CHECK(...) CHECK(__VA_ARGS__)
#else
#define GPUAFF_STATIC_CHECK(...) \
  static_assert(__VA_ARGS__);    \
  CHECK(__VA_ARGS__)
#endif

namespace gpuaff_test {
/// Path of a fixture directory or file under fixtures/.
inline std::string fixture(const std::string& name) { return std::string(GPUAFF_FIXTURES_DIR) + "/" + name; }
}  // namespace gpuaff_test
