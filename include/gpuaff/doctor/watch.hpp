// SPDX-License-Identifier: Apache-2.0
#pragma once
// `gpuaff doctor --watch`: the node's planned processes (examine_all) checked
// again each interval, and only what changed between two checks reported
// (docs/doctor.md, "Watching a job"). watch_events() is pure: two NodeReports
// in, the events out; the command line only reads /proc each interval, sleeps
// and prints. Checks added later (NICs, interrupts) run each interval too:
// WatchCheck.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/doctor/all.hpp"
#include "gpuaff/doctor/doctor.hpp"
#include "gpuaff/doctor/nic_traffic.hpp"
#include "gpuaff/doctor/verdict.hpp"

namespace gpuaff {
inline namespace v0 {

/// What changed between two checks.
enum class WatchEventKind {
  process_started,  ///< a planned process appeared (or was there at the first check)
  process_gone,     ///< a planned process is no longer there
  plan_invalid,     ///< a process appeared whose GPUAFF_PLAN is not a plan gpuaff wrote
  thread_moved,     ///< a thread inside its plan (and role) before may now run outside it
  thread_new,       ///< a thread not seen before that is outside its plan or role
  thread_back,      ///< a thread outside its plan or role before is inside again
  pages_off,        ///< the resident pages on the planned nodes fell below min_local
  pages_back,       ///< ... and rose to it again
  thread_rebound,   ///< the remedy (rebind.hpp) put a thread back
  rebind_failed,    ///< the remedy could not put a thread back (the message says why)
  nic_idle_in_set,  ///< --nics: a NIC of a rank's set carries nothing while the rank moves data
  nic_outside_sets, ///< --nics: a busy NIC in no rank's set that a rank lists or that is a rail
  nic_piled,        ///< --nics: two or more ranks' traffic on one NIC while a NIC of their sets idles
  nic_cleared,      ///< --nics: one of those three is no longer found
};

inline constexpr std::string_view to_string(WatchEventKind k) {
  switch (k) {
    case WatchEventKind::process_started: return "process_started";
    case WatchEventKind::process_gone: return "process_gone";
    case WatchEventKind::plan_invalid: return "plan_invalid";
    case WatchEventKind::thread_moved: return "thread_moved";
    case WatchEventKind::thread_new: return "thread_new";
    case WatchEventKind::thread_back: return "thread_back";
    case WatchEventKind::pages_off: return "pages_off";
    case WatchEventKind::pages_back: return "pages_back";
    case WatchEventKind::thread_rebound: return "thread_rebound";
    case WatchEventKind::rebind_failed: return "rebind_failed";
    case WatchEventKind::nic_idle_in_set: return "nic_idle_in_set";
    case WatchEventKind::nic_outside_sets: return "nic_outside_sets";
    case WatchEventKind::nic_piled: return "nic_piled";
    case WatchEventKind::nic_cleared: return "nic_cleared";
  }
  return "?";
}

/// Every kind, in the order of the enum (for counters).
inline constexpr WatchEventKind watch_event_kinds[] = {
    WatchEventKind::process_started, WatchEventKind::process_gone, WatchEventKind::plan_invalid,
    WatchEventKind::thread_moved,    WatchEventKind::thread_new,   WatchEventKind::thread_back,
    WatchEventKind::pages_off,       WatchEventKind::pages_back,   WatchEventKind::thread_rebound,
    WatchEventKind::rebind_failed,   WatchEventKind::nic_idle_in_set, WatchEventKind::nic_outside_sets,
    WatchEventKind::nic_piled,       WatchEventKind::nic_cleared};

/// One change. Thread fields are set for thread events only (tid 0 otherwise);
/// NIC events (nic_*) have pid 0, gpu -1 and set `nic` and `ranks`.
struct WatchEvent {
  WatchEventKind kind = WatchEventKind::process_started;
  int pid = 0;
  std::string rank{};             ///< where the process's GPU choice came from ("LOCAL_RANK=3")
  int gpu = -1;
  int tid = 0;
  std::string name{};             ///< the thread's comm name
  CpuSet cpus{};                  ///< the thread's CPUs now
  std::optional<CpuSet> previous_cpus{};  ///< its CPUs at the check before, when it was seen
  CpuSet expected{};              ///< where it belongs: its role's CPUs (main, comm), else the plan's
  std::string role{};             ///< the role it belongs to ("main", "comm"), "" for the plan as a whole
  std::string runtime{};          ///< the runtime that likely moved it, with the evidence; "" when nothing tells
  std::string nic{};              ///< NIC events: the port ("mlx5_3:1")
  std::vector<std::string> ranks{};  ///< NIC events: the ranks concerned
  std::string message{};          ///< one line saying it all
};

namespace detail {

/// Runtimes named by the variables of fighting_variables (doctor.hpp).
inline std::string_view runtime_of_variable(std::string_view name) {
  constexpr std::pair<std::string_view, std::string_view> by_name[] = {
      {"KMP_AFFINITY", "Intel/LLVM OpenMP"},
      {"GOMP_CPU_AFFINITY", "GNU OpenMP"},
      {"OMP_PROC_BIND", "OpenMP"},
      {"OMP_PLACES", "OpenMP"},
      {"NCCL_IGNORE_CPU_AFFINITY", "NCCL"},
      {"TLLM_NUMA_AWARE_WORKER_AFFINITY", "TensorRT-LLM"},
      {"MV2_ENABLE_AFFINITY", "MVAPICH2"},
      {"I_MPI_PIN", "Intel MPI"},
  };
  for (const auto& [n, who] : by_name)
    if (n == name) return who;
  return {};
}

/// Where thread `t` of verdict `v` belongs: the main role for the main
/// thread, the comm role for a thread named like NCCL's (the rules of
/// check_roles), else the whole plan. Returns the role ("" for the plan).
inline std::pair<std::string, CpuSet> belongs(const Verdict& v, const ThreadState& t) {
  if (v.expected.roles) {
    const Roles& r = *v.expected.roles;
    if (t.tid == v.pid && !r.main.empty()) return {"main", r.main};
    if (!r.comm.empty() && thread_owner(t.name) == "NCCL") return {"comm", r.comm};
  }
  return {"", v.expected.cpus};
}

inline bool placed_well(const Verdict& v, const ThreadState& t) { return t.cpus.is_subset_of(belongs(v, t).second); }

}  // namespace detail

/// The runtime that likely moved thread `name` of a process with the fighting
/// settings `environment`, with the evidence: its name when the name tells
/// ("NCCL (thread name 'NCCL Proxy')"), else the process's settings
/// ("OpenMP (OMP_PLACES=...)"); "" when neither tells.
inline std::string likely_mover(std::string_view name, const std::vector<FightingSetting>& environment) {
  std::string_view who = thread_owner(name);
  if (!who.empty() && who != "Python") return std::string(who) + " (thread name '" + std::string(name) + "')";
  std::string out;
  for (const auto& s : environment) {
    std::string_view r = detail::runtime_of_variable(s.name);
    if (r.empty()) continue;
    out += (out.empty() ? "" : ", ") + std::string(r) + " (" + s.name + "=" + s.value.substr(0, 80) + ")";
  }
  return out;
}

/// What watch_events needs besides the two reports.
struct WatchOptions {
  double min_local = 0.5;  ///< as DoctorOptions::min_local
};

namespace detail {

inline WatchEvent process_event(WatchEventKind k, const Verdict& v) {
  WatchEvent e;
  e.kind = k;
  e.pid = v.pid;
  e.rank = v.expected.gpu_source;
  e.gpu = v.expected.gpu;
  e.expected = v.expected.cpus;
  return e;
}

inline WatchEvent thread_event(WatchEventKind k, const Verdict& v, const ThreadState& t, const ThreadState* before) {
  WatchEvent e = process_event(k, v);
  e.tid = t.tid;
  e.name = t.name;
  e.cpus = t.cpus;
  if (before != nullptr) e.previous_cpus = before->cpus;
  auto [role, cpus] = belongs(v, t);
  e.role = role;
  e.expected = cpus;
  if (k != WatchEventKind::thread_back) e.runtime = likely_mover(t.name, v.environment);
  std::string where = role.empty() ? "its plan (" + cpus.to_list() + ")" : "its role " + role + " (" + cpus.to_list() + ")";
  std::string head = "pid " + std::to_string(v.pid) + " thread " + std::to_string(t.tid) + " '" + t.name + "'";
  if (k == WatchEventKind::thread_moved)
    e.message = head + " moved off " + where + ": CPUs " + (before ? before->cpus.to_list() : std::string("?")) +
                " -> " + t.cpus.to_list();
  else if (k == WatchEventKind::thread_new)
    e.message = head + " is new and outside " + where + ": CPUs " + t.cpus.to_list();
  else
    e.message = head + " is back inside " + where + ": CPUs " + t.cpus.to_list();
  if (!e.runtime.empty()) e.message += "; likely moved by " + e.runtime;
  return e;
}

inline bool memory_off(const Verdict& v, double min_local) { return v.total > 0 && v.local_fraction() < min_local; }

}  // namespace detail

/// The changes from `before` (the previous check; an empty report at the
/// first) to `now`: pure, so it is tested on recorded process states without
/// sleeping. Events come by pid, then by thread id; a process that appears
/// is reported with its threads already outside (thread_new) and its memory
/// when it is already off (pages_off).
inline std::vector<WatchEvent> watch_events(const NodeReport& before, const NodeReport& now, const WatchOptions& o = {}) {
  std::vector<WatchEvent> out;
  std::map<int, const Verdict*> old;
  for (const auto& v : before.verdicts) old[v.pid] = &v;
  std::map<int, const InvalidPlan*> old_invalid;
  for (const auto& b : before.invalid_plans) old_invalid[b.pid] = &b;
  std::map<int, bool> present;  // pid -> seen now
  std::vector<const Verdict*> verdicts;
  for (const auto& v : now.verdicts) verdicts.push_back(&v);
  std::sort(verdicts.begin(), verdicts.end(), [](const Verdict* a, const Verdict* b) { return a->pid < b->pid; });
  std::vector<std::pair<int, std::vector<WatchEvent>>> by_pid;  // merged by pid at the end
  for (const Verdict* vp : verdicts) {
    const Verdict& v = *vp;
    present[v.pid] = true;
    std::vector<WatchEvent> ev;
    auto it = old.find(v.pid);
    const Verdict* prev = it == old.end() ? nullptr : it->second;
    if (prev == nullptr) {
      WatchEvent e = detail::process_event(WatchEventKind::process_started, v);
      e.message = "pid " + std::to_string(v.pid) + " (" + v.expected.gpu_source + ", GPU " + std::to_string(v.expected.gpu) +
                  ") watched: plan CPUs " + v.expected.cpus.to_list() + ", memory node(s) " +
                  v.expected.memory_nodes.to_list() + ", " + std::to_string(v.threads.size()) + " thread(s)";
      ev.push_back(std::move(e));
    }
    std::map<int, const ThreadState*> old_threads;
    if (prev != nullptr)
      for (const auto& t : prev->threads) old_threads[t.tid] = &t;
    for (const auto& t : v.threads) {
      bool ok = detail::placed_well(v, t);
      auto ot = old_threads.find(t.tid);
      if (ot == old_threads.end()) {
        if (!ok) ev.push_back(detail::thread_event(WatchEventKind::thread_new, v, t, nullptr));
        continue;
      }
      bool was_ok = detail::placed_well(*prev, *ot->second);
      if (was_ok && !ok) ev.push_back(detail::thread_event(WatchEventKind::thread_moved, v, t, ot->second));
      else if (!was_ok && ok) ev.push_back(detail::thread_event(WatchEventKind::thread_back, v, t, ot->second));
      else if (!was_ok && !ok && ot->second->cpus != t.cpus)  // moved again, still outside
        ev.push_back(detail::thread_event(WatchEventKind::thread_moved, v, t, ot->second));
    }
    bool off = detail::memory_off(v, o.min_local);
    bool was_off = prev != nullptr && detail::memory_off(*prev, o.min_local);
    if (off != was_off) {
      WatchEvent e = detail::process_event(off ? WatchEventKind::pages_off : WatchEventKind::pages_back, v);
      e.message = "pid " + std::to_string(v.pid) + ": " + detail::percent(v.local_fraction()) +
                  " of its resident pages on node(s) " + v.expected.memory_nodes.to_list() +
                  (off ? " (below min_local=" : " (back at min_local=") + detail::percent(o.min_local) + ")";
      ev.push_back(std::move(e));
    }
    by_pid.emplace_back(v.pid, std::move(ev));
  }
  for (const auto& b : now.invalid_plans) {
    present[b.pid] = true;
    if (old_invalid.count(b.pid) != 0) continue;
    WatchEvent e;
    e.kind = WatchEventKind::plan_invalid;
    e.pid = b.pid;
    e.message = "pid " + std::to_string(b.pid) + ": " + b.problem;
    by_pid.push_back({b.pid, {std::move(e)}});
  }
  for (const auto& v : before.verdicts) {
    if (present.count(v.pid) != 0) continue;
    WatchEvent e = detail::process_event(WatchEventKind::process_gone, v);
    e.message = "pid " + std::to_string(v.pid) + " (" + v.expected.gpu_source + ", GPU " + std::to_string(v.expected.gpu) +
                ") is gone";
    by_pid.push_back({v.pid, {std::move(e)}});
  }
  for (const auto& b : before.invalid_plans) {
    if (present.count(b.pid) != 0) continue;
    WatchEvent e;
    e.kind = WatchEventKind::process_gone;
    e.pid = b.pid;
    e.message = "pid " + std::to_string(b.pid) + " (plan unreadable) is gone";
    by_pid.push_back({b.pid, {std::move(e)}});
  }
  std::stable_sort(by_pid.begin(), by_pid.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [pid, ev] : by_pid)
    for (auto& e : ev) out.push_back(std::move(e));
  return out;
}

/// The NIC check of `doctor --watch --nics`: each interval's counter sample
/// judged against the one before (judge_nic_traffic), and an event when a
/// problem (a finding with `problem`; the notes are not events) appears or is
/// no longer found. The first sample only records. A problem on a port this
/// interval could not judge (missing from a sample, a counter reset, a zero
/// interval) stays open: it is cleared only by an interval that judged its port.
/// Pure apart from the samples given: tested on recorded sequences.
struct NicWatch {
  NicTrafficOptions options{};
  std::optional<NicSample> last{};          ///< the previous sample
  std::optional<NicTrafficReport> report{};  ///< the last interval's verdict (none before the second sample)
  std::vector<NicFinding> open{};            ///< the problems found and not cleared

  /// The events of sample `now` against the previous one, for `ranks`: new
  /// problems in the verdict's order, then the cleared ones in the order found.
  std::vector<WatchEvent> step(NicSample now, const std::vector<RankNics>& ranks) {
    std::vector<WatchEvent> out;
    if (!last) {
      last = std::move(now);
      return out;
    }
    NicTrafficReport r = judge_nic_traffic(*last, now, ranks, options);
    last = std::move(now);
    auto key = [](const NicFinding& f) {
      std::string k = std::string(to_string(f.kind)) + "|" + f.nic;
      for (const auto& x : f.ranks) k += "|" + x;
      return k;
    };
    auto event = [](WatchEventKind kind, const NicFinding& f, std::string message) {
      WatchEvent e;
      e.kind = kind;
      e.gpu = -1;
      e.nic = f.nic;
      e.ranks = f.ranks;
      e.rank = detail::joined(f.ranks, ",");
      e.message = std::move(message);
      return e;
    };
    std::vector<NicFinding> still;
    std::map<std::string, bool> found;
    for (const auto& f : r.findings)
      if (f.problem) found[key(f)] = true;
    for (auto& f : open) {
      bool judged = std::any_of(r.nics.begin(), r.nics.end(), [&](const NicTrafficRow& n) { return n.nic == f.nic; });
      if (found.count(key(f)) != 0 || !judged) still.push_back(std::move(f));
      else
        out.push_back(event(WatchEventKind::nic_cleared, f,
                            "NIC " + f.nic + ": no longer " + std::string(to_string(f.kind)) +
                                (f.ranks.empty() ? std::string() : " (" + detail::joined(f.ranks) + ")")));
    }
    std::vector<WatchEvent> fresh;
    std::map<std::string, bool> was;
    for (const auto& f : still) was[key(f)] = true;
    for (const auto& f : r.findings) {
      if (!f.problem || was.count(key(f)) != 0) continue;
      WatchEventKind k = f.kind == NicFindingKind::idle_in_set    ? WatchEventKind::nic_idle_in_set
                         : f.kind == NicFindingKind::outside_sets ? WatchEventKind::nic_outside_sets
                                                                  : WatchEventKind::nic_piled;
      fresh.push_back(event(k, f, f.message));
      still.push_back(f);
      was[key(f)] = true;
    }
    open = std::move(still);
    report = std::move(r);
    fresh.insert(fresh.end(), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
    return fresh;
  }
};

/// A check run each interval beside the processes' (the NICs' counters, the
/// interrupts): given the report of this interval, it returns its events.
using WatchCheck = std::function<std::vector<WatchEvent>(const NodeReport& now)>;

/// One interval of the watch: the node's planned processes checked
/// (examine_all), the events against `before`, then every extra check's.
/// `before` becomes this interval's report.
inline std::vector<WatchEvent> watch_once(NodeReport& before, const LaunchOptions& machine, const DoctorOptions& d,
                                          const Readers& readers = {}, const std::vector<WatchCheck>& checks = {}) {
  NodeReport now = examine_all(machine, d, readers);
  std::vector<WatchEvent> ev = watch_events(before, now, WatchOptions{.min_local = d.min_local});
  for (const auto& c : checks) {
    auto more = c(now);
    ev.insert(ev.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  before = std::move(now);
  return ev;
}

}  // namespace v0
}  // namespace gpuaff
