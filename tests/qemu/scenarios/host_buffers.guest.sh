# SPDX-License-Identifier: Apache-2.0
# Scenario host_buffers (tests/qemu/scenarios/README.md), shape 2s2n-smt2-memnode:
# a rank started by `gpuaff exec --gpu 0` (the ATI adapter 15:04.0 on node 1)
# allocates a 48 MiB host buffer with the library on its plan's host nodes and
# a 24 MiB one on node 0 on purpose (/bin/host_buffers prints the kernel's
# answer for both); `gpuaff doctor` checks the rank against its GPUAFF_PLAN;
# `gpuaff probe` measures the guest; the toy pipeline of row H runs once.
[ "$GPUAFF_QEMU_SHAPE" = 2s2n-smt2-memnode ] || exit 0
if [ ! -x /bin/gpuaff ] || [ ! -x /bin/host_buffers ] || [ ! -x /bin/host_pipeline ]; then
  echo "@@GPUAFF-QEMU host_buffers skipped=no-programs"
  exit 0
fi
# NUMA balancing would move pages toward the CPUs that touch them.
echo 0 >/proc/sys/kernel/numa_balancing 2>/dev/null
rm -f /tmp/host_buffers.ready
/bin/gpuaff exec --gpu 0 -- /bin/host_buffers 48 24 0 /tmp/host_buffers.ready &
pid=$!
i=0
while [ ! -e /tmp/host_buffers.ready ] && kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
ready=no
[ -e /tmp/host_buffers.ready ] && ready=yes
echo "@@GPUAFF-QEMU host_buffers ready=$ready"
echo "@@GPUAFF-QEMU BEGIN host_buffers doctor"
timeout 60 /bin/gpuaff doctor --pid $pid --format json
echo "@@GPUAFF-QEMU END host_buffers doctor rc=$?"
echo "@@GPUAFF-QEMU BEGIN host_buffers doctor-text"
timeout 60 /bin/gpuaff doctor --pid $pid
echo "@@GPUAFF-QEMU END host_buffers doctor-text rc=$?"
kill $pid 2>/dev/null
wait $pid 2>/dev/null
echo "@@GPUAFF-QEMU BEGIN host_buffers probe"
timeout 60 /bin/gpuaff probe --size 8 --seconds 0.05 --threads 1
echo "@@GPUAFF-QEMU END host_buffers probe rc=$?"
echo "@@GPUAFF-QEMU BEGIN host_buffers pipeline"
timeout 60 /bin/gpuaff exec --gpu 0 -- /bin/host_pipeline --mib 16 --rounds 3
echo "@@GPUAFF-QEMU END host_buffers pipeline rc=$?"
