// SPDX-License-Identifier: Apache-2.0
// A whole load of a recorded root, then `exclusive` and `node` for each of
// its GPUs, N times in one process: microseconds per load and per round of
// bindings (benchmarks/README.md, "Row S: a CpuSet of 144 bytes"). Built by
// hand against two trees' headers, it compares them side by side:
//   g++ -std=c++20 -O2 -Iinclude benchmarks/load_cost.cpp -o load_cost
//   ./load_cost ROOT N     (ROOT: a recording, such as build/fixtures/big-1152)
#include <gpuaff/gpuaff.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3 || std::atoi(argv[2]) <= 0) {
    std::fprintf(stderr, "usage: %s ROOT N (N > 0 loads)\n", argv[0]);
    return 2;
  }
  int n = std::atoi(argv[2]);
  using clock = std::chrono::steady_clock;
  double load_us = 0;
  double bind_us = 0;
  long cpus = 0;  // printed, so that no binding is optimised away
  std::size_t gpus = 0;
  for (int i = 0; i < n; ++i) {
    auto t0 = clock::now();
    gpuaff::SysfsOptions o;
    o.root = argv[1];
    auto topo = gpuaff::SysfsSource(o).load();
    if (!topo) {
      std::fprintf(stderr, "%s\n", std::string(topo.error().message()).c_str());
      return 1;
    }
    auto t1 = clock::now();
    gpus = topo->gpus.size();
    for (int g = 0; g < static_cast<int>(topo->gpus.size()); ++g) {
      if (auto c = gpuaff::bind(*topo, g, gpuaff::ExclusivePolicy{})) cpus += c->count();
      if (auto c = gpuaff::bind(*topo, g, gpuaff::NodePolicy{})) cpus += c->count();
    }
    auto t2 = clock::now();
    load_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
    bind_us += std::chrono::duration<double, std::micro>(t2 - t1).count();
  }
  std::printf("load %.1f us, %zu GPUs x (exclusive + node) %.1f us (%ld CPUs per round)\n", load_us / n, gpus,
              bind_us / n, cpus / n);
  return 0;
}
