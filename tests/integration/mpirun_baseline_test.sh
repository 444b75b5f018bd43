#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mpirun with its default binding (Open MPI binds each of -np 2 ranks to one
# core) starts `gpuaff exec` on this machine itself: the target is a PCI
# device of this machine (--pci, its node taken as node 0 where the firmware
# gives none), the policy node. What the kernel then enforces on the exec'd
# command (its Cpus_allowed_list) must be:
#   --baseline affinity: the one CPU mpirun left each rank (and a warning);
#   --baseline cgroup:   node 0's CPUs within the process's cgroup cpuset,
#                        the same for both ranks: each rank's full share.
# The expected cgroup cpuset is read here from /proc/self/cgroup and
# /sys/fs/cgroup independently of gpuaff.
#   mpirun_baseline_test.sh GPUAFF
set -euo pipefail
gpuaff=$1
skip() { echo "SKIP: $*"; exit 77; }
command -v mpirun >/dev/null || skip "mpirun not installed (Debian: openmpi-bin)"
command -v python3 >/dev/null || skip "python3 is needed to compute the expected sets"
dev=$(ls /sys/bus/pci/devices 2>/dev/null | head -n 1)
[[ -n $dev ]] || skip "this machine shows no PCI device"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The expected set: node 0's CPUs (the device's node, or node 0) in the cgroup cpuset, online.
expected=$(python3 - "$dev" <<'PY'
import os, sys
def ids(text):
    out = set()
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out.update(range(int(a), int(b or a) + 1))
    return out
def fmt(s):
    s = sorted(s); parts = []; i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1: j += 1
        parts.append(str(s[i]) if i == j else "%d-%d" % (s[i], s[j])); i = j + 1
    return ",".join(parts)
def read(p):
    try: return open(p).read()
    except OSError: return None
lines = [l.split(":", 2) for l in open("/proc/self/cgroup").read().splitlines() if l]
v1 = [l[2] for l in lines if "cpuset" in l[1].split(",")]
v2 = [l[2] for l in lines if l[0] == "0" and l[1] == ""]
if v1: mount, names, path = "/sys/fs/cgroup/cpuset", ["cpuset.effective_cpus", "cpuset.cpus"], v1[0]
elif v2: mount, names, path = "/sys/fs/cgroup", ["cpuset.cpus.effective"], v2[0]
else: mount = None
online = ids(open("/sys/devices/system/cpu/online").read())
cgroup = online
if mount:
    while True:
        found = [read(os.path.join(mount + path, n)) for n in names]
        found = [f for f in found if f is not None]
        if found: cgroup = ids(found[0]); break
        if path in ("", "/"): break
        path = path.rsplit("/", 1)[0] or "/"
node = read("/sys/bus/pci/devices/%s/numa_node" % sys.argv[1])
node = int(node) if node and int(node) >= 0 else 0
print(fmt(ids(open("/sys/devices/system/node/node%d/cpulist" % node).read()) & cgroup & online))
PY
)
[[ $expected == *[,-]* ]] || skip "the device's node has fewer than two CPUs in this cgroup ($expected)"

as_root=()
[[ $(id -u) -eq 0 ]] && as_root=(--allow-run-as-root)
run() {  # run BASELINE: the Cpus_allowed_list of each rank's command, "rank0 rank1"
  local out
  out=$(OMPI_MCA_plm_rsh_agent=false OMPI_MCA_btl=self timeout 60 \
    mpirun "${as_root[@]}" --oversubscribe --tag-output -np 2 \
    "$gpuaff" exec --pci "$dev" --unknown-node node0 --policy node --baseline "$1" -- \
    sh -c 'awk "/^Cpus_allowed_list:/ {print \$2}" /proc/self/status' 2>"$tmp/err.$1") || {
    echo "FAIL: mpirun exited $? with --baseline $1" >&2; cat "$tmp/err.$1" >&2; exit 1; }
  local r0 r1
  r0=$(grep -E '^\[[0-9]+,0\]<stdout>:' <<<"$out" | sed 's/.*<stdout>:[[:space:]]*//')
  r1=$(grep -E '^\[[0-9]+,1\]<stdout>:' <<<"$out" | sed 's/.*<stdout>:[[:space:]]*//')
  echo "$r0 $r1"
}

# What mpirun's default binding gives each rank, without gpuaff.
plain=$(OMPI_MCA_plm_rsh_agent=false OMPI_MCA_btl=self timeout 60 mpirun "${as_root[@]}" --oversubscribe \
  --tag-output -np 2 sh -c 'awk "/^Cpus_allowed_list:/ {print \$2}" /proc/self/status' 2>/dev/null |
  sed 's/.*<stdout>:[[:space:]]*//' | sort | tr '\n' ' ')
echo "mpirun's own binding: $plain; expected under --baseline cgroup: $expected"
[[ $plain != *"$expected"* ]] || skip "mpirun did not narrow the ranks here; nothing to widen"

ok=1
read -r a0 a1 <<<"$(run affinity)"
echo "--baseline affinity: rank 0 $a0, rank 1 $a1"
[[ $a0 != "$expected" && $a1 != "$expected" ]] || { echo "FAIL: affinity should keep mpirun's narrow mask"; ok=0; }
grep -q -- "--baseline cgroup" "$tmp/err.affinity" || { echo "FAIL: no warning under --baseline affinity"; ok=0; }
read -r c0 c1 <<<"$(run cgroup)"
echo "--baseline cgroup: rank 0 $c0, rank 1 $c1"
[[ $c0 == "$expected" && $c1 == "$expected" ]] || { echo "FAIL: expected $expected for both ranks"; ok=0; }
[[ $ok == 1 ]] || { cat "$tmp"/err.* ; exit 1; }
echo "PASS: --baseline cgroup widened both ranks to $expected"
