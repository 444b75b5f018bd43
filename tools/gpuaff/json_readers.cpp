// SPDX-License-Identifier: Apache-2.0
// The JSON readers (a topology file, the DRA metadata) that both binaries
// carry, compiled once for gpuaff and gpuaff-hwloc (readers.hpp).
#include "readers.hpp"

#include "gpuaff/source/json_dra.hpp"
#include "gpuaff/source/json.hpp"
#include "gpuaff/source/load.hpp"

namespace gpuaff::cli {

Readers cli_readers() {
  Readers readers{.json = &read_json_topology, .dra = &read_dra_metadata};
  plug_binary_readers(readers);
  return readers;
}

}  // namespace gpuaff::cli
