// SPDX-License-Identifier: Apache-2.0
#pragma once
// doctor's verdict: is a running process where its plan says? The plan is the
// one it carries (GPUAFF_PLAN, left by `gpuaff exec` and Python's bind), or,
// when options are given or it carries none, the plan those options (or the
// defaults) give its GPU, which the verdict then says is a guess. A process
// that carries UCX_NET_DEVICES or NVSHMEM_HCA_LIST has them checked against
// its GPU's NIC set (launch/nics.hpp). The CLI
// (`gpuaff doctor`) and Python (`gpuaff.doctor`) print this value.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/doctor/doctor.hpp"
#include "gpuaff/doctor/mappings.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/launch/repin_guards.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// Where the plan a process is checked against came from.
enum class PlanOrigin {
  recorded,  ///< its own GPUAFF_PLAN: the plan that was applied
  options,   ///< the options the caller gave
  guess,     ///< neither: what the default options give its GPU
};

/// What the process is checked against.
struct Expectation {
  int gpu = -1;                 ///< visible GPU index; -1 for a PCI device that is not one
  std::string pci{};
  std::string gpu_source{};     ///< where the device choice came from ("LOCAL_RANK=3", "gpu=3")
  PolicyKind policy = PolicyKind::node;
  CpuSet cpus{};
  NodeSet memory_nodes{};
  NodeSet host_nodes{};          ///< the nodes for its pinned host buffers (empty: a plan written before them)
  PlanOrigin origin = PlanOrigin::guess;
  std::optional<Roles> roles{};  ///< the rank's roles, when the plan has some
};

/// A process, as /proc shows it, against its expectation.
struct Verdict {
  int pid = 0;
  Expectation expected{};
  std::vector<ThreadState> threads{};
  std::vector<bool> inside{};               ///< per thread: its CPUs are within expected.cpus
  /// Per thread, with roles: the narrowest role its CPUs lie in ("main",
  /// "comm", "data", "compute"), "rank" for more than one role, "" outside.
  std::vector<std::string> roles{};
  std::map<int, long long> pages{};         ///< resident pages per node
  long long total = 0;                      ///< resident pages
  long long local = 0;                      ///< of them, on expected.memory_nodes
  /// The largest mappings (DoctorOptions::listed_mappings) and every host
  /// buffer off the host nodes (Mapping::off_host), largest first.
  std::vector<Mapping> mappings{};
  std::size_t mapping_count = 0;            ///< mappings with resident pages
  std::vector<FightingSetting> environment{};
  std::vector<std::string> problems{};      ///< empty: healthy
  std::vector<std::string> notes{};         ///< how the expectation was found

  bool healthy() const { return problems.empty(); }
  double local_fraction() const { return total > 0 ? static_cast<double>(local) / static_cast<double>(total) : 1.0; }
};

/// What doctor needs besides the options.
struct DoctorOptions {
  double min_local = 0.5;  ///< the least fraction of resident pages on the expected nodes that is healthy
  /// The resident size from which an anonymous mapping counts as a host
  /// buffer that must be on the plan's host nodes.
  long long min_buffer_bytes = 16LL << 20;
  std::size_t listed_mappings = 5;  ///< how many of the largest mappings the verdict lists
  /// examine_all (doctor --all, --watch, --nics): only the processes of this
  /// scheduler job, those whose SLURM_JOB_ID, PBS_JOBID or LSB_JOBID is it
  /// (a node shared by several jobs); empty: every planned process.
  std::string job{};
};

namespace detail {

inline std::string percent(double f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", f * 100.0);
  return buf;
}

/// "64.0 MiB", "1.5 GiB", "12 KiB".
inline std::string mib_text(long long bytes) {
  char buf[32];
  if (bytes >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1LL << 30));
  else if (bytes >= (1LL << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1LL << 20));
  else std::snprintf(buf, sizeof buf, "%lld KiB", bytes / 1024);
  return buf;
}

/// Whether the caller gave an option that shapes the plan (not only which machine to read).
inline bool shapes_plan(const LaunchOptions& o) {
  for (const auto& k : o.given)
    if (k != "root" && k != "topology" && k != "source" && k != "hwloc_xml") return true;
  return false;
}

