#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by the launcher tests. Records this machine with `gpuaff record`,
# then adds two fake NVIDIA GPUs on NUMA node 0 and narrows the recorded
# allowed set to CPUs 0-1, so that `--policy exclusive` splits node 0's two
# allowed CPUs between the two GPUs: GPU 0 -> CPU 0, GPU 1 -> CPU 1.
# With NGPUS 4, two more GPUs are added on node 0 (0000:e3:00.0, 0000:e4:00.0):
# then only a job of two processes (--nproc 2, or a launcher's local size of
# 2) gets CPU 0 and CPU 1; four would need four cores.
#   prepare_root GPUAFF DIR [NGPUS]    (exits 77, ctest's skip code, when the machine cannot host the test)
#   add_fake_gpus DIR [NGPUS]          (the GPUs alone, into a recording made elsewhere)
skip() { echo "SKIP: $*"; exit 77; }

# Adds NGPUS (2 or 4) fake NVIDIA GPUs on NUMA node 0 to the recording ROOT,
# at 0000:e1:00.0, 0000:e2:00.0 (and 0000:e3:00.0, 0000:e4:00.0), each local
# to node 0's CPUs; leaves the recorded allowed set and cgroup as they are.
# GPU N is listed by the driver (proc/driver/nvidia/gpus/BDF/information,
# `Device Minor: N`) and, as root, has the device node ROOT/dev/nvidiaN, the
# character device 195:N as the test cluster's gres.conf names them
# (tests/slurm/cluster.sh): inside a batch job gpuaff opens it to ask the
# job's device cgroup whether the GPU is the task's (docs/contract.md
# section 2). Without root (or where mknod is refused) there is no node, and
# gpuaff keeps every GPU.
#   add_fake_gpus ROOT [NGPUS]
add_fake_gpus() {
  local root=$1 ngpus=${2:-2} node0_cpus bdf minor=0
  node0_cpus=$(cat "$root/sys/devices/system/node/node0/cpulist")
  mkdir -p "$root/sys/bus/pci/devices" "$root/dev"
  local bdfs=(0000:e1:00.0 0000:e2:00.0)
  [[ $ngpus == 4 ]] && bdfs+=(0000:e3:00.0 0000:e4:00.0)
  for bdf in "${bdfs[@]}"; do
    mkdir -p "$root/proc/driver/nvidia/gpus/$bdf"
    printf 'Model: \t\t fake GPU (tests/integration/prepare_root.sh)\nBus Location: \t %s\nDevice Minor: \t %d\n' \
      "$bdf" "$minor" >"$root/proc/driver/nvidia/gpus/$bdf/information"
    if [[ $(id -u) -eq 0 && ! -e $root/dev/nvidia$minor ]]; then
      mknod -m 666 "$root/dev/nvidia$minor" c 195 "$minor" 2>/dev/null || true
    fi
    minor=$((minor + 1))
    local dir=$root/sys/devices/pci0000:e0/$bdf
    mkdir -p "$dir"
    echo 0x10de >"$dir/vendor"
    echo 0x2330 >"$dir/device"
    echo 0x030200 >"$dir/class"
    echo 0 >"$dir/numa_node"
    echo "$node0_cpus" >"$dir/local_cpulist"
    ln -s "../../../devices/pci0000:e0/$bdf" "$root/sys/bus/pci/devices/$bdf"
  done
}

prepare_root() {
  local gpuaff=$1 root=$2 ngpus=${3:-2}
  "$gpuaff" record --out "$root" >/dev/null
  local allowed
  allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
  # CPUs 0 and 1 must be usable here, and both on node 0 (the GPUs' node).
  python3 - "$allowed" "$root/sys/devices/system/node/node0/cpulist" <<'PY' || skip "CPUs 0 and 1 are not both allowed here and on node 0"
import sys
def ids(text):
    out = set()
    for part in text.strip().split(","):
        if not part: continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
here = ids(sys.argv[1]); node0 = ids(open(sys.argv[2]).read())
sys.exit(0 if {0, 1} <= here and {0, 1} <= node0 else 1)
PY
  local cls
  for dev in "$root"/sys/bus/pci/devices/*; do
    [[ -e $dev/class ]] || continue
    cls=$(cat "$dev/class")
    [[ $cls == 0x0300* || $cls == 0x0302* || $cls == 0x0380* || $cls == 0x1200* ]] && skip "this machine has GPUs; the test adds fake ones"
  done
  # The allowed set the plan works in: CPUs 0-1 (the recorded process's allowed set).
  sed -i 's/^Cpus_allowed_list:.*/Cpus_allowed_list:\t0-1/; /^Cpus_allowed:/d' "$root/proc/self/status"
  # On a two-vCPU SMT guest, CPUs 0 and 1 are one core; make them two, as the test needs two cores.
  local t
  for cpu in 0 1; do
    t=$root/sys/devices/system/cpu/cpu$cpu/topology
    for f in core_cpus_list thread_siblings_list; do [[ -e $t/$f ]] && echo "$cpu" >"$t/$f"; done
    for f in core_cpus thread_siblings; do [[ -e $t/$f ]] && printf '%08x\n' $((1 << cpu)) >"$t/$f"; done
  done
  add_fake_gpus "$root" "$ngpus"
  # Sanity: the recording now binds GPU 0 to CPU 0 and GPU 1 to CPU 1.
  local g0 g1
  g0=$("$gpuaff" bind --root "$root" --gpu 0 --policy exclusive --nproc 2)
  g1=$("$gpuaff" bind --root "$root" --gpu 1 --policy exclusive --nproc 2)
  [[ $g0 == 0 && $g1 == 1 ]] || { echo "FAIL: prepared root binds GPU 0 -> '$g0', GPU 1 -> '$g1'"; exit 1; }
}
