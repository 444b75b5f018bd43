// SPDX-License-Identifier: Apache-2.0
// gpuaff's readers: JSON, and no hwloc. gpuaff does not load libhwloc (nor the
// libudev that comes with it) on any run; gpuaff-hwloc, the same CLI linked
// with hwloc, reads through it (hwloc_reader.cpp, docs/hwloc.md), and the
// front door answers source=hwloc here with an error naming gpuaff-hwloc.
#include "commands.hpp"
#include "gpuaff/source/json_dra.hpp"
#include "gpuaff/source/json.hpp"

namespace gpuaff::cli {

Readers cli_readers() { return Readers{.json = &read_json_topology, .dra = &read_dra_metadata}; }
std::string_view program_name() { return "gpuaff"; }

}  // namespace gpuaff::cli
