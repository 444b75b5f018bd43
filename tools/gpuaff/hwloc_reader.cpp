// SPDX-License-Identifier: Apache-2.0
// gpuaff-hwloc's readers: JSON (json_readers.cpp) and hwloc (source=hwloc,
// hwloc_xml; docs/hwloc.md). Linked into gpuaff-hwloc only, so that gpuaff
// itself loads no libhwloc.
#include "readers.hpp"

#include "gpuaff/source/hwloc.hpp"
#include "gpuaff/source/load.hpp"

namespace gpuaff::cli {

void plug_binary_readers(Readers& readers) { readers.hwloc = &read_hwloc_topology; }
std::string_view program_name() { return "gpuaff-hwloc"; }

}  // namespace gpuaff::cli
