#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds what users install, offline, from Debian's packages, into dist/:
#   dist/gpuaff                    the tool as one static file: no dynamic library
#                                  at all, so it runs in any Linux x86-64 image,
#                                  FROM scratch included (docs/deployments.md)
#   dist/gpuaff-V-cp3X-cp3X-linux_x86_64.whl
#                                  the Python module, with the static tool as the
#                                  `gpuaff` command (and `python3 -m gpuaff`) and
#                                  a few fixtures (gpuaff/fixtures/)
#   dist/gpuaff_V-1_ARCH.deb       the tool (the same static file), man page, bash
#                                  completion, headers, CMake package, pkg-config file,
#                                  the docs (/usr/share/doc/gpuaff) and a few fixtures
#                                  (/usr/share/gpuaff/fixtures), where the man page says
#   dist/gpuaff-hwloc_V-1_ARCH.deb gpuaff-hwloc (needs libhwloc)
#   dist/gpuaff-slurm_V-1_ARCH.deb the Slurm SPANK plugin, where slurm/spank.h is
#                                  (Debian: libslurm-dev), for that Slurm release
# Usage: bash tools/package.sh     (tests/packaging_test.sh installs and runs each)
# Environment: PYTHON, the interpreter the wheel is for (default /usr/bin/python3,
# which has Debian's setuptools and pybind11).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-/usr/bin/python3}
jobs=${JOBS:-$(nproc)}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# Release builds with warnings as errors; each target's sources compiled as one unit.
common=(-DCMAKE_BUILD_TYPE=Release -DGPUAFF_WERROR=ON -DGPUAFF_BUILD_TESTS=OFF -DGPUAFF_BUILD_EXAMPLES=OFF -DGPUAFF_UNPACK_FIXTURES=OFF
  -DGPUAFF_BUILD_PYTHON=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)
quiet() {  # runs a command, shows its output only when it fails
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then cat "$log" >&2; rm -f "$log"; echo "package.sh: failed: $*" >&2; exit 1; fi
  rm -f "$log"
}

rm -rf dist
mkdir -p dist

# The wheel's module compiles while the tool builds: each is one long
# translation unit, and the tool's build leaves a CPU idle for a minute.
# setuptools writes build/ and *.egg-info beside setup.py, so the wheel is
# built from a copy of the tree; pip wheel (below) finds the module built.
tree=build/package-wheel
rm -rf "$tree"
mkdir -p "$tree"
cp -r include python LICENSE "$tree/"  # python/LICENSE is a link to ../LICENSE
rm -rf "$tree/python/build" "$tree"/python/*.egg-info
(cd "$tree/python" && "$python" setup.py build_ext) >"$tree.log" 2>&1 &
module=$!
trap 'wait "$module" 2>/dev/null || true' EXIT  # a failed step leaves no compile running behind it

# One build: `gpuaff` static (GPUAFF_STATIC_TOOLS), `gpuaff-hwloc` dynamic (hwloc
# is a shared library only), the man page and completion; installed under /usr.
echo "== the static tool: dist/gpuaff"
quiet cmake -S . -B build/package "${gen[@]}" "${common[@]}" -DGPUAFF_STATIC_TOOLS=ON -DCMAKE_INSTALL_PREFIX=/usr
quiet cmake --build build/package -j "$jobs"
strip -o dist/gpuaff build/package/tools/gpuaff/gpuaff
if ldd dist/gpuaff >/dev/null 2>&1; then echo "package.sh: dist/gpuaff is not static" >&2; exit 1; fi

echo "== the Debian packages: dist/*.deb"
rm -rf build/package/cpack
quiet cpack --config build/package/CPackConfig.cmake -G DEB -B "$PWD/build/package/cpack"
cp build/package/cpack/*.deb dist/

echo "== the wheel: dist/*.whl"
if ! wait "$module"; then cat "$tree.log" >&2; echo "package.sh: the wheel's module did not build" >&2; exit 1; fi
trap - EXIT
# The fixtures the .deb installs (tools/gpuaff/CMakeLists.txt lists them), inside
# the package: gpuaff topo --root "$(dirname "$(python3 -c 'import gpuaff; print(gpuaff.__file__)')")/fixtures/dgx-h100.tar.xz"
rm -rf build/package/doc-install
quiet cmake --install build/package --component doc --prefix "$PWD/build/package/doc-install"
cp -r build/package/doc-install/share/gpuaff/fixtures "$tree/python/gpuaff/fixtures"
GPUAFF_CLI=$PWD/dist/gpuaff quiet "$python" -m pip wheel --no-build-isolation --no-index --no-deps -w dist "$tree/python"

ls -l dist
