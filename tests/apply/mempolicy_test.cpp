// SPDX-License-Identifier: Apache-2.0
// Memory policy: set with the CPU mask, restored with it, and what happens
// when the kernel refuses (containers: EPERM; sandboxes: ENOSYS/EINVAL).
#include <gpuaff/apply/scoped_affinity.hpp>
#include <gpuaff/apply/spawn.hpp>

#include <sys/syscall.h>

#include <string>

#include "apply_support.hpp"
#include "support/check.hpp"
#include "support/seccomp.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::MemoryOptions;
using gpuaff::MemPolicy;
using gpuaff::NodeSet;
using gpuaff::OnRefused;
using gpuaff::ScopedAffinity;
using gpuaff::SavedMemoryPolicy;
using namespace apply_test;

namespace {
CpuSet mine() { return thread_status_cpus(gpuaff::detail::current_tid()); }

// The kernel's numbers, written from the uapi header rather than from gpuaff.
constexpr int kernel_default = 0, kernel_preferred = 1, kernel_bind = 2, kernel_interleave = 3, kernel_local = 4;

// Whether this kernel lets us set a memory policy at all (some CI containers do not).
// The calling thread's policy straight from the kernel, not through gpuaff.
SavedMemoryPolicy kernel_policy() {
  int mode = -1;
  unsigned long mask[8192 / 64] = {};
  REQUIRE(syscall(SYS_get_mempolicy, &mode, mask, 8193UL, nullptr, 0UL) == 0);
  SavedMemoryPolicy p{mode, {}};
  for (int id = 0; id < 8192; ++id)
    if ((mask[id / 64] >> (id % 64)) & 1UL) p.nodes.set(id);
  return p;
}

bool mempolicy_allowed() {
  int mode = 0;
  unsigned long mask[2] = {0, 0};
  if (syscall(SYS_get_mempolicy, &mode, mask, 129UL, nullptr, 0UL) != 0) return false;
  if (syscall(SYS_set_mempolicy, kernel_local, nullptr, 0UL) != 0) return false;
  syscall(SYS_set_mempolicy, kernel_default, nullptr, 0UL);
  return true;
}

int refuse_eperm(int, const unsigned long*, unsigned long) {
  errno = EPERM;
  return -1;
}
long refuse_eperm_long(int m, const unsigned long* n, unsigned long x) { return refuse_eperm(m, n, x); }
long refuse_enosys(int, const unsigned long*, unsigned long) {
  errno = ENOSYS;
  return -1;
}
}  // namespace

TEST_CASE("memory policy names parse and print") {
  GPUAFF_STATIC_CHECK(gpuaff::parse_mem_policy("interleave").value() == MemPolicy::interleave);
  GPUAFF_STATIC_CHECK(gpuaff::to_string(MemPolicy::preferred) == "preferred");
  auto bad = gpuaff::parse_mem_policy("membind");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == Errc::invalid_argument);
  CHECK(std::string(bad.error().message()).find("'membind'") != std::string::npos);
}

TEST_CASE("a node policy without nodes is refused before anything changes") {
  auto g = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = MemPolicy::bind});
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::invalid_argument);
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("the guard sets the memory policy with the CPUs and restores both") {
  if (!mempolicy_allowed()) {
    MESSAGE("this kernel refuses set_mempolicy here; the refusal paths are tested below with an injected kernel");
    return;
  }
  auto before = gpuaff::memory_policy();
  REQUIRE(before);
  CHECK(before->mode == kernel_default);
  struct Case {
    MemPolicy policy;
    int kernel_mode;
    NodeSet expected_nodes;
  };
  // Node 0 exists on every Linux machine. `preferred` keeps one node; `local` none.
  for (const Case& c : {Case{MemPolicy::bind, kernel_bind, NodeSet{0}}, Case{MemPolicy::interleave, kernel_interleave, NodeSet{0}},
                        Case{MemPolicy::preferred, kernel_preferred, NodeSet{0}}, Case{MemPolicy::first_touch, kernel_local, NodeSet{}}}) {
    CAPTURE(gpuaff::to_string(c.policy));
    {
      auto g = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = c.policy, .nodes = NodeSet{0}});
      REQUIRE(g);
      CHECK(g->memory_applied());
      CHECK(g->warnings().empty());
      SavedMemoryPolicy now = kernel_policy();
      CHECK(now.mode == c.kernel_mode);
      CHECK(now.nodes == c.expected_nodes);
      CHECK(*gpuaff::memory_policy() == now);
      CHECK(mine() == CpuSet::single(cpu_b()));
    }
    CHECK(kernel_policy() == *before);
    CHECK(mine() == allowed_at_start());
  }
}