inline Expectation expectation_of(const LaunchPlan& p, PlanOrigin origin) {
  return Expectation{.gpu = p.visible_gpu,
                     .pci = std::string(p.target().address().to_string().view()),
                     .gpu_source = p.device_source,
                     .policy = p.policy.kind,
                     .cpus = p.cpus,
                     .memory_nodes = p.memory_nodes,
                     .host_nodes = p.host_nodes,
                     .origin = origin,
                     .roles = p.roles};
}

inline Expectation expectation_of(const RecordedPlan& r) {
  return Expectation{.gpu = r.gpu,
                     .pci = r.pci,
                     .gpu_source = r.from,
                     .policy = r.policy,
                     .cpus = r.cpus,
                     .memory_nodes = r.memory_nodes,
                     .host_nodes = r.host_nodes,
                     .origin = PlanOrigin::recorded,
                     .roles = r.roles};
}

/// Whether planning on `m` in the environment `env` asks the GPUs' device
/// nodes which the process may open (device_nodes_probe_due): the sysfs
/// reader, on a root that has a dev folder (this machine always has).
inline bool probes_device_nodes(const MachineSource& m, const Environment& env) {
  if (!device_nodes_probe_due(env) || !m.topology.empty() || m.wants_hwloc()) return false;
  return m.root.empty() || is_directory(m.root_or_live() + "/dev");
}

/// The role a thread's CPUs lie in: the first role (main, comm, data,
/// compute) that holds them all, "rank" when only the rank's CPUs do.
inline std::string role_of(const Roles& roles, const CpuSet& cpus, const CpuSet& rank) {
  for (std::size_t k = 0; k < role_names.size(); ++k) {
    const CpuSet& r = roles.of(static_cast<Role>(k));
    if (!r.empty() && cpus.is_subset_of(r)) return std::string(role_names[k]);
  }
  return cpus.is_subset_of(rank) ? "rank" : "";
}

/// "{48,160},{49,161}": the CPUs of OMP_PLACES written as gpuaff writes it; nullopt otherwise.
inline std::optional<CpuSet> omp_places_cpus(std::string_view text) {
  std::string list;
  for (char c : text)
    if (c != '{' && c != '}') list += c;
  auto set = CpuSet::parse_list(list);
  if (!set) return std::nullopt;
  return *set;
}

/// With roles: the main thread (tid = pid) belongs on the main role, threads
/// named like the communication library's on the comm role. Other threads may
/// use any of the rank's CPUs.
inline void check_roles(const Verdict& v, std::vector<std::string>& problems) {
  const Roles& roles = *v.expected.roles;
  for (const auto& t : v.threads) {
    bool main = t.tid == v.pid && !roles.main.empty();
    bool comm = !roles.comm.empty() && thread_owner(t.name) == "NCCL";
    if (main && !t.cpus.is_subset_of(roles.main))
      problems.push_back(std::string("the main thread ") + std::to_string(t.tid) + " may run on CPUs " + t.cpus.to_list() +
                         ", not only its role main (" + roles.main.to_list() + "); bind it there (Python: "
                         "gpuaff.bind_role('main') in that thread)");
    if (comm && !t.cpus.is_subset_of(roles.comm))
      problems.push_back(std::string("thread ") + std::to_string(t.tid) + " '" + t.name + "' (NCCL) may run on CPUs " +
                         t.cpus.to_list() + ", not only the role comm (" + roles.comm.to_list() +
                         "); bind it there (Python: gpuaff.bind_role('comm', threads='NCCL*') after NCCL starts)");
  }
}

}  // namespace detail

/// The variables whose device lists doctor checks against the GPU's NIC set.
inline constexpr std::string_view nic_list_variables[] = {"UCX_NET_DEVICES", "NVSHMEM_HCA_LIST"};

