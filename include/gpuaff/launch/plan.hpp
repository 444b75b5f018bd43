#pragma once
// The plan of one process's binding, made before anything is applied: which
// device (a visible GPU by index or local rank, or any PCI device), which
// CPUs the policy gives it, which memory nodes and memory policy; then
// applying it to every thread of this process, checked. What `gpuaff bind`
// prints, what `gpuaff exec` applies, and what any other launcher calls.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/apply/process.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/policy/locality.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// What to plan. The topology passed with it must already hold the visible
/// GPUs only (select_visible_gpus) and, for `pci`, that device
/// (SysfsOptions::extra_pci).
struct LaunchRequest {
  std::optional<PciAddress> pci{};  ///< bind this PCI device (any device, a NIC too); else the GPU `gpu`
  int gpu = 0;                      ///< the visible GPU index
  std::string rank_source{};        ///< "LOCAL_RANK=3" when `gpu` is a local rank (LauncherValue::source()): errors name it
  PolicySpec policy{};
  JobOptions job{};
  MemPolicy membind = MemPolicy::none;  ///< the memory policy to apply over memory_nodes
  bool nic_env = false;  ///< choose the GPU's RDMA NIC and export it (launch/nics.hpp); needs Topology::nics
  MemNodes mem_nodes = MemNodes::cpu;  ///< which nodes memory_nodes names
};

/// Everything one binding needs, computed before anything is applied.
struct LaunchPlan {
  Topology topo;         ///< the topology bound on (with_pci_target's copy when a non-GPU device is the target)
  int gpu = 0;           ///< the target's index in topo.gpus
  int visible_gpu = -1;  ///< the target's visible GPU index; -1 for a PCI device that is not a visible GPU
  PolicySpec policy{};
  JobOptions job{};
  CpuSet cpus{};          ///< the policy's CPUs for the target
  NodeSet memory_nodes{}; ///< the target's memory node(s)
  int node = -1;          ///< the target's NUMA node (after JobOptions::unknown_node)
  MemPolicy membind = MemPolicy::none;
  std::string rank_source{};  ///< as in the request
  /// Variables to set for the command, in order (the --nic-env choice).
  std::vector<std::pair<std::string, std::string>> env{};

  const Gpu& target() const { return topo.gpus[static_cast<std::size_t>(gpu)]; }
  /// The memory policy to apply: `membind` over `memory_nodes`.
  MemoryOptions memory(OnRefused on_refused = OnRefused::error) const {
    return MemoryOptions{.policy = membind, .nodes = memory_nodes, .on_refused = on_refused};
  }
};

namespace detail {

/// "0 0000:10:1c.0, 1 0000:10:1d.0": the visible GPUs, for "no such GPU" messages.
inline std::string visible_gpu_list(const Topology& topo) {
  std::string s;
  for (const auto& g : topo.gpus) {
    if (!s.empty()) s += ", ";
    s += std::to_string(g.index) + " " + std::string(g.address().to_string().view());
  }
  return s;
}

/// Errc::not_found for a GPU index beyond the `count` visible GPUs, naming
/// where the index came from and the GPUs there are.
[[gnu::cold]] inline Unexpected<Error> no_such_gpu(const Topology& topo, const LaunchRequest& r) {
  int count = static_cast<int>(topo.gpus.size());
  std::string why = r.rank_source.empty() ? "--gpu " + std::to_string(r.gpu) : r.rank_source;
  if (count == 0) {
    return fail(Errc::not_found, "no GPU is visible in ", topo.origin.view(), " (", why,
                "); check CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES and --visible-devices, or name a device "
                "with --pci BDF");
  }
  std::string hint = r.rank_source.empty()
                         ? "pick one of them"
                         : "when the launcher gives each rank its own GPUs through *_VISIBLE_DEVICES, use --gpu 0";
  return fail(Errc::not_found, "no GPU ", r.gpu, " (", why, "): ", count, " visible in ", topo.origin.view(), " (",
              visible_gpu_list(topo), "); ", hint);
}

/// The GPU's own memory nodes (Gpu::memory_nodes, from the driver's numa_status).
/// Errors: Errc::not_found when it has none.
inline Result<NodeSet> gpu_memory_nodes(const Topology& topo, int gpu) {
  const Gpu& g = topo.gpus[static_cast<std::size_t>(gpu)];
  NodeSet nodes;
  for (int n : g.memory_nodes)
    if (NodeSet::valid_id(n)) nodes.set(n);
  if (nodes.empty())
    return fail(Errc::not_found, "--mem-nodes gpu: GPU ", g.index, " (", g.address().to_string().view(),
                ") has no memory node of its own in ", topo.origin.view(),
                " (only GH200/GB200 in coherent mode have one: proc/driver/nvidia/gpus/BDF/numa_status); use "
                "--mem-nodes cpu");
  return nodes;
}

/// Every node with CPUs in the package that holds node `node`'s CPUs.
/// Errors: Errc::not_found when the node has no CPU or no package.
inline Result<NodeSet> socket_memory_nodes(const Topology& topo, int node) {
  const NumaNode* n = topo.find_node(node);
  const Package* p = n == nullptr || n->cpus.empty() ? nullptr : topo.package_of_cpu(n->cpus.first());
  if (p == nullptr)
    return fail(Errc::not_found, "--mem-nodes socket: node ", node, " has no CPU in a known package in ",
                topo.origin.view(), "; use --mem-nodes cpu");
  NodeSet nodes;
  for (const auto& other : topo.nodes)
    if (other.cpus.intersects(p->cpus) && NodeSet::valid_id(other.id)) nodes.set(other.id);
  return nodes;
}

}  // namespace detail

