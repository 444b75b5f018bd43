// SPDX-License-Identifier: Apache-2.0
// The allowed set of a live load: the CPUs from the calling thread's
// affinity, the memory nodes from the kernel (get_mempolicy with
// MPOL_F_MEMS_ALLOWED), proc/self/status only where the kernel refuses that
// call. Expected values are the kernel's own text, read here without gpuaff.
#include <gpuaff/apply/spawn.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <doctest/doctest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <string>

#include "support/seccomp.hpp"

namespace {

/// Mems_allowed_list of /proc/self/status as the kernel writes it; nullopt
/// where it prints none (no NUMA). A value that does not parse throws.
std::optional<gpuaff::NodeSet> status_mems() {
  std::ifstream in("/proc/self/status");
  const std::string key = "Mems_allowed_list:";
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return gpuaff::NodeSet::parse_list(line.substr(key.size())).value();
  return std::nullopt;
}

bool read_status(const gpuaff::SysfsSource& s) {
  const auto& files = s.files_read();
  return std::find(files.begin(), files.end(), "proc/self/status") != files.end();
}

gpuaff::SysfsSource live_source() {
  return gpuaff::SysfsSource(gpuaff::SysfsOptions{.root = "/", .detail = gpuaff::SysfsDetail::binding});
}

long refuse_eperm(unsigned long*, unsigned long) {
  errno = EPERM;
  return -1;
}

}  // namespace

TEST_CASE("live: the allowed memory nodes come from the kernel, without reading proc/self/status") {
  auto expected = status_mems();
  if (!expected) {
    MESSAGE("this kernel prints no Mems_allowed_list (no NUMA): nothing to compare");
    return;
  }
  gpuaff::SysfsSource source = live_source();
  auto t = source.load();
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->mems_allowed == *expected);
  // The same question asked of the kernel directly: where it answers, the
  // status file (which the kernel formats whole for each read) is not read.
  unsigned long words[gpuaff::NodeSet::capacity / 64] = {};
  bool kernel_answers = syscall(SYS_get_mempolicy, nullptr, words, gpuaff::NodeSet::capacity + 1UL, nullptr, 4UL) == 0;
  CHECK(read_status(source) == !kernel_answers);
}

TEST_CASE("live: a kernel that refuses get_mempolicy (seccomp, no NUMA) gives the status file's nodes") {
  auto expected = status_mems();
  if (!expected) {
    MESSAGE("this kernel prints no Mems_allowed_list (no NUMA): nothing to compare");
    return;
  }
  gpuaff::detail::Syscalls refusing = gpuaff::detail::real_syscalls;
  refusing.get_mems_allowed = &refuse_eperm;
  gpuaff::detail::ScopedSyscalls use(refusing);
  gpuaff::SysfsSource source = live_source();
  auto t = source.load();
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->mems_allowed == *expected);
  CHECK(read_status(source));
}

namespace {
// A real refusal: a seccomp filter that answers EPERM to get_mempolicy, as
// docker's default profile does without CAP_SYS_NICE, installed in a forked
// child (a filter cannot be removed). Returns the child's verdict.
int child_without_get_mempolicy() {
#if defined(__x86_64__)
  auto expected = status_mems();
  if (!expected) return 12;
  if (int refused = gpuaff_test::refuse_syscall(SYS_get_mempolicy, EPERM); refused != 0) return refused;
  gpuaff::SysfsSource source = live_source();
  auto t = source.load();
  if (!t) return 20;
  if (t->mems_allowed != *expected) return 21;
  if (!read_status(source)) return 22;
  return 0;
#else
  return 99;
#endif
}
}  // namespace

TEST_CASE("live: under a seccomp filter that refuses get_mempolicy, the load reads proc/self/status") {
#if !defined(__x86_64__)
  MESSAGE("the seccomp filter here is written for x86-64 only");
#else
  auto child = gpuaff::spawn_callable(&child_without_get_mempolicy);
  REQUIRE(child);
  auto status = child->wait();
  REQUIRE(status);
  if (status->exit_code == 10 || status->exit_code == 11 || status->exit_code == 12) {
    MESSAGE("seccomp filters or Mems_allowed_list are not available here (exit ", status->exit_code, ")");
    return;
  }
  CHECK(status->exit_code == 0);
#endif
}