/// doctor's NIC check: each of nic_list_variables the process carries
/// against the NIC set of its device (PCI address `pci`) on `topo` (read with
/// its NICs). A list that names none of the set's NICs points the library
/// away from the GPU: a problem; one that names the set and more: a note.
/// Appends to `problems` and `notes`; says in a note when it cannot judge.
inline void check_nic_lists(const Topology& topo, std::string_view pci, const std::map<std::string, std::string>& vars,
                            std::vector<std::string>& problems, std::vector<std::string>& notes) {
  const Gpu* gpu = nullptr;
  for (const auto* list : {&topo.host_gpus, &topo.gpus})
    for (const auto& g : *list)
      if (gpu == nullptr && g.address().to_string().view() == pci) gpu = &g;
  NicSet set = gpu != nullptr ? nic_set_of(topo, *gpu) : NicSet{};
  std::string set_text = nic_port_list(set.nics);
  for (std::string_view name : nic_list_variables) {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) continue;
    std::string word = std::string(name) + "=" + it->second.substr(0, 200);
    if (gpu == nullptr || set.empty()) {
      notes.push_back(word + " not checked: " + (gpu == nullptr ? std::string("no GPU ") + std::string(pci) + std::string(" in ") + std::string(topo.origin.view())
                                                                : std::string("no RDMA NIC reaches ") + std::string(pci)));
      continue;
    }
    std::vector<std::string> in, out;
    for (const auto& dev : listed_devices(it->second)) {
      bool mine = std::any_of(set.nics.begin(), set.nics.end(), [&](const Nic* n) { return n->rdma() && n->rdma_names.front().view() == dev; });
      (mine ? in : out).push_back(dev);
    }
    std::string others;
    for (const auto& d : out) others += std::string(others.empty() ? "" : ", ") + d;
    std::string why = " (the GPU's NIC set is " + set_text + std::string(", ") + std::string(to_string(set.path)) +
                      "; gpuaff exec with nic_env=true sets it)";
    if (in.empty() && !out.empty())
      problems.push_back(word + std::string(" points away from the NIC set of ") + std::string(pci) + ": it names " + others + why);
    else if (!out.empty())
      notes.push_back(word + " also names " + others + ", outside the NIC set" + why);
  }
}

/// The verdict on what /proc said of a process, against `e`: pure.
inline Verdict judge(int pid, Expectation e, std::vector<ThreadState> threads, std::map<int, long long> pages,
                     const std::map<std::string, std::string>& vars, const DoctorOptions& d) {
  Verdict v;
  v.pid = pid;
  v.expected = std::move(e);
  v.threads = std::move(threads);
  v.pages = std::move(pages);
  v.environment = fighting_settings(vars);
  // A runtime's documented switch set to keep the binding (what exec exports) does not fight it.
  std::erase_if(v.environment, [](const FightingSetting& s) { return is_repin_guard(s.name, s.value); });
  if (v.expected.roles) {  // the OpenMP variables the roles exported are the plan's own, not a fight
    auto places = vars.find("OMP_PLACES");
    auto bind = vars.find("OMP_PROC_BIND");
    bool own = places != vars.end() && bind != vars.end() && bind->second == "close" &&
               detail::omp_places_cpus(places->second) == std::optional<CpuSet>(v.expected.roles->compute);
    if (own)
      std::erase_if(v.environment, [](const FightingSetting& s) { return s.name == "OMP_PLACES" || s.name == "OMP_PROC_BIND"; });
  }
  for (const auto& t : v.threads) {
    bool in = t.cpus.is_subset_of(v.expected.cpus);
    if (v.expected.roles) v.roles.push_back(detail::role_of(*v.expected.roles, t.cpus, v.expected.cpus));
    v.inside.push_back(in);
    if (!in)
      v.problems.push_back(std::string("thread ") + std::to_string(t.tid) + " '" + t.name + "' may run on CPUs " +
                           (t.cpus - v.expected.cpus).to_list() + " outside the plan");
  }
  if (v.expected.roles) detail::check_roles(v, v.problems);
  for (const auto& [node, n] : v.pages) {
    v.total += n;
    if (NodeSet::valid_id(node) && v.expected.memory_nodes.test(node)) v.local += n;
  }
  if (v.total > 0 && v.local_fraction() < d.min_local)
    v.problems.push_back(detail::percent(1.0 - v.local_fraction()) + " of the resident pages are on nodes other than " +
                         v.expected.memory_nodes.to_list() + " (min_local=" + detail::percent(d.min_local) + ")");
  return v;
}

/// The share of `m`'s resident pages on `nodes`, 0-1.
inline double share_on(const Mapping& m, const NodeSet& nodes) {
  long long on = 0, all = 0;
  for (const auto& [node, n] : m.pages) {
    all += n;
    if (NodeSet::valid_id(node) && nodes.test(node)) on += n;
  }
  return all > 0 ? static_cast<double>(on) / static_cast<double>(all) : 1.0;
}

