#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs every gpuaff benchmark and prints one table (benchmarks/README.md
# explains each row).
#
#   benchmarks/run.sh [--quick] [--no-callgrind] [--rounds=N] [--compile-runs=N] [--startup]
#
#   --quick         a few rounds only: checks that everything runs (numbers meaningless)
#   --no-callgrind  skip the instruction counts (valgrind --tool=callgrind), the
#                   noise-free cross-check of rows 1 and 7
#   --rounds=N      interleaved samples per variant (default 31)
#   --compile-runs=N compilations of each test TU for row 6 (default 7)
#   --startup       rows P and S only (the Python module per call, whole processes)
#
# Build directory: build/bench (Release). Environment: CXX is the compiler used
# for row 6 when set, else the one CMake found.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
callgrind=1
rounds=31
compile_runs=7
startup_only=0
for a in "$@"; do
  case $a in
    --quick) quick=1; rounds=3; compile_runs=1; callgrind=0 ;;
    --no-callgrind) callgrind=0 ;;
    --rounds=*) rounds=${a#*=} ;;
    --compile-runs=*) compile_runs=${a#*=} ;;
    --startup) startup_only=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done

build=build/bench
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
echo "== building $build (Release) =="
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUAFF_BUILD_BENCHMARKS=ON >/dev/null
tus=$(mktemp -d)
trap 'rm -rf "$tus"' EXIT
cxx=${CXX:-$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")}
if ((!startup_only)); then
cmake --build "$build" --target gpuaff_bench
bench=$build/benchmarks/gpuaff_bench

# ---- row 6: compile time of a TU using gpuaff vs one using <vector> ------------------
# The compiler's own CPU time (user + system) is taken, not wall time: on a
# shared machine the wall time mostly measures the wait for a CPU. Each round
# compiles every TU once (every other round in the opposite order), so a
# burst of load lands on all of them; medians over the rounds. Beside this
# commit's headers, the same TUs against the headers of the third wave's last
# commit ($base_commit), read from git, so the change is measured in one loop.
base_commit=1b17af4b
tu() {  # tu NAME HEADER: a TU that includes HEADER and binds GPU 0 with NodePolicy
  printf '#include <%s>\ngpuaff::Result<gpuaff::CpuSet> bind_first_gpu(const gpuaff::Topology& t) {\n  return gpuaff::bind(t, 0, gpuaff::NodePolicy{});\n}\n' \
    "$2" >"$tus/$1.cpp"
}
tu umbrella gpuaff/gpuaff.hpp      # row 6: the umbrella
tu one gpuaff/policy/node.hpp      # row 6b: the light path, the one policy's header
tu light gpuaff/bindings.hpp       # row 6e: every policy (information)
printf '#include <vector>\nstd::vector<int> first_cpus(int n) {\n  std::vector<int> v;\n  for (int i = 0; i < n; ++i) v.push_back(i);\n  return v;\n}\n' \
  >"$tus/vector.cpp"
base_inc=""
if git cat-file -e "$base_commit^{commit}" 2>/dev/null; then
  base_inc=$tus/base
  mkdir "$base_inc"
  git archive "$base_commit" include | tar -x -C "$base_inc"
  base_inc=$base_inc/include
else
  echo "run.sh: row 6: commit $base_commit is not in this clone; the 'before' columns are left out" >&2
fi
cpu_seconds() {  # prints the user+system seconds of compiling $2 against include folder $1 (further arguments: extra flags)
  local TIMEFORMAT='%3U %3S'
  local t inc=$1 tu=$2
  shift 2
  t=$( { time "$cxx" -std=c++20 -O2 -I"$inc" "$@" -c "$tu" -o /dev/null >/dev/null 2>&1 || echo FAILED; } 2>&1 )
  if [[ $t == *FAILED* ]]; then  # a TU that does not compile would time its error, not the header
    echo "run.sh: row 6: $cxx cannot compile $(basename "$tu") against $inc:" >&2
    "$cxx" -std=c++20 -O2 -I"$inc" "$@" -c "$tu" -o /dev/null >&2 || true
    exit 1
  fi
  awk -v t="$t" 'BEGIN { split(t, a, " "); printf "%.3f\n", a[1] + a[2] }'
}
# Information rows 6c/6d: the same TUs with the gpuaff header precompiled, as
# CMake's target_precompile_headers(app PRIVATE <gpuaff/gpuaff.hpp>) does it:
# a header that includes it, compiled once with the TU's flags, then forced
# into the TU with -include (GCC finds NAME.gch beside it, clang NAME.pch).
pch_ext=gch
"$cxx" --version 2>/dev/null | grep -qi clang && pch_ext=pch
mkdir "$tus/pch"
pch_seconds=()
for h in gpuaff bindings; do
  echo "#include <gpuaff/$h.hpp>" >"$tus/pch/$h.hxx"
  t=$( { TIMEFORMAT='%3U %3S'; time "$cxx" -std=c++20 -O2 -Iinclude -x c++-header "$tus/pch/$h.hxx" \
           -o "$tus/pch/$h.hxx.$pch_ext"; } 2>&1 ) || { echo "run.sh: row 6: $cxx cannot precompile gpuaff/$h.hpp" >&2; exit 1; }
  pch_seconds+=("$(awk -v t="$t" 'BEGIN { split(t, a, " "); printf "%.2f", a[1] + a[2] }')")
done
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# One variant per entry: its name, the include folder, the TU, extra flags.
variants=("vector include vector" "umbrella include umbrella" "one include one" "light include light"
          "umbrella_pch include umbrella -Winvalid-pch -include $tus/pch/gpuaff.hxx"
          "light_pch include light -Winvalid-pch -include $tus/pch/bindings.hxx")
[[ -n $base_inc ]] && variants+=("base_umbrella $base_inc umbrella" "base_light $base_inc light")
declare -A times=()
echo "== row 6: compiling each test TU $compile_runs times, interleaved ($cxx -O2) =="
for ((i = 0; i < compile_runs; i++)); do
  order=("${variants[@]}")
  if ((i % 2)); then
    order=()
    for ((k = ${#variants[@]} - 1; k >= 0; k--)); do order+=("${variants[k]}"); done
  fi
  for v in "${order[@]}"; do
    read -r name inc file flags <<<"$v"
    # shellcheck disable=SC2086  # flags: separate words
    times[$name]+="$(cpu_seconds "$inc" "$tus/$file.cpp" $flags) "
  done
done
compile="n=$compile_runs"
[[ -n $base_inc ]] && compile+=",base=$base_commit"
for v in "${variants[@]}"; do
  read -r name _ <<<"$v"
  echo "   $name: ${times[$name]}s"
  # shellcheck disable=SC2086  # the times: separate words
  compile+=",$name=$(printf '%s\n' ${times[$name]} | median)"
done
echo "   precompiling (once per build): gpuaff.hpp ${pch_seconds[0]} s, bindings.hpp ${pch_seconds[1]} s"

# ---- callgrind: instruction counts of rows 1 and 7 ----------------------------------
instructions=""
if ((callgrind)) && command -v valgrind >/dev/null; then
  echo "== callgrind: instruction counts per fixture (user space only) =="
  cg=$(mktemp -d)
  for f in vm-2cpu p4d.24xlarge dgx-h100 dgx-a100 big-1152; do
    valgrind --tool=callgrind --callgrind-out-file="$cg/$f.%p" "$bench" --callgrind="$f" >/dev/null 2>&1 || {
      echo "   callgrind failed for $f (is the build without valgrind/callgrind.h?)"; continue; }
    count() { grep -l "Client Request: $1\$" "$cg/$f".*.* | head -1 | xargs sed -n 's/^totals: //p'; }
    full=$(count gpuaff-load-bind); pol=$(count policies); load=$(count gpuaff-load); hw=$(count hwloc-load || true)
    line=$(awk -v f="$f" -v full="$full" -v pol="$pol" -v load="$load" -v hw="$hw" 'BEGIN {
      s = sprintf("%s: load+bind %.2fM, hwloc load %s, policies %.2fM = %.1f%% of load %.2fM", f, full / 1e6,
                  hw == "" ? "-" : sprintf("%.2fM (%.1fx)", hw / 1e6, hw / full), pol / 1e6, 100 * pol / load, load / 1e6)
      print s }')
    echo "   $line"
    instructions+="${instructions:+; }$line"
  done
  rm -rf "$cg"
elif ((callgrind)); then
  echo "== callgrind: valgrind not installed, skipped =="
fi

# ---- the table ----------------------------------------------------------------------
echo "== measuring (rounds=$rounds) =="
args=(--rounds="$rounds" --compile="$compile")
((quick)) && args=(--quick --compile="$compile")
[[ -n $instructions ]] && args+=(--instructions="$instructions")
echo
"$bench" "${args[@]}"
fi

# ---- row P: the Python module, from `import gpuaff` to bound -----------------------
if cmake --build "$build" --target gpuaff_python >/dev/null 2>&1; then
  python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  echo
  echo "== row P: the Python module ($python) =="
  p_rounds=15
  ((quick)) && p_rounds=3
  "$python" benchmarks/python_bind.py "$build" --rounds="$p_rounds"
else
  echo "== row P: the Python module is not built here (pybind11 or Python's headers missing; docs/python.md), skipped =="
fi

# ---- row S: a whole gpuaff process, beside the floor of any process ---------------
# The floor is a static C program that does nothing (exec, map, exit). Beside it,
# in one hyperfine run (each command's runs in a block): the static tool (tools/package.sh builds it the same
# way) answering --version, and binding GPU 3 of the DGX H100 recording, the
# whole process: by index under node and exclusive, and by address (--pci, the
# input PyTorch has) under node. Each bind beside its I/O floor: a static C
# program that opens, reads and closes exactly the files that bind opens
# (listed with strace), parsing nothing; no reader of those files can start and
# finish faster. Targets: --version <= 1.2x the floor; each bind <= 1.3x its I/O
# floor; the I/O floor of node <= 1.6x the floor. Then the same commands again,
# interleaved (benchmarks/interleave.c: each once per round, so a VM's drift
# between hyperfine's blocks does not tilt a ratio), each bind beside its I/O floor.
# Every program timed is copied into one folder first, as an install copies it:
# on the VM measured, a binary as the linker wrote it started 8-18% slower than
# the same bytes copied with cp (gpuaff --version 0.545 against 0.463 ms, the
# floor 0.443 against 0.405; likely how the page cache holds a file written in
# pieces, each page fault then mapping less), so programs built by different
# tools would not be timed alike.
if command -v hyperfine >/dev/null; then
  static=build/bench-static
  echo
  echo "== row S: process start-up (static tool in $static) =="
  cmake -S . -B "$static" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUAFF_STATIC_TOOLS=ON -DGPUAFF_BUILD_TESTS=OFF \
    -DGPUAFF_BUILD_EXAMPLES=OFF -DGPUAFF_BUILD_PYTHON=OFF -DGPUAFF_WITH_HWLOC=OFF >/dev/null
  cmake --build "$static" --target gpuaff_cli >/dev/null
  mkdir -p "$tus/built" "$tus/timed"
  printf 'int main(void) { return 0; }\n' >"$tus/built/floor.c"
  cc -O2 -static "$tus/built/floor.c" -o "$tus/built/floor"
  cc -O2 -static benchmarks/read_floor.c -o "$tus/built/read_floor"
  cc -O2 benchmarks/interleave.c -o "$tus/interleave"
  # What any static C++ program pays before it reads a file: libstdc++'s
  # start-up (its exception pool) and a string from argv; no stream, no locale.
  printf '#include <cstdio>\n#include <string>\nint main(int argc, char** argv) {\n  std::string root = argc > 1 ? argv[1] : "";\n  std::fputs(root.c_str(), stdout);\n  return 0;\n}\n' >"$tus/built/cxx_floor.cpp"
  "$cxx" -std=c++20 -O2 -static "$tus/built/cxx_floor.cpp" -o "$tus/built/cxx_floor"
  for b in floor read_floor cxx_floor; do cp "$tus/built/$b" "$tus/timed/$b"; done
  cp "$static/tools/gpuaff/gpuaff" "$tus/timed/gpuaff"
  tool=$tus/timed/gpuaff
  s_runs=300
  ((quick)) && s_runs=20
  root=$build/fixtures/dgx-h100
  names=("gpuaff bind --gpu 3 --policy node" "gpuaff bind --pci 0000:61:00.0 --policy node"
         "gpuaff bind --gpu 3 --policy exclusive")
  binds=("$tool bind --root $root --gpu 3 --policy node" "$tool bind --root $root --pci 0000:61:00.0 --policy node"
         "$tool bind --root $root --gpu 3 --policy exclusive")
  cmds=("$tus/timed/floor" "$tool --version" "$tus/timed/cxx_floor $build/fixtures/dgx-h100")
  counts=()
  for i in "${!binds[@]}"; do
    if command -v strace >/dev/null; then
      strace -f -e trace=openat2 -o "$tus/opens$i" ${binds[$i]} >/dev/null 2>&1 || true
      sed -n 's/.*openat2([0-9]*, "\([^"]*\)".*/\1/p' "$tus/opens$i" >"$tus/files$i"
    else
      : >"$tus/files$i"
    fi
    counts+=("$(wc -l <"$tus/files$i")")
    cmds+=("${binds[$i]}" "$tus/timed/read_floor $root $tus/files$i")
  done
  # Page faults of each process (the same on every run): on a VM whose
  # hypervisor traps each one, they are most of what a short process costs.
  faults() {
    perf stat -x, -e page-faults "$@" 2>&1 >/dev/null | awk -F, '/page-faults/ { print $1 }'
  }
  if ! command -v perf >/dev/null || [[ -z $(faults "$tus/timed/floor") ]]; then faults() { echo "-"; }; fi
  hyperfine -N --warmup 20 --runs "$s_runs" --export-csv "$tus/s.csv" "${cmds[@]}" >/dev/null
  # CSV: command,mean,stddev,median,user,system,min,max (seconds); rows in the order of cmds
  mapfile -t med < <(awk -F, 'NR > 1 { print $4 * 1000 }' "$tus/s.csv")
  printf '   %-46s %s\n' "floor (static C, does nothing)" "median $(printf %.3f "${med[0]}") ms, $(faults "$tus/timed/floor") page faults"
  awk -v v="${med[1]}" -v f="${med[0]}" 'BEGIN { printf "   %-46s median %.3f ms  %.2fx the floor (target 1.2x)\n", "gpuaff --version", v, v / f }'
  awk -v v="${med[2]}" -v f="${med[0]}" -v pf="$(faults "$tus/timed/cxx_floor" "$root")" 'BEGIN {
    printf "   %-46s median %.3f ms  %.2fx the floor, %s page faults\n", "static C++ program, a string from argv", v, v / f, pf }'
  echo
  echo "| S | whole process, static tool, dgx-h100 (median of $s_runs hyperfine runs) | bind | its I/O floor (files) | do-nothing floor | bind / I/O floor | I/O floor / do-nothing | page faults: bind, I/O floor |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  for i in "${!binds[@]}"; do
    b=${med[$((3 + 2 * i))]} io=${med[$((4 + 2 * i))]}
    # shellcheck disable=SC2086 # the bind's words, as hyperfine ran them
    pf="$(faults ${binds[$i]}), $(faults "$tus/timed/read_floor" "$root" "$tus/files$i")"
    awk -v n="${names[$i]}" -v b="$b" -v io="$io" -v f="${med[0]}" -v files="${counts[$i]}" -v pf="$pf" -v node="$([[ ${names[$i]} == *node* ]] && echo 1 || echo 0)" 'BEGIN {
      printf "| S | %s | %.3f ms | %.3f ms (%d) | %.3f ms | %.2fx (target 1.3x: %s) | %.2fx%s | %s |\n", n, b, io, files, f, b / io,
             b / io <= 1.3 ? "holds" : "DOES NOT HOLD", io / f,
             node ? (io / f <= 1.6 ? " (target 1.6x: holds)" : " (target 1.6x: DOES NOT HOLD)") : " (information)", pf }'
  done
  # The same ratios, interleaved: every command once per round, medians (ms).
  i_runs=$s_runs
  interleaved=("$(realpath "$tus/timed/floor")")
  for i in "${!binds[@]}"; do
    # shellcheck disable=SC2206 # the bind's words
    words=(${binds[$i]})
    interleaved+=(-- "$(realpath "${words[0]}")" "${words[@]:1}" -- "$(realpath "$tus/timed/read_floor")" "$root" "$tus/files$i")
  done
  read -r -a imed < <("$tus/interleave" "$i_runs" "${interleaved[@]}")
  echo
  echo "| S | the same, interleaved ($i_runs rounds, each command once per round, medians) | bind | its I/O floor | do-nothing floor | bind / I/O floor |"
  echo "| --- | --- | --- | --- | --- | --- |"
  for i in "${!binds[@]}"; do
    awk -v n="${names[$i]}" -v b="${imed[$((1 + 2 * i))]}" -v io="${imed[$((2 + 2 * i))]}" -v f="${imed[0]}" 'BEGIN {
      printf "| S | %s | %.3f ms | %.3f ms | %.3f ms | %.2fx (target 1.3x: %s) |\n", n, b, io, f, b / io,
             b / io <= 1.3 ? "holds" : "DOES NOT HOLD" }'
  done
else
  echo "== row S: hyperfine not installed (Debian: apt-get install hyperfine), skipped =="
fi
