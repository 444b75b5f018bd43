#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the fuzzers for a set time each and reports executions and findings.
# Not part of CI. Usage: tools/fuzz.sh [SECONDS_PER_FUZZER] [FUZZER...]
#
# With clang and libFuzzer (clang's compiler-rt, e.g. libclang-rt-14-dev) it
# builds tests/fuzz/fuzz_target.cpp with -fsanitize=fuzzer,address,undefined
# in build/fuzz and runs it once per entry of tests/fuzz/fuzz_entry.hpp
# (GPUAFF_FUZZ_SELECT), each seeded with the matching inputs of
# tests/fuzz/corpus. An input that breaks an invariant (an abort) or that a
# sanitizer catches is a finding: libFuzzer stops that fuzzer and writes the
# input to build/fuzz/findings/NAME/; add it to tests/fuzz/corpus (first byte:
# the selector) once fixed. Without libFuzzer it replays the corpus only
# (fuzz_replay), which fuzzes nothing, and says so. FUZZ_TIMEOUT (seconds,
# default 30) is how long one input may run before it is a finding (a hang).
set -euo pipefail

seconds=${1:-60}
shift || true
case "$seconds" in
  '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2 ;;
esac
if [ "$seconds" -eq 0 ]; then echo "fuzz.sh: SECONDS must be at least 1" >&2; exit 2; fi

src=$(cd "$(dirname "$0")/.." && pwd)
build="$src/build/fuzz"
jobs=${FUZZ_BUILD_JOBS:-2}
# One input may take this long (libFuzzer's -timeout) before it is a finding.
# It catches hangs and superlinear blowups (a root naming CPUs 0-7000 once
# took a minute); a root of thousands of CPUs legitimately takes several
# seconds under the sanitizers, and more at nice 19 on a shared machine,
# where 10 s gave false findings. libFuzzer's "slow unit" report (10 s by
# default, a file in findings/ that this script counts) waits as long.
timeout=${FUZZ_TIMEOUT:-30}

# name, selector (the first byte fuzz_entry.hpp dispatches on)
fuzzers=("list 0" "mask 1" "pci 2" "tree 3" "visible 4" "numamaps 208" "tar 224" "record 240" "json 241")
if [ "$#" -gt 0 ]; then
  chosen=()
  for want in "$@"; do
    found=""
    for f in "${fuzzers[@]}"; do [ "${f%% *}" = "$want" ] && found="$f"; done
    if [ -z "$found" ]; then
      echo "fuzz.sh: unknown fuzzer '$want'; choose from: list mask pci tree visible tar record json" >&2
      exit 2
    fi
    chosen+=("$found")
  done
  fuzzers=("${chosen[@]}")
fi

cxx=$(command -v clang++ || true)
have_libfuzzer=no
if [ -n "$cxx" ]; then
  probe=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }\n' > "$probe/p.cpp"
  if "$cxx" -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then have_libfuzzer=yes; fi
  rm -rf "$probe"
fi

if [ "$have_libfuzzer" = no ]; then
  echo "fuzz.sh: no clang with libFuzzer here; replaying tests/fuzz/corpus only (no fuzzing)"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$jobs" --target fuzz_replay
  ctest --test-dir "$build" -R '^fuzz_replay$' --output-on-failure
  exit $?
fi

cmake -S "$src" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGPUAFF_BUILD_FUZZERS=ON -DGPUAFF_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target gpuaff_fuzzer
fuzzer="$build/tests/fuzz/gpuaff_fuzzer"

# The corpus inputs of one selector, without their first byte.
seed_corpus() {  # selector dir
  python3 - "$src/tests/fuzz/corpus" "$1" "$2" <<'PY'
import os, sys
src, sel, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)
for name in sorted(os.listdir(src)):
    data = open(os.path.join(src, name), "rb").read()
    if not data:
        continue
    first = data[0]
    # The ranges of fuzz_entry.hpp: 0xf0 and above by parity, 0xe0..0xef the
    # tar reader, 0xd0..0xdf numa_maps, below that the first byte modulo 5.
    if first >= 0xf0 or sel >= 0xf0:
        picks = first >= 0xf0 and sel >= 0xf0 and (first & 1) == (sel & 1)
    elif first >= 0xe0 or sel >= 0xe0:
        picks = first >= 0xe0 and sel >= 0xe0
    elif first >= 0xd0 or sel >= 0xd0:
        picks = first >= 0xd0 and sel >= 0xd0
    else:
        picks = first % 5 == sel
    if picks:
        open(os.path.join(out, name), "wb").write(data[1:])
PY
}

printf '%-8s %8s %12s %10s %9s  %s\n' fuzzer seconds executions exec/s findings status
failed=0
for f in "${fuzzers[@]}"; do
  name=${f%% *}
  sel=${f##* }
  work="$build/run/$name"
  findings="$build/findings/$name"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$findings"
  seed_corpus "$sel" "$work/corpus"
  before=$(find "$findings" -type f | wc -l)
  set +e
  GPUAFF_FUZZ_SELECT=$sel "$fuzzer" -max_total_time="$seconds" -timeout="$timeout" -report_slow_units="$timeout" -rss_limit_mb=4096 \
    -artifact_prefix="$findings/" -print_final_stats=1 "$work/corpus" >"$work/log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  after=$(find "$findings" -type f | wc -l)
  new=$((after - before))
  status="ok"
  if [ "$rc" -ne 0 ] || [ "$new" -ne 0 ]; then
    status="FINDING (rc $rc): see $work/log and $findings"
    failed=1
  fi
  printf '%-8s %8s %12s %10s %9s  %s\n' "$name" "$seconds" "${runs:-?}" "${rate:-?}" "$new" "$status"
done
exit $failed
