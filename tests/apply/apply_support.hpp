// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the apply tests: reading what the kernel reports about a
// thread or process, independently of the code under test.

#include <gpuaff/cpu_set.hpp>

#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>

namespace apply_test {

/// Cpus_allowed_list of /proc/<path>/status ("self", "<pid>", "self/task/<tid>").
inline gpuaff::CpuSet status_cpus(const std::string& who) {
  std::ifstream in("/proc/" + who + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return gpuaff::CpuSet::parse_list(line.substr(18)).value();
  throw std::runtime_error("no Cpus_allowed_list in /proc/" + who + "/status");
}

inline gpuaff::CpuSet thread_status_cpus(pid_t tid) { return status_cpus("self/task/" + std::to_string(tid)); }

/// The CPUs this test process may use, from the kernel's own text, read
/// before any test runs (and so before any test binds the main thread).
inline const gpuaff::CpuSet initial_allowed = status_cpus("self");
inline const gpuaff::CpuSet& allowed_at_start() { return initial_allowed; }

/// Two distinct allowed CPUs (the same one twice on a 1-CPU machine).
inline int cpu_a() { return allowed_at_start().first(); }
inline int cpu_b() {
  int b = allowed_at_start().nth(1);
  return b < 0 ? cpu_a() : b;
}

/// A CPU id the kernel cannot run anything on: one past the last possible CPU
/// (the allowed set could be widened again by sched_setaffinity after a plain
/// `taskset`, so "outside the current mask" would not be outside enough).
inline int impossible_cpu() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string text;
  std::getline(in, text);
  auto possible = gpuaff::CpuSet::parse_list(text);
  int last = possible && possible->any() ? possible->last() : allowed_at_start().last();
  return last + 1;
}

}  // namespace apply_test
