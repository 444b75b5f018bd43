// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one place the version lives; CMakeLists.txt parses these three lines.

#include "gpuaff/config.hpp"

#define GPUAFF_VERSION_MAJOR 0
#define GPUAFF_VERSION_MINOR 1
#define GPUAFF_VERSION_PATCH 0

#define GPUAFF_VERSION_STRING "0.1.0"

namespace gpuaff {
inline namespace v0 {
inline constexpr int version_major = GPUAFF_VERSION_MAJOR;
inline constexpr int version_minor = GPUAFF_VERSION_MINOR;
inline constexpr int version_patch = GPUAFF_VERSION_PATCH;
inline constexpr const char* version_string = GPUAFF_VERSION_STRING;
}  // namespace v0
}  // namespace gpuaff
