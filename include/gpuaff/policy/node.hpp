// SPDX-License-Identifier: Apache-2.0
#pragma once
// PyTorch's `--numa-binding=node`: the allowed CPUs of the GPU's NUMA node.

#include "gpuaff/config.hpp"

#include "gpuaff/policy/bind.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

/// The allowed CPUs of the GPU's NUMA node (resolve_gpu_node).
/// Errors: those of resolve_gpu_node; Errc::empty_result when the node has
/// no allowed CPU (a memory-only node, or a container that excludes it).
struct NodePolicy {
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    GPUAFF_TRY(int node, ctx.gpu_node(gpu));
    const CpuSet& cpus = ctx.node_cpus(node);
    if (cpus.empty()) return no_allowed_cpu(ctx.topology(), gpu, node, "node");
    return cpus;
  }
};
static_assert(BindingPolicy<NodePolicy>);

}  // namespace v0
}  // namespace gpuaff
