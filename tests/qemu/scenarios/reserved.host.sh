# SPDX-License-Identifier: Apache-2.0
# Checks reserved.guest.sh's lines (sourced by run_guest.sh after the guest
# powered off). Only shape 2s2n-smt2-memnode boots with nohz_full=2-3,6-7.
if [[ $shape == 2s2n-smt2-memnode ]]; then
  grep -q '^@@GPUAFF-QEMU reserved skipped=no-tool' "$log.txt" && { echo "reserved: skipped (no static tool)"; return 0; }
  # The kernel took the words: nohz_full lists 2-3,6-7.
  grep -q '^@@GPUAFF-QEMU reserved nohz_full=2-3,6-7$' "$log.txt" || die "reserved: the guest's nohz_full is not 2-3,6-7"
  # GPU 0 is the first ATI adapter in bus order, 0000:15:04.0, on node 1 (CPUs
  # 4-7). Housekeeping = online 0-7 less 2-3,6-7 = 0-1,4-5; taken out, node 1
  # keeps 6-7: exec binds the command there.
  grep -q '^@@GPUAFF-QEMU reserved auto Cpus_allowed_list:6-7 rc=0$' "$log.txt" ||
    die "reserved: exec --reserve-os-cores auto did not bind to 6-7: $(grep '@@GPUAFF-QEMU reserved auto' "$log.txt")"
  # Without auto GPU 0 gets node 1's 4-7, cores {4,5} and {6,7}; main=1 takes
  # the isolated core {6,7} first, compute the rest (4-5).
  grep '^@@GPUAFF-QEMU reserved roles ' "$log.txt" | grep -q ' main=6-7' ||
    die "reserved: --roles main=1 did not put main on 6-7: $(grep '@@GPUAFF-QEMU reserved roles' "$log.txt")"
  grep -q '^@@GPUAFF-QEMU reserved topo .*housekeeping CPUs: 0-1,4-5' "$log.txt" ||
    die "reserved: topo does not show housekeeping CPUs 0-1,4-5"
  echo "reserved: nohz_full=2-3,6-7 read; --reserve-os-cores auto bound exec to 6-7; main on isolated 6-7; topo shows 0-1,4-5"
fi
