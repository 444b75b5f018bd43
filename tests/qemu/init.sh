#!/bin/busybox sh
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
echo "@@GPUAFF-QEMU DONE"
poweroff -f