/// Plans the binding of the request's device on `topo`.
/// Errors: Errc::not_found (no such visible GPU, naming those there are; a
/// PCI device the topology does not hold), and the errors of bind(),
/// memory_nodes() and resolve_gpu_node() for the target, and with
/// `nic_env` those of nic_environment(), with `mem_nodes` gpu or socket
/// Errc::not_found when the GPU has no such nodes.
inline Result<LaunchPlan> make_plan(Topology topo, const LaunchRequest& request) {
  LaunchPlan plan;
  plan.policy = request.policy;
  plan.job = request.job;
  plan.membind = request.membind;
  plan.rank_source = request.rank_source;
  if (request.pci) {
    for (const auto& g : topo.gpus)
      if (g.address() == *request.pci) plan.visible_gpu = g.index;
    GPUAFF_TRY(plan.topo, with_pci_target(topo, *request.pci, &plan.gpu));
  } else {
    if (request.gpu < 0 || request.gpu >= static_cast<int>(topo.gpus.size())) return detail::no_such_gpu(topo, request);
    plan.topo = std::move(topo);
    plan.gpu = request.gpu;
    plan.visible_gpu = request.gpu;
  }
  GPUAFF_TRY(plan.cpus, bind(plan.topo, plan.gpu, plan.policy, plan.job));
  GPUAFF_TRY(plan.memory_nodes, memory_nodes(plan.topo, plan.gpu, plan.job));
  GPUAFF_TRY(plan.node, resolve_gpu_node(plan.topo, plan.gpu, plan.job));
  if (request.mem_nodes == MemNodes::gpu) {
    GPUAFF_TRY(plan.memory_nodes, detail::gpu_memory_nodes(plan.topo, plan.gpu));
  } else if (request.mem_nodes == MemNodes::socket) {
    GPUAFF_TRY(plan.memory_nodes, detail::socket_memory_nodes(plan.topo, plan.node));
  }
  if (request.nic_env) {
    GPUAFF_TRY(plan.env, nic_environment(plan.topo, plan.gpu));
  }
  return plan;
}

/// This machine's online CPUs (sys/devices/system/cpu/online).
/// Errors: Errc::io_error when the file cannot be read; the parse errors of CpuSet::parse_list.
inline Result<CpuSet> live_online_cpus() {
  std::string text;
  if (int err = detail::read_whole_file("/sys/devices/system/cpu/online", text); err != 0)
    return Unexpected<Error>(make_sys_error(Errc::io_error, err, "cannot read /sys/devices/system/cpu/online"));
  return CpuSet::parse_list(text);
}

/// A plan made from another machine's description (a recording, a JSON or
/// XML file) names that machine's CPU ids: they must be online here.
/// Errors: Errc::empty_result naming the CPUs that are not.
inline Result<void> check_cpus_exist(const LaunchPlan& plan, const CpuSet& online) {
  if (plan.cpus.is_subset_of(online)) return {};
  return fail(Errc::empty_result, "CPUs ", (plan.cpus - online).to_list(), " of the binding (planned from ",
              plan.topo.origin.view(), ") do not exist here (online: ", online.to_list(),
              "); plan from this machine (leave out --root/--topology) or run it where those CPUs exist");
}

/// Where a plan was made, for apply_plan.
enum class PlannedOn {
  this_machine,     ///< read from this machine
  another_machine,  ///< read from a recording, a JSON or XML file: checked against this machine first
};

/// Binds every thread of this process to the plan's CPUs, with its memory
/// policy. A plan from another machine is first checked against this
/// machine's online CPUs (when they can be read). The mask the kernel then
/// reports must be the planned one: the kernel silently drops CPUs outside a
/// cgroup's cpuset.
/// Errors: those of check_cpus_exist and bind_process() (prefixed, for a plan
/// from another machine, with where it came from); Errc::empty_result when the
/// kernel narrowed the mask.
inline Result<ProcessBinding> apply_plan(const LaunchPlan& plan, OnRefused on_refused, PlannedOn where) {
  bool foreign = where == PlannedOn::another_machine;
  if (foreign) {
    if (auto online = live_online_cpus()) GPUAFF_TRY_VOID(check_cpus_exist(plan, *online));
  }
  auto applied = bind_process(plan.cpus, plan.memory(on_refused));
  if (!applied) {
    Error e = applied.error();
    if (foreign) e.prepend("cannot apply the binding planned from " + std::string(plan.topo.origin.view()) + " here: ");
    return Unexpected<Error>(e);
  }
  GPUAFF_TRY(CpuSet now, thread_affinity());
  if (now != plan.cpus) {
    return fail(Errc::empty_result, "the kernel bound this process to CPUs ", now.to_list(), " instead of ",
                plan.cpus.to_list(), " (a cgroup cpuset or container limit excludes the others); plan from this "
                "machine (leave out --root/--topology) or widen the container's CPU set");
  }
  return applied;
}

}  // namespace v0
}  // namespace gpuaff
