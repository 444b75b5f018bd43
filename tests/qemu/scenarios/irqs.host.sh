# SPDX-License-Identifier: Apache-2.0
# Sourced by run_guest.sh: checks irqs.guest.sh's lines (see there).
if [[ $shape == 2s2n-smt2-memnode && -n $tool ]]; then
  irq_line() { grep -o "^@@GPUAFF-QEMU irqs $1.*" "$log.txt" | tail -n 1; }
  if [[ -n $(irq_line no-msi) ]]; then
    # A guest kernel without MSI for the device: only that doctor ran is checked.
    echo "irqs: the guest's virtio-rng has no MSI vectors ($(irq_line no-msi)): steering not tested"
  else
    n=$(irq_line vectors | awk '{print $4}')
    [[ -n $n && $n -ge 1 ]] || die "irqs: no 'vectors' line, or no vector (guest lines: $(grep '@@GPUAFF-QEMU irqs' "$log.txt" | head -5))"
    roles=$(irq_line roles)
    main=$(sed -n 's/.* main=\([^ ]*\) .*/\1/p' <<<"$roles")
    compute=$(sed -n 's/.* compute=\(.*\)$/\1/p' <<<"$roles")
    # Node 0 is CPUs 0-3, two cores (0-1, 2-3): main takes one core, compute the other.
    [[ ($main == 0-1 && $compute == 2-3) || ($main == 2-3 && $compute == 0-1) ]] ||
      die "irqs: the roles are not one core each of node 0: $roles"
    [[ -z $(irq_line route-refused) ]] || die "irqs: the guest refused to route a vector: $(irq_line route-refused)"
    # Every vector was routed onto main (and the device read, so that each moved
    # there): doctor sees each on role main and suggests one command each.
    [[ $(irq_line before-rc) == *" 0" || $(irq_line before-rc) == *" 7" ]] || die "irqs: doctor failed: $(irq_line before-rc)"
    [[ $(irq_line before-on-main | awk '{print $4}') == "$n" ]] || die "irqs: $(irq_line before-on-main), not $n"
    [[ $(irq_line suggested | awk '{print $4}') == "$n" ]] || die "irqs: $(irq_line suggested), not $n commands"
    grep -q "^@@GPUAFF-QEMU irqs steer | steered: $n of $n vector(s)$" "$log.txt" ||
      die "irqs: --steer-irqs did not steer every vector: $(grep '^@@GPUAFF-QEMU irqs steer' "$log.txt" | tail -3)"
    # Each vector now may use only the compute CPUs, and none lands on a role.
    while read -r _ _ _ irq cpus _; do
      [[ $cpus == "$compute" ]] || die "irqs: IRQ $irq routed to $cpus after steering, not $compute"
    done < <(grep "^@@GPUAFF-QEMU irqs after [0-9]" "$log.txt")
    # A vector still shown ON ROLE after steering must be a pending move: x86
    # moves a vector at its next interrupt (delivered to the old CPU), and a
    # vector that does not fire (virtio's configuration vector) keeps its old
    # effective CPU until then; what it may use must be compute already.
    while read -r line; do
      [[ $line == *"may use $compute,"* ]] || die "irqs: still on a role after steering, not routed to $compute: $line"
    done < <(grep "^@@GPUAFF-QEMU irqs after | .*ON ROLE" "$log.txt")
    echo "irqs: $n MSI-X vector(s) of the virtio-rng on role main ($main) seen, steered to compute ($compute) by --steer-irqs"
  fi
fi
