// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading the calling thread's (or any thread's) CPU affinity, for any number
// of CPUs: what a process may run on. Both the sources (the live allowed set)
// and the appliers (the mask to restore) read it, so it lives below both, on
// the raw system calls (os/syscalls.hpp) and the CPU_ALLOC buffer
// (os/cpu_buffer.hpp). glibc's cpu_set_t holds 1024 CPUs; the kernel wants a
// mask at least as large as its own (nr_cpu_ids) for sched_getaffinity, so the
// buffer is doubled on EINVAL. Beside it, the node mask the memory policy
// calls take (apply/mempolicy.hpp, memory/host_buffer.hpp, and the live
// reader's allowed memory nodes).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <string>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/os/cpu_buffer.hpp"
#include "gpuaff/os/syscalls.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

namespace detail {

/// A node mask as the memory policy calls take it (set_mempolicy, mbind,
/// get_mempolicy): NodeSet::capacity bits in unsigned longs.
inline constexpr int nodemask_bits = NodeSet::capacity;
inline constexpr std::size_t ulong_bits = sizeof(unsigned long) * 8;
using NodeMask = std::array<unsigned long, nodemask_bits / ulong_bits>;
// The kernel reads maxnode-1 bits (a quirk kept for compatibility), hence +1.
inline constexpr unsigned long nodemask_maxnode = nodemask_bits + 1;

template <class = void>
NodeMask to_nodemask(const NodeSet& nodes) {
  NodeMask m{};
  for (int id : nodes) m[static_cast<std::size_t>(id) / ulong_bits] |= 1UL << (static_cast<std::size_t>(id) % ulong_bits);
  return m;
}
template <class = void>
NodeSet from_nodemask(const NodeMask& m) {
  NodeSet s;
  for (std::size_t i = 0; i < m.size(); ++i)
    for (unsigned long w = m[i]; w != 0; w &= w - 1) s.set(static_cast<int>(i * ulong_bits) + std::countr_zero(w));
  return s;
}

/// Largest mask tried for sched_getaffinity (bits); far beyond any kernel's NR_CPUS.
inline constexpr int max_affinity_bits = 1 << 20;

inline std::string thread_name(pid_t tid) { return tid == 0 ? std::string("the calling thread") : std::string("thread ") + std::to_string(tid); }

/// The raw mask of thread `tid` (0: the calling thread), of whatever size the kernel needs.
/// Errors: Errc::not_found (ESRCH: the thread exited), Errc::system_error.
template <class = void>
inline Result<AllocatedCpuSet> read_affinity(pid_t tid) {
  for (int bits = CPU_SETSIZE; bits <= max_affinity_bits; bits *= 2) {
    AllocatedCpuSet mask(bits);
    if (sys().get_affinity(tid, mask.bytes(), mask.get()) == 0) return mask;
    int e = errno;
    if (e == EINVAL) continue;  // the kernel's mask is larger than ours
    if (e == ESRCH) return Unexpected(make_sys_error(Errc::not_found, e, thread_name(tid), " no longer exists (ESRCH)"));
    return Unexpected(make_sys_error(Errc::system_error, e, "cannot read the CPU affinity of ", thread_name(tid),
                                     " (sched_getaffinity: ", errno_text(e), ")"));
  }
  return Unexpected(make_sys_error(Errc::out_of_range, EINVAL, "cannot read the CPU affinity of ", thread_name(tid),
                                   ": the kernel wants a mask of more than ", max_affinity_bits, " CPUs"));
}

}  // namespace detail

/// The calling thread's CPU affinity.
/// Errors: Errc::system_error when sched_getaffinity fails; Errc::out_of_range
/// when the mask names a CPU id >= CpuSet::capacity.
template <class = void>
inline Result<CpuSet> thread_affinity() {
  GPUAFF_TRY(AllocatedCpuSet raw, detail::read_affinity(0));
  CpuSet s = raw.to_cpu_set();
  for (int id = CpuSet::capacity; id < raw.cpus(); ++id)
    if (CPU_ISSET_S(static_cast<std::size_t>(id), raw.bytes(), raw.get()))
      return fail(Errc::out_of_range, "the calling thread may run on CPU ", id, ", beyond the ",
                  static_cast<int>(CpuSet::capacity), " CPUs gpuaff supports");
  return s;
}

}  // namespace v0
}  // namespace gpuaff
