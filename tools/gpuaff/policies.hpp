#pragma once
// The one place the CLI reads the policy list (policy/dispatch.hpp): names for
// --help and output, parsing --policy, and every policy for topo's table.

#include <string>
#include <string_view>

#include "gpuaff/policy/dispatch.hpp"

namespace gpuaff::cli {

/// The policies for --help: PyTorch's numa binding policies, then NVIDIA's
/// gpu_affinity modes (the kinds from PolicyKind::all on).
inline std::string policies_help() {
  std::string pytorch;
  std::string nvidia;
  for (PolicyKind k : all_policy_kinds) {
    std::string& list = k < PolicyKind::all ? pytorch : nvidia;
    if (!list.empty()) list += ", ";
    list += to_string(k);
  }
  return pytorch + " (PyTorch numa binding); " + nvidia + " (NVIDIA gpu_affinity modes)";
}

inline std::string policy_name(PolicyKind k) { return std::string(to_string(k)); }

inline Result<PolicyKind> policy_kind(std::string_view text) { return parse_policy(text); }

/// Every policy, in the order --help lists them.
inline constexpr const auto& every_policy() { return all_policy_kinds; }

}  // namespace gpuaff::cli
