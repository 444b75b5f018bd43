# SPDX-License-Identifier: Apache-2.0
# Scenario host_buffers: judges the lines host_buffers.guest.sh printed
# (sourced by run_guest.sh with $shape, $log, $work, $tool and die).
if [[ $shape == 2s2n-smt2-memnode && -n $tool ]]; then
  hb_log=$log.txt
  grep -q '^@@GPUAFF-QEMU host_buffers skipped' "$hb_log" && die "host_buffers: the guest lacks its programs"
  grep -q '^@@GPUAFF-QEMU END scenario host_buffers rc=0' "$hb_log" || die "host_buffers: the guest script failed"
  # GPU 0 is the ATI adapter 15:04.0 behind the expander bridge on node 1, a
  # node with CPUs (4-7): the plan's host nodes are node 1. 48 MiB of 4 KiB
  # pages is 12288 pages, 24 MiB is 6144. The kernel's own answers (move_pages
  # asked by the program, its numa_maps line read by the program) must put
  # every page of the first on node 1 and of the second on node 0.
  hb_line() {  # NAME NODES PAGES NODE: sets hb_address
    local got
    got=$(grep -o "^@@GPUAFF-QEMU host_buffers $1 .*" "$hb_log" | tail -n 1)
    [[ $got =~ address=([0-9a-f]+)\ nodes=$2\ pages=$3\ move_pages=$4:$3\ numa_maps=N$4=$3$ ]] ||
      die "host_buffers: the $1 buffer is not every page on node $4 by the kernel's answer: '${got:-nothing}'"
    hb_address=${BASH_REMATCH[1]}
  }
  hb_line planned 1 12288 1
  planned=$hb_address
  hb_line other 0 6144 0
  other=$hb_address
  # doctor against the rank's own GPUAFF_PLAN: the 24 MiB buffer on node 0 is
  # anonymous, over 16 MiB and wholly off host node 1 (and memory node 1): named,
  # the one problem, exit 7. The 48 MiB one is on node 1: not named. Resident:
  # 12288 pages on node 1, 6144 on node 0 plus the static program's own pages
  # (a few hundred), so about 65% is on node 1, above --min-local 50%: the
  # memory fraction is no problem.
  grep -q '^@@GPUAFF-QEMU END host_buffers doctor rc=7$' "$hb_log" || die "host_buffers: doctor did not exit 7"
  sed -n '/^@@GPUAFF-QEMU BEGIN host_buffers doctor$/,/^@@GPUAFF-QEMU END host_buffers doctor /p' "$hb_log" |
    sed '1d;$d' | python3 -c '
import json, sys
planned, other = sys.argv[1], sys.argv[2]
j = json.load(sys.stdin)
def check(ok, what):
    if not ok:
        sys.exit("host_buffers doctor: " + what + "; the JSON: " + json.dumps(j))
check(j["plan_from"] == "GPUAFF_PLAN" and j["host_nodes"] == "1", "not checked against its own plan with host node 1")
check(len(j["problems"]) == 1 and j["problems"][0].startswith("host buffer at " + other + " (anon, 24.0 MiB resident)"),
      "the one problem is not the buffer at " + other)
by = {m["address"]: m for m in j["memory"]["mappings"]}
check(other in by and by[other]["off_host"] and by[other]["bytes"] == 24 << 20 and by[other]["pages_by_node"] == {"0": 6144},
      "the buffer on node 0 is not listed off the host nodes")
check(planned in by and not by[planned]["off_host"] and by[planned]["pages_by_node"] == {"1": 12288},
      "the buffer on node 1 is not listed on the host nodes")
check([m["address"] for m in j["memory"]["mappings"]][:2] == [planned, other], "the largest two are not the buffers")
' "$planned" "$other" || die "host_buffers: doctor does not name the buffer off the host nodes"
  grep -q "^  $other  anon  24.0 MiB  node 0: 100.0% .*OFF the host nodes" "$hb_log" ||
    die "host_buffers: doctor's text does not mark the buffer off the host nodes"
  # probe: the two CPU nodes (0, 1) against the three memory nodes (0-2).
  grep -q '^@@GPUAFF-QEMU END host_buffers probe rc=0$' "$hb_log" || die "host_buffers: gpuaff probe failed"
  grep -q '^Read bandwidth, GiB/s' "$hb_log" && grep -q '^  CPU node     mem 0     mem 1     mem 2$' "$hb_log" ||
    die "host_buffers: gpuaff probe printed no table of CPU nodes against memory nodes 0-2"
  # Row H ran: 16 MiB = 4096 pages per staging buffer, on node 1 and on node 0.
  grep -q '^@@GPUAFF-QEMU END host_buffers pipeline rc=0$' "$hb_log" || die "host_buffers: the toy pipeline failed"
  grep -q "^H  staging on node(s) 1 (plan's host_nodes) \[node 1: 4096 (of 4096 pages" "$hb_log" &&
    grep -q '^H  staging on node 0 (other node) \[node 0: 4096 (of 4096 pages' "$hb_log" ||
    die "host_buffers: the pipeline's staging buffers are not on node 1 and node 0"
  echo "host_buffers: every page of the planned buffer on node 1 and of the other on node 0 (move_pages, numa_maps)," \
       "doctor names the one off the host nodes, probe printed its table, row H ran"
fi
