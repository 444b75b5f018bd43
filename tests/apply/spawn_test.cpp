// SPDX-License-Identifier: Apache-2.0
// spawn / spawn_callable: children start bound, the parent thread does not change.
#include <gpuaff/apply/spawn.hpp>

#include <signal.h>

#include <sys/wait.h>

#include <cerrno>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "apply_support.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using gpuaff::Fallback;
using namespace apply_test;

namespace {
CpuSet mine() { return thread_status_cpus(gpuaff::detail::current_tid()); }

struct Captured {
  std::string out;
  gpuaff::ExitStatus status;
  bool bound = false;
  std::vector<std::string> warnings;
};

// Runs `argv` with stdout captured.
Captured run_captured(const std::vector<std::string>& argv, const gpuaff::SpawnOptions& base) {
  Captured r;
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  gpuaff::SpawnOptions o = base;
  o.stdout_fd = fds[1];
  auto child = gpuaff::spawn(argv, o);
  close(fds[1]);
  REQUIRE(child);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  auto s = child->wait();
  REQUIRE(s);
  r.status = *s;
  r.bound = child->bound();
  r.warnings = child->warnings();
  return r;
}

CpuSet cpus_in(const std::string& status_text) {
  auto pos = status_text.find("Cpus_allowed_list:");
  REQUIRE(pos != std::string::npos);
  auto end = status_text.find('\n', pos);
  return CpuSet::parse_list(status_text.substr(pos + 18, end - pos - 18)).value();
}
}  // namespace

TEST_CASE("a spawned command starts on the requested CPUs and the parent is unchanged") {
  auto r = run_captured({"cat", "/proc/self/status"}, {.cpus = CpuSet::single(cpu_b())});
  CHECK(r.status.success());
  CHECK(r.bound);
  CHECK(r.warnings.empty());
  CHECK(cpus_in(r.out) == CpuSet::single(cpu_b()));
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("a command's exit code and terminating signal are reported") {
  auto c = gpuaff::spawn({"sh", "-c", "exit 7"}, {.cpus = CpuSet::single(cpu_a())});
  REQUIRE(c);
  auto s = c->wait();
  REQUIRE(s);
  CHECK(s->exit_code == 7);
  CHECK(s->signal == 0);
  CHECK_FALSE(s->success());
  CHECK_FALSE(c->wait());  // reaped once only
  auto k = gpuaff::spawn({"sh", "-c", "kill -TERM $$"});
  REQUIRE(k);
  auto ks = k->wait();
  REQUIRE(ks);
  CHECK(ks->signal == SIGTERM);
  CHECK(ks->exit_code == -1);
}

TEST_CASE("a command that does not exist is an error naming it") {
  auto c = gpuaff::spawn({"gpuaff-no-such-command-xyz"}, {.cpus = CpuSet::single(cpu_a())});
  REQUIRE_FALSE(c);
  CHECK(c.error().code() == Errc::not_found);
  CHECK(std::string(c.error().message()).find("gpuaff-no-such-command-xyz") != std::string::npos);
  CHECK(mine() == allowed_at_start());
  CHECK(gpuaff::spawn({}).error().code() == Errc::invalid_argument);
}

TEST_CASE("spawn_callable reports the exit code") {
  auto c = gpuaff::spawn_callable([] { return 42; }, {.cpus = CpuSet::single(cpu_b())});
  REQUIRE(c);
  CHECK(c->bound());
  CHECK(c->cpus() == CpuSet::single(cpu_b()));
  auto s = c->wait();
  REQUIRE(s);
  CHECK(s->exit_code == 42);
  CHECK_FALSE(s->threw);
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("spawn_callable runs the function on the requested CPUs") {
  CpuSet want = CpuSet::single(cpu_b());
  // The child answers through its exit code: 0 when its own /proc view matches.
  auto c = gpuaff::spawn_callable([want] { return status_cpus("self") == want ? 0 : 3; }, {.cpus = want});
  REQUIRE(c);
  CHECK(c->wait()->exit_code == 0);
}

TEST_CASE("spawn_callable reports an exception's text") {
  auto c = gpuaff::spawn_callable([]() -> int { throw std::runtime_error("worker 3 could not open its shard"); });
  REQUIRE(c);
  auto s = c->wait();
  REQUIRE(s);
  CHECK(s->threw);
  CHECK(s->exit_code == 1);
  CHECK(s->exception == "worker 3 could not open its shard");
  CHECK_FALSE(s->success());
  auto odd = gpuaff::spawn_callable([]() -> int { throw 5; });
  REQUIRE(odd);
  auto os = odd->wait();
  REQUIRE(os);
  CHECK(os->threw);
  CHECK(os->exception.find("not derived from std::exception") != std::string::npos);
}

namespace {
int exit_seven() { return 7; }
}  // namespace

TEST_CASE("spawn_callable takes function pointers and std::function, and refuses empty ones") {
  auto by_pointer = gpuaff::spawn_callable(&exit_seven);
  REQUIRE(by_pointer);
  CHECK(by_pointer->wait()->exit_code == 7);
  std::function<int()> wrapped = [] { return 9; };
  auto by_function = gpuaff::spawn_callable(wrapped);
  REQUIRE(by_function);
  CHECK(by_function->wait()->exit_code == 9);

  int (*null_pointer)() = nullptr;
  auto none = gpuaff::spawn_callable(null_pointer);
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == gpuaff::Errc::invalid_argument);
  auto empty = gpuaff::spawn_callable(std::function<int()>{});
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code() == gpuaff::Errc::invalid_argument);
}

