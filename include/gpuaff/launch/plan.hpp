// SPDX-License-Identifier: Apache-2.0
#pragma once
// The plan of one process's binding, made before anything is applied: which
// device (a visible GPU by index or local rank, or any PCI device), which
// CPUs the policy gives it, which memory nodes and memory policy; then
// applying it to every thread of this process, checked. What `gpuaff bind`
// prints, what `gpuaff exec` applies, and what any other launcher calls.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
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
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/policy/dispatch.hpp"
#include "gpuaff/policy/locality.hpp"
#include "gpuaff/policy/pci_target.hpp"
#include "gpuaff/policy/roles.hpp"
#include "gpuaff/policy/split.hpp"
#include "gpuaff/policy/threads.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "gpuaff/source/reserved.hpp"
#include "gpuaff/source/validate.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// What the process's surroundings add to the options of a plan: read once
/// from the environment and the machine by launch_context() (launch/front.hpp),
/// or written as a value by a caller that knows them. The options
/// themselves (LaunchOptions) are the only description of what was asked.
struct LaunchContext {
  /// local_rank=true: the launcher's local rank, and the variable that gave
  /// it (errors name it: "LOCAL_RANK=3").
  std::optional<LauncherValue> local_rank{};
  /// The launcher's local size (local_size()): stands for nproc when that is
  /// not given. Errors name the variable it came from.
  std::optional<LauncherValue> local_size{};
  /// The process's cgroup cpuset (read_cgroup_cpuset): required by
  /// baseline=cgroup; under baseline=affinity it only feeds a warning.
  std::optional<CgroupCpuset> cgroup{};
  /// What the system reserved (read_system_reservations): required by
  /// reserve_os_cores=auto; with roles, main and comm take its CPUs first.
  std::optional<SystemReservations> reserved{};
  /// CUDA_DEVICE_ORDER as the job has it (VisibleDevices::cuda_device_order):
  /// a plan warns when it can make CUDA's numbering differ from gpuaff's.
  std::optional<std::string> cuda_device_order{};
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
  /// The memory nodes for the rank's pinned host buffers (what the GPU copies
  /// from and to): the GPU's node (`node`); when that node has no CPU (a GPU
  /// memory node some firmware names as the PCI numa_node), the nearest node(s)
  /// with CPUs. On GH200/GB200 the PCI numa_node is already the Grace CPU node
  /// beside the GPU's own memory. Never the GPU-memory nodes of mem_nodes=gpu,
  /// and independent of `membind`. With several GPUs per process, the union.
  NodeSet host_nodes{};
  std::string rank_source{};  ///< "LOCAL_RANK=3" when the device is the launcher's local rank
  /// Where the device choice came from: "LOCAL_RANK=3" (a launcher variable),
  /// "gpu=3" or "pci=0000:17:00.0" (named by the caller).
  std::string device_source{};
  std::string nproc_source{};  ///< "LOCAL_WORLD_SIZE=2" when the launcher's local size stood for nproc
  Baseline baseline = Baseline::affinity;
  /// Unreachable::nearest was used: the nodes whose allowed CPUs `cpus` are
  /// (the closest to the target's node that have any); empty otherwise.
  std::vector<int> nearest_nodes{};
  Share share = Share::visible;
  /// One line each, for stderr: settings that are likely not what the user
  /// meant; they change nothing in the plan.
  std::vector<std::string> warnings{};
  /// Variables to set for the command, in order (nic_env's).
  std::vector<std::pair<std::string, std::string>> env{};
  /// nic_env: the target's NIC set as the libraries name it ("mlx5_0:1"), and
  /// its path class; empty and nullopt without nic_env.
  std::vector<std::string> nic_set{};
  /// With nic_env: the host NIC set, the rails on host_nodes ("mlx5_0:1",
  /// "cxi0"; host_nic_set()), for transfers of host buffers.
  std::vector<std::string> host_nic_set{};
  std::optional<PciPath> nic_path{};
  /// Several ranks per GPU: `cpus` is part `part` of `ranks_per_gpu` parts of
  /// the GPU's share (`gpu_share`); 1, 0 and `cpus` otherwise.
  int ranks_per_gpu = 1;
  int part = 0;
  CpuSet gpu_share{};
  /// Several GPUs per process: the others it serves (indexes into topo.gpus,
  /// and their visible indexes); `cpus` and `memory_nodes` are then the union.
  std::vector<int> more_gpus{};
  std::vector<int> more_visible_gpus{};
  /// Roles inside the rank (LaunchOptions::roles): `cpus` cut into whole cores by
  /// role; nullopt without roles. OMP_PLACES/OMP_PROC_BIND in `env` follow
  /// the compute role.
  std::optional<Roles> roles{};
  /// The CPUs kept for the OS before any share was computed: the lowest cores
  /// of reserve_os_cores=N, or the housekeeping CPUs of reserve_os_cores=auto.
  CpuSet os_cores{};
  /// The CPUs the system keeps free of housekeeping work (isolcpus, nohz_full,
  /// isolated partitions) among `cpus`; empty where none or not read.
  CpuSet isolated{};

  const Gpu& target() const { return topo.gpus[static_cast<std::size_t>(gpu)]; }
  /// The memory policy to apply: `membind` over `memory_nodes`.
  MemoryOptions memory(OnRefused on_refused = OnRefused::error) const {
    return MemoryOptions{.policy = membind, .nodes = memory_nodes, .on_refused = on_refused};
  }
};

