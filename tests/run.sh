#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The full test suite: every build configuration CI checks, one after another,
# warnings as errors in each.
#   1. Clang with AddressSanitizer + UndefinedBehaviorSanitizer: every unit test
#      (doctest), the tool's tests, every public header compiled alone
#   2. GCC at -O1: the tool, the Python module, the examples and the benchmark as
#      users build them; the examples' runs, the launchers (torchrun, mpirun),
#      QEMU guests, Python tests
#   3. ThreadSanitizer: the tests labelled `threads`; configured without hwloc, so
#      the optional backend is also checked off
#   4. install, then build a consumer project with find_package(gpuaff), with GCC
#      (-O3 -flto) and Clang under -Wconversion -Wsign-conversion -Wshadow -Werror
#   5. tools/package.sh (static tool, wheel, .deb), then each installed as users do:
#      the static tool alone in an empty root, the wheel in a bare venv, the .deb
#      with apt (as root) and removed (tests/packaging/packaging_test.sh)
# Usage: tests/run.sh [quick]   (quick: one GCC build of everything, all its tests)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# Each configure, build and test run prints its wall time and the CPU time
# (user + system) of what it ran: with other work on the machine, the CPU time
# is the figure that compares.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
cpu_now() {  # cpu: user + system seconds of the finished child processes
  times >"$times_file"  # here, not in $(...): a subshell would count its own children
  cpu=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); n += t[1] * 60 + t[2] } printf "%.0f", n }' \
    "$times_file")
}
timed() {  # label, command...
  local label=$1 start=$SECONDS cpu0
  shift
  cpu_now; cpu0=$cpu
  "$@"
  cpu_now
  printf -- '--- %s: %ss wall, %ss CPU\n' "$label" "$((SECONDS - start))" "$((cpu - cpu0))"
}
quiet() { "$@" >/dev/null; }
step() { printf '\n=== %s ===\n' "$*"; }

# Compile time is most of CI's time, and most of a translation unit's is the
# header-only library's code, compiled again in every unit that uses it. So the
# tests of a folder that build alike are one unit (GPUAFF_TEST_GROUPS, on by
# default: tests/CMakeLists.txt), and every other target's sources are one unit
# too (CMake's unity build: the tool's files, the Python module's), which their
# sources allow.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0)

# One folder of fixture roots for every build tree (GPUAFF_FIXTURES_DIR): the
# first configure unpacks and checks the archives, the later ones find them
# current. No test writes into a fixture (a test that changes one works on a copy).
fixtures=(-DGPUAFF_FIXTURES_DIR="$PWD/build/fixtures")

