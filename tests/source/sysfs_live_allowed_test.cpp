// SPDX-License-Identifier: Apache-2.0
// The allowed set of a live load: the CPUs from the calling thread's
// affinity, the memory nodes from the kernel (get_mempolicy with
// MPOL_F_MEMS_ALLOWED), proc/self/status only where the kernel refuses that
// call. Expected values are the kernel's own text, read here without gpuaff.
#include <gpuaff/apply/spawn.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <doctest/doctest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <string>

namespace {

/// A field of /proc/self/status as the kernel writes it ("Mems_allowed_list").
std::string status_field_text(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return {};
}

bool read_status(const gpuaff::SysfsSource& s) {
  const auto& files = s.files_read();
  return std::find(files.begin(), files.end(), "proc/self/status") != files.end();
}

gpuaff::Result<gpuaff::Topology> load_live(gpuaff::SysfsSource& source) { return source.load(); }

long refuse_eperm(unsigned long*, unsigned long) {
  errno = EPERM;
  return -1;
}

}  // namespace

TEST_CASE("live: the allowed memory nodes come from the kernel, without reading proc/self/status") {
  std::string text = status_field_text("Mems_allowed_list");
  if (text.empty()) {
    MESSAGE("this kernel prints no Mems_allowed_list (no NUMA): nothing to compare");
    return;
  }
  auto expected = gpuaff::NodeSet::parse_list(text);
  REQUIRE(expected);
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{.root = "/", .detail = gpuaff::SysfsDetail::binding});
  auto t = load_live(source);
  REQUIRE_MESSAGE(t, t.error().message());
  CHECK(t->mems_allowed == *expected);
  // The same question asked of the kernel directly: where it answers, the
  // status file (which the kernel formats whole for each read) is not read.
  unsigned long words[gpuaff::NodeSet::capacity / 64] = {};
  bool kernel_answers = syscall(SYS_get_mempolicy, nullptr, words, gpuaff::NodeSet::capacity + 1UL, nullptr, 4UL) == 0;
  CHECK(read_status(source) == !kernel_answers);
}

TEST_CASE("live: a kernel that refuses get_mempolicy (seccomp, no NUMA) gives the status file's nodes") {
  std::string text = status_field_text("Mems_allowed_list");
  if (text.empty()) {
    MESSAGE("this kernel prints no Mems_allowed_list (no NUMA): nothing to compare");
    return;
  }
  auto expected = gpuaff::NodeSet::parse_list(text);
  REQUIRE(expected);
  gpuaff::detail::Syscalls refusing = gpuaff::detail::real_syscalls;
  refusing.get_mems_allowed = &refuse_eperm;
  gpuaff::detail::ScopedSyscalls use(refusing);
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{.root = "/", .detail = gpuaff::SysfsDetail::binding});
  auto t = load_live(source);
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
  std::string text = status_field_text("Mems_allowed_list");
  if (text.empty()) return 12;
  auto expected = gpuaff::NodeSet::parse_list(text);
  if (!expected) return 13;
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_get_mempolicy, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 10;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return 11;
  gpuaff::SysfsSource source(gpuaff::SysfsOptions{.root = "/", .detail = gpuaff::SysfsDetail::binding});
  auto t = load_live(source);
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
