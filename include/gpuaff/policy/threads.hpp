// SPDX-License-Identifier: Apache-2.0
#pragma once
// How many worker threads suit a binding: one per physical core it covers.
// SMT siblings share a core's execution units, so compute-bound pools
// (OMP_NUM_THREADS, torch.set_num_threads, DataLoader num_workers) gain
// little from a second thread per core and lose to contention.

#include "gpuaff/config.hpp"

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// The number of physical cores of `topology` with at least one thread in
/// `cpus`; at least 1. CPUs of `cpus` that belong to no known core (a
/// topology without core data) count one each.
constexpr int recommended_threads(const Topology& topology, const CpuSet& cpus) {
  int n = 0;
  CpuSet covered;
  for (const Core& c : topology.cores) {
    if (c.threads.intersects(cpus)) {
      ++n;
      covered |= c.threads;
    }
  }
  n += (cpus - covered).count();
  return n < 1 ? 1 : n;
}

}  // namespace v0
}  // namespace gpuaff