configure_build_test() {  # dir, build targets..., -- ctest args..., -- cmake args...
  local dir=$1; shift
  local targets=() ctest_args=()
  while [[ $# -gt 0 && $1 != -- ]]; do targets+=(--target "$1"); shift; done
  shift || true
  while [[ $# -gt 0 && $1 != -- ]]; do ctest_args+=("$1"); shift; done
  shift || true
  timed configure quiet cmake -S . -B "$dir" "${gen[@]}" -DGPUAFF_WERROR=ON "${unity[@]}" "${fixtures[@]}" "$@"
  timed build cmake --build "$dir" -j "$jobs" "${targets[@]}"
  timed test ctest --test-dir "$dir" --no-tests=error --output-on-failure -j "$jobs" "${ctest_args[@]}"
}

# quick: one GCC build with everything (unit tests, the tool, Python, examples), all its tests.
if [[ ${1:-} == quick ]]; then
  step "quick: default build, all tests"
  configure_build_test build/default all -- -- \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 \
    -DGPUAFF_BUILD_BENCHMARKS=ON -DGPUAFF_BUILD_PYTHON=ON -DGPUAFF_BUILD_UNIT_TESTS=ON
  exit 0
fi

step "1/5 Clang, ASan + UBSan: every unit test, the tool's tests, each public header alone (hwloc if present)"
# -O0 -g1: the sanitizer build compiles fastest unoptimised and still reports file
# and line; Clang compiles it in half GCC's time, and a second compiler's warnings
# (-Werror) come with it. Step 2 runs the launchers, QEMU and Python with the plain build.
# The SPANK plugin is left to step 2: only slurmd loads it (label integration);
# so are the examples, which step 2 builds as users do and runs (the trainer's
# test included: the library's parts it uses, the spawn and the guard, are
# unit-tested here).
configure_build_test build/asan all all_verify_interface_header_sets -- -LE 'qemu|bench|integration' -- \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" \
  -DGPUAFF_SANITIZE=address,undefined -DGPUAFF_TEST_STATIC_TWINS=OFF -DGPUAFF_BUILD_ABLATION_TEST=OFF \
  -DGPUAFF_BUILD_SPANK=OFF -DGPUAFF_BUILD_EXAMPLES=OFF

step "2/5 GCC, -O1: the tool, Python module, examples, benchmarks; the examples' runs, launchers, QEMU guests, Python, the reader's ablation"
# -O1 with assertions on and without debug info (which doubles compile time here);
# benchmarks/run.sh builds its own optimised tree for figures. The unit tests ran
# in step 1 (GPUAFF_BUILD_UNIT_TESTS=OFF), but for the ablation test of the reader
# (tests/ablation: about 670,000 runs over every fixture, the trees held in
# memory), which runs here. The tool is static, as shipped, so the
# QEMU guests use it as it is. The test labelled pip (pip install of the source
# tree into a venv) is left to step 5, which builds the wheel the same way and
# installs it.
configure_build_test build/default all -- -LE pip -- \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 \
  -DGPUAFF_BUILD_BENCHMARKS=ON -DGPUAFF_BUILD_PYTHON=ON -DGPUAFF_BUILD_UNIT_TESTS=OFF -DGPUAFF_STATIC_TOOLS=ON

step "3/5 TSan, threaded tests; configured without hwloc (the optional backend off)"
# TSan's shadow memory needs a fixed layout: kernels with vm.mmap_rnd_bits=32 break it
# ("unexpected memory mapping"), so run without address-space randomisation where we may.
ctest_prefix=(env)
if setarch "$(uname -m)" -R true 2>/dev/null; then ctest_prefix=(setarch "$(uname -m)" -R); fi
# Build only the threaded tests: one executable per test (GPUAFF_TEST_GROUPS=OFF),
# so that a test's target, which has the test's name, is the executable it runs.
timed configure quiet cmake -S . -B build/tsan "${gen[@]}" "${fixtures[@]}" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
  -DGPUAFF_WERROR=ON -DGPUAFF_SANITIZE=thread -DGPUAFF_WITH_HWLOC=OFF -DGPUAFF_BUILD_EXAMPLES=OFF -DGPUAFF_TEST_GROUPS=OFF
mapfile -t tsan_tests < <(ctest --test-dir build/tsan -N -L threads | sed -n 's/^ *Test *#[0-9]*: *//p')
((${#tsan_tests[@]})) || { echo "no tests labelled threads" >&2; exit 1; }
timed build cmake --build build/tsan -j "$jobs" --target "${tsan_tests[@]}"
timed test "${ctest_prefix[@]}" ctest --test-dir build/tsan --no-tests=error --output-on-failure -j "$jobs" -L threads

step "4/5 install; consumers with find_package(gpuaff) under users' strictest warnings"
# A header-only library is compiled with its users' flags: GCC at -O3 -flto and
# Clang, each with every warning below and -Werror, build tests/consumer, whose
# consumer_api reaches most of the library. Its exclusive bindings on the bundled
# DGX H100 are PyTorch's: 56 cores per socket node, four GPUs per node, 14 cores
# each with their hyperthread siblings (CPU + 112).
rm -rf build/prefix build/consumer-*
timed install quiet cmake --install build/default --prefix "$PWD/build/prefix"
strict="-Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Werror"
expected="exclusive: 0-13,112-125 14-27,126-139 28-41,140-153 42-55,154-167 56-69,168-181 70-83,182-195 84-97,196-209 98-111,210-223"
consumer() {  # "compiler flags": configure, build and run tests/consumer with them
  local cxx=$1 dir=build/consumer-${1%% *}
  cmake -S tests/consumer -B "$dir" "${gen[@]}" -DCMAKE_PREFIX_PATH="$PWD/build/prefix" \
    -DCMAKE_CXX_COMPILER="${cxx%% *}" "-DCMAKE_CXX_FLAGS=$strict ${cxx#* }" >/dev/null
  cmake --build "$dir"
  "$dir/consumer"
  "$dir/consumer_api" build/fixtures/dgx-h100 | grep -qxF "$expected" ||
    { echo "consumer_api ($cxx): the exclusive bindings on dgx-h100 are not PyTorch's" >&2; return 1; }
}
consumers() {  # both compilers side by side (each build is two files): one log each, shown when it fails
  local cxx pids=() logs=() i failed=0
  for cxx in "g++ -O3 -flto=auto" "clang++ -O1"; do
    logs+=("build/consumer-${cxx%% *}.log")
    consumer "$cxx" >"${logs[-1]}" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "${logs[$i]}" >&2; failed=1; }
  done
  return "$failed"
}
timed "consumers (g++ -O3 -flto, clang++ -O1)" consumers
step "5/5 packages: the static tool, the wheel, the .deb files (tools/package.sh), each installed and run"
timed package bash tools/package.sh
timed installs bash tests/packaging/packaging_test.sh build/fixtures

cpu_now
echo "all test configurations passed: ${SECONDS}s wall, ${cpu}s CPU"
