// SPDX-License-Identifier: Apache-2.0
// Built by tests/run.sh with the strictest warnings users build with
// (-Wconversion -Wsign-conversion -Wshadow ... -Werror, and GCC's -O3 -flto):
// a header-only library is compiled with its users' flags, so this program
// reaches most of it (loading a root, every policy through the front door,
// binding and restoring) to have its templates and inline functions compiled
// under those flags, not only its declarations.
// Usage: consumer_api ROOT   (a recorded root; prints every policy's bindings)
#include <gpuaff/doctor/verdict.hpp>
#include <gpuaff/gpuaff.hpp>
#include <gpuaff/launch/front.hpp>
#include <gpuaff/launch/plan_variable.hpp>
#include <gpuaff/record/record.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: consumer_api ROOT\n"), 2;
  for (const auto& policy : gpuaff::policy_registry) {
    gpuaff::LaunchOptions options;
    options.all_gpus = true;
    for (auto [key, value] : {std::pair<std::string, std::string>{"root", argv[1]}, {"policy", std::string(policy.name)}}) {
      auto set = gpuaff::set_option(options, key, value);
      if (!set) return std::fprintf(stderr, "consumer_api: %s\n", set.error().what()), 1;
    }
    auto plans = gpuaff::plan_every_gpu(options);
    if (!plans) return std::fprintf(stderr, "consumer_api: %s\n", plans.error().what()), 1;
    std::printf("%s:", std::string(policy.name).c_str());
    for (const auto& plan : *plans) std::printf(" %s", plan.cpus.to_list().c_str());
    if (!plans->empty() && !gpuaff::parse_plan_variable(gpuaff::plan_variable_value(plans->front())))
      return std::fprintf(stderr, "consumer_api: GPUAFF_PLAN does not read back\n"), 1;
    std::printf("\n");
  }
  // Binding to the CPUs this process already has changes nothing, and runs the
  // appliers: the calling thread's guard, then every thread of the process.
  auto mine = gpuaff::thread_affinity();
  if (!mine) return std::fprintf(stderr, "consumer_api: %s\n", mine.error().what()), 1;
  {
    auto guard = gpuaff::ScopedAffinity::create(*mine);
    if (!guard) return std::fprintf(stderr, "consumer_api: %s\n", guard.error().what()), 1;
  }
  auto all = gpuaff::bind_process(*mine);
  if (!all) return std::fprintf(stderr, "consumer_api: %s\n", all.error().what()), 1;
  // This process has no plan (no GPUAFF_PLAN): the verdict is a guess, or an error; either is fine here.
  gpuaff::LaunchOptions self;
  (void)gpuaff::set_option(self, "root", argv[1]);
  (void)gpuaff::set_option(self, "gpu", "0");
  (void)gpuaff::examine_process(static_cast<int>(getpid()), self);
  return 0;
}
