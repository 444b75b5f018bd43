// SPDX-License-Identifier: Apache-2.0
// ScopedAffinity: a scope's binding, restored on every way out.
#include <gpuaff/apply/scoped_affinity.hpp>

#include <sys/wait.h>

#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include "apply_support.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::ScopedAffinity;
using namespace apply_test;

static_assert(!std::is_copy_constructible_v<ScopedAffinity>);
static_assert(!std::is_copy_assignable_v<ScopedAffinity>);
static_assert(std::is_nothrow_move_constructible_v<ScopedAffinity>);
static_assert(std::is_nothrow_move_assignable_v<ScopedAffinity>);
static_assert(std::is_nothrow_destructible_v<ScopedAffinity>);

namespace {
CpuSet mine() { return thread_status_cpus(gpuaff::detail::current_tid()); }
}  // namespace

TEST_CASE("the mask is restored when the scope ends") {
  REQUIRE(mine() == allowed_at_start());
  {
    auto g = ScopedAffinity::create(CpuSet::single(cpu_b()));
    REQUIRE(g);
    CHECK(g->active());
    CHECK(g->cpus() == CpuSet::single(cpu_b()));
    CHECK(g->previous() == allowed_at_start());
    CHECK(mine() == CpuSet::single(cpu_b()));
  }
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("the mask is restored when an exception leaves the scope") {
  try {
    auto g = ScopedAffinity::create(CpuSet::single(cpu_a()));
    REQUIRE(g);
    CHECK(mine() == CpuSet::single(cpu_a()));
    throw std::runtime_error("leaving");
  } catch (const std::runtime_error&) {
  }
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("nested guards restore in reverse order") {
  auto outer = ScopedAffinity::create(CpuSet::single(cpu_a()));
  REQUIRE(outer);
  {
    auto inner = ScopedAffinity::create(CpuSet::single(cpu_b()));
    REQUIRE(inner);
    CHECK(mine() == CpuSet::single(cpu_b()));
    CHECK(inner->previous() == CpuSet::single(cpu_a()));
  }
  CHECK(mine() == CpuSet::single(cpu_a()));
  REQUIRE(outer->restore());
  CHECK(mine() == allowed_at_start());
  CHECK_FALSE(outer->active());
}

TEST_CASE("a moved-from guard restores nothing; the new owner restores once") {
  auto made = ScopedAffinity::create(CpuSet::single(cpu_b()));
  REQUIRE(made);
  {
    ScopedAffinity moved = std::move(*made);
    CHECK_FALSE(made->active());
    CHECK(moved.active());
    // The moved-from guard going away (or restoring) must not undo the binding.
    REQUIRE(made->restore());
    CHECK(mine() == CpuSet::single(cpu_b()));
  }
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("move assignment restores the target's binding before taking the source's") {
  auto first = ScopedAffinity::create(CpuSet::single(cpu_a()));
  REQUIRE(first);
  ScopedAffinity a = std::move(*first);
  {
    // b saved cpu_a's mask; assigning b to a restores a (to the initial mask)
    // and then holds b's saved mask (cpu_a's).
    auto second = ScopedAffinity::create(CpuSet::single(cpu_b()));
    REQUIRE(second);
    a = std::move(*second);
    CHECK(mine() == allowed_at_start());
  }
  REQUIRE(a.restore());
  CHECK(mine() == CpuSet::single(cpu_a()));
  REQUIRE(gpuaff::set_thread_affinity(allowed_at_start()));
}

TEST_CASE("release keeps the binding after the guard is gone") {
  {
    auto g = ScopedAffinity::create(CpuSet::single(cpu_b()));
    REQUIRE(g);
    g->release();
    CHECK_FALSE(g->active());
  }
  CHECK(mine() == CpuSet::single(cpu_b()));
  REQUIRE(gpuaff::set_thread_affinity(allowed_at_start()));
}

TEST_CASE("a guard that cannot bind fails and changes nothing") {
  {
    auto g = ScopedAffinity::create(CpuSet{});
    REQUIRE_FALSE(g);
    CHECK(g.error().code() == Errc::empty_result);
  }
  {
    int outside = impossible_cpu();
    auto g = ScopedAffinity::create(CpuSet{cpu_a(), outside});
    REQUIRE_FALSE(g);
    CHECK(g.error().code() == Errc::empty_result);  // the machine refuses: exit 5, not a usage mistake
  }
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("a guard restored from another thread restores the creating thread's CPU mask") {
  auto g = ScopedAffinity::create(CpuSet::single(cpu_b()));
  REQUIRE(g);
  ScopedAffinity moved = std::move(*g);
  gpuaff::Result<void> restored;
  pid_t other_tid = 0;
  std::thread t([&] {
    other_tid = gpuaff::detail::current_tid();
    restored = moved.restore();
  });
  t.join();
  CHECK(restored);
  CHECK(mine() == allowed_at_start());
  CHECK(other_tid != gpuaff::detail::current_tid());
}

// fork() copies the guard into the child. Restoring the copy must act on the
// child's own thread: the creating thread's id names a thread of the parent,
// which would otherwise lose its binding while its guard is still in scope.
TEST_CASE("a guard copied into a forked child restores the child, never the parent") {
  auto g = ScopedAffinity::create(CpuSet::single(cpu_b()));
  REQUIRE(g);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    if (!g->restore()) code = 1;
    else if (status_cpus("self") != allowed_at_start()) code = 2;  // the child is back to the saved mask
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(mine() == CpuSet::single(cpu_b()));  // the parent keeps its binding inside its guard
  REQUIRE(g->restore());
  CHECK(mine() == allowed_at_start());
}
