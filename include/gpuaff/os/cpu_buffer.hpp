// SPDX-License-Identifier: Apache-2.0
#pragma once
// The buffer the affinity system calls take: a CPU_ALLOC'ed cpu_set_t. glibc's
// fixed cpu_set_t holds 1024 CPUs, while the kernel wants a mask at least as
// large as its own nr_cpu_ids; machines with more CPUs exist.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sched.h>

#include <cstddef>
#include <cstdlib>

#include "gpuaff/cpu_set.hpp"

namespace gpuaff {
inline namespace v0 {

/// A CPU_ALLOC'ed cpu_set_t sized for a CpuSet's highest id (or more), for
/// sched_{get,set}affinity on machines with more than 1024 CPUs. Owns its memory.
class AllocatedCpuSet {
 public:
  /// A zeroed set able to hold ids < max(cpus, 1).
  explicit AllocatedCpuSet(int cpus = CPU_SETSIZE)
      : cpus_(cpus < 1 ? 1 : cpus),
        set_(CPU_ALLOC(static_cast<std::size_t>(cpus_))),
        bytes_(CPU_ALLOC_SIZE(static_cast<std::size_t>(cpus_))) {
    if (set_ == nullptr) std::abort();  // allocation of a few hundred bytes failed
    CPU_ZERO_S(bytes_, set_);
  }
  explicit AllocatedCpuSet(const CpuSet& s) : AllocatedCpuSet(s.last() < CPU_SETSIZE ? CPU_SETSIZE : s.last() + 1) {
    for (int id : s) CPU_SET_S(static_cast<std::size_t>(id), bytes_, set_);
  }
  AllocatedCpuSet(const AllocatedCpuSet&) = delete;
  AllocatedCpuSet& operator=(const AllocatedCpuSet&) = delete;
  AllocatedCpuSet(AllocatedCpuSet&& o) noexcept : cpus_(o.cpus_), set_(o.set_), bytes_(o.bytes_) {
    o.set_ = nullptr;
    o.bytes_ = 0;
  }
  AllocatedCpuSet& operator=(AllocatedCpuSet&& o) noexcept {
    if (this != &o) {
      if (set_ != nullptr) CPU_FREE(set_);
      cpus_ = o.cpus_;
      set_ = o.set_;
      bytes_ = o.bytes_;
      o.set_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  ~AllocatedCpuSet() {
    if (set_ != nullptr) CPU_FREE(set_);
  }

  cpu_set_t* get() { return set_; }
  const cpu_set_t* get() const { return set_; }
  std::size_t bytes() const { return bytes_; }
  int cpus() const { return cpus_; }
  CpuSet to_cpu_set() const { return CpuSet::from_cpu_set(set_, bytes_); }

 private:
  int cpus_;
  cpu_set_t* set_;
  std::size_t bytes_;
};

}  // namespace v0
}  // namespace gpuaff
