#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks gpuaff on a real GPU server: builds everything (tool, Python module for
# the server's own python3, examples, tests), records the machine, runs the test
# suite against its kernel, and drives the CLI, the Python module (with the
# server's torch, when it has one) and the torchrun example on its GPUs.
#
#   bash tools/gpu-server-check.sh OUTDIR
#
# OUTDIR receives: record.tar (the machine, as `gpuaff record` writes it),
# topo.txt / topo.json, cli.txt (bindings, exec, NIC variables, doctor),
# python.txt, torchrun.txt, torch-compare.txt (gpuaff.plan beside PyTorch's
# own binding functions), ctest.txt, static.txt (dist/gpuaff, when present).
# Dependencies the server lacks (doctest, nlohmann_json headers) can be
# given as a prefix: CMAKE_PREFIX_PATH=/path/usr. Nothing is installed.
# BUILD=DIR builds there (default /tmp/gpuaff-check); SKIP_BUILD=1 uses it as it is.
# CTEST_TIMEOUT=S bounds the test suite's run (default 400 s; 0 skips it),
# CTEST_EXCLUDE=REGEX the labels it leaves out (default bench|pip).
set -uo pipefail
out=${1:?usage: gpu-server-check.sh OUTDIR}
mkdir -p "$out"
out=$(realpath "$out")
b=$(realpath -m "${BUILD:-/tmp/gpuaff-check}")
cd "$(dirname "$0")/.."
py=$(command -v python3)
jobs=$(nproc)
log() { echo "== $*"; }
run() { echo "\$ $*"; "$@"; echo "[exit $?]"; }

log "machine" | tee "$out/machine.txt"
{ uname -a; nproc; command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m; grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status; cat /proc/self/cgroup; } >>"$out/machine.txt" 2>&1

log "build ($b)"
pyargs=()
pybind=$("$py" -m pybind11 --cmakedir 2>/dev/null) && pyargs=(-DPython_EXECUTABLE="$py" -Dpybind11_DIR="$pybind" -DGPUAFF_BUILD_PYTHON=ON)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [[ -z ${SKIP_BUILD:-} ]] && { ! cmake -S . -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUAFF_WITH_HWLOC=OFF "${pyargs[@]}" >"$out/build.txt" 2>&1 \
   || ! cmake --build "$b" -j "$jobs" >>"$out/build.txt" 2>&1; }; then
  tail -40 "$out/build.txt"; echo "gpu-server-check: build failed (build.txt)"; exit 1
fi
g=$b/tools/gpuaff/gpuaff

log "record and report"
run "$g" record --out "$out/record.tar" >"$out/record.txt" 2>&1
"$g" topo >"$out/topo.txt" 2>&1
# The recording must describe the machine as the live reader sees it.
"$g" topo --root "$out/record.tar" >"$b/topo-recorded.txt" 2>&1
if diff <(grep -v '^origin' "$out/topo.txt") <(grep -v '^origin' "$b/topo-recorded.txt") >"$b/topo.diff"; then
  echo "live and recorded reports agree" >>"$out/topo.txt"
else
  { echo "live and recorded reports differ:"; cat "$b/topo.diff"; } >>"$out/topo.txt"
fi
"$g" topo --format json >"$out/topo.json" 2>>"$out/topo.txt"

log "CLI on the real GPUs"
{
  for p in node socket exclusive core-complex unique-contiguous; do run "$g" bind --gpu 0 --policy "$p"; done
  run "$g" bind --gpu all --format json
  run "$g" bind --gpu 0 --ranks-per-gpu 2 --part 1 --format json
  run "$g" bind --gpu 0 --nic-env --format env
  run "$g" exec --gpu 0 --policy exclusive --verbose -- grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status
  run "$g" exec --gpu 0 --membind local --dry-run -- true
  CUDA_VISIBLE_DEVICES=GPU-00000000-bad run "$g" bind --gpu 0
  run "$g" exec --gpu 0 -- sh -c "\"$g\" doctor --gpu 0 --pid \$\$"
  # A batch job's view: the device node of each GPU is opened (and must stay visible when allowed).
  SLURM_JOB_ID=1 CUDA_VISIBLE_DEVICES=0 run "$g" bind --gpu 0 --format json
  run "$g" bind --gpu 0 --policy exclusive --roles main=1,comm=1,data=4 --format json
  run "$g" bind --gpu 1 --policy exclusive --domains-per-gpu 2
  run "$g" topo --format dra
  "$g" exec --gpu 0 -- sleep 20 &
  sleep 1
  run "$g" doctor --all
  run "$g" doctor --all --format prometheus
  kill %1 2>/dev/null
} >"$out/cli.txt" 2>&1

