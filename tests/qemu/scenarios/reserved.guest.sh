# SPDX-License-Identifier: Apache-2.0
# The system's reservations (docs/contract.md section 7) on a kernel booted
# with nohz_full=2-3,6-7 (run_guest.sh adds it to this shape's command line):
# what exec binds under --reserve-os-cores auto and --roles, and what topo shows.
[ "$GPUAFF_QEMU_SHAPE" = 2s2n-smt2-memnode ] || exit 0
[ -x /bin/gpuaff ] || { echo "@@GPUAFF-QEMU reserved skipped=no-tool"; exit 0; }
echo "@@GPUAFF-QEMU reserved nohz_full=$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null)"
mask=$(/bin/gpuaff exec --gpu 0 --reserve-os-cores auto -- sh -c 'grep Cpus_allowed_list /proc/self/status' | tr -d ' \t')
echo "@@GPUAFF-QEMU reserved auto $mask rc=$?"
plan=$(/bin/gpuaff exec --gpu 0 --roles main=1 -- sh -c 'echo $GPUAFF_PLAN')
echo "@@GPUAFF-QEMU reserved roles $plan"
/bin/gpuaff topo | grep -E 'nohz_full|housekeeping CPUs' | sed 's/^/@@GPUAFF-QEMU reserved topo /'
