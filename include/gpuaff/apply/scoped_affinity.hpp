// SPDX-License-Identifier: Apache-2.0
#pragma once
// ScopedAffinity: bind the calling thread for a scope, then put back exactly
// what was there (CPU mask of any size, memory policy and its node mask).
//
//   auto guard = gpuaff::ScopedAffinity::create(cpus, {.policy = gpuaff::MemPolicy::bind, .nodes = nodes});
//   if (!guard) return report(guard.error());
//   spawn_worker();  // inherits the mask and the memory policy from its first instruction
//   // leaving the scope (or unwinding an exception) restores the thread
//
// Guards nest: each saves what the previous one set and restores it. A guard
// belongs to the thread that created it; destroy it there (the CPU mask is
// restored on the creating thread even from elsewhere, the memory policy only
// on the creating thread, as the kernel allows nothing else).
//
// fork() copies a guard into the child along with the thread that forked. The
// copy restores the child's own thread, never the parent's: thread ids are
// per process, and the creating thread's id names a thread of the parent.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <string>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

class ScopedAffinity {
 public:
  /// Saves the calling thread's CPU mask (and memory policy, when one is asked
  /// for), then applies `cpus` and `memory`. The memory policy is set first, so
  /// that when either half fails nothing stays changed: never half-bound.
  /// With OnRefused::cpu_only a refused memory policy becomes a warning
  /// (warnings()) and only the CPUs are bound. The library prints nothing.
  /// Errors: Errc::empty_result (empty `cpus`, or CPUs outside the allowed set
  /// or offline); Errc::invalid_argument (a node policy without nodes);
  /// Errc::permission_denied / Errc::unsupported / Errc::system_error when the
  /// kernel refuses the memory policy and on_refused is OnRefused::error.
  template <class = void>  // compiled where called (config.hpp)
  static Result<ScopedAffinity> create(const CpuSet& cpus, const MemoryOptions& memory = {}) {
    GPUAFF_TRY_VOID(detail::check_binding_set(cpus));
    GPUAFF_TRY_VOID(detail::check_memory_options(memory));
    GPUAFF_TRY(AllocatedCpuSet previous, detail::read_affinity(0));
    ScopedAffinity g;
    g.owner_ = detail::current_tid();
    g.owner_process_ = ::getpid();
    GPUAFF_TRY(detail::MemoryChange mem, detail::change_memory_policy(memory, g.warnings_));
    if (auto r = detail::apply_affinity(0, cpus, previous); !r) {
      if (mem.applied) (void)restore_memory_policy(mem.saved);
      return Unexpected(r.error());
    }
    g.saved_cpus_ = std::move(previous);
    g.saved_memory_ = mem.saved;
    g.memory_applied_ = mem.applied;
    g.cpus_ = cpus;
    g.active_ = true;
    return g;
  }

  ScopedAffinity(ScopedAffinity&& o) noexcept
      : saved_cpus_(std::move(o.saved_cpus_)),
        cpus_(o.cpus_),
        saved_memory_(o.saved_memory_),
        warnings_(std::move(o.warnings_)),
        owner_(o.owner_),
        owner_process_(o.owner_process_),
        memory_applied_(o.memory_applied_),
        active_(std::exchange(o.active_, false)) {}

  /// Restores what this guard holds, then takes over `o`'s binding.
  ScopedAffinity& operator=(ScopedAffinity&& o) noexcept {
    if (this != &o) {
      (void)restore();
      saved_cpus_ = std::move(o.saved_cpus_);
      cpus_ = o.cpus_;
      saved_memory_ = o.saved_memory_;
      warnings_ = std::move(o.warnings_);
      owner_ = o.owner_;
      owner_process_ = o.owner_process_;
      memory_applied_ = o.memory_applied_;
      active_ = std::exchange(o.active_, false);
    }
    return *this;
  }
  ScopedAffinity(const ScopedAffinity&) = delete;
  ScopedAffinity& operator=(const ScopedAffinity&) = delete;

  /// Restores the saved mask and policy; errors are ignored here (a destructor
  /// cannot report them): call restore() first to see them.
  ~ScopedAffinity() { (void)restore(); }

  /// Puts back the saved CPU mask and memory policy now; the guard is then inactive.
  /// Errors: the first failure of sched_setaffinity or set_mempolicy (both are
  /// attempted); Errc::invalid_argument when called on another thread than the
  /// creating one with a memory policy to restore (the CPU mask is restored).
  Result<void> restore() noexcept {
    if (!active_) return {};
    active_ = false;
    // In a forked child (another process) the calling thread is the copy of
    // the one that forked: restore it, not the parent thread owner_ names.
    bool here = detail::current_tid() == owner_ || ::getpid() != owner_process_;
    int e = detail::write_affinity(here ? 0 : owner_, saved_cpus_);
    Result<void> out;
    if (e != 0)
      out = Unexpected(make_sys_error(Errc::system_error, e, "cannot restore the previous CPU mask of ",
                                      detail::thread_name(owner_), " (sched_setaffinity: ", detail::errno_text(e), ")"));
    if (memory_applied_ && here) {
      auto m = restore_memory_policy(saved_memory_);
      if (!m && out) out = m;
    } else if (memory_applied_ && out) {
      out = fail(Errc::invalid_argument, "the memory policy of ", detail::thread_name(owner_),
                 " was not restored: a thread can only change its own, and this guard was restored from thread ",
                 detail::current_tid(), "; destroy a guard on the thread that created it");
    }
    return out;
  }

  /// Keeps the binding: the destructor will not restore anything.
  void release() noexcept { active_ = false; }

  /// True until restore(), release() or a move away.
  bool active() const noexcept { return active_; }
  /// The CPUs this guard bound the thread to.
  const CpuSet& cpus() const noexcept { return cpus_; }
  /// The mask that will be restored (CPU ids beyond CpuSet::capacity are kept
  /// in the guard but not shown here).
  CpuSet previous() const { return saved_cpus_.to_cpu_set(); }
  /// Whether the memory policy was set (false with MemPolicy::none or a refusal under cpu_only).
  bool memory_applied() const noexcept { return memory_applied_; }
  /// Why part of the binding was skipped (OnRefused::cpu_only); empty when all of it applied.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }

 private:
  ScopedAffinity() = default;

  AllocatedCpuSet saved_cpus_{1};
  CpuSet cpus_{};
  SavedMemoryPolicy saved_memory_{};
  std::vector<std::string> warnings_;
  pid_t owner_ = 0;          ///< the creating thread
  pid_t owner_process_ = 0;  ///< its process: a forked child holds a copy of the guard
  bool memory_applied_ = false;
  bool active_ = false;
};

}  // namespace v0
}  // namespace gpuaff
