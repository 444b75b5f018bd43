#pragma once
// Choosing a policy at run time (--policy NAME) and the one `bind` every
// policy, built-in or user-written, goes through.

#include <array>
#include <string_view>
#include <vector>

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/context.hpp"
#include "gpuaff/policy/core_complex.hpp"
#include "gpuaff/policy/exclusive.hpp"
#include "gpuaff/policy/locality.hpp"
#include "gpuaff/policy/node.hpp"
#include "gpuaff/policy/nvidia.hpp"
#include "gpuaff/policy/socket.hpp"

namespace gpuaff {
inline namespace v0 {

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

inline constexpr std::array<PolicyKind, 9> all_policy_kinds{
    PolicyKind::node,          PolicyKind::socket, PolicyKind::exclusive,     PolicyKind::core_complex,
    PolicyKind::all,           PolicyKind::single, PolicyKind::single_unique, PolicyKind::unique_interleaved,
    PolicyKind::unique_contiguous};

/// The name used on the command line: "node", "core-complex", "unique-contiguous", ...
constexpr std::string_view to_string(PolicyKind k) {
  switch (k) {
    case PolicyKind::node: return "node";
    case PolicyKind::socket: return "socket";
    case PolicyKind::exclusive: return "exclusive";
    case PolicyKind::core_complex: return "core-complex";
    case PolicyKind::all: return "all";
    case PolicyKind::single: return "single";
    case PolicyKind::single_unique: return "single-unique";
    case PolicyKind::unique_interleaved: return "unique-interleaved";
    case PolicyKind::unique_contiguous: return "unique-contiguous";
  }
  return "unknown";
}

/// Parses a policy name as CONTRACT.md writes it ("core-complex"); NVIDIA's
/// spelling with '_' ("unique_contiguous") is accepted too.
/// Errors: Errc::invalid_argument naming the text and listing the valid names.
constexpr Result<PolicyKind> parse_policy(std::string_view name) {
  for (PolicyKind k : all_policy_kinds) {
    std::string_view want = to_string(k);
    if (name.size() != want.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i)
      same = name[i] == want[i] || (name[i] == '_' && want[i] == '-');
    if (same) return k;
  }
  return fail(Errc::invalid_argument, "unknown policy '", name.substr(0, 40),
              "'; valid policies: node, socket, exclusive, core-complex, all, single, single-unique, "
              "unique-interleaved, unique-contiguous");
}

/// A policy chosen at run time; `nvidia` is read by the five NVIDIA modes only.
struct PolicySpec {
  PolicyKind kind = PolicyKind::node;
  NvidiaOptions nvidia{};
};

namespace detail {

/// gpuaff::bind on a context: the policy's result (a built-in policy
/// evaluates on the context's facts; a user-written one is called as
/// policy.bind(topo, gpu, job)), checked.
template <BindingPolicy P>
constexpr Result<CpuSet> bind_checked(JobContext& ctx, int gpu, const P& policy) {
  const Topology& topo = ctx.topo();
  // One Result, returned on every path, so it is made in the caller's place
  // (no 1 KiB copy); the checks read it there.
  Result<CpuSet> result = [&]() -> Result<CpuSet> {
    GPUAFF_TRY_VOID(ctx.check(gpu));
    if constexpr (ContextPolicy<P>) return policy.evaluate(ctx, gpu);
    else return policy.bind(topo, gpu, ctx.job());
  }();
  if (!result) return result;
  const CpuSet& usable = ctx.usable();
  if (result->empty())
    result = fail(Errc::empty_result, "the policy gives ", gpu_label(topo, gpu), " no CPU; an empty mask is never applied");
  else if (!result->is_subset_of(usable))
    result = fail(Errc::invalid_argument, "the policy gives ", gpu_label(topo, gpu), " CPUs ",
                  cpulist_text(*result - usable), " that are not allowed and online (usable: ", cpulist_text(usable), ")");
  return result;
}

/// gpuaff::bind(topo, gpu, spec, job) on a context.
constexpr Result<CpuSet> bind_spec(JobContext& ctx, int gpu, const PolicySpec& spec) {
  switch (spec.kind) {
    case PolicyKind::node: return bind_checked(ctx, gpu, NodePolicy{});
    case PolicyKind::socket: return bind_checked(ctx, gpu, SocketPolicy{});
    case PolicyKind::exclusive: return bind_checked(ctx, gpu, ExclusivePolicy{});
    case PolicyKind::core_complex: return bind_checked(ctx, gpu, CoreComplexPolicy{});
    case PolicyKind::all: return bind_checked(ctx, gpu, AllPolicy{spec.nvidia});
    case PolicyKind::single: return bind_checked(ctx, gpu, SinglePolicy{spec.nvidia});
    case PolicyKind::single_unique: return bind_checked(ctx, gpu, SingleUniquePolicy{spec.nvidia});
    case PolicyKind::unique_interleaved: return bind_checked(ctx, gpu, UniqueInterleavedPolicy{spec.nvidia});
    case PolicyKind::unique_contiguous: return bind_checked(ctx, gpu, UniqueContiguousPolicy{spec.nvidia});
  }
  return fail(Errc::invalid_argument, "unknown policy kind ", static_cast<int>(spec.kind));
}

/// Converts to bind_spec(ctx, gpu, spec): emplace_back makes the Result in
/// the vector itself, where push_back would copy 1 KiB into it.
struct BindLater {
  JobContext* ctx;
  int gpu;
  const PolicySpec* spec;
  constexpr operator Result<CpuSet>() const { return bind_spec(*ctx, gpu, *spec); }  // NOLINT
};

}  // namespace detail

/// Binds GPU `gpu` with any BindingPolicy, and checks what the policy gives:
/// never empty, never outside Topology::usable().
/// Errors: the policy's own; Errc::empty_result for an empty set;
/// Errc::invalid_argument when a (user-written) policy returns CPUs that are
/// not allowed or not online.
template <BindingPolicy P>
constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const P& policy, const JobOptions& job = {}) {
  detail::JobContext ctx(topo, job);
  return detail::bind_checked(ctx, gpu, policy);
}

/// Binds GPU `gpu` with the policy `spec` names.
/// Errors: those of the chosen policy (see each policy's bind).
constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const PolicySpec& spec, const JobOptions& job = {}) {
  detail::JobContext ctx(topo, job);
  return detail::bind_spec(ctx, gpu, spec);
}

