// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runtimes that re-pin a process's threads after the launcher bound it, and
// the variable each documents to stop it (docs/binding.md, "Runtimes that
// re-pin"). `gpuaff exec` exports a row's variable when the runtime is found
// in the process's environment (a variable with one of the runtime's own
// prefixes) or in the command's name, and never when the user set it.
// Only what the runtime's own documentation says is here: each row cites it.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpuaff {
inline namespace v0 {

/// One runtime that re-pins, and its documented switch.
struct RepinGuard {
  std::string_view runtime;
  std::string_view variable;
  std::string_view value;                        ///< the value that keeps the outside binding
  std::array<std::string_view, 2> env_prefixes;  ///< the runtime is found by a variable starting so ("" unused)
  std::string_view command_prefix;               ///< ... or by the command's file name starting so ("" none)
  std::string_view what;                         ///< what the runtime does by default, and what the value changes
  std::string_view source;                       ///< where the runtime documents it
};

/// THE table. Add a row only with the runtime's own documentation of the
/// variable and of the value's meaning.
inline constexpr RepinGuard repin_guards[] = {
    {"TensorRT-LLM", "TLLM_NUMA_AWARE_WORKER_AFFINITY", "0", {"TLLM_", "TRTLLM_"}, "trtllm-",
     "unset, TensorRT-LLM clears the CPU affinity of a worker whose affinity is already constrained (undoing the "
     "binding) and sets its own when it is not; '0' (or any value but '1') leaves the affinity as configured",
     "NVIDIA/TensorRT-LLM docs/source/deployment-guide/configuring-cpu-affinity.md (table of "
     "TLLM_NUMA_AWARE_WORKER_AFFINITY values); tensorrt_llm envs.py: 'unset=auto, 1=force enable, any other "
     "value=disable'"},
    {"MVAPICH2", "MV2_ENABLE_AFFINITY", "0", {"MV2_", ""}, "",
     "MVAPICH2 pins each rank to a core itself by default (1); '0' disables its CPU affinity",
     "MVAPICH2 User Guide (mvapich.cse.ohio-state.edu, mvapich2-userguide.html), run-time parameter "
     "MV2_ENABLE_AFFINITY: default 1, 0 disables"},
};

/// A variable to export, with why.
struct RepinGuardSetting {
  std::string name;
  std::string value;
  std::string_view runtime;
  std::string found_by;  ///< what showed the runtime ("TLLM_LOG_LEVEL", "command trtllm-serve")
  std::string_view source;
};

namespace detail {

inline std::string_view file_name(std::string_view path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace detail

/// The guards to export for a process with the environment `vars` running
/// `command` (its first word): one per runtime found, unless the user set its
/// variable (any value, even empty: never overridden). Pure.
inline std::vector<RepinGuardSetting> repin_guard_variables(const std::map<std::string, std::string>& vars,
                                                            std::string_view command) {
  std::vector<RepinGuardSetting> out;
  for (const auto& g : repin_guards) {
    if (vars.count(std::string(g.variable)) != 0) continue;
    std::string found;
    for (const auto& [name, value] : vars) {
      for (std::string_view p : g.env_prefixes)
        if (!p.empty() && std::string_view(name).substr(0, p.size()) == p) found = name;
      if (!found.empty()) break;
    }
    std::string_view file = detail::file_name(command);
    if (found.empty() && !g.command_prefix.empty() && file.substr(0, g.command_prefix.size()) == g.command_prefix)
      found = "command " + std::string(file);
    if (found.empty()) continue;
    out.push_back({std::string(g.variable), std::string(g.value), g.runtime, std::move(found), g.source});
  }
  return out;
}

/// Whether NAME=VALUE is a guard's own setting (gpuaff's, or the same one
/// set by hand): it keeps the binding, so it is not a setting that fights it.
inline bool is_repin_guard(std::string_view name, std::string_view value) {
  for (const auto& g : repin_guards)
    if (g.variable == name && g.value == value) return true;
  return false;
}

}  // namespace v0
}  // namespace gpuaff
