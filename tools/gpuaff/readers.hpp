// SPDX-License-Identifier: Apache-2.0
// The readers of the two binaries. gpuaff (no_hwloc.cpp) and gpuaff-hwloc
// (hwloc_reader.cpp) differ in one file each; the JSON readers both carry are
// compiled once (json_readers.cpp: nlohmann_json's templates are most of a
// reader's compile time), and this header declares without including the
// library, so that no_hwloc.cpp compiles in a moment.
#pragma once

#include <string_view>

namespace gpuaff {
inline namespace v0 {
struct Readers;  // source/load.hpp
}  // namespace v0
}  // namespace gpuaff

namespace gpuaff::cli {

/// The readers this binary has: JSON always (json_readers.cpp), hwloc in
/// gpuaff-hwloc only (plug_binary_readers).
Readers cli_readers();
/// Adds this binary's own readers: hwloc in gpuaff-hwloc (hwloc_reader.cpp),
/// none in gpuaff (no_hwloc.cpp).
void plug_binary_readers(Readers& readers);
/// "gpuaff", or "gpuaff-hwloc" for the binary linked with hwloc: what --version says.
std::string_view program_name();

}  // namespace gpuaff::cli
