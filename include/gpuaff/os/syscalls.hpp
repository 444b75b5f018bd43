// SPDX-License-Identifier: Apache-2.0
#pragma once
// The handful of system calls the apply layer (and the live reader) makes, behind a table of
// function pointers. Production code always goes through the real kernel;
// tests swap the table (detail::ScopedSyscalls) to play a kernel that refuses
// set_mempolicy (EPERM, as in docker's default seccomp profile) or that needs
// a larger CPU mask, paths a test cannot otherwise reach on an ordinary machine.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sched.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Each entry follows the kernel convention of its namesake: -1 and errno on
/// failure. `tid` 0 means the calling thread.
struct Syscalls {
  int (*get_affinity)(pid_t tid, std::size_t bytes, cpu_set_t* mask);
  int (*set_affinity)(pid_t tid, std::size_t bytes, const cpu_set_t* mask);
  long (*get_mempolicy)(int* mode, unsigned long* nodemask, unsigned long maxnode);
  long (*set_mempolicy)(int mode, const unsigned long* nodemask, unsigned long maxnode);
  /// get_mempolicy(MPOL_F_MEMS_ALLOWED): the nodes the thread may allocate on.
  long (*get_mems_allowed)(unsigned long* nodemask, unsigned long maxnode);
};

inline int real_get_affinity(pid_t tid, std::size_t bytes, cpu_set_t* mask) {
  return ::sched_getaffinity(tid, bytes, mask);
}
inline int real_set_affinity(pid_t tid, std::size_t bytes, const cpu_set_t* mask) {
  return ::sched_setaffinity(tid, bytes, mask);
}
// Raw syscalls: no libnuma, no <numaif.h>, so gpuaff builds where libnuma-dev
// is absent and behaves the same in static binaries.
inline long real_get_mempolicy(int* mode, unsigned long* nodemask, unsigned long maxnode) {
#ifdef SYS_get_mempolicy
  return ::syscall(SYS_get_mempolicy, mode, nodemask, maxnode, nullptr, 0UL);
#else
  (void)mode, (void)nodemask, (void)maxnode;
  errno = ENOSYS;
  return -1;
#endif
}
inline long real_set_mempolicy(int mode, const unsigned long* nodemask, unsigned long maxnode) {
#ifdef SYS_set_mempolicy
  return ::syscall(SYS_set_mempolicy, mode, nodemask, maxnode);
#else
  (void)mode, (void)nodemask, (void)maxnode;
  errno = ENOSYS;
  return -1;
#endif
}

inline long real_get_mems_allowed(unsigned long* nodemask, unsigned long maxnode) {
#ifdef SYS_get_mempolicy
  constexpr unsigned long mpol_f_mems_allowed = 1UL << 2;  // linux/mempolicy.h
  return ::syscall(SYS_get_mempolicy, nullptr, nodemask, maxnode, nullptr, mpol_f_mems_allowed);
#else
  (void)nodemask, (void)maxnode;
  errno = ENOSYS;
  return -1;
#endif
}

inline constexpr Syscalls real_syscalls{&real_get_affinity, &real_set_affinity, &real_get_mempolicy,
                                        &real_set_mempolicy, &real_get_mems_allowed};

/// The table in use; tests swap it while no other thread binds. A plain
/// pointer read and written with the compiler's atomic built-ins (GCC and
/// clang): std::atomic's header brings C++20's wait and notify with it, about
/// 0.2 s of compiler time in every translation unit that applies a binding
/// (benchmarks row 6).
inline const Syscalls* syscall_table = &real_syscalls;

inline const Syscalls& sys() { return *__atomic_load_n(&syscall_table, __ATOMIC_ACQUIRE); }

/// Installs `table` for the lifetime of the object (tests only).
class ScopedSyscalls {
 public:
  explicit ScopedSyscalls(const Syscalls& table) : previous_(__atomic_exchange_n(&syscall_table, &table, __ATOMIC_ACQ_REL)) {}
  ScopedSyscalls(const ScopedSyscalls&) = delete;
  ScopedSyscalls& operator=(const ScopedSyscalls&) = delete;
  ~ScopedSyscalls() { __atomic_store_n(&syscall_table, previous_, __ATOMIC_RELEASE); }

 private:
  const Syscalls* previous_;
};

/// The calling thread's kernel id (gettid(2)), cached per thread: guards ask for
/// it on every create and restore. A forked child starts with the forking
/// thread's cache, so a fork handler clears it there.
inline pid_t& cached_tid() {
  thread_local pid_t tid = 0;
  return tid;
}
inline pid_t current_tid() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { cached_tid() = 0; });
    return true;
  }();
  (void)registered;
  pid_t& tid = cached_tid();
  if (tid == 0) tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return tid;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