TEST_CASE("nested guards restore the outer memory policy, not the default") {
  if (!mempolicy_allowed()) return;
  auto outer = ScopedAffinity::create(CpuSet::single(cpu_a()), {.policy = MemPolicy::interleave, .nodes = NodeSet{0}});
  REQUIRE(outer);
  {
    auto inner = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = MemPolicy::bind, .nodes = NodeSet{0}});
    REQUIRE(inner);
    CHECK(kernel_policy().mode == kernel_bind);
  }
  CHECK(kernel_policy().mode == kernel_interleave);
  CHECK(kernel_policy().nodes == NodeSet{0});
  REQUIRE(outer->restore());
  CHECK(kernel_policy().mode == kernel_default);
}

TEST_CASE("EPERM with OnRefused::error: the whole guard fails and the CPU mask is untouched") {
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
  fake.set_mempolicy = &refuse_eperm_long;
  gpuaff::detail::ScopedSyscalls use(fake);
  auto g = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = MemPolicy::bind, .nodes = NodeSet{0}});
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::permission_denied);
  CHECK(g.error().sys_errno() == EPERM);
  std::string msg(g.error().message());
  CHECK(msg.find("set_mempolicy(bind, nodes 0)") != std::string::npos);
  CHECK(msg.find("nothing was changed") != std::string::npos);
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("EPERM with OnRefused::cpu_only: CPUs bound, a warning recorded, nothing printed") {
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
  fake.set_mempolicy = &refuse_eperm_long;
  gpuaff::detail::ScopedSyscalls use(fake);
  {
    auto g = ScopedAffinity::create(CpuSet::single(cpu_b()),
                                    {.policy = MemPolicy::bind, .nodes = NodeSet{0}, .on_refused = OnRefused::cpu_only});
    REQUIRE(g);
    CHECK_FALSE(g->memory_applied());
    REQUIRE(g->warnings().size() == 1);
    CHECK(g->warnings()[0].find("EPERM") != std::string::npos);
    CHECK(mine() == CpuSet::single(cpu_b()));
  }
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("ENOSYS is a refusal too; other errors are not softened by cpu_only") {
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
  fake.set_mempolicy = &refuse_enosys;
  gpuaff::detail::ScopedSyscalls use(fake);
  auto err = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = MemPolicy::first_touch});
  REQUIRE_FALSE(err);
  CHECK(err.error().code() == Errc::unsupported);
  auto soft = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = MemPolicy::first_touch, .on_refused = OnRefused::cpu_only});
  REQUIRE(soft);
  CHECK(soft->warnings().size() == 1);
}

namespace {
// A real refusal: a seccomp filter that answers EPERM to set_mempolicy, the
// way docker's default profile does without CAP_SYS_NICE. Installed in a
// forked child (filters cannot be removed); returns the child's verdict.
int child_under_seccomp() {
#if defined(__x86_64__)
  if (int refused = gpuaff_test::refuse_syscall(SYS_set_mempolicy, EPERM); refused != 0) return refused;
  CpuSet start = thread_status_cpus(gpuaff::detail::current_tid());
  {
    auto g = ScopedAffinity::create(CpuSet::single(cpu_b()), {.policy = MemPolicy::bind, .nodes = NodeSet{0}});
    if (g || g.error().code() != Errc::permission_denied) return 20;
    if (thread_status_cpus(gpuaff::detail::current_tid()) != start) return 21;
  }
  {
    auto g = ScopedAffinity::create(CpuSet::single(cpu_b()),
                                    {.policy = MemPolicy::bind, .nodes = NodeSet{0}, .on_refused = OnRefused::cpu_only});
    if (!g || g->memory_applied() || g->warnings().size() != 1) return 30;
    if (thread_status_cpus(gpuaff::detail::current_tid()) != CpuSet::single(cpu_b())) return 31;
  }
  return 0;
#else
  return 99;
#endif
}
}  // namespace

TEST_CASE("a seccomp filter that refuses set_mempolicy is handled like a container") {
#if !defined(__x86_64__)
  MESSAGE("the seccomp filter here is written for x86-64 only");
#else
  auto child = gpuaff::spawn_callable(&child_under_seccomp);
  REQUIRE(child);
  auto status = child->wait();
  REQUIRE(status);
  if (status->exit_code == 10 || status->exit_code == 11) {
    MESSAGE("seccomp filters are not available here (exit ", status->exit_code, ")");
    return;
  }
  CHECK(status->exit_code == 0);
#endif
}

TEST_CASE("when the CPUs fail after the memory policy was set, the memory policy is put back") {
  if (!mempolicy_allowed()) return;
  SavedMemoryPolicy before = kernel_policy();
  auto g = ScopedAffinity::create(CpuSet::single(impossible_cpu()), {.policy = MemPolicy::bind, .nodes = NodeSet{0}});
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::empty_result);  // the kernel refuses the CPUs: the machine's answer
  CHECK(kernel_policy() == before);
  CHECK(mine() == allowed_at_start());
}
