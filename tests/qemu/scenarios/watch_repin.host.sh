# SPDX-License-Identifier: Apache-2.0
# Checks watch_repin.guest.sh's lines (scenarios/README.md). Sourced by
# run_guest.sh with $shape, $log, $work, $tool and die().
if [[ $shape == 2s2n-smt2-memnode ]]; then
  grep -q '^@@GPUAFF-QEMU watch_repin skipped' "$log.txt" && die "watch_repin: /bin/gpuaff or /bin/repinner missing in the guest"
  head=$(grep -m1 '^@@GPUAFF-QEMU watch_repin pid=' "$log.txt") || die "watch_repin: no start line"
  pid=$(sed -n 's/.* pid=\([0-9]*\) .*/\1/p' <<<"$head")
  tid=$(sed -n 's/.* tid=\([0-9]*\) .*/\1/p' <<<"$head")
  # GPU 0 is 15:04.0, behind the bridge on node 1 (CPUs 4-7): exec binds there.
  [[ $head == *" before=4-7" ]] || die "watch_repin: the thread did not start on node 1's CPUs 4-7: $head"
  # The thread moves itself to the CPUs it was not allowed: 0-3 (node 0).
  repin=$(grep -m1 '^@@GPUAFF-QEMU watch_repin repinned' "$log.txt")
  [[ $repin == *"rc=0 cpus=0,1,2,3" ]] || die "watch_repin: the thread did not re-pin itself to 0-3: $repin"
  at=$(sed -n 's/.* at=\([0-9]*\) .*/\1/p' <<<"$repin")
  json=$(sed -n '/^@@GPUAFF-QEMU BEGIN watch_repin log/,/^@@GPUAFF-QEMU END watch_repin log/p' "$log.txt" | sed '1d;$d')
  check=$(cat <<'PY'
import json, sys
pid, tid, at = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
events = [json.loads(l) for l in sys.stdin if l.startswith("{")]
moved = [e for e in events if e["event"] == "thread_moved" and e.get("tid") == tid]
if not moved:
    print("no thread_moved for tid %d" % tid); sys.exit(1)
m = moved[0]
# Its name and where it went: the thread names itself "repinner" and moved
# from the plan (4-7) to node 0's CPUs (0-3).
assert m["pid"] == pid and m["name"] == "repinner", m
assert m["cpus"] == "0-3" and m["previous_cpus"] == "4-7" and m["expected_cpus"] == "4-7", m
# Within one interval (2 s) of the move, plus the clocks' rounding to whole
# seconds (1 s): the first check after the move saw it.
import calendar, time
seen = calendar.timegm(time.strptime(m["time"], "%Y-%m-%dT%H:%M:%SZ"))
assert seen - at <= 3, "reported %d s after the move" % (seen - at)
back = [e for e in events if e["event"] == "thread_rebound" and e.get("tid") == tid]
assert back and back[0]["cpus"] == "4-7", back
print("watch_repin: thread_moved after %d s, then put back" % (seen - at))
PY
)
  python3 -c "$check" "$pid" "$tid" "$at" <<<"$json" || { echo "$json"; die "watch_repin: the watch's log does not report the move (above)"; }
  after=$(grep -m1 '^@@GPUAFF-QEMU watch_repin after=' "$log.txt")
  # The kernel's answer after the remedy: the thread is on node 1's CPUs again.
  [[ $after == "@@GPUAFF-QEMU watch_repin after=4-7" ]] || die "watch_repin: after --rebind the kernel says: $after"
  grep -q '^@@GPUAFF-QEMU watch_repin watch_rc=0' "$log.txt" || die "watch_repin: doctor --watch did not exit 0 on SIGTERM"
  echo "doctor --watch names the thread that re-pinned itself (repinner, tid $tid) and --rebind puts it back on 4-7"
fi
