// SPDX-License-Identifier: Apache-2.0
#pragma once
// The light header, for code that only computes bindings: Result, CpuSet,
// Topology and every policy, with no file reading and no system call to
// apply them (those are in the umbrella header, gpuaff/gpuaff.hpp). A
// Topology can come from the umbrella's readers in another translation unit,
// or be written as a value, as the tests and constexpr users do.

#include "gpuaff/config.hpp"
#include "gpuaff/version.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/topology.hpp"
#include "gpuaff/policy/policy.hpp"
