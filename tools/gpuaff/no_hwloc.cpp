// SPDX-License-Identifier: Apache-2.0
// gpuaff's readers: JSON (json_readers.cpp), and no hwloc. gpuaff does not load
// libhwloc (nor the libudev that comes with it) on any run; gpuaff-hwloc, the
// same CLI linked with hwloc, reads through it (hwloc_reader.cpp, docs/hwloc.md),
// and the front door answers source=hwloc here with an error naming gpuaff-hwloc.
#include "readers.hpp"

namespace gpuaff::cli {

void plug_binary_readers(Readers&) {}
std::string_view program_name() { return "gpuaff"; }

}  // namespace gpuaff::cli
