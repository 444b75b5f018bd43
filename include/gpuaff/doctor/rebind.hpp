// SPDX-License-Identifier: Apache-2.0
#pragma once
// The remedy for what `doctor --watch` finds (docs/doctor.md, "Putting
// threads back"): the threads of a process that drifted off their plan (or
// role) set back, one sched_setaffinity each, opt-in. Each thread is moved
// exactly or left as it was (apply_affinity reads the mask back), and every
// thread that could not be moved is reported with the reason: never
// half-applied silently.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sys/types.h>

#include <cerrno>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/doctor/verdict.hpp"
#include "gpuaff/doctor/watch.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// One thread to move, or moved: from its CPUs to where it belongs.
struct ThreadMove {
  int tid = 0;
  std::string name{};
  CpuSet from{};
  CpuSet to{};
};

/// A thread that could not be moved, and why.
struct ThreadFailure {
  int tid = 0;
  std::string name{};
  CpuSet to{};
  std::string error{};
};

/// What rebind_threads did to one process.
struct RebindReport {
  int pid = 0;
  std::vector<ThreadMove> moved{};
  std::vector<ThreadFailure> failed{};
  int exited = 0;  ///< threads that ended before they could be moved (fine)
  /// Every thread found off its place is back (or ended).
  bool complete() const { return failed.empty(); }
};

/// The threads of `now` that are off their place, each with where it goes
/// back to: the CPUs it had at `before` when it was well placed then (a thread
/// pinned to one core of its role gets that core back), else its role's CPUs
/// (the main thread, NCCL's threads), else the whole plan's. Pure.
inline std::vector<ThreadMove> rebind_targets(const Verdict& now, const Verdict* before = nullptr) {
  std::map<int, const ThreadState*> old;
  if (before != nullptr && before->pid == now.pid)
    for (const auto& t : before->threads) old[t.tid] = &t;
  std::vector<ThreadMove> out;
  for (const auto& t : now.threads) {
    if (detail::placed_well(now, t)) continue;
    CpuSet to = detail::belongs(now, t).second;
    auto it = old.find(t.tid);
    if (it != old.end() && detail::placed_well(*before, *it->second) && !it->second->cpus.empty())
      to = it->second->cpus;
    if (to.empty()) continue;  // nowhere to go: a plan without CPUs is not one to enforce
    out.push_back({t.tid, t.name, t.cpus, std::move(to)});
  }
  return out;
}

/// Moves each thread of `moves` (threads of process `pid`) to its `to` set:
/// exactly, or not at all (the mask is read back and put back when the
/// kernel narrowed it). A thread that ended meanwhile is counted, not an
/// error; one the kernel refuses (EPERM: another user's process without
/// CAP_SYS_NICE; EINVAL: CPUs outside its cpuset) is in `failed` with the
/// reason. Never throws; touches only the threads named.
inline RebindReport rebind_threads(int pid, const std::vector<ThreadMove>& moves) {
  RebindReport r;
  r.pid = pid;
  for (const auto& m : moves) {
    // The thread id must still be one of pid's threads (ids are reused).
    std::string status;
    int e = detail::read_whole_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(m.tid) + "/status", status);
    if (e == ENOENT || e == ESRCH) {
      ++r.exited;
      continue;
    }
    auto previous = detail::read_affinity(static_cast<pid_t>(m.tid));
    if (!previous) {
      if (previous.error().sys_errno() == ESRCH) {
        ++r.exited;
        continue;
      }
      r.failed.push_back({m.tid, m.name, m.to, std::string(previous.error().message())});
      continue;
    }
    auto done = detail::apply_affinity(static_cast<pid_t>(m.tid), m.to, *previous);
    if (done) {
      r.moved.push_back({m.tid, m.name, previous->to_cpu_set(), m.to});
    } else if (done.error().sys_errno() == ESRCH) {
      ++r.exited;
    } else {
      r.failed.push_back({m.tid, m.name, m.to, std::string(done.error().message())});
    }
  }
  return r;
}

/// The report as watch events (thread_rebound, rebind_failed) of verdict
/// `v`'s process, for the watch's output.
inline std::vector<WatchEvent> rebind_events(const Verdict& v, const RebindReport& r) {
  std::vector<WatchEvent> out;
  auto head = [&](WatchEventKind k, int tid, const std::string& name, const CpuSet& to) {
    WatchEvent e = detail::process_event(k, v);
    e.tid = tid;
    e.name = name;
    e.expected = to;
    for (const auto& t : v.threads)
      if (t.tid == tid) {
        e.role = detail::belongs(v, t).first;
        e.cpus = t.cpus;
      }
    return e;
  };
  for (const auto& m : r.moved) {
    WatchEvent e = head(WatchEventKind::thread_rebound, m.tid, m.name, m.to);
    e.previous_cpus = m.from;
    e.cpus = m.to;
    e.message = "pid " + std::to_string(v.pid) + " thread " + std::to_string(m.tid) + " '" + m.name + "' put back: CPUs " +
                m.from.to_list() + " -> " + m.to.to_list();
    out.push_back(std::move(e));
  }
  for (const auto& f : r.failed) {
    WatchEvent e = head(WatchEventKind::rebind_failed, f.tid, f.name, f.to);
    e.message = "pid " + std::to_string(v.pid) + " thread " + std::to_string(f.tid) + " '" + f.name +
                "' NOT put back on CPUs " + f.to.to_list() + ": " + f.error;
    out.push_back(std::move(e));
  }
  return out;
}

/// Checks process `pid` against its plan (examine_process, with `o` as
/// there) and moves back every thread found off it (rebind_targets with
/// `before`, the previous check, when the caller has one, then
/// rebind_threads). Errors: those of examine_process; what happens per
/// thread is in the report.
inline Result<RebindReport> rebind_drifted(int pid, const LaunchOptions& o = {}, const Verdict* before = nullptr) {
  GPUAFF_TRY(Verdict v, examine_process(pid, o));
  return rebind_threads(pid, rebind_targets(v, before));
}

}  // namespace v0
}  // namespace gpuaff
