#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up a fresh Debian 12 machine for gpuaff, builds the CLI, and runs the
# main job: the topology report with every policy's binding of every GPU, for
# this machine, then for a bundled fixture (a DGX H100 by default). It also
# builds the Python module and makes `import gpuaff` work in the Python it was
# built for (a .pth file in that Python's user site directory; docs/python.md),
# links gpuaff into ~/.local/bin and ends with the next steps.
#   bash tools/quickstart.sh [FIXTURE]     e.g. build/quickstart/fixtures/p4d.24xlarge (CMake unpacks
#                                          fixtures/*.tar.xz there); run as root, or as a user
#                                          with sudo, when packages are missing
set -euo pipefail
cd "$(dirname "$0")/.."
fixture=${1:-build/quickstart/fixtures/dgx-h100}
packages=(build-essential cmake ninja-build pkg-config doctest-dev nlohmann-json3-dev libhwloc-dev
  python3-dev pybind11-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
  echo "installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Build output is shown only when a step fails.
quiet() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then cat "$log" >&2; rm -f "$log"; echo "quickstart: failed: $*" >&2; exit 1; fi
  rm -f "$log"
}
echo "building the tool and the Python module into build/quickstart (a few minutes)"
quiet cmake -S . -B build/quickstart -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUAFF_BUILD_TESTS=OFF -DGPUAFF_BUILD_EXAMPLES=OFF
quiet cmake --build build/quickstart --target gpuaff_cli gpuaff_python
gpuaff=$PWD/build/quickstart/tools/gpuaff/gpuaff

# `import gpuaff` from the build tree: the interpreter CMake built the module for.
python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' build/quickstart/CMakeCache.txt)
site=$("$python" -m site --user-site)
mkdir -p "$site"
echo "$PWD/build/quickstart/python" >"$site/gpuaff-build.pth"

echo; echo "=== this machine: gpuaff topo ==="
"$gpuaff" topo
echo; echo "=== a bundled fixture: gpuaff topo --root $fixture ==="
"$gpuaff" topo --root "$fixture"

# gpuaff on PATH: a link in ~/.local/bin, which Debian's login shells put on PATH when it exists.
mkdir -p "$HOME/.local/bin"
ln -sf "$gpuaff" "$HOME/.local/bin/gpuaff"
echo
echo "=== done ==="
echo "gpuaff:        $gpuaff"
echo "               linked as ~/.local/bin/gpuaff$(command -v gpuaff >/dev/null || printf '%s' "; not on PATH in this shell: export PATH=\"\$HOME/.local/bin:\$PATH\"")"
echo "Python module: $("$python" -c 'import gpuaff; print(gpuaff.__file__)') (import gpuaff in $python)"
echo
echo "Next:"
echo "  1. run a job bound:    gpuaff exec --gpu 0 --policy exclusive -- python3 train.py"
echo "     under torchrun:     torchrun --nproc-per-node 8 --no-python gpuaff exec --local-rank -- python3 train.py"
echo "                         (Debian's torch 1.13: --nproc_per_node 8 --no_python --redirects 1 --tee 1)"
echo "  2. your launcher:      docs/deployments.md (Slurm, mpirun, Kubernetes, Docker, Ray)"
echo "  3. install elsewhere:  bash tools/package.sh  (static binary, wheel, .deb in dist/; README)"
