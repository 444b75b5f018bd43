// SPDX-License-Identifier: Apache-2.0
#pragma once
// Choosing a policy at run time (--policy NAME): the registry of built-in
// policies, from which their names, parse_policy and the CLI's help are
// derived; gpuaff::bind of a PolicySpec, bind_all and bind_table. The
// gpuaff::bind every policy goes through: bind.hpp.

#include "gpuaff/config.hpp"

#include <array>
#include <concepts>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpuaff/detail/suggest.hpp"
#include "gpuaff/policy/bind.hpp"
#include "gpuaff/policy/context.hpp"
#include "gpuaff/policy/core_complex.hpp"
#include "gpuaff/policy/exclusive.hpp"
#include "gpuaff/policy/node.hpp"
#include "gpuaff/policy/nvidia.hpp"
#include "gpuaff/policy/socket.hpp"

namespace gpuaff {
inline namespace v0 {

/// The built-in policies, in the order of policy_registry.
enum class PolicyKind {
  node,
  socket,
  exclusive,
  core_complex,
  all,
  single,
  single_unique,
  unique_interleaved,
  unique_contiguous,
};

/// A policy chosen at run time; `nvidia` is read by the five NVIDIA modes only.
struct PolicySpec {
  PolicyKind kind = PolicyKind::node;
  NvidiaOptions nvidia{};
};

namespace detail {

/// bind_checked with policy P made from a spec's NVIDIA options (the
/// PyTorch modes take none).
template <class P>
constexpr Result<CpuSet> bind_kind(BindingContext& ctx, int gpu, const NvidiaOptions& nvidia) {
  if constexpr (requires { P{nvidia}; }) return bind_checked(ctx, gpu, P{nvidia});
  else return bind_checked(ctx, gpu, P{});
}

/// The built-in policy `kind` binding `gpu`. A switch, not a table of
/// function pointers: taking a policy's address compiles it in every TU
/// that includes this header, bound with it or not (benchmarks row 6).
/// -Wswitch names a PolicyKind without its case here.
template <class = void>
constexpr Result<CpuSet> bind_kind_of(PolicyKind kind, BindingContext& ctx, int gpu, const NvidiaOptions& nvidia) {
  switch (kind) {
    case PolicyKind::node: return bind_kind<NodePolicy>(ctx, gpu, nvidia);
    case PolicyKind::socket: return bind_kind<SocketPolicy>(ctx, gpu, nvidia);
    case PolicyKind::exclusive: return bind_kind<ExclusivePolicy>(ctx, gpu, nvidia);
    case PolicyKind::core_complex: return bind_kind<CoreComplexPolicy>(ctx, gpu, nvidia);
    case PolicyKind::all: return bind_kind<AllPolicy>(ctx, gpu, nvidia);
    case PolicyKind::single: return bind_kind<SinglePolicy>(ctx, gpu, nvidia);
    case PolicyKind::single_unique: return bind_kind<SingleUniquePolicy>(ctx, gpu, nvidia);
    case PolicyKind::unique_interleaved: return bind_kind<UniqueInterleavedPolicy>(ctx, gpu, nvidia);
    case PolicyKind::unique_contiguous: return bind_kind<UniqueContiguousPolicy>(ctx, gpu, nvidia);
  }
  return fail(Errc::invalid_argument, "unknown policy kind ", static_cast<int>(kind));
}

}  // namespace detail

/// One row of policy_registry: a built-in policy as the command line knows it.
struct PolicyInfo {
  PolicyKind kind;
  std::string_view name;         ///< on the command line and in docs/contract.md: "core-complex"
  std::string_view alternate;    ///< another accepted spelling (NVIDIA's "unique_contiguous"); empty if none
  std::string_view origin;       ///< whose mode it reproduces: "PyTorch" or "NVIDIA"
  std::string_view description;  ///< one line for help text
  bool nvidia_options;           ///< reads NvidiaOptions (scope, smt, balanced, min_cores, max_cores)
  /// Splits a node (or socket) among its GPUs, so that which GPUs take part
  /// (the job's, or every GPU of the host: Share) changes each GPU's share.
  bool splits;
  /// The parts of a Topology the policy reads beyond what every binding reads
  /// (nodes, allowed CPUs, GPUs): a load for it may leave the rest out.
  /// NVIDIA modes with scope=socket read packages too (policy_needs()).
  TopologyParts needs;
  /// The policy's binding of one GPU on a context, checked like gpuaff::bind.
  template <class = void>
  constexpr Result<CpuSet> bind(BindingContext& ctx, int gpu, const NvidiaOptions& nvidia) const {
    return detail::bind_kind_of(kind, ctx, gpu, nvidia);
  }
};

/// Every built-in policy, one row each, in PolicyKind order. Adding a policy
/// is its class, its PolicyKind, its row here and its case in bind_kind_of.
inline constexpr std::array policy_registry{
    PolicyInfo{PolicyKind::node, "node", "", "PyTorch", "the allowed CPUs of the GPU's NUMA node", false, false,
               TopologyParts::none()},
    PolicyInfo{PolicyKind::socket, "socket", "", "PyTorch", "the allowed CPUs of every node in the GPU's socket", false, false,
               TopologyParts::only(&TopologyParts::packages)},
    PolicyInfo{PolicyKind::exclusive, "exclusive", "", "PyTorch",
               "the node's physical cores split without overlap among its GPUs", false, true,
               TopologyParts::only(&TopologyParts::cores)},
    PolicyInfo{PolicyKind::core_complex, "core-complex", "core_complex", "PyTorch",
               "one last-level-cache group of the node per GPU", false, true,
               TopologyParts::only(&TopologyParts::caches)},
    PolicyInfo{PolicyKind::all, "all", "", "NVIDIA", "every core of the GPU's node (or socket)", true, false,
               TopologyParts::only(&TopologyParts::cores)},
    PolicyInfo{PolicyKind::single, "single", "", "NVIDIA", "the node's first core, shared by its GPUs", true, false,
               TopologyParts::only(&TopologyParts::cores)},
    PolicyInfo{PolicyKind::single_unique, "single-unique", "single_unique", "NVIDIA",
               "one core of the node per GPU, none shared", true, true,
               TopologyParts::only(&TopologyParts::cores)},
    PolicyInfo{PolicyKind::unique_interleaved, "unique-interleaved", "unique_interleaved", "NVIDIA",
               "the node's cores dealt to its GPUs by stride", true, true,
               TopologyParts::only(&TopologyParts::cores)},
    PolicyInfo{PolicyKind::unique_contiguous, "unique-contiguous", "unique_contiguous", "NVIDIA",
               "the node's cores cut into one contiguous run per GPU (NVIDIA's default)", true, true,
               TopologyParts::only(&TopologyParts::cores)},
};

static_assert([] {
  for (std::size_t i = 0; i < policy_registry.size(); ++i)
    if (static_cast<std::size_t>(policy_registry[i].kind) != i) return false;
  return true;
}(), "policy_registry lists the policies in PolicyKind order");

/// Every PolicyKind, in registry order.
inline constexpr auto all_policy_kinds = [] {
  std::array<PolicyKind, policy_registry.size()> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = policy_registry[i].kind;
  return out;
}();

/// The registry row of `k`.
constexpr const PolicyInfo& policy_info(PolicyKind k) { return policy_registry[static_cast<std::size_t>(k)]; }

/// Whether policy `k` splits a node among its GPUs (PolicyInfo::splits).
constexpr bool splits_among_gpus(PolicyKind k) { return policy_info(k).splits; }

/// The parts of a Topology a binding with `spec` reads beyond nodes, allowed
/// CPUs and GPUs (PolicyInfo::needs, and packages for scope=socket).
constexpr TopologyParts policy_needs(const PolicySpec& spec) {
  TopologyParts p = policy_info(spec.kind).needs;
  if (policy_info(spec.kind).nvidia_options && spec.nvidia.scope == Scope::socket) p.packages = true;
  return p;
}

/// The name used on the command line: "node", "core-complex", "unique-contiguous", ...
constexpr std::string_view to_string(PolicyKind k) {
  auto i = static_cast<std::size_t>(k);
  return i < policy_registry.size() ? policy_registry[i].name : "unknown";
}

/// The names of every policy, comma-separated, in registry order:
/// "node, socket, exclusive, ..." (for help text and error messages).
constexpr FixedString<256> policy_names() {
  FixedString<256> out;
  for (const PolicyInfo& p : policy_registry) {
    if (!out.empty()) out.append(", ");
    out.append(p.name);
  }
  return out;
}

/// One line per policy for --help: two spaces, the name padded to 20
/// columns, the description, and " (NVIDIA options apply)" where they do.
template <class = void>
constexpr FixedString<1024> policy_help() {
  FixedString<1024> out;
  for (const PolicyInfo& p : policy_registry) {
    out.append("  ").append(p.name);
    for (std::size_t i = p.name.size(); i < 20; ++i) out.push_back(' ');
    out.append(p.description);
    if (p.nvidia_options) out.append(" (NVIDIA options apply)");
    out.push_back('\n');
  }
  return out;
}

/// Parses a policy name as docs/contract.md section 3 writes it
/// ("core-complex"), or its registry alternate ("unique_contiguous").
/// Errors: Errc::invalid_argument naming the text and listing the valid names.
template <class = void>
constexpr Result<PolicyKind> parse_policy(std::string_view name) {
  for (const PolicyInfo& p : policy_registry)
    if (name == p.name || (!p.alternate.empty() && name == p.alternate)) return p.kind;
  std::array<std::string_view, policy_registry.size()> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = policy_registry[i].name;
  std::string_view guess = detail::closest(name, names);
  if (!guess.empty())
    return fail(Errc::invalid_argument, "unknown policy '", name.substr(0, 40), "'; did you mean ", guess,
                "? valid policies: ", policy_names());
  return fail(Errc::invalid_argument, "unknown policy '", name.substr(0, 40), "'; valid policies: ", policy_names());
}

namespace detail {

/// gpuaff::bind(topo, gpu, spec, job) on a context.
template <class = void>
constexpr Result<CpuSet> bind_spec(BindingContext& ctx, int gpu, const PolicySpec& spec) {
  return bind_kind_of(spec.kind, ctx, gpu, spec.nvidia);
}

}  // namespace detail

/// gpuaff::bind (policy/bind.hpp) with the policy a PolicySpec names.
template <class Topo, class Gpu, class Spec, class Job = const JobOptions&>
  requires std::same_as<std::remove_cvref_t<Topo>, Topology> && std::convertible_to<Gpu, int> &&
           std::same_as<std::remove_cvref_t<Spec>, PolicySpec> && std::convertible_to<Job, const JobOptions&>
constexpr Result<CpuSet> bind(Topo&& topo, Gpu&& gpu, Spec&& spec, Job&& job = JobOptions{}) {
  BindingContext ctx(topo, job);
  return detail::bind_spec(ctx, static_cast<int>(gpu), spec);
}

/// The binding of every participating GPU (0..nproc-1, or every visible GPU),
/// in GPU order: the table `gpuaff bind` can print. Each GPU's set is
/// bind(topo, g, spec, job); the facts they share are derived once.
/// Errors: the first GPU's error, prefixed with its index.
template <class = void>
constexpr Result<std::vector<CpuSet>> bind_all(const Topology& topo, const PolicySpec& spec, const JobOptions& job = {}) {
  GPUAFF_TRY(int participating, detail::participating_gpus(topo, job));
  BindingContext ctx(topo, job);
  std::vector<CpuSet> out;
  out.reserve(static_cast<std::size_t>(participating));
  for (int g = 0; g < participating; ++g) {
    auto r = detail::bind_spec(ctx, g, spec);
    if (!r) return fail(r.error().code(), "GPU ", g, ": ", r.error().message());
    out.push_back(*r);
  }
  return out;
}

/// Every visible GPU bound with each of `specs`, errors included:
/// table[s][g] is bind(topo, g, specs[s], job) (a GPU beyond JobOptions::nproc
/// gets bind's error), with the facts the bindings share (nodes, allowed
/// CPUs, physical cores) derived once for the whole table.
/// What `gpuaff topo` prints, and what a launcher binding every local rank calls.
template <class = void>
constexpr std::vector<std::vector<Result<CpuSet>>> bind_table(const Topology& topo, const std::vector<PolicySpec>& specs,
                                                              const JobOptions& job = {}) {
  BindingContext ctx(topo, job);
  std::vector<std::vector<Result<CpuSet>>> table(specs.size());
  for (std::size_t s = 0; s < specs.size(); ++s) {
    table[s].reserve(topo.gpus.size());
    for (int g = 0; g < static_cast<int>(topo.gpus.size()); ++g) table[s].push_back(detail::bind_spec(ctx, g, specs[s]));
  }
  return table;
}

}  // namespace v0
}  // namespace gpuaff
