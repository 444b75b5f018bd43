#!/bin/busybox sh
# SPDX-License-Identifier: Apache-2.0
# /init of the gpuaff QEMU guests: mount the kernel file systems, run the
# checks, record the topology, print everything between markers on the serial
# console (read back by run_guest.sh), power off. The kernel passes
# `gpuaff_shape=NAME` from its command line to us as an environment variable.
/bin/busybox mount -t devtmpfs dev /dev
# The initramfs has no /dev/console node (making one needs root); talk to the
# console through devtmpfs instead.
exec 0</dev/console 1>/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmp /tmp

if [ -n "$gpuaff_shell" ]; then  # by hand: a shell instead of the checks (docs/qemu.md)
  exec setsid cttyhack sh
fi

echo "@@GPUAFF-QEMU shape=$gpuaff_shape kernel=$(uname -r) cpus=$(nproc)"
echo "@@GPUAFF-QEMU BEGIN checks"
GPUAFF_QEMU_SHAPE=$gpuaff_shape timeout 150 /bin/guest_checks --no-colors=true --duration=false
echo "@@GPUAFF-QEMU END checks rc=$?"

if [ -x /bin/gpuaff ]; then
  timeout 60 /bin/gpuaff record --out /tmp/recording
  echo "@@GPUAFF-QEMU END record rc=$?"
  echo "@@GPUAFF-QEMU BEGIN recording"
  tar -C /tmp/recording -cf - . | gzip -9 | base64
  echo "@@GPUAFF-QEMU END recording"
fi
# --baseline against what the kernel enforces (after the recording, which must
# show the unconfined guest): a child shell joins a cgroup v2 cpuset of CPUs
# 2-7, then taskset narrows each gpuaff to CPU 5; the exec'd grep reports the
# mask the kernel applied. run_guest.sh checks the lines.
if [ -x /bin/gpuaff ] && [ "$gpuaff_shape" = 2s2n-smt2-memnode ]; then
  mkdir -p /sys/fs/cgroup
  mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control &&
    mkdir /sys/fs/cgroup/job && echo 2-7 >/sys/fs/cgroup/job/cpuset.cpus
  sh -c '
    echo $$ >/sys/fs/cgroup/job/cgroup.procs
    for run in "affinity 0000:15:03.0" "cgroup 0000:15:03.0" "affinity 0000:29:02.0" "cgroup 0000:29:02.0" \
               "nearest 0000:29:02.0"; do
      set -- $run
      extra="--baseline $1"
      [ "$1" = nearest ] && extra="--baseline affinity --unreachable nearest"
      got=$(taskset -c 5 /bin/gpuaff exec --pci "$2" $extra -- grep Cpus_allowed_list /proc/self/status 2>/dev/null)
      rc=$?
      echo "@@GPUAFF-QEMU cgroup $1 $2 rc=$rc cpus=$(echo "$got" | sed "s/.*:[[:space:]]*//")"
    done'
fi
# `gpuaff doctor` on pages the kernel really placed: two processes run on node
# 1's CPUs (4-7, where GPU 0, the ATI adapter 15:04.0, is) and first-touch 64
# MiB under MPOL_BIND, one on node 0 (remote), one on node 1 (local); doctor
# prints its verdict as JSON between markers and run_guest.sh checks it.
if [ -x /bin/gpuaff ] && [ -x /bin/first_touch ] && [ "$gpuaff_shape" = 2s2n-smt2-memnode ]; then
  # Automatic NUMA balancing may migrate pages toward the CPUs that use them;
  # these checks want the placement the first touch made.
  echo 0 >/proc/sys/kernel/numa_balancing 2>/dev/null
  for run in "remote 0" "local 1"; do
    set -- $run
    rm -f /tmp/touched
    taskset -c 4-7 /bin/first_touch "$2" 64 /tmp/touched &
    pid=$!
    i=0
    while [ ! -e /tmp/touched ] && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    ready=no
    [ -e /tmp/touched ] && ready=yes
    echo "@@GPUAFF-QEMU doctor $1 touched=$ready"
    echo "@@GPUAFF-QEMU BEGIN doctor $1"
    timeout 60 /bin/gpuaff doctor --pid $pid --gpu 0 --root / --format json
    echo "@@GPUAFF-QEMU END doctor $1 rc=$?"
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
  done
fi
# Scenarios (tests/qemu/scenarios/README.md): each runs in its own shell with
# the shape in GPUAFF_QEMU_SHAPE and prints its own marked lines.
for s in /scenarios/*.guest.sh; do
  [ -f "$s" ] || continue
  GPUAFF_QEMU_SHAPE=$gpuaff_shape timeout 120 sh "$s"
  echo "@@GPUAFF-QEMU END scenario $(basename "$s" .guest.sh) rc=$?"
done
echo "@@GPUAFF-QEMU DONE"
poweroff -f
