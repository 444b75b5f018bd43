// SPDX-License-Identifier: Apache-2.0
#pragma once
// Grouping cores by the speed the platform reports (Core::priority) into
// classes: what the sysfs reader records and the roles (policy/roles.hpp)
// place the main and communication threads by.

#include "gpuaff/config.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gpuaff {
inline namespace v0 {

/// Values that differ by less than this fraction of the larger are one class:
/// identical cores report slightly different capacities (Grace: 996-1013 for
/// one core type: open-mpi/hwloc#634), and a 2% step is below any real
/// difference between core types or SST-BF frequency levels.
inline constexpr double priority_tolerance = 0.02;

/// Priority classes of `values` (one per core; -1: unknown): 0 for the
/// highest, then 1, ... Sorted from the highest value down, a value joins the
/// current class when it is within priority_tolerance of that class's
/// highest value; unknown values are the last class.
template <class = void>
std::vector<int> priority_classes(const std::vector<long long>& values) {
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] > values[b]; });
  std::vector<int> cls(values.size(), 0);
  int current = -1;
  long long top = 0;
  for (std::size_t i : order) {
    long long v = values[i];
    bool joins = current >= 0 && v >= 0 && static_cast<double>(top - v) <= priority_tolerance * static_cast<double>(top);
    bool unknown_again = current >= 0 && v < 0 && top < 0;
    if (!joins && !unknown_again) {
      ++current;
      top = v;
    }
    cls[i] = current;
  }
  return cls;
}

}  // namespace v0
}  // namespace gpuaff