namespace detail {

/// "0 0000:10:1c.0, 1 0000:10:1d.0": the visible GPUs, for "no such GPU" messages
/// ("0 0000:10:1c.0 (0/2), 1 0000:10:1c.0 (1/2)" for a device's partitions or domains).
inline std::string visible_gpu_list(const Topology& topo) {
  std::string s;
  for (const auto& g : topo.gpus) {
    if (!s.empty()) s += ", ";
    s += std::to_string(g.index) + std::string(" ") + std::string(g.address().to_string().view());
    if (g.pci.compute_partitions > 1)  // a partition or locality domain: which of its device's
      s += std::string(" (") + std::to_string(g.partition) + std::string("/") + std::to_string(g.pci.compute_partitions) + ")";
  }
  return s;
}

/// Errc::not_found for a GPU index beyond the `count` visible GPUs, naming
/// where the index came from and the GPUs there are.
[[gnu::cold]] inline Unexpected<Error> no_such_gpu(const Topology& topo, int gpu, const std::string& rank_source) {
  int count = static_cast<int>(topo.gpus.size());
  std::string why = rank_source.empty() ? std::string("gpu=") + std::to_string(gpu) : rank_source;
  bool none_there = topo.host_gpus.empty() && topo.hidden_gpus.empty() &&
                    std::none_of(topo.pci_devices.begin(), topo.pci_devices.end(), [](const PciDevice& d) { return d.is_gpu(); });
  if (count == 0 && none_there) {
    return fail(Errc::not_found, "no GPU ", gpu, " (", why, "): ", topo.origin.view(), " has no GPU at all (no PCI "
                "device of a display or accelerator class from NVIDIA, AMD or Intel); name the device with pci=BDF");
  }
  if (count == 0) {
    return fail(Errc::not_found, "no GPU is visible in ", topo.origin.view(), " (", why,
                "); check CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES and visible_devices=LIST, or name a device "
                "with pci=BDF");
  }
  std::string hint = rank_source.empty()
                         ? "pick one of them"
                         : "when the launcher gives each rank its own GPUs through *_VISIBLE_DEVICES, use gpu=0";
  return fail(Errc::not_found, "no GPU ", gpu, " (", why, "): ", count, " visible in ", topo.origin.view(), " (",
              visible_gpu_list(topo), "); ", hint);
}

/// Draws bindings from the cgroup cpuset (Baseline::cgroup): the allowed CPUs
/// and memory nodes become the cpuset's, or every online CPU and no memory
/// limit where the process has no cgroup cpuset.
inline Result<void> use_cgroup_baseline(Topology& topo, const std::optional<CgroupCpuset>& cgroup) {
  if (!cgroup)
    return fail(Errc::invalid_argument, "baseline=cgroup needs the process's cgroup cpuset, which ",
                topo.origin.view(), " does not carry; read the machine from a root (root=DIR, or this machine) "
                "instead of a topology file");
  topo.allowed = cgroup->has_cpus ? cgroup->cpus : topo.online;
  topo.mems_allowed = cgroup->has_mems ? cgroup->mems : CpuSet{};
  return {};
}

/// Under Baseline::affinity: a warning when the allowed set is narrower than
/// the cgroup cpuset (a launcher such as mpirun or srun bound the process
/// first); empty otherwise.
inline std::string narrowed_mask_warning(const Topology& topo, const std::optional<CgroupCpuset>& cgroup) {
  if (!cgroup || !cgroup->has_cpus) return {};
  CpuSet wide = cgroup->cpus & topo.online;
  CpuSet usable = topo.usable();
  if (!usable.is_subset_of(wide) || usable == wide) return {};
  return "this process may run on CPUs " + usable.to_list() + " only, narrower than its cgroup's " + wide.to_list() +
         " (" + cgroup->cpus_file + "): a launcher or taskset bound it first; pass baseline=cgroup to draw from "
         "the cgroup, or start it unbound (mpirun --bind-to none, srun --cpu-bind=none)";
}

/// Takes the `n` lowest-numbered physical cores of every NUMA node (all their
/// threads) out of the allowed set: cores a site keeps for the OS. The cores
/// are the node's online cores, whether or not this process may use them, so
/// every process of the machine reserves the same ones.
inline CpuSet reserve_os_cores(Topology& topo, int n) {
  CpuSet taken_cpus;
  if (n <= 0) return taken_cpus;
  for (const NumaNode& node : topo.nodes) {
    int taken = 0;
    for (const Core& c : topo.cores) {  // sorted by lowest thread
      if (taken == n) break;
      if (!c.threads.intersects(node.cpus)) continue;
      topo.allowed -= c.threads;
      taken_cpus |= c.threads;
      ++taken;
    }
  }
  return taken_cpus;
}

/// reserve_os_cores=auto: takes the system's housekeeping CPUs (the online
/// CPUs that isolcpus, nohz_full and isolated cpuset partitions leave) out
/// of the allowed set, and returns them.
/// Errors: Errc::invalid_argument when the reservations were not read (a
/// topology file); Errc::not_found when the system declares no reserved CPU
/// (never a silent N=0); Errc::empty_result when the process may use
/// housekeeping CPUs only.
inline Result<CpuSet> reserve_housekeeping(Topology& topo, const std::optional<SystemReservations>& reserved) {
  if (!reserved)
    return fail(Errc::invalid_argument, "reserve_os_cores=auto takes the CPUs the system keeps for housekeeping, and ",
                topo.origin.view(), " does not carry them; read the machine from a root (root=DIR, or this machine), "
                "or give reserve_os_cores=N");
  if (!reserved->declared())
    return fail(Errc::not_found, "reserve_os_cores=auto: ", topo.origin.view(), " declares no reserved CPU "
                "(sys/devices/system/cpu/isolated and nohz_full are empty or missing, and the process's cgroup is in "
                "no isolated cpuset partition), so the housekeeping CPUs are unknown; boot with isolcpus=/nohz_full=, "
                "or give reserve_os_cores=N for the N lowest cores of every node");
  CpuSet housekeeping = reserved->housekeeping(topo.online);
  CpuSet left = topo.usable() - housekeeping;
  if (left.empty())
    return fail(Errc::empty_result, "reserve_os_cores=auto: this process may use CPUs ", topo.usable().to_list(),
                ", all housekeeping CPUs (the system reserved ", reserved->sources(), "); run it on the reserved "
                "CPUs, or leave reserve_os_cores out");
  topo.allowed -= housekeeping;
  return housekeeping;
}

/// The nodes with allowed CPUs closest to `node` by its SLIT distances
/// (nodeN/distance), ties all included.
/// Errors: Errc::empty_result when no node has an allowed CPU, or `node` has
/// no distances to compare by.
inline Result<std::vector<int>> nearest_allowed_nodes(const Topology& topo, int node) {
  const NumaNode* from = topo.find_node(node);
  CpuSet usable = topo.usable();
  if (from == nullptr || from->distances.size() != topo.nodes.size())
    return fail(Errc::empty_result, "no allowed CPU is on NUMA node ", node, ", and ", topo.origin.view(),
                " gives no distances from it (nodeN/distance) to find the nearest node; widen the allowed CPUs or "
                "pick them with taskset");
  int best = -1;
  std::vector<int> nodes;
  for (std::size_t i = 0; i < topo.nodes.size(); ++i) {
    if (!topo.nodes[i].cpus.intersects(usable)) continue;
    int d = from->distances[i];
    if (best < 0 || d < best) {
      best = d;
      nodes.clear();
    }
    if (d == best) nodes.push_back(topo.nodes[i].id);
  }
  if (nodes.empty())
    return fail(Errc::empty_result, "no NUMA node of ", topo.origin.view(), " has an allowed CPU (usable: ",
                usable.to_list(), ")");
  return nodes;
}

/// Whether no allowed CPU is on NUMA node `node` (a node with CPUs).
inline bool node_unreachable(const Topology& topo, int node) {
  const NumaNode* n = topo.find_node(node);
  return n != nullptr && !n->memory_only() && !n->cpus.intersects(topo.usable());
}

/// JobOptions::nproc from the launcher's local size, when nproc is not given.
/// Errors: Errc::invalid_argument when the local size is more than the visible GPUs.
inline Result<void> use_local_size(LaunchPlan& plan, const LaunchOptions& o, const LaunchContext& c) {
  const std::optional<LauncherValue>& size = c.local_size;
  if (plan.job.nproc != 0 || !size || o.pci) return {};
  int visible = static_cast<int>(plan.topo.gpus.size());
  int gpus = size->value / plan.ranks_per_gpu;  // whole: checked by rank_part()
  if (gpus > visible) {
    return fail(Errc::invalid_argument, size->source(), " (the launcher's processes on this machine) is more "
                "than the ", visible, " GPU(s) this process sees in ", plan.topo.origin.view(),
                plan.ranks_per_gpu > 1 ? std::string(" at ranks_per_gpu=") + std::to_string(plan.ranks_per_gpu) : std::string(),
                "; when each process sees only its own GPU, use gpu=0 (and share=machine); when several ranks share "
                "each GPU, ranks_per_gpu=N; else pass nproc=N");
  }
  plan.job.nproc = gpus;
  plan.nproc_source = size->source();
  return {};
}

/// The ranks per GPU a launcher's local size implies when ranks_per_gpu is not
/// given: local size / GPUs taking part (`visible`, or nproc when fewer) when
/// that is a whole multiple above 1; else 1. Not for one GPU: a process that
/// sees only its own GPU (srun --gpus-per-task) under a local size of several
/// looks the same.
inline int implied_ranks_per_gpu(int local_size, int nproc, int visible) {
  int taking_part = nproc > 0 ? std::min(nproc, visible) : visible;
  if (taking_part > 1 && local_size > taking_part && local_size % taking_part == 0) return local_size / taking_part;
  return 1;
}

/// Several ranks per GPU (docs/contract.md section 3): sets plan.ranks_per_gpu
/// and plan.part, and returns the GPU index the options mean (`named`: gpu=N,
/// or the local rank). Under a local
/// rank r with local size L: N = ranks_per_gpu, or L / GPUs taking part when
/// that is a whole multiple above 1; GPU r / N, part r % N.
/// Errors: Errc::invalid_argument for a local size that is not a multiple of N,
/// or a part beyond N.
inline Result<int> rank_part(LaunchPlan& plan, const LaunchOptions& o, const LaunchContext& c, int named,
                             int visible) {
  int n = o.ranks_per_gpu;
  if (!o.local_rank || o.pci) {  // the device is named: the part too (check_options)
    plan.ranks_per_gpu = std::max(n, 1);
    plan.part = o.part.value_or(0);
    if (plan.part >= plan.ranks_per_gpu)
      return fail(Errc::invalid_argument, "part=", plan.part, " is not below ranks_per_gpu=", plan.ranks_per_gpu);
    return named;
  }
  const std::optional<LauncherValue>& size = c.local_size;
  if (n == 0 && size) n = implied_ranks_per_gpu(size->value, o.job.nproc, visible);
  n = std::max(n, 1);
  if (size && size->value % n != 0)
    return fail(Errc::invalid_argument, size->source(), " (the launcher's processes on this machine) is not a "
                "multiple of ranks_per_gpu=", n, ": every GPU must get the same number of ranks");
  plan.ranks_per_gpu = n;
  plan.part = named % n;
  return named / n;
}

/// The GPU's own memory nodes (Gpu::memory_nodes, from the driver's numa_status).
/// Errors: Errc::not_found when it has none.
inline Result<NodeSet> gpu_memory_nodes(const Topology& topo, int gpu) {
  const Gpu& g = topo.gpus[static_cast<std::size_t>(gpu)];
  NodeSet nodes;
  for (int n : g.memory_nodes)
    if (NodeSet::valid_id(n)) nodes.set(n);
  if (nodes.empty())
    return fail(Errc::not_found, "mem_nodes=gpu: GPU ", g.index, " (", g.address().to_string().view(),
                ") has no memory node of its own in ", topo.origin.view(),
                " (only GH200/GB200 in coherent mode have one: proc/driver/nvidia/gpus/BDF/numa_status); use "
                "mem_nodes=cpu");
  return nodes;
}

/// The host-buffer nodes for a device on NUMA node `node` (LaunchPlan::host_nodes):
/// the node itself when it has CPUs or nothing to compare by; a memory-only node's
/// nearest node(s) with CPUs by its SLIT distances (nodeN/distance), ties all included.
inline NodeSet host_nodes_for(const Topology& topo, int node) {
  const NumaNode* n = topo.find_node(node);
  if (!NodeSet::valid_id(node)) return {};
  if (n == nullptr || !n->memory_only() || n->distances.size() != topo.nodes.size()) return NodeSet::single(node);
  int best = -1;
  NodeSet out;
  for (std::size_t i = 0; i < topo.nodes.size(); ++i) {
    if (topo.nodes[i].cpus.empty() || !NodeSet::valid_id(topo.nodes[i].id)) continue;
    int d = n->distances[i];
    if (best < 0 || d < best) best = d, out = NodeSet{};
    if (d == best) out.set(topo.nodes[i].id);
  }
  return out.empty() ? NodeSet::single(node) : out;
}

/// Every node with CPUs in the package that holds node `node`'s CPUs.
/// Errors: Errc::not_found when the node has no CPU or no package.
inline Result<NodeSet> socket_memory_nodes(const Topology& topo, int node) {
  const NumaNode* n = topo.find_node(node);
  const Package* p = n == nullptr || n->cpus.empty() ? nullptr : topo.package_of_cpu(n->cpus.first());
  if (p == nullptr)
    return fail(Errc::not_found, "mem_nodes=socket: node ", node, " has no CPU in a known package in ",
                topo.origin.view(), "; use mem_nodes=cpu");
  NodeSet nodes;
  for (const auto& other : topo.nodes)
    if (other.cpus.intersects(p->cpus) && NodeSet::valid_id(other.id)) nodes.set(other.id);
  return nodes;
}

}  // namespace detail

