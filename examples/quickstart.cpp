// The README's example: one worker process per GPU, each started on its GPU's
// CPUs under a ScopedAffinity guard. Usage: quickstart [COMMAND [ARGS...]]
// (default: grep Cpus_allowed_list /proc/self/status). The GPU index is
// appended to the command's arguments.
#include <gpuaff/gpuaff.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> command(argv + 1, argv + argc);
  if (command.empty()) command = {"grep", "-H", "Cpus_allowed_list", "/proc/self/status"};

  // -- the README's ten lines ----------------------------------------------------------
  auto topo = gpuaff::SysfsSource(gpuaff::SysfsOptions{}).load();  // this machine, *_VISIBLE_DEVICES applied
  if (!topo) return std::fprintf(stderr, "gpuaff: %s\n", topo.error().what()), 1;
  std::vector<gpuaff::Child> workers;
  for (int gpu = 0; gpu < static_cast<int>(topo->gpus.size()); ++gpu) {
    auto cpus = gpuaff::bind(*topo, gpu, gpuaff::ExclusivePolicy{});  // PyTorch's --numa-binding=exclusive
    if (!cpus) return std::fprintf(stderr, "gpuaff: %s\n", cpus.error().what()), 1;
    auto guard = gpuaff::ScopedAffinity::create(*cpus);  // this thread runs on the GPU's CPUs ...
    if (!guard) return std::fprintf(stderr, "gpuaff: %s\n", guard.error().what()), 1;
    std::vector<std::string> args = command;
    args.push_back(std::to_string(gpu));
    if (auto child = gpuaff::spawn(args)) workers.push_back(std::move(*child));  // ... and so does its child
  }  // ... until the guard restores this thread's mask at the end of the iteration
  // --------------------------------------------------------------------------------------

  if (topo->gpus.empty()) std::printf("no GPU on this machine (%s)\n", topo->origin.c_str());
  auto statuses = gpuaff::wait_all(workers);
  return statuses ? 0 : 1;
}