TEST_CASE("Fallback::error: a binding that cannot be applied starts no child") {
  int outside = impossible_cpu();
  auto c = gpuaff::spawn({"true"}, {.cpus = CpuSet::single(outside), .fallback = Fallback::error});
  REQUIRE_FALSE(c);
  CHECK(c.error().code() == Errc::empty_result);  // the kernel refuses the CPUs: the machine's answer
  CHECK(std::string(c.error().message()).find("CPUs " + std::to_string(outside)) != std::string::npos);
  auto f = gpuaff::spawn_callable([] { return 0; }, {.cpus = CpuSet::single(outside)});
  REQUIRE_FALSE(f);
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("Fallback::unbound: the child runs with the parent's mask and a warning says why") {
  int outside = impossible_cpu();
  auto r = run_captured({"cat", "/proc/self/status"}, {.cpus = CpuSet{cpu_a(), outside}, .fallback = Fallback::unbound});
  CHECK(r.status.success());
  CHECK_FALSE(r.bound);
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].find("started unbound") != std::string::npos);
  CHECK(r.warnings[0].find(std::to_string(outside)) != std::string::npos);
  CHECK(cpus_in(r.out) == allowed_at_start());  // never half-bound: not {cpu_a}
  CHECK(mine() == allowed_at_start());
}

TEST_CASE("memory-only options keep the parent's CPUs for the child") {
  if (syscall(SYS_set_mempolicy, 0, nullptr, 0UL) != 0) return;
  // The child checks its own policy: MPOL_INTERLEAVE (3) over node 0.
  auto c = gpuaff::spawn_callable(
      [] {
        auto p = gpuaff::memory_policy();
        return p && p->mode == 3 && p->nodes == CpuSet{0} && status_cpus("self") == allowed_at_start() ? 0 : 4;
      },
      {.memory = {.policy = gpuaff::MemPolicy::interleave, .nodes = CpuSet{0}}});
  REQUIRE(c);
  CHECK(c->wait()->exit_code == 0);
  CHECK(gpuaff::memory_policy()->mode == 0);
}

// A Child dropped without wait() is reaped by its destructor, so a launcher
// that returns early leaves no zombie: afterwards waitpid finds no such child.
TEST_CASE("a Child dropped without wait is waited for, not left a zombie") {
  pid_t pid = -1;
  {
    auto child = gpuaff::spawn({"sh", "-c", "exit 3"});
    REQUIRE(child);
    pid = child->pid();
    CHECK(child->running());
  }
  int status = 0;
  errno = 0;
  CHECK(waitpid(pid, &status, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("a moved-from Child does not wait; the Child it moved into does") {
  auto child = gpuaff::spawn({"true"});
  REQUIRE(child);
  gpuaff::Child moved = std::move(*child);
  CHECK_FALSE(child->running());
  CHECK(moved.running());
  auto s = moved.wait();
  REQUIRE(s);
  CHECK(s->success());
  CHECK_FALSE(moved.running());
}

TEST_CASE("kill stops a child; wait then reports the signal") {
  auto child = gpuaff::spawn({"sleep", "30"});
  REQUIRE(child);
  REQUIRE(child->kill(SIGTERM));
  auto s = child->wait();
  REQUIRE(s);
  CHECK(s->signal == SIGTERM);
  CHECK(s->exit_code == -1);
  auto again = child->kill(SIGTERM);
  REQUIRE_FALSE(again);
  CHECK(again.error().code() == Errc::invalid_argument);
}

TEST_CASE("spawn_callable takes a move-only callable and runs it in the child") {
  auto owned = std::make_unique<int>(7);
  auto fn = [p = std::move(owned)]() { return *p; };
  auto child = gpuaff::spawn_callable(fn);
  REQUIRE(child);
  auto s = child->wait();
  REQUIRE(s);
  CHECK(s->exit_code == 7);
}

TEST_CASE("spawn_callable gives the child the streams the options name, as spawn does") {
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  gpuaff::SpawnOptions o;
  o.stdout_fd = fds[1];
  auto child = gpuaff::spawn_callable([] {
    const char text[] = "from the child\n";
    return write(1, text, sizeof text - 1) == static_cast<ssize_t>(sizeof text - 1) ? 0 : 3;
  }, o);
  close(fds[1]);
  REQUIRE(child);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  auto s = child->wait();
  REQUIRE(s);
  CHECK(s->exit_code == 0);
  CHECK(out == "from the child\n");
}

TEST_CASE("a redirection that cannot be set up starts no child") {
  gpuaff::SpawnOptions o;
  o.stdout_fd = 1 << 20;  // no such descriptor: posix_spawn's dup2 fails in the child
  auto child = gpuaff::spawn({"true"}, o);
  if (child) {
    // glibc reports a failed dup2 of the file actions as a spawn error; a child that started anyway
    // must not have run with the inherited stdout.
    auto s = child->wait();
    REQUIRE(s);
    CHECK(s->exit_code != 0);
  } else {
    CHECK(child.error().code() != gpuaff::Errc::not_found);
  }
}
