// SPDX-License-Identifier: Apache-2.0
// gpuaff-hwloc's readers: JSON and hwloc (source=hwloc, hwloc_xml; docs/hwloc.md).
// Linked into gpuaff-hwloc only, so that gpuaff itself loads no libhwloc.
#include "commands.hpp"
#include "gpuaff/source/hwloc.hpp"
#include "gpuaff/source/json_dra.hpp"
#include "gpuaff/source/json.hpp"

namespace gpuaff::cli {

Readers cli_readers() { return Readers{.json = &read_json_topology, .hwloc = &read_hwloc_topology, .dra = &read_dra_metadata}; }
std::string_view program_name() { return "gpuaff-hwloc"; }

}  // namespace gpuaff::cli
