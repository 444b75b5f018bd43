#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for gpuaff, builds the CLI, and runs the
# main job: the topology report and every GPU's bindings for this machine,
# then the same for a bundled fixture (a DGX H100 by default). It also builds
# the Python module and makes `import gpuaff` work in the Python it was built
# for (a .pth file in that Python's user site directory; docs/python.md).
#   bash tools/quickstart.sh [FIXTURE]     e.g. build/quickstart/fixtures/p4d.24xlarge (CMake unpacks
#                                          fixtures/*.tar.xz there); run as root, or as a user
#                                          with sudo, when packages are missing
set -euo pipefail
cd "$(dirname "$0")/.."
fixture=${1:-build/quickstart/fixtures/dgx-h100}
packages=(build-essential cmake ninja-build pkg-config doctest-dev nlohmann-json3-dev libcli11-dev libhwloc-dev
  python3-dev pybind11-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
  echo "installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cmake -S . -B build/quickstart -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUAFF_BUILD_TESTS=OFF -DGPUAFF_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/quickstart --target gpuaff_cli gpuaff_python
gpuaff=build/quickstart/tools/gpuaff/gpuaff

# `import gpuaff` from the build tree: the interpreter CMake built the module for.
python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' build/quickstart/CMakeCache.txt)
site=$("$python" -m site --user-site)
mkdir -p "$site"
echo "$PWD/build/quickstart/python" >"$site/gpuaff-build.pth"
"$python" -c 'import gpuaff; print("Python:", gpuaff.__file__, gpuaff.__version__)'

show() {  # root-args...
  "$gpuaff" topo "$@"
  local n
  n=$("$gpuaff" topo "$@" --format json | { grep -o '"index"' || true; } | wc -l)
  for ((g = 0; g < n; g++)); do
    for p in node socket exclusive core-complex unique-contiguous; do
      printf 'GPU %d %-18s ' "$g" "$p"
      "$gpuaff" bind "$@" --gpu "$g" --policy "$p" --format numactl || true
    done
  done
}

echo; echo "=== this machine ==="
show
echo; echo "=== bundled fixture: $fixture ==="
show --root "$fixture"