/// The mappings' part of the verdict: the `d.listed_mappings` largest, and
/// every host buffer off the plan's host nodes: an anonymous mapping
/// (Mapping::buffer_like) of at least `d.min_buffer_bytes` resident with more
/// than half of its pages on nodes that are neither `host_nodes` nor the
/// plan's memory nodes (where mem_nodes puts memory on purpose, as a GH200's
/// GPU memory). Each such buffer is a problem; a plan without host nodes (one
/// written before them) is only a note. Pure.
inline void judge_mappings(Verdict& v, std::vector<Mapping> mappings, const DoctorOptions& d) {
  v.mapping_count = mappings.size();
  std::stable_sort(mappings.begin(), mappings.end(), [](const Mapping& a, const Mapping& b) { return a.bytes() > b.bytes(); });
  const NodeSet& host = v.expected.host_nodes;
  NodeSet allowed = host | v.expected.memory_nodes;
  bool unplanned = false;
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    Mapping& m = mappings[i];
    bool judged = m.buffer_like() && m.bytes() >= d.min_buffer_bytes;
    if (judged && host.empty()) unplanned = true;
    m.off_host = judged && !host.empty() && share_on(m, allowed) < 0.5;
    if (m.off_host) {
      NodeSet where;
      for (const auto& [node, n] : m.pages)
        if (NodeSet::valid_id(node) && !allowed.test(node)) where.set(node);
      v.problems.push_back(std::string("host buffer at ") + m.address_text() + " (" + std::string(m.kind()) + ", " +
                           detail::mib_text(m.bytes()) + " resident) has " + detail::percent(1.0 - share_on(m, allowed)) +
                           " of its pages on node(s) " + where.to_list() + ", not on the plan's host nodes " +
                           host.to_list() + ": a GPU's copies from and to it cross between nodes; allocate it on the "
                           "host nodes (gpuaff::allocate_host_buffer, Python gpuaff.host_buffer(plan=...))");
    }
    if (i < d.listed_mappings || m.off_host) v.mappings.push_back(std::move(m));
  }
  if (unplanned)
    v.notes.push_back("host buffers not checked: the plan carries no host nodes (written by a gpuaff before them); "
                      "start the process again under this gpuaff");
}