/// The binding of every participating GPU (0..nproc-1, or every visible GPU),
/// in GPU order: the table `gpuaff bind` can print. Each GPU's set is
/// bind(topo, g, spec, job); the facts they share are derived once.
/// Errors: the first GPU's error, prefixed with its index.
constexpr Result<std::vector<CpuSet>> bind_all(const Topology& topo, const PolicySpec& spec, const JobOptions& job = {}) {
  GPUAFF_TRY(int participating, detail::participating_gpus(topo, job));
  detail::JobContext ctx(topo, job);
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
/// CPUs, physical cores, cache groups) derived once for the whole table.
/// What `gpuaff topo` prints, and what a launcher binding every local rank calls.
constexpr std::vector<std::vector<Result<CpuSet>>> bind_table(const Topology& topo, const std::vector<PolicySpec>& specs,
                                                              const JobOptions& job = {}) {
  detail::JobContext ctx(topo, job);
  std::vector<std::vector<Result<CpuSet>>> table(specs.size());
  for (std::size_t s = 0; s < specs.size(); ++s) {
    table[s].reserve(topo.gpus.size());
    for (int g = 0; g < static_cast<int>(topo.gpus.size()); ++g)
      table[s].emplace_back(detail::BindLater{&ctx, g, &specs[s]});
  }
  return table;
}

}  // namespace v0
}  // namespace gpuaff