namespace detail {

/// "exclusive, core-complex, ... or unique-contiguous": the policies --share applies to.
inline std::string splitting_policy_names() {
  std::vector<std::string_view> names;
  for (PolicyKind k : all_policy_kinds)
    if (splits_among_gpus(k)) names.push_back(to_string(k));
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return out;
}

/// The usage rules of Share::machine: a policy that splits, and no --nproc.
/// Errors: Errc::invalid_argument naming what does not apply.
inline Result<void> check_machine_share(const LaunchOptions& r) {
  if (r.share != Share::machine) return {};
  if (!splits_among_gpus(r.policy.kind))
    return fail(Errc::invalid_argument, "share=machine applies to the policies that split a node among its GPUs (",
                splitting_policy_names(), "), not to policy=", to_string(r.policy.kind),
                "; leave share=machine out or choose one of them");
  if (r.job.nproc != 0)
    return fail(Errc::invalid_argument, "nproc=", r.job.nproc,
                " does not apply with share=machine: every GPU of the host takes part; leave out one of them");
  return {};
}

/// The plan of a GPU under Share::machine: the same GPU bound as host GPU h of
/// a copy of the topology whose GPUs are every GPU of the host, all taking part.
/// Errors: Errc::invalid_argument (a target that is no GPU), Errc::not_found
/// (no host GPU list, or the target is not in it).
inline Result<void> plan_machine_share(LaunchPlan& plan, const PciAddress& target, bool is_gpu) {
  if (!is_gpu)
    return fail(Errc::invalid_argument, "share=machine splits among GPUs, and ", target.to_string(),
                " is not a GPU; leave out share=machine to bind a device by its own node");
  const Topology& topo = plan.topo;
  if (topo.host_gpus.empty())
    return fail(Errc::not_found, "share=machine needs every GPU of the host, and ", topo.origin.view(),
                " does not list them; read the machine with a gpuaff source (sysfs, JSON, hwloc)");
  int partition = plan.target().partition;
  auto at = std::find_if(topo.host_gpus.begin(), topo.host_gpus.end(),
                         [&](const Gpu& g) { return g.pci.address == target && g.partition == partition; });
  if (at == topo.host_gpus.end())
    return fail(Errc::not_found, "GPU ", target.to_string(), " is not among the host's GPUs of ", topo.origin.view(),
                "; leave out share=machine");
  plan.topo.gpus = topo.host_gpus;
  for (std::size_t i = 0; i < plan.topo.gpus.size(); ++i) plan.topo.gpus[i].index = static_cast<int>(i);
  plan.gpu = static_cast<int>(at - topo.host_gpus.begin());
  return {};
}

/// A partition of an AMD GPU (PciDevice::compute_partitions N > 1) as the
/// target: the policy binds the physical GPUs, one entry per device (the
/// plan's topology then lists those); under a policy that splits a node among
/// GPUs the target gets part `partition` of its device's share, as
/// ranks_per_gpu=N would (policy/split.hpp), under one that shares it the
/// device's whole share.
/// JobOptions::nproc, counted in partitions, becomes the devices they are on.
/// Errors: Errc::invalid_argument with ranks_per_gpu above 1 or several GPUs.
inline Result<void> collapse_partitions(LaunchPlan& plan, const LaunchOptions& o) {
  const Gpu& target = plan.target();
  int n = target.pci.compute_partitions;
  if (n <= 1) return {};
  if (plan.ranks_per_gpu > 1 || !o.more_gpus.empty()) {
    // Named as the user made them: domains (domains_per_gpu) or the device's own partitions.
    std::string unit = o.domains_per_gpu > 1 ? "domain" : "partition";
    std::string made = o.domains_per_gpu > 1 ? "domains_per_gpu=" + std::to_string(o.domains_per_gpu)
                                             : std::to_string(n) + " compute partitions";
    std::string refused = plan.ranks_per_gpu > 1
                              ? (o.ranks_per_gpu > 1 ? "ranks_per_gpu=" + std::to_string(o.ranks_per_gpu) +
                                                           " cannot cut it again; leave out ranks_per_gpu=N"
                                                     : "a local size of several ranks per " + unit +
                                                           " cannot cut it again; run one rank per " + unit)
                              : "it is not one of a list of GPUs; name one GPU (gpu=N)";
    return fail(Errc::invalid_argument, "GPU ", plan.visible_gpu, " is ", unit, " ", target.partition, " of ",
                target.address().to_string().view(), " (", made, "), a GPU of its own: ", refused);
  }
  int part = target.partition;
  DeviceView v = by_device(plan.topo, plan.job.nproc);
  plan.gpu = v.device_of[static_cast<std::size_t>(plan.gpu)];
  if (plan.job.nproc > 0) plan.job.nproc = v.nproc;
  plan.topo = std::move(v.topo);
  // A policy that shares (node, socket, NVIDIA's all and single) gives an AMD
  // partition what any GPU of its node gets; one that splits the node among
  // GPUs splits it among the devices, then each device's part among its
  // partitions (contract section 6). Locality domains (domains_per_gpu) are
  // parts of their GPU's locality under every policy.
  if (!splits_among_gpus(plan.policy.kind) && o.domains_per_gpu <= 1) return {};
  plan.ranks_per_gpu = n;
  plan.part = part;
  return {};
}

/// Locality domains the system files do not show (domains_per_gpu N > 1):
/// each GPU of `topo` (visible ones, and the host's for share=machine) becomes
/// N GPUs in a row, domain k of a GPU taking part k of its share as a compute
/// partition does (collapse_partitions); indices are renumbered.
/// Errors: Errc::invalid_argument for a GPU already split into AMD compute
/// partitions (those are its placement units).
inline Result<void> split_domains(Topology& topo, int n) {
  if (n <= 1) return {};
  auto split = [n](std::vector<Gpu>& gpus) -> Result<void> {
    for (Gpu& g : gpus) {
      if (g.pci.compute_partitions > 1)
        return fail(Errc::invalid_argument, "domains_per_gpu=", n, ": GPU ", g.address().to_string().view(),
                    " is split into ", g.pci.compute_partitions, " compute partitions already "
                    "(current_compute_partition), each a GPU of its own; leave out domains_per_gpu");
      g.pci.compute_partitions = n;
    }
    gpus = expand_partitions(std::move(gpus));
    return {};
  };
  GPUAFF_TRY_VOID(split(topo.gpus));
  return split(topo.host_gpus);
}

/// The warning for a process that sees one GPU of the several on its node
/// under a policy that splits the node: it gets the whole split to itself.
inline std::optional<std::string> one_gpu_warning(const LaunchPlan& plan) {
  if (plan.share != Share::visible || !splits_among_gpus(plan.policy.kind) || plan.visible_gpu < 0) return std::nullopt;
  const Topology& topo = plan.topo;
  int node = topo.gpus[static_cast<std::size_t>(plan.gpu)].numa_node();
  if (node < 0) return std::nullopt;
  auto on_node = [node](const std::vector<Gpu>& gpus) {
    return std::count_if(gpus.begin(), gpus.end(), [node](const Gpu& g) { return g.numa_node() == node; });
  };
  auto seen = on_node(topo.gpus);
  auto there = on_node(topo.host_gpus);
  if (seen != 1 || there < 2) return std::nullopt;
  return std::string("GPU ") + std::to_string(plan.visible_gpu) + " is the only GPU this process sees on node " +
         std::to_string(node) + std::string(", which has ") + std::to_string(there) + ": policy=" +
         std::string(to_string(plan.policy.kind)) + " leaves nothing for the node's other GPUs (it gives CPUs " +
         plan.cpus.to_list() + "); when other processes use them, pass share=machine for disjoint slices";
}

/// The process's GPUs (the host's less the hidden ones) with their PCI device ids.
inline std::vector<Gpu> process_gpus_with_ids(const Topology& topo) {
  std::vector<Gpu> out;
  for (Gpu g : topo.host_gpus) {
    if (std::find(topo.hidden_gpus.begin(), topo.hidden_gpus.end(), g.pci.address) != topo.hidden_gpus.end()) continue;
    if (const PciDevice* d = topo.find_pci(g.pci.address)) g.pci.device = d->device;
    out.push_back(g);
  }
  return out;
}

}  // namespace detail

