// SPDX-License-Identifier: Apache-2.0
#pragma once
// PyTorch's `--numa-binding=exclusive`: the node's allowed physical cores split
// without overlap among the node's participating GPUs.

#include "gpuaff/config.hpp"

#include "gpuaff/policy/bind.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

/// The allowed CPUs of the GPU's node, grouped into physical cores (all
/// allowed siblings together, whatever the SMT width) and sorted by their
/// lowest thread, are cut into as many contiguous runs as the node has
/// participating GPUs: per = cores / GPUs each, and the remainder one more
/// each to the lowest GPUs. GPU r of the node (in index order) gets run r.
/// Errors: those of resolve_gpu_node (for this GPU or one that shares the
/// split); Errc::empty_result when the node has no allowed CPU;
/// Errc::insufficient_cores "only K physical cores on node N but M GPUs".
struct ExclusivePolicy {
  template <class = void>
  constexpr Result<CpuSet> evaluate(BindingContext& ctx, int gpu) const {
    GPUAFF_TRY(NodeShare node, ctx.node_share(gpu));
    const CpuSet& cpus = ctx.node_cpus(node.node);
    if (cpus.empty()) return no_allowed_cpu(ctx.topology(), gpu, node.node, "exclusive");
    const CoreList& cores = ctx.cores(node.node);
    if (cores.size() < static_cast<std::size_t>(node.count))
      return fail(Errc::insufficient_cores, "exclusive: only ", cores.size(), " physical cores on node ", node.node, " but ",
                  node.count, " GPUs (allowed CPUs of the node: ", detail::cpulist_text(cpus),
                  "); use policy=node to share them, or fewer processes (nproc=N)");
    return share(cores, node.count, node.rank);
  }
};
static_assert(BindingPolicy<ExclusivePolicy>);

}  // namespace v0
}  // namespace gpuaff
