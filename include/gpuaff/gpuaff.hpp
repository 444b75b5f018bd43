// SPDX-License-Identifier: Apache-2.0
#pragma once
// The umbrella header: everything in gpuaff that has no dependency beyond
// the C++ standard library and Linux. The JSON source (nlohmann_json) and the
// hwloc source are opt-in headers: gpuaff/source/json.hpp, gpuaff/source/hwloc.hpp.

#include "gpuaff/config.hpp"
#include "gpuaff/version.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/topology.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "gpuaff/policy/policy.hpp"
#include "gpuaff/apply/apply.hpp"
