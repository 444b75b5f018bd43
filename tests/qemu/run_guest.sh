#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Boots one multi-NUMA guest under QEMU (TCG) and checks gpuaff against the
# real Linux kernel inside it. Used by ctest (label `qemu`) and by hand:
#
#   tests/qemu/run_guest.sh --shape 2s2n-smt2-memnode --guest build/x/tests/qemu/qemu_guest_checks \
#       --gpuaff build/x/tests/qemu/qemu_gpuaff_static --work /tmp/guest
#
# Steps: pack an initramfs (busybox, the guest check program, the gpuaff tool,
# /init), boot the kernel with the shape's QEMU flags, read the serial console,
# and fail unless the guest printed `@@GPUAFF-QEMU END checks rc=0` (and, with a
# tool, a recording that matches fixtures/qemu-<shape>.tar.xz as the build unpacks it).
#
# Exit codes: 0 pass, 1 fail, 77 skipped (no qemu-system-x86_64, kernel image,
# busybox or cpio on this machine; .ci/run installs them so CI never skips).
#
# Environment: GPUAFF_QEMU_KERNEL (kernel image; default: newest /boot/vmlinuz-*),
# GPUAFF_QEMU_BIN (default qemu-system-x86_64), GPUAFF_QEMU_TIMEOUT (seconds for
# one guest, default 180), GPUAFF_QEMU_UPDATE_FIXTURES=1 (copy the recording
# into the fixture folder instead of comparing).
set -uo pipefail

shape="" guest="" tool="" host_tool="" work="" fixture="" busybox="" first_touch=""
programs=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --guest) guest=$2; shift 2 ;;
    --gpuaff) tool=$2; shift 2 ;;
    --host-gpuaff) host_tool=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --fixture) fixture=$2; shift 2 ;;
    --busybox) busybox=$2; shift 2 ;;
    --first-touch) first_touch=$2; shift 2 ;;
    --program) programs+=("$2"); shift 2 ;;
    *) echo "run_guest.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -z $shape || -z $guest || -z $work ]]; then
  echo "usage: run_guest.sh --shape NAME --guest PROGRAM --work DIR [--gpuaff STATIC_TOOL]" \
       "[--host-gpuaff TOOL] [--fixture DIR] [--busybox PATH] [--first-touch PROGRAM] [--program PATH]..." >&2
  exit 2
fi

skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "FAILED [$shape]: $*" >&2; exit 1; }

# ---- the shapes: QEMU flags; the guest program holds the matching expectations ----
common_memory() {  # size of each node's memory
  echo "-object memory-backend-ram,id=m$1,size=512M"
}
shape_append=""  # kernel command-line words a shape adds (isolcpus=..., say)
case $shape in
  2s2n-smt2-memnode)
    # 2 sockets x 2 cores x 2 threads; node 0 = socket 0, node 1 = socket 1,
    # node 2 has memory and no CPU. Behind a PCI expander bridge on node 1
    # (bus 0x14 -> devices on bus 0x15): an e1000 (15:03.0) and two ATI VGA
    # adapters (15:04.0, 15:05.0); behind one on node 0 (bus 0x28 -> 0x29): a
    # virtio-rng (29:02.0) and a third ATI VGA (29:03.0). The ATI adapters
    # (vendor 0x1002, class 0x0300) are GPUs by docs/contract.md section 2.
    shape_args=(-m 1536 -smp 8,sockets=2,cores=2,threads=2
      $(common_memory 0) $(common_memory 1) $(common_memory 2)
      -numa node,nodeid=0,cpus=0-3,memdev=m0 -numa node,nodeid=1,cpus=4-7,memdev=m1
      -numa node,nodeid=2,memdev=m2
      -device pxb,id=bridge1,bus_nr=20,numa_node=1,bus=pci.0
      -device e1000,bus=bridge1,addr=0x3,netdev=n1 -netdev user,id=n1,restrict=on
      -device ati-vga,bus=bridge1,addr=0x4 -device ati-vga,bus=bridge1,addr=0x5
      -device pxb,id=bridge0,bus_nr=40,numa_node=0,bus=pci.0
      -device virtio-rng-pci,bus=bridge0,addr=0x2 -device ati-vga,bus=bridge0,addr=0x3)
    shape_pci=(0000:15:03.0 0000:29:02.0)
    # Core 1 of each socket (CPUs 2-3, 6-7) without the scheduler tick: the
    # reserved scenario (scenarios/reserved.*.sh). nohz_full leaves every
    # process's affinity as it is (isolcpus would narrow init's).
    shape_append="nohz_full=2-3,6-7"
    ;;
  1s4n-nps4)
    # 1 socket, 4 dies of 1 core x 2 threads, each die its own node and L3
    # (like AMD's NPS4). A virtio-rng behind a PCI expander bridge on node 2
    # (bus 0x20 -> 0000:21:04.0): there `socket` (0-7) differs from `node` (4-5).
    shape_args=(-m 2048 -smp 8,sockets=1,dies=4,cores=1,threads=2
      $(common_memory 0) $(common_memory 1) $(common_memory 2) $(common_memory 3)
      -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1
      -numa node,nodeid=2,cpus=4-5,memdev=m2 -numa node,nodeid=3,cpus=6-7,memdev=m3
      -device pxb,id=bridge2,bus_nr=32,numa_node=2,bus=pci.0
      -device virtio-rng-pci,bus=bridge2,addr=0x4 -nic none)
    shape_pci=(0000:21:04.0)
    ;;
  *) die "unknown shape '$shape' (known: 2s2n-smt2-memnode, 1s4n-nps4)" ;;
