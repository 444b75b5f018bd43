// SPDX-License-Identifier: Apache-2.0
#pragma once
// The words a launch is configured with, each list written once: the command
// line (gpuaff bind/topo/exec), its help and its checks, and any other front
// end (a C++ launcher, a Python module) parse the same words into the same
// types. Policy names live with the policies (parse_policy, policy/dispatch.hpp).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/apply/fallback.hpp"  // `gpuaff exec --fallback` is the same choice as a spawn's
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/policy/common.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/visible.hpp"

namespace gpuaff {
inline namespace v0 {

/// One accepted word and the value it stands for.
template <class E>
struct Choice {
  std::string_view name;
  E value;
};

/// `gpuaff bind --format`: how a binding is printed.
enum class BindFormat { cpulist, mask, numactl, json, env };
/// `gpuaff topo --format`.
enum class TopoFormat { text, json, dra };
/// `probe --format`.
enum class ProbeFormat { text, json };
/// `doctor --format`.
enum class DoctorFormat { text, json, prometheus };
/// `--baseline`: the CPUs (and memory nodes) bindings are drawn from.
enum class Baseline {
  affinity,  ///< the calling thread's allowed set (what a launcher or taskset left)
  cgroup,    ///< the process's cgroup cpuset (source/cgroup.hpp), ignoring a narrower mask
};
/// `--unreachable`: when no allowed CPU is on the GPU's node.
enum class Unreachable {
  error,    ///< refuse (the default)
  nearest,  ///< the allowed CPUs of the closest node(s) that have any
};
/// `gpuaff topo --color`: auto colours a terminal unless NO_COLOR is set.
enum class ColorMode { automatic, always, never };
/// `--share`: which GPUs a node's split is among (docs/contract.md section 3):
/// the job's GPUs that take part (visible), or every GPU of the host (machine).
enum class Share { visible, machine };

/// `--vendor`: whose GPUs an index counts (source/visible.hpp, numbered_vendor).
inline constexpr std::array vendor_choices{Choice<GpuVendor>{"auto", GpuVendor::automatic},
                                           Choice<GpuVendor>{"nvidia", GpuVendor::nvidia},
                                           Choice<GpuVendor>{"amd", GpuVendor::amd},
                                           Choice<GpuVendor>{"intel", GpuVendor::intel}};
inline constexpr std::array scope_choices{Choice<Scope>{"node", Scope::node}, Choice<Scope>{"socket", Scope::socket}};
inline constexpr std::array smt_choices{Choice<Smt>{"all", Smt::all}, Choice<Smt>{"one", Smt::one}};
/// `--membind`: "local" is the GPU's node(s) only (MPOL_BIND, like numactl
/// --membind); "bind" is a synonym. The kernel's own "local" (first touch)
/// is what "none" leaves in place.
inline constexpr std::array membind_choices{
    Choice<MemPolicy>{"none", MemPolicy::none}, Choice<MemPolicy>{"local", MemPolicy::bind},
    Choice<MemPolicy>{"bind", MemPolicy::bind}, Choice<MemPolicy>{"preferred", MemPolicy::preferred},
    Choice<MemPolicy>{"interleave", MemPolicy::interleave}};
inline constexpr std::array bind_format_choices{
    Choice<BindFormat>{"cpulist", BindFormat::cpulist}, Choice<BindFormat>{"mask", BindFormat::mask},
    Choice<BindFormat>{"numactl", BindFormat::numactl}, Choice<BindFormat>{"json", BindFormat::json},
    Choice<BindFormat>{"env", BindFormat::env}};
inline constexpr std::array topo_format_choices{Choice<TopoFormat>{"text", TopoFormat::text},
                                                Choice<TopoFormat>{"json", TopoFormat::json},
                                                Choice<TopoFormat>{"dra", TopoFormat::dra}};
inline constexpr std::array doctor_format_choices{Choice<DoctorFormat>{"text", DoctorFormat::text},
                                                  Choice<DoctorFormat>{"json", DoctorFormat::json},
                                                  Choice<DoctorFormat>{"prometheus", DoctorFormat::prometheus}};
inline constexpr std::array probe_format_choices{Choice<ProbeFormat>{"text", ProbeFormat::text},
                                                 Choice<ProbeFormat>{"json", ProbeFormat::json}};
inline constexpr std::array color_choices{Choice<ColorMode>{"auto", ColorMode::automatic},
                                          Choice<ColorMode>{"always", ColorMode::always},
                                          Choice<ColorMode>{"never", ColorMode::never}};
inline constexpr std::array baseline_choices{Choice<Baseline>{"affinity", Baseline::affinity},
                                             Choice<Baseline>{"cgroup", Baseline::cgroup}};
inline constexpr std::array unreachable_choices{Choice<Unreachable>{"error", Unreachable::error},
                                                Choice<Unreachable>{"nearest", Unreachable::nearest}};
inline constexpr std::array share_choices{Choice<Share>{"visible", Share::visible},
                                          Choice<Share>{"machine", Share::machine}};
/// `--mem-nodes`: which nodes the memory policy (and bind's memory_nodes) names.
enum class MemNodes {
  cpu,     ///< the GPU's CPU node (its PCI numa_node, or the one resolved for it)
  gpu,     ///< the GPU's own memory nodes (GH200/GB200 coherent mode: numa_status)
  socket,  ///< every node with CPUs in the package of the GPU's node
};
inline constexpr std::array mem_nodes_choices{Choice<MemNodes>{"cpu", MemNodes::cpu},
                                              Choice<MemNodes>{"gpu", MemNodes::gpu},
                                              Choice<MemNodes>{"socket", MemNodes::socket}};
inline constexpr std::array fallback_choices{Choice<Fallback>{"error", Fallback::error},
                                             Choice<Fallback>{"unbound", Fallback::unbound}};

/// The first word that stands for `value` ("local" for MemPolicy::bind).
template <class E, std::size_t N>
constexpr std::string_view name_of(const std::array<Choice<E>, N>& choices, E value) {
  for (const auto& c : choices)
    if (c.value == value) return c.name;
  return "unknown";
}

/// The words joined with `separator`: "node|socket", "none, local, bind".
template <class E, std::size_t N>
std::string choice_names(const std::array<Choice<E>, N>& choices, std::string_view separator) {
  std::string out;
  for (const auto& c : choices) {
    if (!out.empty()) out += separator;
    out += c.name;
  }
  return out;
}

/// The value of `text` in `choices`.
/// Errors: Errc::invalid_argument "<option> '<text>' is not valid; use a|b|c".
template <class E, std::size_t N>
Result<E> parse_choice(std::string_view option, std::string_view text, const std::array<Choice<E>, N>& choices) {
  for (const auto& c : choices)
    if (c.name == text) return c.value;
  return fail(Errc::invalid_argument, option, "=", text.empty() ? std::string_view("''") : text.substr(0, 40),
              " is not valid; use ", choice_names(choices, "|"));
}

inline Result<Scope> parse_scope(std::string_view s) { return parse_choice("scope", s, scope_choices); }
inline Result<Smt> parse_smt(std::string_view s) { return parse_choice("smt", s, smt_choices); }
inline Result<MemPolicy> parse_membind(std::string_view s) { return parse_choice("membind", s, membind_choices); }
inline Result<BindFormat> parse_bind_format(std::string_view s) { return parse_choice("format", s, bind_format_choices); }
inline Result<TopoFormat> parse_topo_format(std::string_view s) { return parse_choice("format", s, topo_format_choices); }
inline Result<ColorMode> parse_color(std::string_view s) { return parse_choice("color", s, color_choices); }
inline Result<Fallback> parse_fallback(std::string_view s) { return parse_choice("fallback", s, fallback_choices); }

/// `--unknown-node error|node0|N`: how a GPU whose PCI numa_node is -1 is
/// placed, set into `job` (UnknownNode::error, UnknownNode::node0, or
/// JobOptions::assume_node = N).
/// Errors: Errc::invalid_argument for any other text.
inline Result<JobOptions> parse_unknown_node(std::string_view s, JobOptions job = {}) {
  if (s == "error") {
    job.unknown_node = UnknownNode::error;
  } else if (s == "node0") {
    job.unknown_node = UnknownNode::node0;
  } else if (int n = detail::parse_count(s); n >= 0) {
    // Linux numbers at most 1024 nodes (NODES_SHIFT is at most 10).
    if (n > 1023)
      return fail(Errc::invalid_argument, "unknown_node=", s.substr(0, 40),
                  " is beyond the largest NUMA node id Linux has (1023); name a node of this machine");
    job.assume_node = n;
  } else {
    return fail(Errc::invalid_argument, "unknown_node=", s.empty() ? std::string_view("''") : s.substr(0, 40), " is not valid; use error, node0 or a NUMA node id such as 1");
  }
  return job;
}

}  // namespace v0
}  // namespace gpuaff
