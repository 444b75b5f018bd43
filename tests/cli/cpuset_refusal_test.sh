#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A binding the kernel refuses is the machine's answer, not a usage mistake:
# exec exits 5 (cannot bind), and --fallback unbound runs the command
# unbound. The process is put in a cpuset cgroup holding CPU 1 only (as a
# Slurm step does when another job holds CPU 0) and given a plan from
# fixtures/two-node-2cpu.json, whose GPU 0 is on CPU 0: sched_setaffinity
# answers EINVAL. taskset alone cannot show it (a thread may widen its own
# mask within its cpuset). Needs root, two CPUs and a writable cpuset
# hierarchy (cgroup v1 `cpuset`, or v2 with the cpuset controller): else skipped (77).
set -u
gpuaff=$1 source_dir=$2
json=$source_dir/fixtures/two-node-2cpu.json
skip() { echo "skipped: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "not root"
grep -qw 1 <(taskset -pc $$ | sed 's/.*: //;s/[,-]/ /g') || skip "CPU 1 is not allowed here"
if [[ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]]; then
  cg=/sys/fs/cgroup/cpuset/gpuaff-refusal-$$
  mkdir "$cg" 2>/dev/null || skip "cannot create $cg"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"$cg/cpuset.mems"
elif grep -qw cpuset /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  cg=/sys/fs/cgroup/gpuaff-refusal-$$
  mkdir "$cg" 2>/dev/null || skip "cannot create $cg"
else
  skip "no writable cpuset hierarchy"
fi
trap 'rmdir "$cg" 2>/dev/null' EXIT
echo 1 >"$cg/cpuset.cpus" || skip "cannot write $cg/cpuset.cpus"
fail=0
out=$(bash -c "echo \$\$ >'$cg/cgroup.procs' && exec '$gpuaff' exec --topology '$json' --gpu 0 -- true" 2>&1)
rc=$?
echo "$out"
if [[ $rc != 5 ]]; then echo "FAIL: exec exited $rc, want 5 (cannot bind)"; fail=1; fi
grep -q "CPUs 0 are not in this process's allowed set" <<<"$out" || { echo "FAIL: the error does not name CPU 0"; fail=1; }
out=$(bash -c "echo \$\$ >'$cg/cgroup.procs' && exec '$gpuaff' exec --topology '$json' --gpu 0 --fallback unbound -- \
  sh -c 'grep Cpus_allowed_list /proc/self/status'" 2>&1)
rc=$?
echo "$out"
if [[ $rc != 0 ]]; then echo "FAIL: --fallback unbound exited $rc, want 0"; fail=1; fi
grep -q "Cpus_allowed_list:	1$" <<<"$out" || { echo "FAIL: the command did not run unbound in its cpuset"; fail=1; }
exit $fail