esac

# ---- what this machine must have ----
qemu=${GPUAFF_QEMU_BIN:-qemu-system-x86_64}
command -v "$qemu" >/dev/null || skip "$qemu not found (Debian: apt-get install qemu-system-x86)"
kernel=${GPUAFF_QEMU_KERNEL:-}
if [[ -z $kernel ]]; then
  kernel=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
fi
[[ -n $kernel ]] || skip "no kernel image /boot/vmlinuz-* (Debian: apt-get install linux-image-amd64, or set GPUAFF_QEMU_KERNEL)"
[[ -e $kernel ]] || skip "kernel image $kernel does not exist (set GPUAFF_QEMU_KERNEL)"
[[ -r $kernel ]] || skip "kernel image $kernel is not readable by this user (set GPUAFF_QEMU_KERNEL to a readable copy)"
if [[ -z $busybox ]]; then
  for b in /bin/busybox /usr/bin/busybox; do [[ -x $b ]] && { busybox=$b; break; }; done
fi
[[ -n $busybox ]] || skip "busybox not found (Debian: apt-get install busybox-static)"
command -v cpio >/dev/null || skip "cpio not found (Debian: apt-get install cpio)"
command -v gzip >/dev/null || skip "gzip not found"
[[ -x $guest ]] || die "guest program '$guest' is missing: build the target qemu_guest_checks"
if [[ -n $tool && ! -x $tool ]]; then die "gpuaff tool '$tool' is missing: build it first"; fi
if [[ -n $first_touch && ! -x $first_touch ]]; then
  die "program '$first_touch' is missing: build the target qemu_first_touch"
fi