namespace detail {

/// One GPU's CPUs and memory nodes under a plan's policy and options.
struct GpuBinding {
  CpuSet cpus{};
  NodeSet memory_nodes{};
  int node = -1;
  std::vector<int> nearest_nodes{};  ///< Unreachable::nearest was used: the nodes the CPUs came from
};

/// GPU `gpu` (an index into plan.topo.gpus) bound under the plan's policy,
/// with the options' unreachable and mem_nodes; `narrowed` (the launcher's
/// narrowed mask, if any) is appended to a policy's error.
inline Result<GpuBinding> bind_gpu(const LaunchPlan& plan, const LaunchOptions& o, int gpu,
                                   const std::string& narrowed) {
  auto explained = [&narrowed](Error e) {
    if (!narrowed.empty()) e.append("; " + narrowed);
    return Unexpected<Error>(e);
  };
  GpuBinding b;
  // The GPU's node lists no CPU while online CPUs lie in no node's list: the
  // node lost its list (a memory-only node leaves every CPU to the others),
  // and the GPU's binding depends on it. An error naming the list, never a
  // memory-only node's answer (no CPU, the nearest node's, or unbound).
  if (auto node = resolve_gpu_node(plan.topo, gpu, plan.job); node) {
    const NumaNode* n = plan.topo.find_node(*node);
    CpuSet lost = cpus_in_no_node(plan.topo);
    if (n != nullptr && n->memory_only() && !lost.empty())
      return explained(make_error(Errc::parse_error, gpu_label(plan.topo, gpu), " is on NUMA node ", *node,
                                  ", whose cpulist (sys/devices/system/node/node", *node, "/cpulist) in ",
                                  plan.topo.origin.view(), " lists no CPU while online CPUs ", lost.to_list(),
                                  " are in no node's cpulist: that list was lost (a recording cut short or "
                                  "damaged), not a memory-only node, and the GPU's CPUs are unknown; record the "
                                  "machine again with `gpuaff record`"));
  }
  Result<CpuSet> cpus = bind(plan.topo, gpu, plan.policy, plan.job);
  if (!cpus) {
    // A policy that reaches beyond the node (socket) may still succeed; only
    // a failure on a node without allowed CPUs is "unreachable".
    auto node = resolve_gpu_node(plan.topo, gpu, plan.job);
    if (!node || !node_unreachable(plan.topo, *node)) return explained(cpus.error());
    if (o.unreachable == Unreachable::error) {
      Error e = cpus.error();
      e.append("; or pass unreachable=nearest to use the allowed CPUs of the closest node(s)");
      return explained(e);
    }
    b.node = *node;
    GPUAFF_TRY(b.nearest_nodes, nearest_allowed_nodes(plan.topo, b.node));
    for (int id : b.nearest_nodes) {
      b.cpus |= plan.topo.find_node(id)->cpus & plan.topo.usable();
      b.memory_nodes.set(id);
    }
  } else {
    b.cpus = *cpus;
    GPUAFF_TRY(b.memory_nodes, memory_nodes(plan.topo, gpu, plan.job));
    GPUAFF_TRY(b.node, resolve_gpu_node(plan.topo, gpu, plan.job));
  }
  if (o.mem_nodes == MemNodes::gpu) {
    GPUAFF_TRY(b.memory_nodes, gpu_memory_nodes(plan.topo, gpu));
  } else if (o.mem_nodes == MemNodes::socket) {
    GPUAFF_TRY(b.memory_nodes, socket_memory_nodes(plan.topo, b.node));
  }
  return b;
}

/// The other GPUs of the options (visible indexes) as indexes into
/// plan.topo.gpus, found by address (Share::machine renumbers them).
/// Errors: Errc::not_found for an index with no visible GPU; Errc::invalid_argument
/// for a GPU named twice.
inline Result<void> find_more_gpus(LaunchPlan& plan, const LaunchOptions& o, const std::vector<Gpu>& visible) {
  for (int g : o.more_gpus) {
    if (g < 0 || g >= static_cast<int>(visible.size())) {
      Topology seen;
      seen.gpus = visible;
      seen.origin = plan.topo.origin;
      return no_such_gpu(seen, g, std::string());
    }
    if (g == plan.visible_gpu || std::find(plan.more_visible_gpus.begin(), plan.more_visible_gpus.end(), g) !=
                                     plan.more_visible_gpus.end())
      return fail(Errc::invalid_argument, "gpu=", g, " is named twice in the list; name each GPU once");
    const PciAddress& a = visible[static_cast<std::size_t>(g)].address();
    auto at = std::find_if(plan.topo.gpus.begin(), plan.topo.gpus.end(), [&](const Gpu& x) { return x.address() == a; });
    plan.more_gpus.push_back(static_cast<int>(at - plan.topo.gpus.begin()));
    plan.more_visible_gpus.push_back(g);
  }
  return {};
}

/// A plan binds the device the options name, and only that: gpu=N, pci=BDF or
/// local_rank=true (with the local rank read into the context). No device
/// named is a mistake, never GPU 0 by default.
/// Errors: Errc::invalid_argument.
inline Result<void> check_device_named(const LaunchOptions& o, bool local_rank_read) {
  if (o.all_gpus)
    return fail(Errc::invalid_argument, "gpu=all is for bind: a launch binds one process to one device; name it "
                "with gpu=N, pci=BDF or local_rank=true");
  if (!o.gpu && !o.pci && !o.local_rank)
    return fail(Errc::invalid_argument, "no device is named; name it with gpu=N, pci=BDF or local_rank=true");
  if (o.local_rank && !local_rank_read)
    return fail(Errc::invalid_argument, "local_rank=true, and the launch context holds no local rank; read it with "
                "launch_context(options, environment), or pass gpu=N");
  return {};
}
inline Result<void> check_device_named(const LaunchOptions& o, const LaunchContext& context) {
  return check_device_named(o, context.local_rank.has_value());
}

/// A plan's CPUs, once its GPU is known: the GPU's share (with its memory
/// and host nodes), the part of it for this rank when several ranks share the
/// GPU, and the union with the other GPUs a process drives (`visible`: the
/// GPUs they are named among; `narrowed`: the launcher's mask, for errors).
inline Result<void> plan_cpus(LaunchPlan& plan, const LaunchOptions& o, const std::vector<Gpu>& visible,
                              const std::string& narrowed) {
  // What cuts the GPU's share into parts, named in a refusal as the user gave it.
  std::string cut_by;
  if (int n = plan.target().pci.compute_partitions; n > 1)
    cut_by = o.domains_per_gpu > 1 ? "domains_per_gpu=" + std::to_string(o.domains_per_gpu)
                                   : "GPU " + std::string(plan.target().address().to_string().view()) + "'s " +
                                         std::to_string(n) + " compute partitions (current_compute_partition)";
  GPUAFF_TRY_VOID(detail::collapse_partitions(plan, o));
  GPUAFF_TRY_VOID(detail::find_more_gpus(plan, o, visible));
  GPUAFF_TRY(detail::GpuBinding b, detail::bind_gpu(plan, o, plan.gpu, narrowed));
  plan.cpus = b.cpus;
  plan.memory_nodes = b.memory_nodes;
  plan.node = b.node;
  plan.nearest_nodes = b.nearest_nodes;
  plan.host_nodes = detail::host_nodes_for(plan.topo, b.node);
  plan.gpu_share = plan.cpus;
  if (plan.ranks_per_gpu > 1) {
    GPUAFF_TRY(auto parts, split_share(plan.topo, plan.cpus, plan.ranks_per_gpu, cut_by));
    plan.cpus = parts[static_cast<std::size_t>(plan.part)];
  }
  for (int more : plan.more_gpus) {  // several GPUs per process: the union
    GPUAFF_TRY(detail::GpuBinding other, detail::bind_gpu(plan, o, more, narrowed));
    plan.cpus |= other.cpus;
    plan.memory_nodes |= other.memory_nodes;
    plan.host_nodes |= detail::host_nodes_for(plan.topo, other.node);
  }
  return {};
}

/// What goes with a plan's CPUs: the roles' cores, the NIC variables of the
/// GPUs' NICs, and OpenMP's places for the compute role.
inline Result<void> plan_roles_and_env(LaunchPlan& plan, const LaunchOptions& o) {
  if (o.roles.given()) {
    GPUAFF_TRY(plan.roles, split_roles(plan.topo, plan.cpus, o.roles, o.priority_cores, plan.isolated));
    if (o.priority_cores && plan.topo.priority_source.empty())
      plan.warnings.push_back(std::string("priority_cores=true: ") + std::string(plan.topo.origin.view()) + " states no core "
                              "priorities (cpufreq/base_frequency, acpi_cppc/highest_perf, cpu_capacity): the roles "
                              "take cores in CPU order");
  }
  if (o.nic_env) {
    std::vector<int> served{plan.gpu};
    served.insert(served.end(), plan.more_gpus.begin(), plan.more_gpus.end());
    GPUAFF_TRY(NicSet set, served_nic_set(plan.topo, served));
    std::vector<const Nic*> host = host_nic_set(plan.topo, plan.host_nodes);
    GPUAFF_TRY(plan.env, nic_variables(plan.topo, set, o.nic_libs, host,
                                       o.was_given("nic_libs") ? &plan.warnings : nullptr));
    for (const Nic* n : set.nics) plan.nic_set.push_back(nic_label(*n));
    for (const Nic* n : host) plan.host_nic_set.push_back(nic_label(*n));
    plan.nic_path = set.path;
  }
  if (plan.roles) {  // OpenMP threads one per core of the compute role
    plan.env.emplace_back("OMP_PLACES", omp_places(plan.topo, plan.roles->compute));
    plan.env.emplace_back("OMP_PROC_BIND", "close");
  }
  return {};
}

/// make_plan's body, filling `plan` (as default-constructed but for
/// plan.topo, the machine) where the caller keeps it: a LaunchPlan holds some
/// 20 sets, strings and vectors and its Topology more, and every copy
/// of one on the way out is stack pages a bound process touches
/// (benchmarks/README.md, row S).
inline Result<void> fill_plan(LaunchPlan& plan, const LaunchOptions& o, const LaunchContext& context) {
  Topology& topo = plan.topo;
  GPUAFF_TRY_VOID(check_device_named(o, context));
  std::string rank_source = o.local_rank ? context.local_rank->source() : std::string();
  int named = o.local_rank ? context.local_rank->value : o.gpu.value_or(0);  // pci=BDF: not a GPU index
  plan.policy = o.policy;
  plan.job = o.job;
  plan.membind = o.membind;
  plan.rank_source = rank_source;
  plan.device_source = !rank_source.empty() ? rank_source
                       : o.pci              ? std::string("pci=") + std::string(o.pci->to_string().view())
                                          : std::string("gpu=") + std::to_string(named);
  plan.baseline = o.baseline;
  plan.share = o.share;
  GPUAFF_TRY_VOID(check_machine_share(o));  // a usage mistake first, before what the machine says
  if (o.baseline == Baseline::cgroup) {
    GPUAFF_TRY_VOID(use_cgroup_baseline(topo, context.cgroup));
  }
  // A launcher that bound the process first (mpirun's cores, srun's
  // --cpu-bind) is the usual cause of a binding that cannot be made: say so
  // in the warning, and in the error when the policy fails.
  std::string narrowed = o.baseline == Baseline::affinity ? narrowed_mask_warning(topo, context.cgroup)
                                                                 : std::string();
  if (!narrowed.empty()) plan.warnings.push_back(narrowed);
  CpuSet os_cores;
  if (o.reserve_os_auto) {
    GPUAFF_TRY(os_cores, reserve_housekeeping(topo, context.reserved));
  } else {
    os_cores = reserve_os_cores(topo, o.reserve_os_cores);
  }
  // CUDA's numbering matters only where an index names the GPU, not pci=BDF.
  if (auto w = o.pci ? std::nullopt : device_order_warning(process_gpus_with_ids(topo), context.cuda_device_order))
    plan.warnings.push_back(*w);
  GPUAFF_TRY(int gpu, rank_part(plan, o, context, named, static_cast<int>(topo.gpus.size())));
  std::vector<Gpu> visible = o.more_gpus.empty() ? std::vector<Gpu>() : topo.gpus;  // before Share::machine
  if (o.pci) {
    for (const auto& g : topo.gpus)
      if (g.address() == *o.pci) plan.visible_gpu = g.index;
    GPUAFF_TRY_VOID(target_pci(topo, *o.pci, &plan.gpu));
  } else {
    if (gpu < 0 || gpu >= static_cast<int>(topo.gpus.size())) return no_such_gpu(topo, gpu, rank_source);
    plan.gpu = gpu;
    plan.visible_gpu = gpu;
  }
  if (plan.share == Share::machine) {
    PciAddress target = plan.target().address();
    bool is_gpu = plan.visible_gpu >= 0 || plan.target().pci.is_gpu();
    GPUAFF_TRY_VOID(plan_machine_share(plan, target, is_gpu));
  }
  // The local size counts GPUs as the launcher does (partitions, domains):
  // nproc in those, which collapse_partitions turns into devices.
  if (plan.share != Share::machine) GPUAFF_TRY_VOID(use_local_size(plan, o, context));
  GPUAFF_TRY_VOID(plan_cpus(plan, o, visible, narrowed));
  plan.os_cores = os_cores;
  if (context.reserved) plan.isolated = context.reserved->reserved() & plan.cpus;
  GPUAFF_TRY_VOID(plan_roles_and_env(plan, o));
  if (auto w = one_gpu_warning(plan)) plan.warnings.push_back(*w);
  return {};
}

}  // namespace detail

