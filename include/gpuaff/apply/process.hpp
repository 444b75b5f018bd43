// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whole-process binding: sched_setaffinity(0) binds only the calling thread,
// so threads that already exist (a logging thread, an OpenMP pool, a CUDA
// helper) would stay unbound. bind_process walks /proc/self/task and binds
// every thread, scanning again until a scan finds no thread it has not seen.
//
// Memory policy is per thread and the kernel only lets a thread set its own:
// bind_process sets it for the calling thread only (threads created by that
// thread afterwards inherit it). ProcessBinding says so in `warnings` when
// other threads existed.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <dirent.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// What bind_process did.
struct ProcessBinding {
  CpuSet cpus{};
  MemoryOptions memory{};
  int threads_bound = 0;       ///< threads whose mask was set
  int threads_exited = 0;      ///< threads that exited while being bound (ESRCH), which is fine
  int passes = 0;              ///< scans of /proc/self/task
  bool memory_applied = false; ///< the memory policy was set (for the calling thread)
  std::vector<std::string> warnings;
};

namespace detail {

/// Thread ids listed in /proc/self/task.
/// Errors: Errc::io_error when the directory cannot be read (no /proc mounted).
template <class = void>
Result<std::vector<pid_t>> list_threads(const char* dir = "/proc/self/task") {
  DIR* d = ::opendir(dir);
  if (d == nullptr) {
    int e = errno;
    return Unexpected(make_sys_error(Errc::io_error, e, "cannot list the process's threads in ", std::string_view(dir),
                                     " (", errno_text(e), "); is /proc mounted?"));
  }
  std::vector<pid_t> tids;
  while (dirent* ent = ::readdir(d)) {
    const char* n = ent->d_name;
    if (n[0] < '0' || n[0] > '9') continue;
    tids.push_back(static_cast<pid_t>(std::strtol(n, nullptr, 10)));
  }
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

/// Most scans before giving up: threads appearing faster than they can be bound.
inline constexpr int max_process_scans = 64;

/// A thread bound by bind_all_threads, with the mask to put back on undo.
struct ChangedThread {
  pid_t tid;
  AllocatedCpuSet previous;
};

/// What became of one thread.
enum class ThreadOutcome { bound, exited };

/// Binds thread `tid` to `cpus` (already in `mask`), recording its previous
/// mask in `changed`. A thread that exits meanwhile (ESRCH at any step) is
/// `exited`, which is fine; the kernel silently dropping CPUs is an error.
template <class = void>
Result<ThreadOutcome> bind_one_thread(pid_t tid, const CpuSet& cpus, const AllocatedCpuSet& mask,
                                      std::vector<ChangedThread>& changed) {
  auto previous = read_affinity(tid);
  if (!previous) {
    if (previous.error().sys_errno() == ESRCH) return ThreadOutcome::exited;
    return Unexpected(previous.error());
  }
  if (int e = write_affinity(tid, mask); e != 0) {
    if (e == ESRCH) return ThreadOutcome::exited;
    return Unexpected(affinity_error(tid, cpus, e, CpuSet{}));
  }
  changed.push_back({tid, std::move(*previous)});
  auto now = read_affinity(tid);
  if (!now) {
    if (now.error().sys_errno() == ESRCH) return ThreadOutcome::exited;
    return Unexpected(now.error());
  }
  CpuSet got = now->to_cpu_set();
  if (got != cpus) return Unexpected(affinity_error(tid, cpus, 0, cpus - got));
  return ThreadOutcome::bound;
}

/// Puts back what a failed bind_all_threads changed: every thread in
/// `changed` gets its previous mask, newest first. A thread born while the
/// process was being bound inherited the binding from its (bound) creator
/// without being in any scan, so /proc/self/task is scanned again, until a
/// scan finds no thread not in `seen`: a newcomer that holds exactly `cpus`
/// gets the mask the bound threads had before (when they all had the same
/// one; otherwise which mask it should have is unknown). Returns the ids of
/// the threads it could not put back.
template <class = void>
std::vector<pid_t> undo_binding(const CpuSet& cpus, const std::vector<ChangedThread>& changed,
                                std::vector<pid_t> seen) {
  std::vector<pid_t> stuck;
  for (auto it = changed.rbegin(); it != changed.rend(); ++it)
    if (int e = write_affinity(it->tid, it->previous); e != 0 && e != ESRCH) stuck.push_back(it->tid);
  if (changed.empty()) return stuck;
  const AllocatedCpuSet& before = changed.front().previous;
  bool one_before = std::all_of(changed.begin(), changed.end(), [&](const ChangedThread& c) {
    return c.previous.to_cpu_set() == before.to_cpu_set();
  });
  for (int scan = 0; scan < max_process_scans; ++scan) {
    auto tids = list_threads();
    if (!tids) break;  // the scans of the binding could read it: not expected; nothing more can be found
    bool found_new = false;
    for (pid_t tid : *tids) {
      auto at = std::lower_bound(seen.begin(), seen.end(), tid);
      if (at != seen.end() && *at == tid) continue;
      seen.insert(at, tid);
      found_new = true;
      auto now = read_affinity(tid);
      if (!now || now->to_cpu_set() != cpus) continue;  // exited, or not born of a bound thread
      int e = one_before ? write_affinity(tid, before) : EINVAL;
      if (e != 0 && e != ESRCH) stuck.push_back(tid);
    }
    if (!found_new) return stuck;
  }
  return stuck;
}

/// The end of a failed binding's message: what the undo achieved.
template <class = void>
std::string undo_outcome(const CpuSet& cpus, std::vector<pid_t> stuck) {
  if (stuck.empty()) return "; every thread was put back as it was";
  std::sort(stuck.begin(), stuck.end());
  const bool one = stuck.size() == 1;
  // Appended piece by piece: GCC 12 at -O3 -flto reports a false stringop-overflow
  // on `"literal" + std::string`, and users compile these headers with -Werror.
  std::string out = one ? "; thread " : "; threads ";
  for (std::size_t i = 0; i < stuck.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(stuck[i]);
  }
  out += one ? " could not be put back and stays bound to CPUs " : " could not be put back and stay bound to CPUs ";
  out += cpus.to_list();
  out += " (every other thread was put back)";
  return out;
}

template <class = void>
Result<ProcessBinding> bind_all_threads(const CpuSet& cpus, const MemoryOptions& memory) {
  GPUAFF_TRY_VOID(check_binding_set(cpus));
  GPUAFF_TRY_VOID(check_memory_options(memory));
  ProcessBinding out;
  out.cpus = cpus;
  out.memory = memory;
  GPUAFF_TRY(MemoryChange mem, change_memory_policy(memory, out.warnings));
  AllocatedCpuSet mask(cpus);
  std::vector<ChangedThread> changed;
  std::vector<pid_t> seen;  // sorted
  auto undo = [&](Error e) -> Result<ProcessBinding> {
    std::vector<pid_t> stuck = undo_binding(cpus, changed, seen);
    if (mem.applied) (void)restore_memory_policy(mem.saved);
    e.append(undo_outcome(cpus, std::move(stuck)));
    return Unexpected(e);
  };
  // Scan until a scan finds no thread not seen before: threads may be created
  // while the others are being bound.
  for (bool found_new = true; found_new;) {
    if (out.passes == max_process_scans)
      return undo(make_error(Errc::system_error, "threads kept appearing through ", max_process_scans,
                             " scans of /proc/self/task; bind before starting threads"));
    ++out.passes;
    found_new = false;
    auto tids = list_threads();
    if (!tids) return undo(tids.error());
    for (pid_t tid : *tids) {
      auto at = std::lower_bound(seen.begin(), seen.end(), tid);
      if (at != seen.end() && *at == tid) continue;
      seen.insert(at, tid);
      found_new = true;
      auto outcome = bind_one_thread(tid, cpus, mask, changed);
      if (!outcome) return undo(outcome.error());
      ++(*outcome == ThreadOutcome::bound ? out.threads_bound : out.threads_exited);
    }
  }
  out.memory_applied = mem.applied;
  if (mem.applied && out.threads_bound + out.threads_exited > 1)
    out.warnings.push_back(std::string("memory policy ") + std::string(to_string(memory.policy)) +
                           " set for the calling thread only (the kernel has no call to set it for other threads); "
                           "threads that existed before keep their policy");
  return out;
}

}  // namespace detail

/// Binds every thread of this process to `cpus` (and the calling thread's
/// memory to `memory`), scanning /proc/self/task until no new thread appears.
/// Threads that exit meanwhile are skipped. On any failure every thread
/// already changed is put back, and so is every thread born meanwhile with
/// the binding inherited from a bound thread; the error names any thread that
/// could not be put back.
/// Errors: as ScopedAffinity::create, plus Errc::io_error when /proc/self/task
/// cannot be read and Errc::system_error when threads keep appearing.
template <class = void>
Result<ProcessBinding> bind_process(const CpuSet& cpus, const MemoryOptions& memory = {}) {
  return detail::bind_all_threads(cpus, memory);
}

/// Re-applies a process binding after a library reset it (Intel OpenMP's
/// KMP_AFFINITY, some BLAS builds, NCCL after communicator init). Create it
/// once, call reapply() after each such step; drifted() tells whether needed.
class Rebinder {
 public:
  /// Binds the process now. Errors: as bind_process.
  template <class = void>  // compiled where called (config.hpp)
  static Result<Rebinder> create(const CpuSet& cpus, const MemoryOptions& memory = {}) {
    GPUAFF_TRY(ProcessBinding first, bind_process(cpus, memory));
    return Rebinder(std::move(first));
  }
  /// Binds every thread again (the memory policy again for the calling thread).
  /// Errors: as bind_process.
  template <class = void>  // compiled where called (config.hpp)
  Result<ProcessBinding> reapply() const { return bind_process(binding_.cpus, binding_.memory); }
  /// Threads whose mask is no longer the bound set.
  /// Errors: Errc::io_error (/proc/self/task), Errc::system_error.
  template <class = void>  // compiled where called (config.hpp)
  Result<std::vector<pid_t>> drifted() const {
    GPUAFF_TRY(std::vector<pid_t> tids, detail::list_threads());
    std::vector<pid_t> out;
    for (pid_t tid : tids) {
      auto m = detail::read_affinity(tid);
      if (!m) {
        if (m.error().sys_errno() == ESRCH) continue;
        return Unexpected(m.error());
      }
      if (m->to_cpu_set() != binding_.cpus) out.push_back(tid);
    }
    return out;
  }
  /// The first binding (threads bound, warnings).
  const ProcessBinding& binding() const { return binding_; }

 private:
  explicit Rebinder(ProcessBinding b) : binding_(std::move(b)) {}
  ProcessBinding binding_;
};

}  // namespace v0
}  // namespace gpuaff
