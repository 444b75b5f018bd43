#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every public header compiles alone: CMake's VERIFY_INTERFACE_HEADER_SETS,
# one translation unit per header of gpuaff, gpuaff::json and gpuaff::hwloc,
# in a build tree of its own where nothing else is built (tests/run.sh runs it
# beside its steps, at the lowest priority).
# Usage: tests/headers.sh [BUILD_DIR]   (default: build/headers)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/headers}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cxx=()
command -v clang++ >/dev/null && cxx=(-DCMAKE_CXX_COMPILER=clang++)
# -O0 without debug information: the check is that each header compiles.
cmake -S . -B "$dir" "${gen[@]}" "${cxx[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DGPUAFF_BUILD_TESTS=OFF -DGPUAFF_BUILD_TOOLS=OFF -DGPUAFF_BUILD_EXAMPLES=OFF -DGPUAFF_BUILD_PYTHON=OFF \
  -DGPUAFF_BUILD_SPANK=OFF >/dev/null
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target all_verify_interface_header_sets
echo "headers.sh: every public header compiles alone"
