// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one gpuaff::bind every policy, built-in or user-written, goes through.
// Each policy's header includes it, so a TU that binds with one policy
// includes that policy's header and pays for nothing else (benchmarks row 6b);
// choosing a policy by name at run time: dispatch.hpp.

#include "gpuaff/config.hpp"

#include <concepts>
#include <type_traits>

#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// gpuaff::bind on a context: the policy's result, checked: never empty,
/// never outside the usable CPUs.
template <class P>
constexpr Result<CpuSet> bind_checked(BindingContext& ctx, int gpu, const P& policy) {
  const Topology& topo = ctx.topology();
  Result<CpuSet> result = [&]() -> Result<CpuSet> {
    GPUAFF_TRY_VOID(ctx.check_gpu(gpu));
    if constexpr (ContextPolicy<P>) return policy.evaluate(ctx, gpu);
    else return policy.bind(topo, gpu, ctx.job());
  }();
  if (!result) return result;
  const CpuSet& usable = ctx.usable();
  if (result->empty())
    return fail(Errc::empty_result, "the policy gives ", gpu_label(topo, gpu), " no CPU; an empty mask is never applied");
  if (!result->is_subset_of(usable))
    return fail(Errc::invalid_argument, "the policy gives ", gpu_label(topo, gpu), " CPUs ", cpulist_text(*result - usable),
                " that are not allowed and online (usable: ", cpulist_text(usable), ")");
  return result;
}

}  // namespace detail

/// Binds GPU `gpu` with any BindingPolicy and checks what the policy gives:
/// never empty, never outside Topology::usable(). (A PolicySpec, the policy
/// chosen by name: the overload in dispatch.hpp.)
/// Errors: the policy's own; Errc::empty_result for an empty set;
/// Errc::invalid_argument when a (user-written) policy returns CPUs that are
/// not allowed or not online.
///
/// Every parameter is a constrained forwarding reference so that an
/// unqualified bind(topo, 0, ExclusivePolicy{}) under `using namespace std;`
/// picks this function over std::bind (which takes forwarding references
/// too, and would otherwise win on the topology's missing const).
template <class Topo, class Gpu, class Policy, class Job = const JobOptions&>
  requires std::same_as<std::remove_cvref_t<Topo>, Topology> && std::convertible_to<Gpu, int> &&
           BindingPolicy<std::remove_cvref_t<Policy>> && std::convertible_to<Job, const JobOptions&>
constexpr Result<CpuSet> bind(Topo&& topo, Gpu&& gpu, Policy&& policy, Job&& job = JobOptions{}) {
  BindingContext ctx(topo, job);
  return detail::bind_checked(ctx, static_cast<int>(gpu), policy);
}

}  // namespace v0
}  // namespace gpuaff
