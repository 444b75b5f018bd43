#!/usr/bin/env bash
# The full test suite: every build configuration CI checks, one after another.
#   1. default build, warnings as errors, every public header compiled alone, all tests
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build without hwloc (so it is also the
#      "optional backend off" configuration), all tests but the QEMU guests and benchmarks
#   3. ThreadSanitizer build, the tests labelled `threads`
#   4. install, then build a consumer project with find_package(gpuaff)
# Usage: tests/run.sh [quick]   (quick: configuration 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
step() { printf '\n=== %s ===\n' "$*"; }

configure_build_test() {  # dir, ctest args..., -- cmake args...
  local dir=$1; shift
  local ctest_args=()
  while [[ $# -gt 0 && $1 != -- ]]; do ctest_args+=("$1"); shift; done
  shift || true
  cmake -S . -B "$dir" "${gen[@]}" -DGPUAFF_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  ctest --test-dir "$dir" --no-tests=error --output-on-failure -j "$jobs" "${ctest_args[@]}"
}

step "1/4 default build (hwloc if present; the Python module, required), all tests"
# -O1 with assertions on and without debug info (which doubles compile time here);
# benchmarks/run.sh builds its own optimised tree for figures.
configure_build_test build/default -- -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 \
  -DGPUAFF_BUILD_BENCHMARKS=ON -DGPUAFF_BUILD_PYTHON=ON
cmake --build build/default --target all_verify_interface_header_sets -j "$jobs"
[[ ${1:-} == quick ]] && exit 0

step "2/4 ASan + UBSan, without hwloc"
# -O0 -g1: the sanitizer build compiles fastest unoptimised and still reports file and line.
configure_build_test build/asan -LE 'qemu|bench' -- -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" \
  -DGPUAFF_SANITIZE=address,undefined \
  -DGPUAFF_WITH_HWLOC=OFF \
  -DGPUAFF_TEST_STATIC_TWINS=OFF

step "3/4 TSan, threaded tests"
# TSan's shadow memory needs a fixed layout: kernels with vm.mmap_rnd_bits=32 break it
# ("unexpected memory mapping"), so run without address-space randomisation where we may.
ctest_prefix=(env)
if setarch "$(uname -m)" -R true 2>/dev/null; then ctest_prefix=(setarch "$(uname -m)" -R); fi
# Build only the threaded tests (a test's target has the test's name).
cmake -S . -B build/tsan "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DGPUAFF_WERROR=ON -DGPUAFF_SANITIZE=thread \
  -DGPUAFF_BUILD_TOOLS=OFF -DGPUAFF_BUILD_EXAMPLES=OFF >/dev/null
mapfile -t tsan_tests < <(ctest --test-dir build/tsan -N -L threads | sed -n 's/^ *Test *#[0-9]*: *//p')
((${#tsan_tests[@]})) || { echo "no tests labelled threads" >&2; exit 1; }
cmake --build build/tsan -j "$jobs" --target "${tsan_tests[@]}"
"${ctest_prefix[@]}" ctest --test-dir build/tsan --no-tests=error --output-on-failure -j "$jobs" -L threads

step "4/4 install + find_package consumer"
rm -rf build/prefix build/consumer
cmake --install build/default --prefix "$PWD/build/prefix" >/dev/null
cmake -S tests/consumer -B build/consumer "${gen[@]}" -DCMAKE_PREFIX_PATH="$PWD/build/prefix" >/dev/null
cmake --build build/consumer
build/consumer/consumer
echo "all test configurations passed"
