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
echo "@@GPUAFF-QEMU DONE"
poweroff -f
