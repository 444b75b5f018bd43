// The plan of bind and exec (and topo's policy and job) from the command
// line's options, through the library's launch layer (gpuaff/launch/).
#include "commands.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "policies.hpp"

namespace gpuaff::cli {

Result<PolicySpec> policy_spec(const PlanOptions& o) {
  GPUAFF_TRY(PolicyKind kind, parse_policy(o.policy));
  return PolicySpec{.kind = kind, .nvidia = o.nvidia};
}

Result<JobOptions> job_options(const PlanOptions& o) { return parse_unknown_node(o.unknown_node, JobOptions{.nproc = o.nproc}); }

Result<LaunchPlan> plan_binding(const PlanOptions& o, MemPolicy membind) {
  LaunchRequest request{.gpu = o.gpu.value_or(0), .membind = membind, .nic_env = o.nic_env, .mem_nodes = o.mem_nodes};
  GPUAFF_TRY(request.policy, policy_spec(o));
  GPUAFF_TRY(request.job, job_options(o));
  SourceOptions source = o.source;
  // bind and exec: read only what the binding needs; the NICs come with a full read
  source.detail = o.nic_env || o.mem_nodes == MemNodes::gpu ? SysfsDetail::full : SysfsDetail::binding;
  if (!o.pci.empty()) {
    auto a = PciAddress::parse(o.pci);
    if (!a) return fail(Errc::invalid_argument, "--pci: ", a.error().message());
    request.pci = *a;
    source.extra_pci.push_back(*a);
  }
  if (o.local_rank) {
    auto rank = local_rank(process_environment());
    if (!rank) {
      Error e = rank.error();
      e.prepend("--local-rank: ").append(", or pass --gpu N");
      return Unexpected<Error>(e);
    }
    request.gpu = rank->value;
    request.rank_source = rank->source();
  }
  GPUAFF_TRY(Topology topo, load_topology(source));
  return make_plan(std::move(topo), request);
}

}  // namespace gpuaff::cli