# ---- the initramfs ----
rm -rf "$work"
root=$work/root
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/tmp" || die "cannot create $work"
# A dynamically linked program still runs in the guest if its libraries come along.
copy_with_libs() {  # program, name in /bin
  cp "$1" "$root/bin/$2"
  local lib
  for lib in $(LC_ALL=C ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}
copy_with_libs "$busybox" busybox
copy_with_libs "$guest" guest_checks
[[ -n $tool ]] && copy_with_libs "$tool" gpuaff
[[ -n $first_touch ]] && copy_with_libs "$first_touch" first_touch
for p in "${programs[@]}"; do
  [[ -x $p ]] || die "program '$p' is missing: build it first"
  copy_with_libs "$p" "$(basename "$p")"
done
# Scenarios (tests/qemu/scenarios/README.md): each NAME.guest.sh runs in the
# guest after the shared checks; each NAME.host.sh judges its lines here.
scenarios=$(cd "$(dirname "$0")" && pwd)/scenarios
mkdir -p "$root/scenarios"
for s in "$scenarios"/*.guest.sh; do
  [[ -e $s ]] && cp "$s" "$root/scenarios/"
done
cp "$(dirname "$0")/init.sh" "$root/init"
chmod 755 "$root/init" "$root/bin/"*
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -1 >"$work/initrd.gz") ||
  die "cannot pack the initramfs"

# ---- boot ----
limit=${GPUAFF_QEMU_TIMEOUT:-180}
log=$work/serial.log
echo "booting shape $shape: kernel $kernel, limit ${limit}s, serial log $log"
start=$SECONDS
cmd=("$qemu" -accel tcg -cpu Skylake-Server -display none -no-reboot
  -monitor none -serial stdio -kernel "$kernel" -initrd "$work/initrd.gz"
  -append "console=ttyS0 quiet loglevel=3 panic=-1 gpuaff_shape=$shape${shape_append:+ $shape_append}"
  "${shape_args[@]}")
printf '%q ' "${cmd[@]}" >"$work/qemu.cmdline"
echo "qemu command line: $work/qemu.cmdline"
# QEMU's TCG emulator itself can crash under load (seen once: SIGSEGV, exit
# 139, after 9 s, on a busy 2-core machine; the rerun passed). A crash of the
# emulator by a signal says nothing of the guest: boot once more, then judge.
# So does one boot that ran past the limit (seen once in hundreds of runs:
# the first test run on a freshly started 2-core machine, where the same
# guest then took 29 s): its serial log is kept beside the second one's, and
# a guest that hangs again fails the test.
for attempt in 1 2; do
  timeout -k 10 "$limit" "${cmd[@]}" </dev/null >"$log" 2>"$work/qemu.stderr"
  qemu_rc=$?
  ((attempt == 1)) || break
  if ((qemu_rc == 124 || qemu_rc == 137)); then
    cp "$log" "$work/serial.first-boot.log"
    marker=$(tr -d '\r' <"$log" | grep -a '^@@GPUAFF-QEMU' | tail -n 1)
    echo "the guest did not power off within ${limit}s; its last marker: ${marker:-none (it did not reach the checks)}" \
      "(serial log: $work/serial.first-boot.log); booting once more"
    continue
  fi
  ((qemu_rc > 128)) || break
  echo "qemu itself died with signal $((qemu_rc - 128)) (exit $qemu_rc); booting once more"
done
tr -d '\r' <"$log" >"$log.txt"
echo "guest ran $((SECONDS - start))s (qemu exit $qemu_rc)"
# The guest's report, without the recording blob.
sed '/^@@GPUAFF-QEMU BEGIN recording/,/^@@GPUAFF-QEMU END recording/d' "$log.txt"
if [[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]]; then
  die "the guest did not power off within ${limit}s (hung?); serial log above"
fi
[[ $qemu_rc -eq 0 ]] || { cat "$work/qemu.stderr" >&2; die "qemu exited with $qemu_rc"; }
grep -q '^@@GPUAFF-QEMU DONE' "$log.txt" || die "the guest stopped before its last marker (crash or kernel panic?)"

checks=$(grep -o '^@@GPUAFF-QEMU END checks rc=[0-9]*' "$log.txt" | tail -n 1)
[[ -n $checks ]] || die "no result line from the guest checks"
[[ $checks == *"rc=0" ]] || die "guest checks failed ($checks); see the doctest output above"

# ---- the recording ----
if [[ -n $tool ]]; then
  rec_line=$(grep -o '^@@GPUAFF-QEMU END record rc=[0-9]*' "$log.txt" | tail -n 1)
  [[ $rec_line == *"rc=0" ]] || die "gpuaff record failed in the guest (${rec_line:-no result line})"
  rec=$work/recording
  mkdir -p "$rec"
  sed -n '/^@@GPUAFF-QEMU BEGIN recording/,/^@@GPUAFF-QEMU END recording/p' "$log.txt" |
    grep -E '^[A-Za-z0-9+/=]+$' | base64 -d | tar -xzf - -C "$rec" ||
    die "cannot decode the recording from the serial log"
  [[ -d $rec/sys/devices/system/node ]] || die "the recording has no sys/devices/system/node"
  echo "recording: $rec ($(find "$rec" -type f | wc -l) files)"
  if [[ -n $fixture ]]; then
    if [[ ${GPUAFF_QEMU_UPDATE_FIXTURES:-0} == 1 ]]; then
      rm -rf "$fixture" && mkdir -p "$fixture" && cp -a "$rec/." "$fixture/" || die "cannot write $fixture"
      echo "updated fixture $fixture; archive it with: fixtures/generate.py --pack $fixture qemu-$shape"
    elif [[ ! -d $fixture ]]; then
      die "fixture $fixture does not exist; make it with GPUAFF_QEMU_UPDATE_FIXTURES=1"
    else
      # The checked-in fixture must still be what the real kernel shows: compare
      # what gpuaff reads from both (the root path itself differs).
      if [[ -n $host_tool ]]; then
        compare() {  # what gpuaff reads from both; the root path itself differs
          local a b
          a=$("$host_tool" "$@" --root "$rec" 2>&1) || die "gpuaff $* --root $rec failed: $a"
          b=$("$host_tool" "$@" --root "$fixture" 2>&1) || die "gpuaff $* --root $fixture failed: $b"
          if ! diff <(grep -vE '"(root|origin)"' <<<"$a") <(grep -vE '"(root|origin)"' <<<"$b") >"$work/fixture.diff"; then
            cat "$work/fixture.diff"
            die "gpuaff $* reads fixture $fixture differently from the guest (diff above;" \
                "refresh with GPUAFF_QEMU_UPDATE_FIXTURES=1)"
          fi
        }
        compare topo --format json
        for bdf in "${shape_pci[@]}"; do compare bind --pci "$bdf" --format json; done
      else
        if ! diff -r --exclude=status --exclude=meminfo "$rec" "$fixture" >"$work/fixture.diff"; then
          cat "$work/fixture.diff"
          die "fixture $fixture no longer matches the guest (diff above; refresh with GPUAFF_QEMU_UPDATE_FIXTURES=1)"
        fi
      fi
      echo "fixture $fixture matches the guest"
    fi
  fi
fi
# ---- --baseline on a real kernel (init.sh): cgroup cpuset 2-7, taskset 5 ----
# node 0 = CPUs 0-3 (the virtio-rng 29:02.0), node 1 = 4-7 (the e1000 15:03.0).
#   affinity: the mask taskset left, 5, on node 1; nothing on node 0 (exit 5);
#   cgroup:   the node within the cpuset, wider than the mask: 4-7 and 2-3;
#   nearest:  under affinity, node 0's device gets node 1's allowed CPU 5.
if [[ -n $tool && $shape == 2s2n-smt2-memnode ]]; then
  expect_cgroup() {  # RUN BDF "rc=N cpus=LIST"
    local line
    line=$(grep -o "^@@GPUAFF-QEMU cgroup $1 $2 .*" "$log.txt" | tail -n 1)
    [[ $line == "@@GPUAFF-QEMU cgroup $1 $2 $3" ]] ||
      die "--baseline in a cgroup: expected '$1 $2 $3', the guest printed '${line:-nothing}'"
  }
  expect_cgroup affinity 0000:15:03.0 "rc=0 cpus=5"
  expect_cgroup cgroup 0000:15:03.0 "rc=0 cpus=4-7"
  expect_cgroup affinity 0000:29:02.0 "rc=5 cpus="
  expect_cgroup cgroup 0000:29:02.0 "rc=0 cpus=2-3"
  expect_cgroup nearest 0000:29:02.0 "rc=0 cpus=5"
  echo "--baseline affinity and cgroup match what the kernel enforces in a cgroup v2 cpuset"
fi
# ---- gpuaff doctor on pages the kernel placed (init.sh) ----
# GPU 0 is the ATI adapter 0000:15:04.0 behind the expander bridge on node 1,
# so its plan (policy node) expects node 1's CPUs 4-7 and memory node 1. Both
# processes run under `taskset -c 4-7`: their one thread is inside the plan and
# only the memory decides the verdict. Each wrote 64 MiB = 16384 pages of 4 KiB
# under MPOL_BIND, so at least 16384 of its resident pages are on the bound
# node; everything else it has resident (the static program's text and data,
# its stack) is a few hundred pages at most, so:
#   remote (bound to node 0): >= 16384 pages on node 0, local fraction at most
#     ~300/16384 < 0.1, below --min-local 0.5: not healthy, exit 7, one problem;
#   local (bound to node 1): >= 16384 pages on node 1, local fraction at least
#     16384/(16384+300) > 0.9: healthy, exit 0, no problem.
# The plan's host nodes are node 1 too (the GPU's node, which has CPUs), so the
# remote run's 64 MiB is also a host buffer off them: a second problem.
if [[ -n $tool && -n $first_touch && $shape == 2s2n-smt2-memnode ]]; then
  command -v python3 >/dev/null || die "python3 is needed to read gpuaff doctor's JSON"
  expect_doctor() {  # RUN EXIT_CODE BOUND_NODE HEALTHY
    local run=$1 line json
    grep -q "^@@GPUAFF-QEMU doctor $run touched=yes" "$log.txt" ||
      die "doctor $run: first_touch did not place its memory (see its message in the serial log above)"
    line=$(grep -o "^@@GPUAFF-QEMU END doctor $run rc=[0-9]*" "$log.txt" | tail -n 1)
    [[ $line == "@@GPUAFF-QEMU END doctor $run rc=$2" ]] ||
      die "doctor $run: expected exit $2, the guest printed '${line:-nothing}'"
    json=$(sed -n "/^@@GPUAFF-QEMU BEGIN doctor $run\$/,/^@@GPUAFF-QEMU END doctor $run /p" "$log.txt" | sed '1d;$d')
    python3 -c '
import json, sys
run, node, healthy = sys.argv[1], sys.argv[2], sys.argv[3] == "true"
j = json.load(sys.stdin)
def check(ok, what):
    if not ok:
        sys.exit(f"doctor {run}: {what}; the JSON: {json.dumps(j)}")
check(j["gpu"] == 0 and j["bdf"] == "0000:15:04.0", "GPU 0 is not 0000:15:04.0")
check(j["expected_cpus"] == "4-7" and j["memory_nodes"] == "1", "the plan is not CPUs 4-7 with memory node 1")
check(len(j["threads"]) == 1 and j["threads"][0]["cpus"] == "4-7" and j["threads"][0]["inside"],
      "expected one thread on CPUs 4-7, inside the plan")
pages = j["memory"]["pages_by_node"]
total = sum(pages.values())
check(pages.get(node, 0) >= 16384, f"fewer than the 16384 pages written on node {node}")
check(total - pages.get(node, 0) <= 1000, "more than 1000 pages off the bound node")
fraction = j["memory"]["local_fraction"]
check(fraction is not None, "no local fraction")
if node == "1":
    check(fraction > 0.9, f"local fraction {fraction} is not above 0.9")
else:
    check(fraction < 0.1, f"local fraction {fraction} is not below 0.1")
problems = j["problems"]
check(j["healthy"] == healthy, "healthy is " + str(j["healthy"]))
check(len(problems) == (0 if healthy else 2), f"problems: {problems}")
# The 64 MiB is one anonymous mapping (possibly merged with a neighbour of a
# few pages): on node 0 it is a host buffer off the plan host node 1 (the
# GPU node); on node 1 it is where it belongs.
off = [m for m in j["memory"]["mappings"] if m["off_host"]]
check(j["host_nodes"] == "1", "the host nodes of the plan are not node 1")
if not healthy:
    check("resident pages" in problems[0], "the first problem is not about the resident pages")
    check(problems[1].startswith("host buffer at " + off[0]["address"] if off else "?"),
          "the second problem does not name the buffer off the host nodes")
    check(len(off) == 1 and off[0]["kind"] == "anon" and off[0]["pages_by_node"].get("0", 0) >= 16384,
          "the 64 MiB on node 0 is not the one mapping named off the host nodes")
else:
    check(not off, "a mapping is named off the host nodes")
    big = [m for m in j["memory"]["mappings"] if m["pages_by_node"].get("1", 0) >= 16384]
    check(len(big) == 1, "the 64 MiB on node 1 is not among the largest mappings")
' "$run" "$3" "$4" <<<"$json" || die "doctor $run: the report does not match the placement (above)"
  }
  expect_doctor remote 7 0 false
  expect_doctor local 0 1 true
  echo "gpuaff doctor reports memory first-touched on node 0 as remote and on node 1 as local"
fi
# ---- scenarios (tests/qemu/scenarios/README.md) ----
# Each NAME.host.sh is sourced here with: $shape, $log (the serial log, CRs
# removed, as $log.txt), $work, $tool, and die(); it checks its guest lines.
for s in "$scenarios"/*.host.sh; do
  [[ -e $s ]] || continue
  # shellcheck source=/dev/null
  source "$s"
done
echo "PASSED [$shape]"
