// SPDX-License-Identifier: Apache-2.0
#pragma once
// `gpuaff doctor --all`: every process of this machine that carries a
// GPUAFF_PLAN, each checked against that plan (verdict.hpp), and the GPUs'
// NIC sets, so that reports from several nodes can be compared rail by rail
// (docs/doctor.md, "A whole job").

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// A process whose GPUAFF_PLAN is not a plan gpuaff wrote: it cannot be
/// checked, which is a problem of its own (a plan that was changed or
/// written by hand, so nobody knows where the process should be).
struct InvalidPlan {
  int pid = 0;
  std::string problem{};  ///< the variable's value and what is wrong with it
};

/// One machine's processes that carry a plan.
struct NodeReport {
  std::string node;                      ///< the host name
  std::string job{};                     ///< DoctorOptions::job: only this scheduler job's processes; empty: all
  std::vector<Verdict> verdicts{};       ///< one per process, by pid
  std::vector<InvalidPlan> invalid_plans{};  ///< processes whose plan cannot be read, by pid
  std::vector<std::string> notes{};      ///< processes that ended or could not be read, and why
  /// Per visible GPU index, its NIC set as the libraries name it ("mlx5_0:1");
  /// empty when the machine has no RDMA NIC or its NICs cannot be read.
  std::map<int, std::string> gpu_rails{};
  /// Per visible GPU index, the rail and plane of each NIC of its set in
  /// NCCL_IB_HCA's syntax ("mlx5_0:1:0:0,mlx5_1:1:0:1"; rail_identities()).
  std::map<int, std::string> gpu_rail_ids{};

  /// Every process healthy, and none with a plan that cannot be read.
  bool healthy() const {
    return invalid_plans.empty() && std::all_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.healthy(); });
  }
  /// The processes that carry a plan: those checked and those whose plan cannot be read.
  std::size_t planned() const { return verdicts.size() + invalid_plans.size(); }
};

namespace detail {

/// The value of `name` in an environ file's text (NUL-separated NAME=value
/// entries); nullopt when it is not set. Without parse_environ's map: the
/// listing asks this of every process of the machine.
inline std::optional<std::string_view> environ_value(std::string_view text, std::string_view name) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\0', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(at, end - at);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=')
      return entry.substr(name.size() + 1);
    at = end + 1;
  }
  return std::nullopt;
}

/// Whether an environ file's text sets GPUAFF_PLAN.
inline bool environ_has_plan(std::string_view text) { return environ_value(text, plan_variable).has_value(); }

/// Whether the process whose environ file reads `text` belongs to scheduler
/// job `job`: one of job_id_variables (launch/front.hpp) is set to it.
inline bool environ_in_job(std::string_view text, std::string_view job) {
  for (std::string_view name : job_id_variables)
    if (environ_value(text, name) == job) return true;
  return false;
}

/// What is wrong with the GPUAFF_PLAN of `pid`, when the check of it failed
/// because it carries one that is not a plan gpuaff wrote (and `machine`
/// does not name a plan of its own to check it against); nullopt otherwise
/// (it ended, or could not be read: a note, not a problem).
inline std::optional<std::string> invalid_plan(int pid, const LaunchOptions& machine) {
  if (shapes_plan(machine)) return std::nullopt;
  auto vars = process_environ(pid);
  if (!vars) return std::nullopt;
  auto it = vars->find(std::string(plan_variable));
  if (it == vars->end()) return std::nullopt;
  auto p = parse_plan_variable(it->second);
  if (p) return std::nullopt;
  return std::string(p.error().message()) +
         "; the process was not checked: start it again under gpuaff, or check it alone against the plan it should have";
}

}  // namespace detail

