# SPDX-License-Identifier: Apache-2.0
# Sourced by the doctor's shell tests, which start processes carrying a
# GPUAFF_PLAN and check them with `gpuaff doctor`:
#   need_cpus_0_1        exit 77 (ctest's skip) unless python3 is here and CPUs
#                        0 and 1 are both allowed (the plans of two_gpu_root)
#   planned_tmp NAME     $tmp, a fresh folder; every pid in $pids is killed and
#                        the folder removed at exit
#   wait_for_plans       until each of $pids has exec'd with its GPUAFF_PLAN
#   two_gpu_root DIR     a root whose two GPUs (0000:17:00.0, 0000:65:00.0) are
#                        on node 0 with local CPUs 0-1, each CPU a core of its
#                        own: exclusive gives GPU 0 CPU 0 and GPU 1 CPU 1
#   start_two_ranks ROOT `gpuaff exec --gpu 0|1 --policy exclusive -- sleep 60`
#                        on that root ($gpuaff), both waited for

need_cpus_0_1() {
  command -v python3 >/dev/null || { echo "SKIP: python3 is needed"; exit 77; }
  python3 -c 'import os, sys; sys.exit(0 if {0, 1} <= os.sched_getaffinity(0) else 1)' ||
    { echo "SKIP: CPUs 0 and 1 are not both allowed here"; exit 77; }
}

planned_tmp() {
  tmp=$(mktemp -d "/tmp/gpuaff-$1.XXXXXX")
  pids=()
  trap planned_cleanup EXIT
}

planned_cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}

wait_for_plans() {
  for p in "${pids[@]}"; do
    for _ in $(seq 200); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^GPUAFF_PLAN=' && break; sleep 0.02; done
  done
}

two_gpu_root() {
  python3 - "$1" <<'PY'
import os, sys
root = sys.argv[1]
def write(rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
cpu = "sys/devices/system/cpu/"
write(cpu + "online", "0-1\n")
write(cpu + "possible", "0-1\n")
for c in (0, 1):
    write(cpu + "cpu%d/topology/core_cpus_list" % c, "%d\n" % c)
    write(cpu + "cpu%d/topology/physical_package_id" % c, "0\n")
    write(cpu + "cpu%d/topology/package_cpus_list" % c, "0-1\n")
write("sys/devices/system/node/online", "0\n")
write("sys/devices/system/node/node0/cpulist", "0-1\n")
write("sys/devices/system/node/node0/distance", "10\n")
write("proc/self/status", "Cpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n")
for bdf in ("0000:17:00.0", "0000:65:00.0"):
    d = "sys/devices/pci0000:00/" + bdf + "/"
    write(d + "class", "0x030200\n"); write(d + "vendor", "0x10de\n"); write(d + "device", "0x2330\n")
    write(d + "numa_node", "0\n"); write(d + "local_cpulist", "0-1\n")
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"), exist_ok=True)
    os.symlink("../../../devices/pci0000:00/" + bdf, os.path.join(root, "sys/bus/pci/devices", bdf))
PY
}

start_two_ranks() {
  local g
  for g in 0 1; do
    "$gpuaff" exec --root "$1" --gpu "$g" --policy exclusive -- sleep 60 >/dev/null &
    pids+=($!)
  done
  wait_for_plans
}
