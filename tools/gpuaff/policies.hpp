#pragma once
// The one place the CLI reads the policy list (policy/dispatch.hpp): names for
// --help and output, parsing --policy, and every policy for topo's table.

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

/// One line per policy with what it does, for the commands' --help footers.
inline std::string policies_table() { return "Policies:\n" + std::string(policy_help().view()); }

inline std::string policy_name(PolicyKind k) { return std::string(to_string(k)); }

inline Result<PolicyKind> policy_kind(std::string_view text) { return parse_policy(text); }

/// Every policy, in the order --help lists them.
inline constexpr const auto& every_policy() { return all_policy_kinds; }

}  // namespace gpuaff::cli
