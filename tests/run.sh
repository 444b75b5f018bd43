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
# Each step ends with its wall time and the CPU time (user + system) of what it ran:
# with other work on the machine, the CPU time is the figure that compares.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
step_start=$SECONDS
step_cpu=0
cpu_now() {  # cpu: user + system seconds of the finished child processes
  times >"$times_file"  # here, not in $(...): a subshell would count its own children
  cpu=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); n += t[1] * 60 + t[2] } printf "%.0f", n }' \
    "$times_file")
}
step_done() {
  cpu_now
  printf -- '--- %ss wall, %ss CPU\n' "$((SECONDS - step_start))" "$((cpu - step_cpu))"
  step_start=$SECONDS step_cpu=$cpu
}
step() {
  if [[ -n ${step_name:-} ]]; then step_done; fi
  step_name=$*
  printf '\n=== %s ===\n' "$*"
}

# Compile time is most of CI's time, and most of a translation unit's is the
# header-only library's code, compiled again in every unit that uses it. So:
# each test folder's tests are one unit (GPUAFF_TEST_GROUPS, tests/CMakeLists.txt),
# and every other target's sources are one unit too (CMake's unity build: the
# tool's ten files, the Python module's four), which their sources allow.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)

configure_build_test() {  # dir, build targets..., -- ctest args..., -- cmake args...
  local dir=$1; shift
  local targets=() ctest_args=()
  while [[ $# -gt 0 && $1 != -- ]]; do targets+=(--target "$1"); shift; done
  shift || true
  while [[ $# -gt 0 && $1 != -- ]]; do ctest_args+=("$1"); shift; done
  shift || true
  cmake -S . -B "$dir" "${gen[@]}" -DGPUAFF_WERROR=ON "${unity[@]}" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
  ctest --test-dir "$dir" --no-tests=error --output-on-failure -j "$jobs" "${ctest_args[@]}"
}

step "1/4 default build (hwloc if present; the Python module, required), all tests"
# -O1 with assertions on and without debug info (which doubles compile time here);
# benchmarks/run.sh builds its own optimised tree for figures. The header checks
# build with everything else, so that they fill the build's idle slots.
configure_build_test build/default all all_verify_interface_header_sets -- -- \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 \
  -DGPUAFF_BUILD_BENCHMARKS=ON -DGPUAFF_BUILD_PYTHON=ON
[[ ${1:-} == quick ]] && { step_done; exit 0; }

step "2/4 ASan + UBSan, without hwloc"
# -O0 -g1: the sanitizer build compiles fastest unoptimised and still reports file and line.
# Tests labelled source_tree check the source tree alone, the same in every build;
# step 1 ran them.
configure_build_test build/asan all -- -LE 'qemu|bench|source_tree' -- \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" \
  -DGPUAFF_SANITIZE=address,undefined \
  -DGPUAFF_WITH_HWLOC=OFF \
  -DGPUAFF_TEST_STATIC_TWINS=OFF

step "3/4 TSan, threaded tests"
# TSan's shadow memory needs a fixed layout: kernels with vm.mmap_rnd_bits=32 break it
# ("unexpected memory mapping"), so run without address-space randomisation where we may.
ctest_prefix=(env)
if setarch "$(uname -m)" -R true 2>/dev/null; then ctest_prefix=(setarch "$(uname -m)" -R); fi
# Build only the threaded tests: one executable per test (GPUAFF_TEST_GROUPS=OFF),
# so that a test's target, which has the test's name, is the executable it runs.
cmake -S . -B build/tsan "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DGPUAFF_WERROR=ON -DGPUAFF_SANITIZE=thread \
  -DGPUAFF_BUILD_TOOLS=OFF -DGPUAFF_BUILD_EXAMPLES=OFF -DGPUAFF_TEST_GROUPS=OFF >/dev/null
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
step_done
echo "all test configurations passed in ${SECONDS}s wall, ${cpu}s CPU"
