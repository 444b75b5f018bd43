// SPDX-License-Identifier: Apache-2.0
// One worker process per GPU, each started on its GPU's CPUs.
// Usage: quickstart [COMMAND [ARGS...]]; the GPU index is appended to the arguments.
#include <gpuaff/gpuaff.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> command(argv + 1, argv + argc);
  if (command.empty()) command = {"grep", "-H", "Cpus_allowed_list", "/proc/self/status"};

  auto topo = gpuaff::SysfsSource(gpuaff::SysfsOptions{}).load();  // this machine, *_VISIBLE_DEVICES applied
  if (!topo) return std::fprintf(stderr, "gpuaff: %s\n", topo.error().what()), 1;
  std::vector<gpuaff::Child> workers;  // a Child not waited for is waited for when dropped: no zombies
  for (int gpu = 0; gpu < static_cast<int>(topo->gpus.size()); ++gpu) {
    auto cpus = gpuaff::bind(*topo, gpu, gpuaff::ExclusivePolicy{});  // PyTorch's --numa-binding=exclusive
    if (!cpus) return std::fprintf(stderr, "gpuaff: %s\n", cpus.error().what()), 1;
    auto guard = gpuaff::ScopedAffinity::create(*cpus);  // this thread runs on the GPU's CPUs ...
    if (!guard) return std::fprintf(stderr, "gpuaff: %s\n", guard.error().what()), 1;
    std::vector<std::string> args = command;
    args.push_back(std::to_string(gpu));
    auto child = gpuaff::spawn(args);  // ... and so does its child
    if (!child) return std::fprintf(stderr, "gpuaff: %s\n", child.error().what()), 1;
    workers.push_back(std::move(*child));
  }  // ... until the guard restores this thread's mask at the end of the iteration
  if (topo->gpus.empty()) std::printf("no GPU on this machine (%s)\n", topo->origin.c_str());
  auto statuses = gpuaff::wait_all(workers);
  if (!statuses) return std::fprintf(stderr, "gpuaff: %s\n", statuses.error().what()), 1;
  for (const auto& s : *statuses)
    if (!s.success()) return 1;
  return 0;
}
