// SPDX-License-Identifier: Apache-2.0
#pragma once
// The apply layer: putting a CpuSet (and a NUMA memory policy) onto threads
// and child processes. Everything else in gpuaff is pure; the system calls
// live here. See docs/binding.md for when and how to bind.
//
//   affinity.hpp         thread_affinity(), set_thread_affinity()
//   mempolicy.hpp        MemPolicy, MemoryOptions, memory_policy(), set_memory_policy()
//   scoped_affinity.hpp  ScopedAffinity: bind a scope, restore on exit
//   process.hpp          bind_process(), Rebinder: every thread of the process
//   spawn.hpp            spawn(), spawn_callable(), Child::wait(): bound children
//   threads.hpp          recommended_threads(): worker count for a binding

#include "gpuaff/config.hpp"  // first: the C++20 check

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/apply/process.hpp"
#include "gpuaff/apply/scoped_affinity.hpp"
#include "gpuaff/apply/spawn.hpp"
#include "gpuaff/topology.hpp"
