// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading and setting one thread's CPU affinity, for any number of CPUs.
//
// glibc's cpu_set_t holds 1024 CPUs; the kernel wants a mask at least as large
// as its own (nr_cpu_ids) for sched_getaffinity, so the buffer is CPU_ALLOC'ed
// and doubled on EINVAL. sched_setaffinity silently drops CPUs outside the
// cgroup/taskset allowed set; every set here is read back and undone when the
// kernel did not apply exactly what was asked, so a binding is never partial.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <string>
#include <string_view>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/os/cpu_buffer.hpp"
#include "gpuaff/os/syscalls.hpp"
#include "gpuaff/os/thread_mask.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// Writes a raw mask, returning 0 or the errno.
template <class = void>
int write_affinity(pid_t tid, const AllocatedCpuSet& mask) {
  return sys().set_affinity(tid, mask.bytes(), mask.get()) == 0 ? 0 : errno;
}

/// The error for a refused or partially applied set. A set the kernel
/// refuses (EINVAL: none of its CPUs may run this thread) or narrows is the
/// machine's answer, not a wrong argument: Errc::empty_result, what a plan
/// that cannot be bound here gives (exit 5 in the CLI, which `exec --fallback
/// unbound` may cover; a launcher's cpuset that holds other CPUs than the
/// plan's is the usual cause).
template <class = void>
Error affinity_error(pid_t tid, const CpuSet& cpus, int e, const CpuSet& missing) {
  if (e == EINVAL || e == 0) {
    const CpuSet& named = missing.empty() ? cpus : missing;
    return make_sys_error(Errc::empty_result, e == 0 ? EINVAL : e, "CPUs ", named.to_list(),
                          " are not in this process's allowed set (cgroup/taskset) or are offline (",
                          e == 0 ? std::string("the kernel dropped them") : "sched_setaffinity: EINVAL",
                          "); nothing was changed for ", thread_name(tid),
                          "; choose CPUs from Cpus_allowed_list in /proc/self/status");
  }
  if (e == ESRCH) return make_sys_error(Errc::not_found, e, thread_name(tid), " no longer exists (ESRCH)");
  if (e == EPERM)
    return make_sys_error(Errc::permission_denied, e, "not permitted to set the CPU affinity of ", thread_name(tid),
                          " to CPUs ", cpus.to_list(), " (sched_setaffinity: EPERM)");
  return make_sys_error(Errc::system_error, e, "cannot set the CPU affinity of ", thread_name(tid), " to CPUs ",
                        cpus.to_list(), " (sched_setaffinity: ", errno_text(e), ")");
}

/// Sets thread `tid` to exactly `cpus`, or leaves it as it was. `previous` is
/// the mask to put back if the kernel applied only part of the set.
template <class = void>
Result<void> apply_affinity(pid_t tid, const CpuSet& cpus, const AllocatedCpuSet& previous) {
  AllocatedCpuSet mask(cpus);
  if (int e = write_affinity(tid, mask); e != 0) return Unexpected(affinity_error(tid, cpus, e, CpuSet{}));
  // The kernel drops only CPUs outside the thread's cpuset. A set inside the
  // mask the thread had a moment ago is inside that cpuset, so nothing can have
  // been dropped and the read-back (a third system call) is not needed.
  bool inside_previous = true;
  for (int id : cpus) {
    if (id >= previous.cpus() || !CPU_ISSET_S(static_cast<std::size_t>(id), previous.bytes(), previous.get())) {
      inside_previous = false;
      break;
    }
  }
  if (inside_previous) return {};
  auto now = read_affinity(tid);
  if (!now) return Unexpected(now.error());
  CpuSet got = now->to_cpu_set();
  if (got != cpus) {
    (void)write_affinity(tid, previous);
    return Unexpected(affinity_error(tid, cpus, 0, cpus - got));
  }
  return {};
}

template <class = void>
Result<void> check_binding_set(const CpuSet& cpus) {
  if (cpus.empty())
    return fail(Errc::empty_result, "refusing to bind to an empty CPU set (a thread needs at least one CPU)");
  return {};
}

}  // namespace detail

/// Binds the calling thread to exactly `cpus`; threads it creates afterwards
/// inherit the mask. On any error the thread's mask is unchanged.
/// Errors: Errc::empty_result (empty set, or CPUs the kernel refuses) naming the
/// CPUs outside the allowed set (cgroup/taskset) or offline (EINVAL, or CPUs
/// the kernel would silently drop); Errc::permission_denied (EPERM);
/// Errc::system_error for other errno values (Error::sys_errno has it).
template <class = void>
Result<void> set_thread_affinity(const CpuSet& cpus) {
  GPUAFF_TRY_VOID(detail::check_binding_set(cpus));
  GPUAFF_TRY(AllocatedCpuSet previous, detail::read_affinity(0));
  return detail::apply_affinity(0, cpus, previous);
}

}  // namespace v0
}  // namespace gpuaff
