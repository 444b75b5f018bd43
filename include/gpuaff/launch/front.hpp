// SPDX-License-Identifier: Apache-2.0
#pragma once
// The front door: from what a user asks (LaunchOptions, launch/options.hpp)
// and the process's environment to a checked plan, in the library. The way
// out, from options to a bound process (what exec, the SPANK plugin and
// Python's bind call), is gpuaff::launch (launch/launch.hpp), built on these:
//
//   LaunchOptions o;                                // or set_option(o, "policy", "exclusive"), ...
//   o.local_rank = true;
//   LaunchStage stage;
//   auto p = gpuaff::plan(o, process_environment(), Readers{}, &stage);
//   if (!p && usage_mistake(p.error(), stage)) ...  // a plan to look at: topo, bind --dry-run
//
// Every failure says at which stage it happened, so that a caller can tell a
// usage mistake (a bad option, a malformed or wrong visibility list) from
// what the machine refuses without reading the machine again.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/launch/plan.hpp"
#include "gpuaff/policy/threads.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "gpuaff/source/dra.hpp"
#include "gpuaff/source/load.hpp"
#include "gpuaff/source/reserved.hpp"

namespace gpuaff {
inline namespace v0 {

/// Where a launch failed.
enum class LaunchStage {
  options,     ///< the options or the launcher's variables are wrong (a usage mistake)
  machine,     ///< the machine cannot be read
  device,      ///< a named PCI device is not there
  visibility,  ///< the visibility list is malformed or names GPUs that are not there (a usage mistake)
  plan,        ///< the machine cannot give the binding (no such GPU, empty result, too few cores, ...)
  apply,       ///< the kernel refused the binding
};

/// Whether a failure is the user's mistake rather than the machine's answer:
/// a fallback (run unbound) may cover the machine's answer, never a mistake.
constexpr bool usage_mistake(const Error& e, LaunchStage stage) {
  if (stage == LaunchStage::options || stage == LaunchStage::visibility) return true;
  return e.code() == Errc::invalid_argument && stage != LaunchStage::apply;
}

namespace detail {

inline Unexpected<Error> staged(Error e, LaunchStage stage, LaunchStage* failed_at) {
  if (failed_at != nullptr) *failed_at = stage;
  return Unexpected<Error>(std::move(e));
}

constexpr LaunchStage stage_of(LoadStage s) {
  switch (s) {
    case LoadStage::machine: return LaunchStage::machine;
    case LoadStage::device: return LaunchStage::device;
    case LoadStage::visibility: return LaunchStage::visibility;
  }
  return LaunchStage::machine;
}

/// The cgroup cpuset of the machine the options read (a root, or this
/// machine); nullopt for a JSON or XML file, which carries none. Under
/// Baseline::affinity it only feeds a warning, so an unreadable one is
/// nullopt there; under Baseline::cgroup that is the error.
inline Result<std::optional<CgroupCpuset>> cgroup_of(const LaunchOptions& o) {
  if (!o.machine.topology.empty() || !o.machine.hwloc_xml.empty()) return std::optional<CgroupCpuset>{};
  auto cgroup = read_cgroup_cpuset(o.machine.root_or_live());
  if (!cgroup) {
    if (o.baseline == Baseline::affinity) return std::optional<CgroupCpuset>{};
    Error e = cgroup.error();
    e.prepend("baseline=cgroup: ");
    return Unexpected<Error>(e);
  }
  return std::optional<CgroupCpuset>(std::move(*cgroup));
}

/// The DRA device metadata directory of `o`: dra_metadata=DIR, else the
/// kubelet's mount point when the machine is this one and it exists; "" for none.
inline std::string dra_metadata_of(const LaunchOptions& o) {
  if (!o.dra_metadata.empty()) return o.dra_metadata;
  if (!o.machine.root.empty() || !o.machine.topology.empty() || !o.machine.hwloc_xml.empty()) return {};
  struct stat st {};
  return ::stat(dra_metadata_dir, &st) == 0 && S_ISDIR(st.st_mode) ? std::string(dra_metadata_dir) : std::string();
}

/// What the system reserved (source/reserved.hpp), for the options that use
/// it: reserve_os_cores=auto and roles. None from a topology or hwloc file.
/// Errors: those of read_system_reservations, prefixed with the option.
inline Result<std::optional<SystemReservations>> reservations_of(const LaunchOptions& o) {
  if (!o.reserve_os_auto && !o.roles.given()) return std::optional<SystemReservations>{};
  if (!o.machine.topology.empty() || !o.machine.hwloc_xml.empty()) return std::optional<SystemReservations>{};
  auto r = read_system_reservations(o.machine.root_or_live());
  if (!r) {
    Error e = r.error();
    e.prepend(o.reserve_os_auto ? "reserve_os_cores=auto: " : "roles: ");
    return Unexpected<Error>(e);
  }
  return std::optional<SystemReservations>(std::move(*r));
}

}  // namespace detail

/// The visibility list and variables the options and the environment give:
/// `visible_devices` when set, else CUDA_/HIP_/ROCR_VISIBLE_DEVICES of `env`.
inline VisibleDevices visible_devices_of(const LaunchOptions& o, const Environment& env) {
  return VisibleDevices{.list = o.visible_devices,
                        .use_environment = false,
                        .cuda_visible_devices = env("CUDA_VISIBLE_DEVICES"),
                        .hip_visible_devices = env("HIP_VISIBLE_DEVICES"),
                        .rocr_visible_devices = env("ROCR_VISIBLE_DEVICES"),
                        .cuda_device_order = env("CUDA_DEVICE_ORDER").value_or(std::string())};
}

/// The variables a batch scheduler sets to its job's id in every process of
/// the job (Slurm, PBS/Torque, LSF).
inline constexpr std::string_view job_id_variables[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"};

/// Whether a load in the environment `env` asks each NVIDIA GPU's device node
/// whether the process may open it (SysfsOptions::probe_device_nodes;
/// docs/contract.md section 2): in a batch job (SLURM_JOB_ID, PBS_JOBID or
/// LSB_JOBID set) with CUDA_VISIBLE_DEVICES set, where a scheduler's device
/// cgroup may hide GPUs that the driver still lists.
inline bool device_nodes_probe_due(const Environment& env) {
  bool batch = false;
  for (std::string_view name : job_id_variables) batch = batch || env(name).has_value();
  return batch && env("CUDA_VISIBLE_DEVICES").has_value();
}

/// What loading the machine of `o` reads: every file with SysfsDetail::full
/// (topo), or what a binding needs (the nearest node needs the distances, the
/// NICs and the GPU's memory nodes come with a full read).
inline LoadRequest load_request(const LaunchOptions& o, const Environment& env, const Readers& readers,
                                SysfsDetail detail, TopologyParts needs = TopologyParts::policies(),
                                std::optional<LoadFocus> focus = std::nullopt) {
  LoadRequest r{
      .source = o.machine, .visible = visible_devices_of(o, env), .detail = detail, .needs = needs, .readers = readers};
  r.focus = std::move(focus);
  r.probe_device_nodes = device_nodes_probe_due(env);
  if (o.pci) r.extra_pci.push_back(*o.pci);
  r.priorities = o.priority_cores;
  return r;
}

/// The detail a plan of `o` needs from the sysfs reader.
inline SysfsDetail plan_detail(const LaunchOptions& o) {
  bool full = o.unreachable == Unreachable::nearest || o.nic_env || o.mem_nodes == MemNodes::gpu;
  return full ? SysfsDetail::full : SysfsDetail::binding;
}

/// The parts of the machine a plan of `o` reads (docs/contract.md section 1,
/// "what each answer reads"): the policy's (policy_needs), core siblings to
/// reserve OS cores, packages for the socket's memory nodes, distances for
/// the nearest reachable node, NICs and GPU memory nodes for their variables.
inline TopologyParts plan_needs(const LaunchOptions& o) {
  TopologyParts p = policy_needs(o.policy);
  p.cores = p.cores || o.reserve_os_cores > 0 || o.reserve_os_auto;
  p.packages = p.packages || o.mem_nodes == MemNodes::socket;
  p.cores = p.cores || o.omp_threads;  // OMP_NUM_THREADS counts physical cores
  p.cores = p.cores || o.ranks_per_gpu > 1 || o.domains_per_gpu > 1;  // parts are cut on whole cores
  p.cores = p.cores || o.roles.given();  // so are roles
  p.distances = o.unreachable == Unreachable::nearest;
  p.nics = o.nic_env || o.mem_nodes == MemNodes::gpu;
  return p;
}

/// The answer a plan of `o` gives in `c`, when its load may read only what
/// that answer depends on (SysfsOptions::focus, docs/contract.md section 1):
/// one device (gpu=N, pci=BDF or the local rank) under PyTorch's four policies,
/// binding detail, and no option that looks beyond the device's node (share,
/// reserved OS cores, roles, parts, several GPUs, memory or NIC choices).
inline std::optional<LoadFocus> plan_focus(const LaunchOptions& o, const LaunchContext& c) {
  PolicyKind k = o.policy.kind;
  if (k != PolicyKind::node && k != PolicyKind::socket && k != PolicyKind::exclusive && k != PolicyKind::core_complex)
    return std::nullopt;
  if (o.all_gpus || !o.more_gpus.empty() || o.share != Share::visible || plan_detail(o) != SysfsDetail::binding ||
      o.reserve_os_cores > 0 || o.reserve_os_auto || o.roles.given() || o.priority_cores || o.omp_threads || o.ranks_per_gpu > 1 ||
      o.domains_per_gpu > 1 || o.part || o.mem_nodes != MemNodes::cpu || !o.machine.topology.empty() || !o.gpu_nodes.empty() ||
      o.machine.wants_hwloc())
    return std::nullopt;
  LoadFocus f;
  f.peers = splits_among_gpus(o.policy.kind);
  if (o.pci) f.pci = *o.pci;
  else if (o.local_rank && c.local_rank) f.gpu = c.local_rank->value;
  else if (o.gpu) f.gpu = *o.gpu;
  else return std::nullopt;
  return f;
}

namespace detail {

/// Sets each GPU's NUMA node from a gpu_nodes file: 'BDF NODE' lines, '#'
/// comments and blank lines ignored (what `gpuaff probe --gpu-nodes` writes).
/// A listed GPU the machine lacks is ignored (the file may cover other shapes).
/// Errors: Errc::io_error (unreadable), Errc::parse_error naming the file and
/// line, Errc::not_found for a node the machine does not have.
inline Result<void> apply_gpu_nodes(Topology& topo, const std::string& file) {
  std::string text;
  if (int e = read_whole_file(file, text); e != 0)
    return Unexpected(make_sys_error(Errc::io_error, e, "cannot read gpu_nodes=", file, " (", errno_text(e), ")"));
  int number = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    std::string_view line = std::string_view(text).substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    ++number;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty()) continue;
    std::size_t sp = line.find_first_of(" \t");
    auto bad = [&] {
      return fail(Errc::parse_error, "gpu_nodes=", file, " line ", number, ": '", line.substr(0, 60),
                  "' is not 'BDF NODE' (e.g. 0000:17:00.0 0)");
    };
    if (sp == std::string_view::npos) return bad();
    auto bdf = PciAddress::parse(line.substr(0, sp));
    std::string_view rest = line.substr(line.find_first_not_of(" \t", sp));
    int node = parse_count(rest);
    if (!bdf || node < 0) return bad();
    if (topo.find_node(node) == nullptr)
      return fail(Errc::not_found, "gpu_nodes=", file, " line ", number, ": NUMA node ", node, " is not a node of ",
                  topo.origin.view());
    for (auto* list : {&topo.gpus, &topo.host_gpus})
      for (Gpu& g : *list)
        if (g.address() == *bdf) g.pci.numa_node = node;
  }
  return {};
}

/// load() into `topo` (as default-constructed: it is read where it is kept).
inline Result<void> load_into(Topology& topo, const LaunchOptions& o, const Environment& env, const Readers& readers,
                              SysfsDetail level, LaunchStage* failed_at, TopologyParts needs,
                              std::optional<LoadFocus> focus) {
  if (auto ok = check_options(o); !ok) return staged(ok.error(), LaunchStage::options, failed_at);
  LoadStage stage = LoadStage::machine;
  if (auto read = load_machine_into(topo, load_request(o, env, readers, level, needs, std::move(focus)), &stage); !read)
    return staged(std::move(read).error(), stage_of(stage), failed_at);
  if (!o.gpu_nodes.empty())
    if (auto ok = apply_gpu_nodes(topo, o.gpu_nodes); !ok) return staged(ok.error(), LaunchStage::machine, failed_at);
  return {};
}

}  // namespace detail

/// The machine `o` names, its visible GPUs selected; `focus`: only what that
/// answer reads (plan_focus()).
/// Errors: those of check_options (LaunchStage::options) and load_machine.
inline Result<Topology> load(const LaunchOptions& o, const Environment& env = process_environment(),
                             const Readers& readers = {}, SysfsDetail detail = SysfsDetail::full,
                             LaunchStage* failed_at = nullptr, TopologyParts needs = TopologyParts::policies(),
                             std::optional<LoadFocus> focus = std::nullopt) {
  return detail::built_in_place<Topology>([&](Topology& topo) {
    return detail::load_into(topo, o, env, readers, detail, failed_at, needs, std::move(focus));
  });
}

namespace detail {

/// launch_context() into `c` (as default-constructed), where the caller
/// keeps it.
inline Result<void> fill_launch_context(LaunchContext& c, const LaunchOptions& o, const Environment& env) {
  c.cuda_device_order = env("CUDA_DEVICE_ORDER").value_or(std::string());
  if (o.local_rank) {
    auto rank = local_rank(env);
    if (!rank) {
      Error e = rank.error();
      e.prepend("local_rank=true: ").append("; or pass gpu=N");
      return Unexpected<Error>(e);
    }
    c.local_rank = std::move(*rank);
    auto size = local_size(env);  // stands for nproc; a malformed one is a usage mistake
    if (!size) {
      Error e = size.error();
      e.prepend("local_rank=true: ").append("; or pass nproc=N");
      return Unexpected<Error>(e);
    }
    c.local_size = *size;
  }
  return {};
}

}  // namespace detail

/// What the process's surroundings add to the options (LaunchContext): the
/// launcher's local rank and local size under `local_rank`, and
/// CUDA_DEVICE_ORDER. The cgroup cpuset is the machine's (prepare() reads it).
/// Errors (LaunchStage::options): Errc::invalid_argument for a missing or
/// malformed launcher variable.
inline Result<LaunchContext> launch_context(const LaunchOptions& o, const Environment& env) {
  return detail::built_in_place<LaunchContext>([&](LaunchContext& c) { return detail::fill_launch_context(c, o, env); });
}

namespace detail {

/// The machine and the launch context of a plan, into `topo` and `context`
/// (as default-constructed), where the caller keeps them (benchmarks/README.md,
/// row S).
inline Result<void> prepare(Topology& topo, LaunchContext& context, const LaunchOptions& o, const Environment& env,
                            const Readers& readers, LaunchStage* failed_at, bool one_device = false) {
  if (auto ok = check_options(o); !ok) return staged(ok.error(), LaunchStage::options, failed_at);
  if (auto ok = fill_launch_context(context, o, env); !ok) return staged(ok.error(), LaunchStage::options, failed_at);
  // Under baseline=cgroup the cpuset is what bindings are drawn from: read
  // first, its error before the machine's. Under affinity it only feeds the
  // narrowed-mask warning, read below once the machine says it can matter.
  if (o.baseline == Baseline::cgroup)
    if (auto ok = read_into(context.cgroup, cgroup_of, o); !ok) return staged(ok.error(), LaunchStage::machine, failed_at);
  if (auto ok = read_into(context.reserved, reservations_of, o); !ok)
    return staged(ok.error(), LaunchStage::machine, failed_at);
  TopologyParts needs = plan_needs(o);
  std::string dra_dir = dra_metadata_of(o);
  std::optional<LoadFocus> focus = one_device && dra_dir.empty() ? plan_focus(o, context) : std::nullopt;
  GPUAFF_TRY_VOID(load_into(topo, o, env, readers, plan_detail(o), failed_at, needs, focus));
  if (!dra_dir.empty()) {
    if (readers.dra == nullptr)
      return staged(make_error(Errc::invalid_argument, "dra_metadata=", dra_dir, " needs the JSON reader "
                               "(gpuaff/source/json_dra.hpp), which this program does not include"),
                    LaunchStage::options, failed_at);
    auto claims = readers.dra(dra_dir);
    if (!claims) return staged(claims.error(), LaunchStage::machine, failed_at);
    if (auto ok = apply_dra_claims(topo, *claims); !ok) return staged(ok.error(), LaunchStage::device, failed_at);
  }
  // A local size that is a whole multiple of the GPUs makes several ranks per
  // GPU (make_plan), and a partitioned AMD GPU several GPUs of one device:
  // both cut the device's share on whole cores. Read them then, and only then.
  bool multiple = context.local_size && !o.pci &&
                  detail::implied_ranks_per_gpu(context.local_size->value, o.job.nproc,
                                                static_cast<int>(topo.gpus.size())) > 1;
  bool partitioned = std::any_of(topo.gpus.begin(), topo.gpus.end(),
                                 [](const Gpu& g) { return g.pci.compute_partitions > 1; });
  // A focused load of a partitioned GPU reads the cores of its node (the
  // partitions' parts are cut there); several ranks per GPU number the GPUs
  // anew (rank / N), so the whole machine is read for them.
  if ((multiple || partitioned) && (!needs.cores || (focus && multiple))) {
    needs.cores = true;
    detail::reset_in_place(topo);
    GPUAFF_TRY_VOID(load_into(topo, o, env, readers, plan_detail(o), failed_at, needs, multiple ? std::nullopt : focus));
  }
  if (auto split = split_domains(topo, o.domains_per_gpu); !split) return staged(split.error(), LaunchStage::device, failed_at);
  // The narrowed-mask warning (make_plan) compares the usable CPUs with the
  // cgroup's online ones, which hold no CPU that is not online: a process
  // that may use every online CPU cannot be narrower, and its cgroup is not
  // read (one file fewer for every unbound rank).
  if (o.baseline == Baseline::affinity && topo.usable() != topo.online)
    (void)read_into(context.cgroup, cgroup_of, o);  // unreadable: no warning, as without a cgroup
  return {};
}

/// plan() into `plan` (as default-constructed).
inline Result<void> plan_into(LaunchPlan& plan, const LaunchOptions& o, const Environment& env, const Readers& readers,
                              LaunchStage* failed_at) {
  if (auto ok = check_device_named(o, true); !ok) return staged(ok.error(), LaunchStage::options, failed_at);
  {
    LaunchContext context;
    GPUAFF_TRY_VOID(prepare(plan.topo, context, o, env, readers, failed_at, true));
    auto made = fill_plan(plan, o, context);
    if (made) return {};
    if (!plan_focus(o, context)) return staged(std::move(made).error(), LaunchStage::plan, failed_at);
  }
  // A focused load holds one node: an error is worded from the whole machine.
  detail::reset_in_place(plan);
  LaunchContext context;
  GPUAFF_TRY_VOID(prepare(plan.topo, context, o, env, readers, failed_at));
  if (auto made = fill_plan(plan, o, context); !made) return staged(std::move(made).error(), LaunchStage::plan, failed_at);
  return {};
}

}  // namespace detail

/// The plan of the device `o` names (gpu=N, pci=BDF or local_rank=true; one
/// must be named) on the machine it names, in the environment `env`.
/// Errors: those of load() and make_plan(), with the stage in `*failed_at`;
/// no device named is Errc::invalid_argument (LaunchStage::options), before
/// anything is read.
inline Result<LaunchPlan> plan(const LaunchOptions& o, const Environment& env = process_environment(),
                               const Readers& readers = {}, LaunchStage* failed_at = nullptr) {
  return detail::built_in_place<LaunchPlan>([&](LaunchPlan& p) { return detail::plan_into(p, o, env, readers, failed_at); });
}

/// The plan of every GPU that takes part (0..nproc-1, or every visible GPU),
/// from one load.
/// Errors: those of plan(); Errc::not_found when no GPU is visible.
inline Result<std::vector<LaunchPlan>> plan_every_gpu(const LaunchOptions& o,
                                                      const Environment& env = process_environment(),
                                                      const Readers& readers = {}, LaunchStage* failed_at = nullptr) {
  Topology topo;
  LaunchContext context;
  GPUAFF_TRY_VOID(detail::prepare(topo, context, o, env, readers, failed_at));
  int count = static_cast<int>(topo.gpus.size());
  if (count == 0)
    return detail::staged(make_error(Errc::not_found, "no GPU is visible in ", topo.origin.view(),
                                     " (gpu=all); check CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES and "
                                     "visible_devices=LIST"),
                          LaunchStage::plan, failed_at);
  if (o.job.nproc > 0 && o.job.nproc < count) count = o.job.nproc;
  LaunchOptions each = o;  // gpu=all: each GPU in turn
  each.all_gpus = false;
  // Each plan holds its own copy of the machine; it is made where it is kept.
  std::vector<LaunchPlan> plans;
  plans.reserve(static_cast<std::size_t>(count));
  for (int g = 0; g < count; ++g) {
    each.gpu = g;
    LaunchPlan& p = plans.emplace_back();
    p.topo = topo;
    if (auto made = detail::fill_plan(p, each, context); !made)
      return detail::staged(std::move(made).error(), LaunchStage::plan, failed_at);
  }
  return plans;
}

/// recommended_threads() of a plan: the physical cores its CPUs touch. A plan
/// whose answer needs no core siblings was made without them (a machine has
/// at least one core, so none read means not read): they are read now, from
/// the machine `o` names, core siblings only. `cores` (optional) keeps that
/// read for the next plans of the same machine (`bind gpu=all`).
/// Errors: those of load() (a broken sibling list names its file).
inline Result<int> plan_threads(const LaunchPlan& p, const LaunchOptions& o,
                                const Environment& env = process_environment(), const Readers& readers = {},
                                std::optional<Topology>* cores = nullptr) {
  if (!p.topo.cores.empty()) return recommended_threads(p.topo, p.cpus);
  const NumaNode* planned = p.topo.find_node(p.node);
  if (cores == nullptr && planned != nullptr && (p.cpus - planned->cpus).empty()) {
    // One device's plan within its node: the siblings of that node.
    auto node = load(o, env, readers, SysfsDetail::binding, nullptr, TopologyParts::only(&TopologyParts::cores),
                     LoadFocus{.pci = p.target().address()});
    if (node && node->nodes.size() == 1 && (p.cpus - node->nodes.front().cpus).empty())
      return recommended_threads(*node, p.cpus);
  }
  std::optional<Topology> once;
  std::optional<Topology>& read = cores != nullptr ? *cores : once;
  if (!read) {
    GPUAFF_TRY(read, load(o, env, readers, SysfsDetail::binding, nullptr, TopologyParts::only(&TopologyParts::cores)));
  }
  return recommended_threads(*read, p.cpus);
}

/// A machine read once to plan many devices and policies from (Python's
/// gpuaff.load()): the visible GPUs selected, every part a policy reads, and
/// the cgroup cpuset. Plans from it read nothing more.
struct LoadedMachine {
  Topology topo;
  TopologyParts parts;               ///< the parts read: a plan needing another is refused
  LaunchOptions options;             ///< what it was loaded with (the machine, visibility, pci)
  std::optional<CgroupCpuset> cgroup;  ///< nullopt: none (a JSON or XML file), or unreadable
  std::string cgroup_error;          ///< why the cgroup cpuset could not be read, if it could not
};

/// Reads the machine `o` names once, with every part a policy reads, the
/// cores' priorities (and the distances, NICs and GPU memory nodes when `o`
/// asks for them).
/// Errors: those of load() (LaunchStage::options, machine, device, visibility).
inline Result<LoadedMachine> load_for_plans(const LaunchOptions& o, const Environment& env = process_environment(),
                                          const Readers& readers = {}, LaunchStage* failed_at = nullptr) {
  LoadedMachine m;
  m.parts = TopologyParts::policies() | plan_needs(o);
  if (auto ok = check_options(o); !ok) return detail::staged(ok.error(), LaunchStage::options, failed_at);
  LoadRequest request = load_request(o, env, readers, plan_detail(o), m.parts);
  request.priorities = true;  // a plan from it may ask for priority_cores
  LoadStage stage = LoadStage::machine;
  auto topo = load_machine(request, &stage);
  if (!topo) return detail::staged(topo.error(), detail::stage_of(stage), failed_at);
  m.topo = std::move(*topo);
  m.options = o;
  if (o.machine.topology.empty() && o.machine.hwloc_xml.empty()) {
    auto cgroup = read_cgroup_cpuset(o.machine.root_or_live());
    if (cgroup) m.cgroup = std::move(*cgroup);
    else m.cgroup_error = std::string(cgroup.error().message());
  }
  return m;
}

namespace detail {

/// plan(LoadedMachine) into `plan` (as default-constructed).
inline Result<void> plan_loaded_into(LaunchPlan& plan, const LoadedMachine& m, const LaunchOptions& o,
                                     const Environment& env, LaunchStage* failed_at) {
  if (auto ok = check_options(o); !ok) return staged(ok.error(), LaunchStage::options, failed_at);
  const MachineSource& a = o.machine;
  const MachineSource& b = m.options.machine;
  if (a.root != b.root || a.topology != b.topology || a.hwloc_xml != b.hwloc_xml || a.reader != b.reader ||
      a.vendor != b.vendor || o.visible_devices != m.options.visible_devices)
    return staged(make_error(Errc::invalid_argument, "a plan from a loaded machine takes no root, topology, "
                             "source, hwloc_xml, visible_devices or vendor: they belong to the load"),
                  LaunchStage::options, failed_at);
  TopologyParts needs = plan_needs(o);
  if ((needs | m.parts) != m.parts)
    return staged(make_error(Errc::invalid_argument, "this plan needs ",
                             needs.distances && !m.parts.distances ? "the node distances (unreachable=nearest)"
                                                                   : "the NICs (nic_env, mem_nodes=gpu)",
                             ", which the machine was loaded without; pass the same option to the load"),
                  LaunchStage::options, failed_at);
  if (auto ok = check_device_named(o, true); !ok)
    return staged(ok.error(), LaunchStage::options, failed_at);
  LaunchContext context;
  if (auto ok = fill_launch_context(context, o, env); !ok) return staged(ok.error(), LaunchStage::options, failed_at);
  if (o.baseline == Baseline::cgroup && !m.cgroup)
    return staged(make_error(Errc::io_error, "baseline=cgroup: ",
                             m.cgroup_error.empty() ? std::string("the machine was read from a file, which "
                                                                  "carries no cgroup")
                                                    : m.cgroup_error),
                  LaunchStage::machine, failed_at);
  context.cgroup = m.cgroup;
  if (o.pci && m.topo.find_pci(*o.pci) == nullptr)
    return staged(make_error(Errc::not_found, "PCI device ", o.pci->to_string(), " was not read with the "
                             "machine (only GPUs and the device named by pci= at the load are)"),
                  LaunchStage::device, failed_at);
  plan.topo = m.topo;
  if (auto split = split_domains(plan.topo, o.domains_per_gpu); !split)
    return staged(split.error(), LaunchStage::device, failed_at);
  if (auto made = fill_plan(plan, o, context); !made) return staged(std::move(made).error(), LaunchStage::plan, failed_at);
  return {};
}

}  // namespace detail

/// The plan of the device `o` names on a loaded machine: the options of the
/// plan only (policy, device, job, memory); the machine, its visibility list
/// and the devices were given to load_for_plans().
/// Errors: Errc::invalid_argument (LaunchStage::options) when `o` names
/// another machine or visibility list, or needs a part that was not read;
/// those of launch_context() and make_plan().
inline Result<LaunchPlan> plan(const LoadedMachine& m, const LaunchOptions& o,
                               const Environment& env = process_environment(), LaunchStage* failed_at = nullptr) {
  return detail::built_in_place<LaunchPlan>([&](LaunchPlan& p) { return detail::plan_loaded_into(p, m, o, env, failed_at); });
}

/// The checks of a plan that is to be applied (exec, Python's bind): a
/// memory node choice needs a memory policy to act on.
/// Errors: Errc::invalid_argument.
inline Result<void> check_apply_options(const LaunchOptions& o) {
  if (o.mem_nodes != MemNodes::cpu && o.membind == MemPolicy::none)
    return fail(Errc::invalid_argument, "mem_nodes=", name_of(mem_nodes_choices, o.mem_nodes),
                " has no effect without a memory policy; add membind=local (or preferred, interleave)");
  return {};
}

}  // namespace v0
}  // namespace gpuaff