if [[ -x dist/gpuaff ]]; then
  log "the static tool (dist/gpuaff)"
  { run ldd dist/gpuaff; run dist/gpuaff --version; run dist/gpuaff bind --gpu 0 --policy exclusive; } >"$out/static.txt" 2>&1
fi

log "Python"
cat >"$b/check.py" <<'EOF'
import os, threading, gpuaff
m = gpuaff.load()
print("gpus:", m.gpus)
for policy in ("node", "socket", "exclusive", "core-complex"):
    p = m.plan(gpu=0, policy=policy)
    print(policy, p.cpulist, "memory nodes", sorted(p.memory_nodes), "threads", p.recommended_threads)
before = os.sched_getaffinity(0)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count())
except ImportError:
    torch = None
with gpuaff.bound(gpu=0):
    inside = os.sched_getaffinity(0)
    if torch is not None and torch.cuda.is_available():
        x = torch.ones(1 << 20, device="cuda")
        print("allocated on", x.device, "sum", float(x.sum()))
print("inside:", sorted(inside))
print("restored:", os.sched_getaffinity(0) == before)
seen = {}
def worker():
    with gpuaff.bound(gpu=0, policy="exclusive"):
        seen["worker"] = sorted(os.sched_getaffinity(0))
t = threading.Thread(target=worker); t.start(); t.join()
print("worker thread:", seen["worker"], "main unchanged:", os.sched_getaffinity(0) == before)
p = gpuaff.bind(gpu=0, policy="exclusive", roles="main=1,comm=1,data=4")
print("roles:", {k: sorted(v) for k, v in p.roles.items()}, "OMP_PLACES" in os.environ)
print("bind_role main:", gpuaff.bind_role("main"), sorted(os.sched_getaffinity(0)))
if torch is not None and torch.cuda.is_available():
    print("after roles, matmul ok:", float((torch.ones(64, 64, device="cuda") @ torch.ones(64, 64, device="cuda")).sum()))
EOF
PYTHONPATH=$b/python run "$py" "$b/check.py" >"$out/python.txt" 2>&1

if command -v torchrun >/dev/null; then
  log "torchrun example"
  printf 'import os\nprint("rank", os.environ.get("LOCAL_RANK"), "cpus", open("/proc/self/status").read().split("Cpus_allowed_list:")[1].split()[0])\n' >"$b/train.py"
  GPUAFF=$g NPROC=1 run timeout 120 bash examples/torchrun.sh "$b/train.py" >"$out/torchrun.txt" 2>&1
fi

log "gpuaff.plan beside PyTorch's own binding functions (row PT)"
PYTHONPATH=$b/python run "$py" benchmarks/python_vs_torch.py "$b" >"$out/torch-compare.txt" 2>&1

if [[ ${CTEST_TIMEOUT:-400} != 0 ]]; then
  log "test suite"
  (cd "$b" && timeout "${CTEST_TIMEOUT:-400}" ctest -j "$jobs" -LE "${CTEST_EXCLUDE:-bench|pip}" --output-on-failure) \
    >"$out/ctest.txt" 2>&1
  echo "[ctest exit $?]" >>"$out/ctest.txt"
  tail -5 "$out/ctest.txt"
fi
grep -h '^\[exit\|^\$' "$out"/cli.txt "$out"/python.txt "$out"/torchrun.txt 2>/dev/null | paste - - | awk '$NF != "0]"' | head -20
