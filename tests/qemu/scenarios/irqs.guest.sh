#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# doctor --irqs and --steer-irqs on a real kernel's MSI-X vectors: the
# virtio-rng at 0000:29:02.0 (node 0, CPUs 0-3) of shape 2s2n-smt2-memnode is
# the plan's device (exec --pci; --roles main=1 cuts node 0's two cores into
# main and compute). Every vector is routed onto the main role first, so the
# steering has something to move; doctor must see each vector ON ROLE main and
# print one command per vector; --steer-irqs must move each onto the compute
# CPUs, and doctor then sees none on main. Lines: @@GPUAFF-QEMU irqs ...
[ "$GPUAFF_QEMU_SHAPE" = 2s2n-smt2-memnode ] || exit 0
say() { echo "@@GPUAFF-QEMU irqs $*"; }
[ -x /bin/gpuaff ] || { say "skipped no-tool"; exit 0; }
dev=/sys/bus/pci/devices/0000:29:02.0
# The virtio drivers are modules of Debian's kernel (tests/qemu/CMakeLists.txt brings them as /bin/*.ko).
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio-rng; do
  [ -e /bin/$m.ko ] && { insmod /bin/$m.ko 2>/dev/null || say "insmod-failed $m"; }
done
sleep 1
if [ ! -d $dev/msi_irqs ]; then
  say "no-msi driver=$(basename "$(readlink $dev/driver 2>/dev/null)" 2>/dev/null)"
  exit 0
fi
vectors=$(ls $dev/msi_irqs)
say "vectors $(echo $vectors | wc -w)"
gpuaff exec --pci 0000:29:02.0 --policy node --roles main=1 -- sleep 100 &
pid=$!
sleep 1
plan=$(tr '\0' '\n' </proc/$pid/environ | grep '^GPUAFF_PLAN=')
main=$(echo "$plan" | sed -n 's/.* main=\([^ ]*\).*/\1/p')
compute=$(echo "$plan" | sed -n 's/.* compute=\([^ ]*\).*/\1/p')
say "roles main=$main compute=$compute"
for n in $vectors; do
  echo "$main" >/proc/irq/$n/smp_affinity_list 2>/dev/null || say "route-refused $n"
done
# x86 moves a vector at its next interrupt: read the device so that it fires.
rng() { [ -c /dev/hwrng ] || mknod /dev/hwrng c 10 183 2>/dev/null; head -c 64 /dev/hwrng >/dev/null 2>&1; }
rng
gpuaff doctor --pid $pid --irqs >/tmp/irqs-before.txt
say "before-rc $?"
sed 's/^/@@GPUAFF-QEMU irqs before | /' /tmp/irqs-before.txt
say "before-on-main $(grep -c 'ON ROLE main\|onto role main' /tmp/irqs-before.txt)"
say "suggested $(grep -c '^  echo .* > /proc/irq/[0-9]*/smp_affinity_list$' /tmp/irqs-before.txt)"
gpuaff doctor --pid $pid --irqs --steer-irqs >/tmp/irqs-steer.txt
say "steer-rc $?"
sed 's/^/@@GPUAFF-QEMU irqs steer | /' /tmp/irqs-steer.txt
rng
for n in $vectors; do
  say "after $n $(cat /proc/irq/$n/smp_affinity_list) effective $(cat /proc/irq/$n/effective_affinity_list)"
done
gpuaff doctor --pid $pid --irqs >/tmp/irqs-after.txt
sed 's/^/@@GPUAFF-QEMU irqs after | /' /tmp/irqs-after.txt | grep 'IRQ\|steering'
say "after-on-main $(grep -c 'ON ROLE\|onto role' /tmp/irqs-after.txt)"
kill $pid