/// Plans the binding of the device the options name on `topo`, which must
/// already hold the visible GPUs only (select_visible_gpus) and, for `pci`,
/// that device (SysfsOptions::extra_pci); `context` is what the process's
/// surroundings add (launch_context()). The order: the baseline first
/// (the allowed set, or the cgroup cpuset), the launcher's local size as
/// nproc when nproc is 0 (not under Share::machine, where every host GPU takes
/// part), then the policy; under Unreachable::nearest a target whose node has
/// no allowed CPU gets the allowed CPUs (and memory) of the nearest node(s)
/// instead. With Share::machine the target GPU is bound among every GPU of the
/// host (plan.topo then lists them as its GPUs, plan.gpu the target's host index).
/// Errors: Errc::invalid_argument when no device is named (gpu=N, pci=BDF or
/// local_rank=true: never a silent GPU 0), or local_rank=true without the
/// context's local rank; Errc::not_found (no such visible GPU, naming those
/// there are; a PCI device the topology does not hold), Errc::invalid_argument (cgroup
/// baseline without a cgroup; a local size above the visible GPUs; --share
/// machine where it does not apply), and the errors of bind(), memory_nodes(),
/// resolve_gpu_node() and nearest_allowed_nodes() for the target; with
/// `nic_env` those of served_nic_set(), with `mem_nodes` gpu or socket
/// Errc::not_found when the GPU has no such nodes.
inline Result<LaunchPlan> make_plan(Topology topo, const LaunchOptions& o, const LaunchContext& context = {}) {
  return detail::built_in_place<LaunchPlan>([&](LaunchPlan& p) {
    p.topo = std::move(topo);
    return detail::fill_plan(p, o, context);
  });
}