/// Checks process `pid`: against its GPUAFF_PLAN when it carries one and
/// `o` shapes no plan (only the machine may be named); otherwise against the
/// plan `o` gives the GPU it names, or the process's own local rank, in the
/// process's environment (its *_VISIBLE_DEVICES).
/// A process that carries NIC lists (nic_list_variables) has them checked on
/// `with_nics`, the machine read with its NICs, when the caller has it
/// (examine_all reads it once for every process); otherwise on a read of the
/// machine `o` names.
/// Not guessed: the GPU of a process in a batch job with CUDA_VISIBLE_DEVICES
/// set, planned without `o.pci` on a machine whose device nodes the reader
/// probes, from another device cgroup than this process's (its index counts
/// the GPUs its own cgroup lets it open).
/// Errors: those of process_environ, process_threads, process_pages_by_node,
/// process_device_cgroup, parse_plan_variable and plan(), prefixed with the
/// process; Errc::invalid_argument for the GPU not guessed, naming both
/// cgroups and pci=BDF.
inline Result<Verdict> examine_process(int pid, const LaunchOptions& o, const DoctorOptions& d = {},
                                       const Readers& readers = {}, const Topology* with_nics = nullptr) {
  if (pid <= 0) return fail(Errc::invalid_argument, "pid=", pid, " is not a process id (above 0)");
  GPUAFF_TRY(auto vars, process_environ(pid));
  Expectation e;
  std::vector<std::string> notes;
  auto recorded = vars.find(std::string(plan_variable));
  if (recorded != vars.end() && !detail::shapes_plan(o)) {
    auto r = parse_plan_variable(recorded->second);
    if (!r) {
      Error err = r.error();
      err.prepend(std::string("process ") + std::to_string(pid) + ": ").append("; pass policy=P (and gpu=N) to check it against a plan");
      return Unexpected<Error>(err);
    }
    e = detail::expectation_of(*r);
    notes.push_back(std::string("checked against the plan it was bound with (") + std::string(plan_variable) + ")");
  } else {
    LaunchOptions mine = o;
    bool by_rank = !mine.gpu && !mine.pci;
    if (by_rank) mine.local_rank = true;  // its own rank variable
    Environment env = environment_of(vars);
    // Its GPU is guessed from its own launcher variables; without one the
    // caller is told what the process lacks, not an option they never passed.
    bool launched = std::any_of(local_rank_variables.begin(), local_rank_variables.end(),
                                [&env](std::string_view v) { return env(v).has_value(); });
    if (by_rank && !launched)
      return fail(Errc::invalid_argument, "process ", pid, " carries no ", plan_variable, " and none of ",
                  variable_list(local_rank_variables), " to tell its GPU (it was not started by gpuaff exec, "
                  "gpuaff.bind or a launcher); pass gpu=N, the GPU it drives, and the policy it was meant to have");
    // Which GPU a batch-job process's index names depends on the device nodes
    // its cgroup lets it open, and the reader's probe opens them with doctor's
    // own cgroup: from another cgroup it would name the wrong GPU. Not guessed.
    if (!mine.pci && detail::probes_device_nodes(mine.machine, env)) {
      GPUAFF_TRY(std::string theirs, process_device_cgroup(pid));
      GPUAFF_TRY(std::string ours, process_device_cgroup(0));
      if (theirs != ours)
        return fail(Errc::invalid_argument, "process ", pid, " runs in a batch job with CUDA_VISIBLE_DEVICES set, "
                    "in another device cgroup than doctor (its '", detail::quotable(theirs), "', doctor's '",
                    detail::quotable(ours), "'): which GPU its index names depends on the GPUs its cgroup lets it "
                    "open, which doctor cannot try from here, so it does not guess; pass pci=BDF, the GPU the process "
                    "drives (nvidia-smi --query-gpu=pci.bus_id inside the job), or run doctor in that cgroup");
    }
    auto p = plan(mine, env, readers);
    if (!p) {
      Error err = p.error();
      err.prepend(std::string("process ") + std::to_string(pid) + ": ");
      return Unexpected<Error>(err);
    }
    PlanOrigin origin = detail::shapes_plan(o) ? PlanOrigin::options : PlanOrigin::guess;
    e = detail::expectation_of(*p, origin);
    if (origin == PlanOrigin::guess)
      notes.push_back(std::string("it carries no ") + std::string(plan_variable) + " (it was not started by gpuaff exec or "
                      "gpuaff.bind): checked against what policy=" + std::string(to_string(o.policy.kind)) +
                      " gives its GPU, a guess; pass policy=P and its options to check the plan it was meant to have");
    else if (recorded != vars.end())
      notes.push_back(std::string("checked against the options given, not the ") + std::string(plan_variable) + " it carries");
  }
  GPUAFF_TRY(auto threads, process_threads(pid));
  auto maps = process_numa_maps(pid);
  if (!maps) {
    Error err = maps.error();
    err.prepend(std::string("process ") + std::to_string(pid) + ": ");
    return Unexpected<Error>(err);
  }
  std::string pci = e.pci;
  Verdict v = judge(pid, std::move(e), std::move(threads), std::move(maps->pages), vars, d);
  v.notes = std::move(notes);
  judge_mappings(v, std::move(maps->mappings), d);
  bool lists = std::any_of(std::begin(nic_list_variables), std::end(nic_list_variables),
                           [&](std::string_view n) { return vars.count(std::string(n)) != 0; });
  if (lists && with_nics != nullptr) {
    check_nic_lists(*with_nics, pci, vars, v.problems, v.notes);
  } else if (lists) {
    // The machine's NICs: the plan does not carry them. A machine that cannot
    // be read leaves the lists unjudged, not the process.
    auto topo = load(o, environment_of(vars), readers, SysfsDetail::full, nullptr, TopologyParts::only(&TopologyParts::nics));
    if (topo) {
      check_nic_lists(*topo, pci, vars, v.problems, v.notes);
    } else {
      v.notes.push_back(std::string("NIC lists not checked: ") + std::string(topo.error().message()));
    }
  }
  return v;
}

}  // namespace v0
}  // namespace gpuaff
