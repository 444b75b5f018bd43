#pragma once
// PyTorch's `--numa-binding=exclusive`: the node's allowed physical cores split
// without overlap among the node's participating GPUs.

#include "gpuaff/policy/common.hpp"
#include "gpuaff/policy/context.hpp"

namespace gpuaff {
inline namespace v0 {

/// The allowed CPUs of the GPU's node, grouped into physical cores (all
/// allowed siblings together, whatever the SMT width) and sorted by their
/// lowest thread, are cut into as many contiguous runs as the node has
/// participating GPUs: per = cores / GPUs each, and the remainder one more
/// each to the lowest GPUs. GPU r of the node (in index order) gets run r.
struct ExclusivePolicy {
  /// Errors: those of resolve_gpu_node (for this GPU or one that shares the
  /// split); Errc::empty_result when the node has no allowed CPU;
  /// Errc::insufficient_cores "only K physical cores on node N but M GPUs".
  constexpr Result<CpuSet> bind(const Topology& topo, int gpu, const JobOptions& job) const {
    detail::JobContext ctx(topo, job);
    return evaluate(ctx, gpu);
  }
  /// bind() on the facts of a context (shared by the job's bindings).
  constexpr Result<CpuSet> evaluate(detail::JobContext& ctx, int gpu) const {
    const Topology& topo = ctx.topo();
    GPUAFF_TRY(detail::NodeShare share, detail::node_share(ctx, gpu));
    const CpuSet& cpus = ctx.allowed(share.node);
    if (cpus.empty()) return detail::no_allowed_cpu(topo, gpu, share.node, "exclusive");
    const detail::CoreList& cores = ctx.cores(share.node);
    int k = static_cast<int>(cores.size());
    int m = share.count;
    if (k < m)
      return fail(Errc::insufficient_cores, "exclusive: only ", k, " physical cores on node ", share.node, " but ", m,
                  " GPUs (allowed CPUs of the node: ", detail::cpulist_text(cpus),
                  "); use --policy node to share them, or fewer processes (--nproc)");
    int per = k / m;
    int extra = k % m;
    int r = share.rank;
    int begin = r * per + (r < extra ? r : extra);
    int len = per + (r < extra ? 1 : 0);
    return detail::threads_of(topo, cores, static_cast<std::size_t>(begin), static_cast<std::size_t>(len));
  }
};
static_assert(BindingPolicy<ExclusivePolicy>);

}  // namespace v0
}  // namespace gpuaff