/// The processes of this machine (other than this one) whose environment
/// carries GPUAFF_PLAN, or that published a plan (bound in place), by pid. A process whose environment this one may not
/// read (another user's, without privilege) is counted in `*unreadable`.
/// With `job`, only the processes of that scheduler job (environ_in_job);
/// the planned ones of other jobs, or of none, are counted in `*other_jobs`.
inline std::vector<int> planned_processes(int* unreadable = nullptr, std::string_view job = {},
                                          int* other_jobs = nullptr) {
  std::vector<int> out;
  int hidden = 0;
  int others = 0;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  int self = static_cast<int>(::getpid());
  while (const dirent* e = ::readdir(dir)) {
    std::string_view name(e->d_name);
    if (!detail::is_decimal(name)) continue;
    long long pid = 0;
    detail::leading_number(name, 10, 1LL << 30, pid);
    if (pid <= 0 || pid == self) continue;
    std::string text;
    int err = detail::read_whole_file(std::string("/proc/") + std::string(name) + "/environ", text);
    if (err == EACCES || err == EPERM) ++hidden;
    if (err != 0) continue;
    // A process that bound itself in place published its plan instead of
    // carrying it in the environment it was exec'd with (launch/published_plan.hpp).
    if (!detail::environ_has_plan(text) && !published_plan_value(static_cast<int>(pid))) continue;
    if (!job.empty() && !detail::environ_in_job(text, job)) ++others;
    else out.push_back(static_cast<int>(pid));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  if (unreadable != nullptr) *unreadable = hidden;
  if (other_jobs != nullptr) *other_jobs = others;
  return out;
}

namespace detail {
/// planned_processes() of scheduler job `job` (every one when it is empty),
/// and, when `job` left some out or found none, the note that says so
/// ("job=ID: N planned process(es) of the job <done>, M of other jobs ...")
/// appended to `notes`.
inline std::vector<int> planned_processes_of_job(std::string_view job, std::string_view done,
                                                 std::vector<std::string>& notes, int* unreadable = nullptr) {
  int other_jobs = 0;
  std::vector<int> pids = planned_processes(unreadable, job, &other_jobs);
  if (!job.empty() && (other_jobs > 0 || pids.empty()))
    notes.push_back("job=" + std::string(job) + ": " + std::to_string(pids.size()) + " planned process(es) of the job " +
                    std::string(done) + ", " + std::to_string(other_jobs) + " of other jobs (or of none) left out" +
                    (pids.empty() ? "; is the job's id right (its SLURM_JOB_ID, PBS_JOBID or LSB_JOBID)?" : ""));
  return pids;
}
}  // namespace detail

/// Every planned process of this machine checked against its own plan, with
/// the machine `machine` names (this one by default), read once with its NICs,
/// for the processes' NIC lists and each GPU's NIC set.
/// Never fails as a whole: a process whose GPUAFF_PLAN is not a plan gpuaff
/// wrote is an invalid plan (a problem); a process that ends or cannot be read
/// while it is checked becomes a note, and so does a machine that cannot be read (the
/// NIC sets are then not compared; each process's lists are judged on a read
/// of its own, which says why).
inline NodeReport examine_all(const LaunchOptions& machine, const DoctorOptions& d = {}, const Readers& readers = {}) {
  NodeReport r;
  char host[256] = {};
  r.node = ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("?");
  r.job = d.job;
  auto topo = load(machine, process_environment(), readers, SysfsDetail::full, nullptr,
                   TopologyParts::only(&TopologyParts::nics));
  int unreadable = 0;
  for (int pid : detail::planned_processes_of_job(d.job, "checked", r.notes, &unreadable)) {
    auto v = examine_process(pid, machine, d, readers, topo ? &*topo : nullptr);
    if (v) r.verdicts.push_back(std::move(*v));
    else if (auto bad = detail::invalid_plan(pid, machine)) r.invalid_plans.push_back({pid, std::move(*bad)});
    else r.notes.push_back(std::string(v.error().message()));
  }
  if (unreadable > 0)
    r.notes.push_back(std::to_string(unreadable) + " process(es) whose environment this user may not read were "
                      "not looked at" + (::geteuid() == 0 ? std::string(" (refused even to root: another user "
                                                                        "namespace, or a security module)")
                                                          : std::string("; run as root to check every user's processes")));
  if (!topo) {
    r.notes.push_back(std::string("rails not compared: ") + std::string(topo.error().message()));
    return r;
  }
  if (topo->nics.empty()) return r;
  auto ids = rail_identities(*topo);
  for (std::size_t g = 0; g < topo->gpus.size(); ++g) {
    auto set = served_nic_set(*topo, {static_cast<int>(g)});
    if (!set) continue;
    r.gpu_rails[static_cast<int>(g)] = nic_port_list(set->nics);
    std::vector<RailIdentity> mine;
    for (const Nic* n : set->nics) mine.push_back(rail_identity_of(ids, n));
    r.gpu_rail_ids[static_cast<int>(g)] = rail_id_text(mine);
  }
  return r;
}

}  // namespace v0
}  // namespace gpuaff