/// OMP_NUM_THREADS for a plan (omp_threads): the physical cores of its
/// compute role, or of all its CPUs without roles.
inline int omp_thread_count(const LaunchPlan& p) {
  return recommended_threads(p.topo, p.roles ? p.roles->compute : p.cpus);
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
              "); plan from this machine (leave out root=DIR and topology=FILE) or run it where those CPUs exist");
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
/// A plan from another machine names that machine's CPU ids: checked against
/// this machine's online CPUs (when they can be read) before it is applied.
/// Errors: those of check_cpus_exist.
inline Result<void> check_planned_here(const LaunchPlan& plan, PlannedOn where) {
  if (where != PlannedOn::another_machine) return {};
  if (auto online = live_online_cpus()) return check_cpus_exist(plan, *online);
  return {};
}

inline Result<ProcessBinding> apply_plan(const LaunchPlan& plan, OnRefused on_refused, PlannedOn where) {
  bool foreign = where == PlannedOn::another_machine;
  GPUAFF_TRY_VOID(check_planned_here(plan, where));
  auto applied = bind_process(plan.cpus, plan.memory(on_refused));
  if (!applied) {
    Error e = applied.error();
    if (foreign) e.prepend(std::string("cannot apply the binding planned from ") + std::string(plan.topo.origin.view()) + " here: ");
    return Unexpected<Error>(e);
  }
  GPUAFF_TRY(CpuSet now, thread_affinity());
  if (now != plan.cpus) {
    return fail(Errc::empty_result, "the kernel bound this process to CPUs ", now.to_list(), " instead of ",
                plan.cpus.to_list(), " (a cgroup cpuset or container limit excludes the others); plan from this "
                "machine (leave out root=DIR and topology=FILE) or widen the container's CPU set");
  }
  return applied;
}

}  // namespace v0
}  // namespace gpuaff
