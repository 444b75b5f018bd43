// SPDX-License-Identifier: Apache-2.0
#pragma once
// has_note(t, {"file", "what"}): whether one of a topology's notes holds every
// one of the given pieces (notes are one line each; tests match their parts,
// not their whole wording).

#include <gpuaff/topology.hpp>

#include <string>
#include <vector>

namespace gpuaff_test {
inline bool has_note(const gpuaff::Topology& t, const std::vector<std::string>& parts) {
  for (const auto& n : t.notes) {
    bool all = true;
    for (const auto& p : parts) all = all && n.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}
}  // namespace gpuaff_test
