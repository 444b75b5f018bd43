// The plan of bind and exec (and topo's policy and job) from the command
// line's options, through the library's launch layer (gpuaff/launch/).
#include <utility>

#include "commands.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace gpuaff::cli {
namespace {

/// A topology read for binding and the request to plan on it.
struct Prepared {
  Topology topo;
  LaunchRequest request;
};

/// The cgroup cpuset of the root the options read (--root, or this machine);
/// nullopt for a topology file, which carries none. Under --baseline affinity
/// it only feeds a warning, so a root whose cgroup files cannot be read gives
/// nullopt there; under --baseline cgroup that is the error.
Result<std::optional<CgroupCpuset>> cgroup_of(const PlanOptions& o) {
  if (!o.source.topology_file.empty() || !o.source.hwloc_xml.empty()) return std::optional<CgroupCpuset>{};
  auto cgroup = read_cgroup_cpuset(o.source.root.empty() ? std::string("/") : o.source.root);
  if (!cgroup) {
    if (o.baseline == Baseline::affinity) return std::optional<CgroupCpuset>{};
    Error e = cgroup.error();
    e.prepend("--baseline cgroup: ");
    return Unexpected<Error>(e);
  }
  return std::optional<CgroupCpuset>(std::move(*cgroup));
}

Result<Prepared> prepare(const PlanOptions& o, MemPolicy membind) {
  LaunchRequest request{.gpu = o.gpu.value_or(0), .membind = membind};
  request.share = o.share;
  request.cuda_device_order = o.source.visible.with_environment().cuda_device_order;
  request.nic_env = o.nic_env;
  request.mem_nodes = o.mem_nodes;
  GPUAFF_TRY(request.policy, policy_spec(o));
  GPUAFF_TRY(request.job, job_options(o));
  request.baseline = o.baseline;
  request.unreachable = o.unreachable;
  SourceOptions source = o.source;
  // bind and exec read only what the binding needs; the nearest node needs the
  // distances, and the NICs and the GPU's memory nodes come with a full read.
  bool full = o.unreachable == Unreachable::nearest || o.nic_env || o.mem_nodes == MemNodes::gpu;
  source.detail = full ? SysfsDetail::full : SysfsDetail::binding;
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
    // The launcher's local size stands for --nproc; a malformed one is a usage error.
    auto size = local_size(process_environment());
    if (!size) {
      Error e = size.error();
      e.prepend("--local-rank: ").append(", or pass --nproc N");
      return Unexpected<Error>(e);
    }
    request.local_size = *size;
  }
  GPUAFF_TRY(request.cgroup, cgroup_of(o));
  GPUAFF_TRY(Topology topo, load_topology(source));
  return Prepared{std::move(topo), std::move(request)};
}

}  // namespace

Result<PolicySpec> policy_spec(const PlanOptions& o) {
  GPUAFF_TRY(PolicyKind kind, parse_policy(o.policy));
  GPUAFF_TRY_VOID(check_nvidia_options_apply(kind, o.nvidia_flags));
  return PolicySpec{.kind = kind, .nvidia = o.nvidia};
}

Result<JobOptions> job_options(const PlanOptions& o) { return parse_unknown_node(o.unknown_node, JobOptions{.nproc = o.nproc}); }

Result<LaunchPlan> plan_binding(const PlanOptions& o, MemPolicy membind) {
  GPUAFF_TRY(Prepared p, prepare(o, membind));
  return make_plan(std::move(p.topo), p.request);
}

Result<std::vector<LaunchPlan>> plan_every_gpu(const PlanOptions& o, MemPolicy membind) {
  GPUAFF_TRY(Prepared p, prepare(o, membind));
  int count = static_cast<int>(p.topo.gpus.size());
  if (count == 0) {
    return fail(Errc::not_found, "no GPU is visible in ", p.topo.origin.view(),
                " (--gpu all); check CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES and --visible-devices");
  }
  if (p.request.job.nproc > 0 && p.request.job.nproc < count) count = p.request.job.nproc;
  std::vector<LaunchPlan> plans;
  for (int g = 0; g < count; ++g) {
    p.request.gpu = g;
    GPUAFF_TRY(LaunchPlan plan, make_plan(p.topo, p.request));
    plans.push_back(std::move(plan));
  }
  return plans;
}

bool visibility_list_failed(const PlanOptions& o) {
  SourceOptions source = o.source;
  source.detail = SysfsDetail::binding;
  if (!load_topology(source)) {
    source.visible = VisibleDevices{.list = std::nullopt, .use_environment = false};
    return static_cast<bool>(load_topology(source));
  }
  return false;
}

void print_warnings(const LaunchPlan& p) {
  for (const auto& w : p.warnings) print_line(stderr, "gpuaff: warning: " + w);
}

}  // namespace gpuaff::cli
