// SPDX-License-Identifier: Apache-2.0
#pragma once
// The policy list as the CLI's --help shows it, from the registry in
// policy/dispatch.hpp (names, parsing and topo's table use the registry directly).

#include <string>
#include <string_view>

#include "gpuaff/policy/dispatch.hpp"

namespace gpuaff::cli {

/// The policies for --help, grouped by whose mode each reproduces (the
/// registry's origin): "node, socket, ... (PyTorch numa binding); all, ...
/// (NVIDIA gpu_affinity modes)".
inline std::string policies_help() {
  std::string pytorch;
  std::string nvidia;
  for (const PolicyInfo& p : policy_registry) {
    std::string& list = p.origin == "PyTorch" ? pytorch : nvidia;
    if (!list.empty()) list += ", ";
    list += p.name;
  }
  return pytorch + " (PyTorch numa binding); " + nvidia + " (NVIDIA gpu_affinity modes)";
}

}  // namespace gpuaff::cli
