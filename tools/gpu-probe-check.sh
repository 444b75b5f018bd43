#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks host buffers and `gpuaff probe` on a GPU machine, in a few minutes:
# builds only the tool, the host_buffer example and the Python module (Release),
# then runs
#   probe.txt        gpuaff probe (short)
#   probe-gpu.json   gpuaff probe --gpu 0 --format json (exit code 8: no runtime or GPU)
#   gpu-nodes.txt    the --gpu-nodes file it writes
#   bind.json        bind --gpu 0 --format json (host_nodes)
#   host_buffer.txt  the C++ allocation's page report (touch and populate, 256 MiB)
#   torch.txt        Python: host_buffer -> pinned_tensor -> timed H2D/D2H copies beside a
#                    torch pin_memory() tensor of the same size
#
#   bash tools/gpu-probe-check.sh OUTDIR
#
# Dependencies the machine lacks (nlohmann_json headers) can be given as
# a prefix: CMAKE_PREFIX_PATH=/path/usr. BUILD=DIR builds there (default
# /tmp/gpuaff-probe-check); SKIP_BUILD=1 uses it as it is. Without a GPU the
# GPU parts say so and the script still ends 0; a failed build ends 1.
set -uo pipefail
out=${1:?usage: gpu-probe-check.sh OUTDIR}
mkdir -p "$out"
out=$(realpath "$out")
b=$(realpath -m "${BUILD:-/tmp/gpuaff-probe-check}")
cd "$(dirname "$0")/.."
py=$(command -v python3)
jobs=$(nproc)
log() { echo "== $*"; }
run() { echo "\$ $*"; "$@"; echo "[exit $?]"; }

log "machine" | tee "$out/machine.txt"
{ uname -a; nproc; command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m; grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status
  cat /proc/self/cgroup; grep -H . /sys/devices/system/node/node*/distance /sys/bus/pci/devices/*/numa_node 2>/dev/null | grep -v ':-1$' | head -40
  grep -E 'Huge' /proc/meminfo; cat /sys/kernel/mm/transparent_hugepage/enabled; } >>"$out/machine.txt" 2>&1

log "build ($b): gpuaff, host_buffer, the Python module"
pyargs=(-DGPUAFF_BUILD_PYTHON=OFF)
targets=(gpuaff_cli gpuaff_example_host_buffer)
if pybind=$("$py" -m pybind11 --cmakedir 2>/dev/null); then
  pyargs=(-DPython_EXECUTABLE="$py" -Dpybind11_DIR="$pybind" -DGPUAFF_BUILD_PYTHON=ON)
  targets+=(gpuaff_python)
fi
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [[ -z ${SKIP_BUILD:-} ]] && { ! cmake -S . -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGPUAFF_WITH_HWLOC=OFF \
      -DGPUAFF_BUILD_TESTS=OFF -DGPUAFF_BUILD_BENCHMARKS=OFF -DGPUAFF_BUILD_EXAMPLES=ON "${pyargs[@]}" >"$out/build.txt" 2>&1 \
   || ! cmake --build "$b" -j "$jobs" --target "${targets[@]}" >>"$out/build.txt" 2>&1; }; then
  tail -40 "$out/build.txt"; echo "gpu-probe-check: build failed (build.txt)"; exit 1
fi
g=$b/tools/gpuaff/gpuaff

log "probe"
{ run timeout 120 "$g" probe --size 256 --seconds 0.5; } >"$out/probe.txt" 2>&1
log "probe --gpu 0 --format json"
timeout 120 "$g" probe --gpu 0 --size 256 --seconds 0.5 --format json --gpu-nodes "$out/gpu-nodes.txt" \
  >"$out/probe-gpu.json" 2>"$out/probe-gpu.err"
echo "[exit $?]" >>"$out/probe-gpu.err"
{ run "$g" probe --gpu 0 --size 64 --seconds 0.2; } >"$out/probe-gpu.txt" 2>&1

log "bind and the C++ allocation's page report"
"$g" bind --gpu 0 --format json >"$out/bind.json" 2>&1
nodes=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["host_nodes"])' "$out/bind.json" 2>/dev/null)
[[ -n $nodes ]] || nodes=$(sed -n 's/^Mems_allowed_list:\s*//p' /proc/self/status | cut -d, -f1 | cut -d- -f1)
{
  echo "host nodes: $nodes"
  for fault in touch populate; do run "$b/examples/host_buffer" 256 "$nodes" "$fault"; done
  run "$b/examples/host_buffer" 256 "$nodes" touch transparent
  run "$b/examples/host_buffer" 64 "$nodes" touch hugetlb
  for n in $(ls -d /sys/devices/system/node/node[0-9]* | sed 's/.*node//'); do run "$b/examples/host_buffer" 64 "$n" touch; done
  # A node that is not allowed: the error names it.
  run "$b/examples/host_buffer" 4 63 touch
} >"$out/host_buffer.txt" 2>&1

if [[ -d $b/python/gpuaff ]]; then
  log "Python: host_buffer -> pinned_tensor, copies beside pin_memory()"
  cat >"$b/probe_check.py" <<'EOF'
import sys, time
import gpuaff
try:
    plan = gpuaff.plan(gpu=0)
    print("plan: node", plan.node, "host_nodes", sorted(plan.host_nodes), "cpus", plan.cpulist)
    buf = gpuaff.host_buffer(256 << 20, plan=plan)
except gpuaff.NotFound as e:
    print("no plan for GPU 0 (%s): the buffer goes on the first allowed node" % e)
    plan = None
    allowed = open("/proc/self/status").read().split("Mems_allowed_list:")[1].split()[0]
    buf = gpuaff.host_buffer(256 << 20, str(min(gpuaff._gpuaff.parse_cpulist(allowed))))
print("placement:", buf.placement)
try:
    import torch
except ImportError:
    print("no torch: skipped"); sys.exit(0)
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())
try:
    t = gpuaff.pinned_tensor(buf)
except gpuaff.Unsupported as e:
    print("pinned_tensor:", e); sys.exit(0)
print("tensor", t.shape, t.dtype, "pinned", t.is_pinned(), "same memory", t.data_ptr() == buf.address)
ref = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
dev = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

def rate(copy, n=20):
    copy(); torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        copy()
    torch.cuda.synchronize()
    return n * (256 << 20) / (time.perf_counter() - start) / 2**30

import contextlib
with gpuaff.bound(plan) if plan is not None else contextlib.nullcontext():
    for name, host in (("gpuaff.host_buffer", t), ("torch pin_memory()", ref)):
        h2d = rate(lambda: dev.copy_(host, non_blocking=True))
        d2h = rate(lambda: host.copy_(dev, non_blocking=True))
        print("%-20s H2D %6.1f GiB/s  D2H %6.1f GiB/s" % (name, h2d, d2h))
t.fill_(3); torch.cuda.synchronize()
print("buffer sees the tensor's writes:", bytes(memoryview(buf)[:4]) == b"\x03" * 4)
print("placement after the copies:", buf.query())
del t, buf
import gc; gc.collect()
print("released (unregistered, then unmapped)")
EOF
  PYTHONPATH=$b/python run timeout 120 "$py" "$b/probe_check.py" >"$out/torch.txt" 2>&1
fi
log "done: $out"
ls -l "$out"
