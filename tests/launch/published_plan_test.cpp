// SPDX-License-Identifier: Apache-2.0
// A plan applied in place is published where another process can read it
// (gpuaff/launch/published_plan.hpp): a sealed memfd of the process's own,
// read through /proc/PID/fd. Each case reads a real second process, as
// `gpuaff doctor` does.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/launch/launch.hpp"
#include "gpuaff/launch/published_plan.hpp"
#include "support/check.hpp"

namespace {

/// A child that runs `act`, then waits until the parent closes the pipe.
/// The parent gets the child's pid once `act` is done.
struct Child {
  pid_t pid = -1;
  int release = -1;

  template <class Act>
  explicit Child(Act act) {
    int ready[2];
    int hold[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(hold) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(ready[0]);
      ::close(hold[1]);
      act();
      char c = 'r';
      (void)!::write(ready[1], &c, 1);
      (void)!::read(hold[0], &c, 1);  // until the parent is done
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::close(ready[0]);
    release = hold[1];
  }
  ~Child() {
    ::close(release);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

}  // namespace

TEST_CASE("another process reads the plan a process published, and the newest one only") {
  Child child([] {
    (void)gpuaff::publish_plan_value("v1 gpu=0 pci=0000:17:00.0 from=gpu=0 policy=node node=0 cpus=0 mems= membind=none");
    (void)gpuaff::publish_plan_value("v1 gpu=1 pci=0000:97:00.0 from=gpu=1 policy=exclusive node=1 cpus=1 mems= membind=none");
  });
  auto value = gpuaff::published_plan_value(child.pid);
  REQUIRE(value);
  CHECK(*value == "v1 gpu=1 pci=0000:97:00.0 from=gpu=1 policy=exclusive node=1 cpus=1 mems= membind=none");
  auto plan = gpuaff::parse_plan_variable(*value);
  REQUIRE(plan);
  CHECK(plan->policy == gpuaff::PolicyKind::exclusive);
}

TEST_CASE("nothing published, or withdrawn, reads as none") {
  Child none([] {});
  CHECK(!gpuaff::published_plan_value(none.pid));
  Child withdrawn([] {
    (void)gpuaff::publish_plan_value("v1 gpu=0 pci=0000:17:00.0 from=gpu=0 policy=node node=0 cpus=0 mems= membind=none");
    gpuaff::withdraw_published_plan();
  });
  CHECK(!gpuaff::published_plan_value(withdrawn.pid));
  CHECK(!gpuaff::published_plan_value(0));        // no such process
  CHECK(!gpuaff::published_plan_value(1 << 30));  // beyond any pid
}

TEST_CASE("a memfd of the same name that is not sealed, or too large, is not taken") {
  // Anyone may name a memfd "gpuaff-plan": only a sealed one (nobody can change
  // it after the reader looked) of a plan's size is the published plan.
  Child unsealed([] {
    int fd = ::memfd_create("gpuaff-plan", MFD_ALLOW_SEALING);
    const char text[] = "v1 gpu=0 pci=0000:17:00.0 from=gpu=0 policy=node node=0 cpus=0 mems= membind=none";
    (void)!::write(fd, text, std::strlen(text));
  });
  CHECK(!gpuaff::published_plan_value(unsealed.pid));
  Child huge([] { (void)gpuaff::publish_plan_value(std::string(gpuaff::published_plan_max + 1, 'x')); });
  CHECK(!gpuaff::published_plan_value(huge.pid));
}

TEST_CASE("a launch that binds the process in place publishes its plan; one for a program to be exec'd does not") {
  // two-node-2cpu: GPU 1 alone on node 1 with CPU 1 (fixtures/two-node-2cpu).
  // Its CPU 1 exists on every machine the suite runs on (2 CPUs or more).
  const std::string root = gpuaff_test::fixture("two-node-2cpu");
  auto allowed = gpuaff::thread_affinity();
  REQUIRE(allowed);
  if (!allowed->contains(1)) {
    MESSAGE("skipped: CPU 1 is not allowed here (allowed: ", allowed->to_list(), ")");
    return;
  }
  auto launch_in_child = [&](bool publish) {
    return [root, publish] {
      gpuaff::LaunchOptions o;
      REQUIRE(gpuaff::set_option(o, "root", root));
      REQUIRE(gpuaff::set_option(o, "gpu", "1"));
      REQUIRE(gpuaff::set_option(o, "policy", "exclusive"));
      auto l = gpuaff::launch(o, gpuaff::process_environment(), {},
                              {.apply = gpuaff::LaunchApply::process, .running = "running", .publish = publish});
      if (!l.ok()) ::_exit(3);
    };
  };
  {
    Child in_place(launch_in_child(true));
    auto value = gpuaff::published_plan_value(in_place.pid);
    REQUIRE(value);
    CHECK(value->find(" policy=exclusive ") != std::string::npos);
    CHECK(value->find(" cpus=1 ") != std::string::npos);
  }
  {
    Child for_exec(launch_in_child(false));
    CHECK(!gpuaff::published_plan_value(for_exec.pid));
  }
}
