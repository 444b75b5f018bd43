# SPDX-License-Identifier: Apache-2.0
# doctor --watch on a thread that re-pins itself (scenarios/README.md). In the
# 2s2n guest, GPU 0 (the ATI adapter 15:04.0) is on node 1, CPUs 4-7: `gpuaff
# exec --gpu 0` binds /bin/repinner there; its thread "repinner" then moves
# itself onto the CPUs it was not allowed (0-3, node 0). `doctor --watch
# --interval 2 --rebind` must report it (thread_moved, its name and tid) and
# put it back; the kernel's Cpus_allowed_list of the thread says where it is.
[ "$GPUAFF_QEMU_SHAPE" = 2s2n-smt2-memnode ] || exit 0
[ -x /bin/gpuaff ] && [ -x /bin/repinner ] || { echo "@@GPUAFF-QEMU watch_repin skipped"; exit 0; }
rm -f /tmp/go /tmp/go.done /tmp/tid /tmp/watch.jsonl
/bin/gpuaff exec --gpu 0 --root / -- /bin/repinner /tmp/go /tmp/tid &
pid=$!
i=0
while [ ! -e /tmp/tid ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
tid=$(cat /tmp/tid 2>/dev/null)
echo "@@GPUAFF-QEMU watch_repin pid=$pid tid=$tid before=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/task/$tid/status)"
/bin/gpuaff doctor --watch --root / --interval 2 --format json --rebind >/tmp/watch.jsonl 2>/tmp/watch.err &
watch=$!
i=0
while ! grep -q "\"event\":\"process_started\",\"pid\":$pid," /tmp/watch.jsonl 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
touch /tmp/go
i=0
while [ ! -e /tmp/go.done ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
moved_at=$(date +%s)
echo "@@GPUAFF-QEMU watch_repin repinned at=$moved_at $(cat /tmp/go.done 2>/dev/null)"
i=0
while ! grep -q '"event":"thread_rebound"' /tmp/watch.jsonl 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
echo "@@GPUAFF-QEMU watch_repin after=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/task/$tid/status)"
kill -TERM $watch
wait $watch
echo "@@GPUAFF-QEMU watch_repin watch_rc=$?"
kill $pid 2>/dev/null
wait $pid 2>/dev/null
echo "@@GPUAFF-QEMU BEGIN watch_repin log"
cat /tmp/watch.jsonl /tmp/watch.err
echo "@@GPUAFF-QEMU END watch_repin log"
