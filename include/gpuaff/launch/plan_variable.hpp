// SPDX-License-Identifier: Apache-2.0
#pragma once
// The plan travels with the process: what `gpuaff exec` (and Python's bind)
// applied is left in the process's own environment as GPUAFF_PLAN, so that
// `gpuaff doctor --pid PID` checks the plan that was really applied rather
// than guessing it (docs/contract.md, "GPUAFF_PLAN").
//
// The value is one line of space-separated fields, the version first:
//
//   v1 gpu=3 pci=0000:9d:00.0 from=LOCAL_RANK=3 policy=exclusive node=1 cpus=56-69,168-181 mems=1 membind=none
//
// `gpu` is -1 for a PCI device that is not a visible GPU; `from` says where
// the device choice came from (a launcher variable, or gpu=N / pci=BDF named
// by the caller); `mems` is the memory nodes (a cpulist-style list, possibly
// empty) that `membind` applies to; `part=P/N` (several ranks per GPU) says
// `cpus` is part P of N of the GPU's share; `gpus=0,4` (several GPUs per
// process) that `cpus` is the union of those GPUs' shares; `main=`, `comm=`,
// `data=` and `compute=` (roles inside the rank) the CPUs of each role that has
// any. Unknown fields are ignored, so a later v1
// may add fields; a reader refuses another version.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/plan.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/policy/roles.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// The variable's name.
inline constexpr std::string_view plan_variable = "GPUAFF_PLAN";

/// A plan as the variable carries it.
struct RecordedPlan {
  int gpu = -1;              ///< the visible GPU index; -1: a PCI device that is not one
  std::string pci{};         ///< the device's PCI address
  std::string from{};        ///< where the device choice came from ("LOCAL_RANK=3", "gpu=3")
  PolicyKind policy = PolicyKind::node;
  int node = -1;             ///< the device's NUMA node
  CpuSet cpus{};             ///< the CPUs every thread was bound to
  NodeSet memory_nodes{};    ///< the nodes `membind` applies to
  MemPolicy membind = MemPolicy::none;
  NodeSet host_nodes{};      ///< the nodes for pinned host buffers (`host=`; empty from a plan written before it)
  std::optional<Roles> roles{};  ///< the rank's roles (main=, comm=, data=, compute= fields), when it had some
};

/// The variable's value for a plan that was applied.
inline std::string plan_variable_value(const LaunchPlan& p) {
  std::string s = std::string("v1 gpu=") + std::to_string(p.visible_gpu) + " pci=" +
                  std::string(p.target().address().to_string().view()) + " from=" + p.device_source +
                  std::string(" policy=") + std::string(to_string(p.policy.kind)) + std::string(" node=") + std::to_string(p.node) +
                  " cpus=" + p.cpus.to_list() + " mems=" + p.memory_nodes.to_list() +
                  std::string(" membind=") + std::string(name_of(membind_choices, p.membind));
  if (!p.host_nodes.empty()) s += " host=" + p.host_nodes.to_list();
  if (p.ranks_per_gpu > 1) s += std::string(" part=") + std::to_string(p.part) + std::string("/") + std::to_string(p.ranks_per_gpu);
  if (!p.more_visible_gpus.empty()) {
    s += std::string(" gpus=") + std::to_string(p.visible_gpu);
    for (int g : p.more_visible_gpus) s += std::string(",") + std::to_string(g);
  }
  if (p.roles) {
    for (std::size_t k = 0; k < role_names.size(); ++k) {
      const CpuSet& cpus = p.roles->of(static_cast<Role>(k));
      if (!cpus.empty()) s += std::string(" ") + std::string(role_names[k]) + "=" + cpus.to_list();
    }
  }
  return s;
}

/// The plan a GPUAFF_PLAN value describes.
/// Errors: Errc::parse_error naming the variable, the field and what it should be
/// (another version, a missing or malformed field).
inline Result<RecordedPlan> parse_plan_variable(std::string_view text) {
  auto bad = [&](std::string_view what) {
    return fail(Errc::parse_error, plan_variable, "='", detail::quotable(text.substr(0, 120)), "' is not a plan gpuaff wrote: ", what);
  };
  std::size_t sp = text.find(' ');
  if (text.substr(0, sp) != "v1") return bad("its version is not v1 (written by another gpuaff?)");
  RecordedPlan r;
  bool has_cpus = false;
  bool has_pci = false;
  std::string_view rest = sp == std::string_view::npos ? std::string_view() : text.substr(sp + 1);
  while (!rest.empty()) {
    std::size_t end = rest.find(' ');
    std::string_view field = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (field.empty()) continue;
    std::size_t eq = field.find('=');
    if (eq == std::string_view::npos) return bad("a field without '='");
    std::string_view key = field.substr(0, eq);
    std::string_view value = field.substr(eq + 1);
    if (key == "gpu" || key == "node") {
      // leading_number saturates at its cap: a number at the cap is one too large, never cut to it.
      constexpr long long most = (1 << 20) - 1;
      long long v = 0;
      bool negative = value == "-1";
      if (!negative && (value.empty() || detail::leading_number(value, 10, most + 1, v) != value.size() || v > most))
        return bad("gpu and node are integers from -1 to 1048575");
      (key == "gpu" ? r.gpu : r.node) = negative ? -1 : static_cast<int>(v);
    } else if (key == "pci") {
      auto a = PciAddress::parse(value);
      if (!a) return bad("pci is not a PCI address");
      r.pci = std::string(value);
      has_pci = true;
    } else if (key == "from") {
      r.from = std::string(value);
    } else if (key == "policy") {
      auto k = parse_policy(value);
      if (!k) return bad("policy is not a policy name");
      r.policy = *k;
    } else if (key == "cpus" || key == "mems" || key == "host") {
      auto set = CpuSet::parse_list(value);
      if (!set || (key == "cpus" && set->empty())) return bad("cpus, mems and host are cpulists, cpus not empty");
      (key == "cpus" ? r.cpus : key == "mems" ? r.memory_nodes : r.host_nodes) = *set;
      has_cpus |= key == "cpus";
    } else if (std::find(role_names.begin(), role_names.end(), key) != role_names.end()) {
      auto set = CpuSet::parse_list(value);
      if (!set || set->empty()) return bad("main, comm, data and compute are cpulists, not empty");
      if (!r.roles) r.roles.emplace();
      auto k = static_cast<std::size_t>(std::find(role_names.begin(), role_names.end(), key) - role_names.begin());
      (k == 0 ? r.roles->main : k == 1 ? r.roles->comm : k == 2 ? r.roles->data : r.roles->compute) = *set;
    } else if (key == "membind") {
      bool found = false;
      for (const auto& c : membind_choices)
        if (c.name == value) r.membind = c.value, found = true;
      if (!found) return bad("membind is not a memory policy");
    }
  }
  if (!has_cpus || !has_pci) return bad("it lacks cpus or pci");
  return r;
}

}  // namespace v0
}  // namespace gpuaff
