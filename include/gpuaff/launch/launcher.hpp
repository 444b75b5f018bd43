// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which process of the job this is on its machine: the local rank and local
// size that launchers (torchrun, srun, mpirun, PALS) put in the environment
// of every process they start (docs/contract.md section 3). The environment
// is a parameter, so a launcher can pass the variables it is about to set and
// tests can pass a map; process_environment() reads the real one.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// Looks up one environment variable: its value, or nullopt when it is unset.
using Environment = std::function<std::optional<std::string>(std::string_view name)>;

/// The environment of this process (getenv).
inline Environment process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

/// The local rank, from the first of these that is set: torchrun, Slurm's
/// srun, Open MPI, MPICH and Intel MPI (Hydra), PMI-based launchers (Cray
/// PMI), HPE PALS.
inline constexpr std::array<std::string_view, 6> local_rank_variables{
    "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID"};

/// The number of the job's processes on this machine, from the first of these
/// that is set, in the same launcher order; after them, Slurm's tasks on this
/// node (slurm_tasks_per_node_variable).
inline constexpr std::array<std::string_view, 5> local_size_variables{
    "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"};

/// Slurm gives no local size variable: SLURM_STEP_TASKS_PER_NODE lists the
/// tasks of each node of the job step in a compressed form ("4", "2(x3),1"),
/// and SLURM_NODEID (the node's index in the step) says which entry is this
/// node's. srun also writes the step's list into SLURM_TASKS_PER_NODE, but not
/// under `srun -E` (--preserve-env), which keeps the job's: for a step smaller
/// than its job, or on fewer nodes, only the step's list is right. So the
/// step's variable comes first; SLURM_TASKS_PER_NODE serves where it is not
/// set (a script that sets only it).
inline constexpr std::string_view slurm_step_tasks_per_node_variable = "SLURM_STEP_TASKS_PER_NODE";
inline constexpr std::string_view slurm_tasks_per_node_variable = "SLURM_TASKS_PER_NODE";
inline constexpr std::string_view slurm_node_id_variable = "SLURM_NODEID";

/// A value read from a launcher variable, with where it came from.
struct LauncherValue {
  std::string variable;  ///< the variable that gave it ("LOCAL_RANK")
  std::string text;      ///< its value as set
  int value = 0;

  /// "LOCAL_RANK=3": what messages show as the origin of a GPU index.
  std::string source() const { return variable + "=" + text; }
};

/// The names of `variables` joined with ", ", for messages and help texts.
template <std::size_t N>
std::string variable_list(const std::array<std::string_view, N>& variables) {
  std::string out;
  for (std::string_view v : variables) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

namespace detail {

/// A non-negative decimal integer of at most 9 digits, the whole text; -1 otherwise.
constexpr int parse_count(std::string_view s) {
  if (s.size() > 9 || !is_decimal(s)) return -1;
  long long v = 0;
  leading_number(s, 10, 999999999, v);
  return static_cast<int>(v);
}

/// The error for a variable whose value is not what it must be.
inline Unexpected<Error> bad_variable(std::string_view name, std::string_view value, std::string_view expected) {
  return fail(Errc::invalid_argument, name, "='", quotable(value.substr(0, 40)), "' is not ", expected, "; fix or unset ", name);
}

/// Entry `node` of a SLURM_TASKS_PER_NODE list ("2(x3),1": nodes 0-2 run 2
/// tasks, node 3 runs 1), or -1 when the list is malformed or too short.
inline int slurm_tasks_of_node(std::string_view list, int node) {
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    int repeat = 1;
    if (std::size_t paren = item.find("(x"); paren != std::string_view::npos) {
      if (item.back() != ')') return -1;
      repeat = parse_count(item.substr(paren + 2, item.size() - paren - 3));
      item = item.substr(0, paren);
    }
    int tasks = parse_count(item);
    if (tasks < 0 || repeat < 1) return -1;
    if (node < repeat) return tasks;
    node -= repeat;
  }
  return -1;
}

/// This node's entry of SLURM_STEP_TASKS_PER_NODE, else of
/// SLURM_TASKS_PER_NODE, or nullopt when neither is set.
inline Result<std::optional<LauncherValue>> slurm_local_size(const Environment& env) {
  std::string_view variable = slurm_step_tasks_per_node_variable;
  std::optional<std::string> list = env(variable);
  if (!list) {
    variable = slurm_tasks_per_node_variable;
    list = env(variable);
  }
  if (!list) return std::optional<LauncherValue>{};
  std::optional<std::string> node_text = env(slurm_node_id_variable);
  int node = node_text ? parse_count(*node_text) : 0;
  if (node < 0) return bad_variable(slurm_node_id_variable, *node_text, "a non-negative integer");
  int tasks = slurm_tasks_of_node(*list, node);
  if (tasks < 1) {
    return fail(Errc::invalid_argument, variable, "='", quotable(std::string_view(*list).substr(0, 40)),
                "' gives no task count for node ", node, " (", slurm_node_id_variable, "); fix or unset ", variable);
  }
  return std::optional<LauncherValue>{LauncherValue{std::string(variable), *list, tasks}};
}

}  // namespace detail

/// The local rank from the first variable of local_rank_variables that is set.
/// Errors: Errc::invalid_argument when that variable is not a non-negative
/// integer (naming it and its value; a later variable is never consulted
/// instead), or when none is set.
inline Result<LauncherValue> local_rank(const Environment& env) {
  for (std::string_view name : local_rank_variables) {
    std::optional<std::string> value = env(name);
    if (!value) continue;
    int v = detail::parse_count(*value);
    if (v < 0) return detail::bad_variable(name, *value, "a non-negative integer");
    return LauncherValue{std::string(name), *value, v};
  }
  return fail(Errc::invalid_argument, "none of ", variable_list(local_rank_variables),
              " is set; run under torchrun, srun or mpirun");
}

/// The local size from the first variable of local_size_variables that is set,
/// else from Slurm's tasks on this node; nullopt when the launcher gives none.
/// Errors: Errc::invalid_argument when the variable that is set is not a
/// positive integer (or not a valid Slurm task list), naming it and its value.
inline Result<std::optional<LauncherValue>> local_size(const Environment& env) {
  for (std::string_view name : local_size_variables) {
    std::optional<std::string> value = env(name);
    if (!value) continue;
    int v = detail::parse_count(*value);
    if (v < 1) return detail::bad_variable(name, *value, "a positive integer");
    return std::optional<LauncherValue>{LauncherValue{std::string(name), *value, v}};
  }
  return detail::slurm_local_size(env);
}

}  // namespace v0
}  // namespace gpuaff
