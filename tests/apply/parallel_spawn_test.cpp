// SPDX-License-Identifier: Apache-2.0
// Many threads spawning at once under different masks: affinity is per
// thread, so each child must get exactly its creating thread's binding.
// Labelled `threads`: CI runs it under ThreadSanitizer as well.
#include <gpuaff/apply/spawn.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "apply_support.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using namespace apply_test;

namespace {
constexpr int thread_count = 16;
constexpr int children_per_thread = 50;

struct Outcome {
  int spawned = 0;
  int matched = 0;
  int parent_unchanged = 0;
  std::string first_problem;
};

void note(Outcome& o, const std::string& what) {
  if (o.first_problem.empty()) o.first_problem = what;
}

// Even threads start `cat` reading a pipe; odd threads fork a callable that
// blocks reading a pipe. Either way the child stays alive until the parent has
// read /proc/<pid>/status, then the parent lets it go.
void spawner(int index, Outcome& o) {
  CpuSet mask = CpuSet::single(index % 2 == 0 ? cpu_a() : cpu_b());
  for (int i = 0; i < children_per_thread; ++i) {
    int gate[2];
    if (pipe2(gate, O_CLOEXEC) != 0) return note(o, "pipe2 failed");
    gpuaff::Result<gpuaff::Child> child = index % 2 == 0
        ? gpuaff::spawn({"cat"}, {.cpus = mask, .stdin_fd = gate[0]})
        : gpuaff::spawn_callable(
              [fd = gate[0]] {
                char c = 0;
                ssize_t n;
                do n = read(fd, &c, 1);
                while (n < 0 && errno == EINTR);
                return n == 1 && c == 'x' ? 0 : 5;
              },
              {.cpus = mask});
    close(gate[0]);
    if (!child) {
      close(gate[1]);
      return note(o, std::string(child.error().message()));
    }
    ++o.spawned;
    CpuSet seen = status_cpus(std::to_string(child->pid()));
    if (seen == mask) ++o.matched;
    else note(o, "child " + std::to_string(child->pid()) + " had " + seen.to_list() + ", wanted " + mask.to_list());
    if (thread_status_cpus(gpuaff::detail::current_tid()) == allowed_at_start()) ++o.parent_unchanged;
    ssize_t w = write(gate[1], "x", 1);
    (void)w;
    close(gate[1]);
    auto s = child->wait();
    if (!s || !s->success()) note(o, "child did not exit cleanly");
  }
}
}  // namespace

TEST_CASE("16 threads each spawning 50 children under different single-CPU masks") {
  std::vector<Outcome> outcomes(thread_count);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) threads.emplace_back(spawner, t, std::ref(outcomes[static_cast<std::size_t>(t)]));
  for (auto& t : threads) t.join();
  for (int t = 0; t < thread_count; ++t) {
    const Outcome& o = outcomes[static_cast<std::size_t>(t)];
    CAPTURE(t);
    CHECK(o.first_problem == "");
    CHECK(o.spawned == children_per_thread);
    CHECK(o.matched == children_per_thread);
    CHECK(o.parent_unchanged == children_per_thread);
  }
}
