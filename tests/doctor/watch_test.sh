#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuaff doctor --watch` against live processes: two ranks started by
# `gpuaff exec` (GPU 0 on CPU 0, GPU 1 on CPU 1 of a root with two fake GPUs,
# as planned_processes.sh builds it), watched every 0.2 s with --format json.
# Then a thread of rank 1 is re-pinned to CPU 0 (outside its plan, CPU 1):
# the watch must name it (thread_moved, with its tid and comm name), put it
# back with --rebind (thread_rebound; the kernel's mask is then CPU 1 again),
# report rank 0 gone when it is killed, and exit 0 on SIGTERM. Meanwhile a
# second watch rewrites a Prometheus textfile that node_exporter (Debian's
# prometheus-node-exporter, when installed) scrapes with no error.
#   watch_test.sh GPUAFF
# Exit 0: passed; 1: a check failed; 77 (ctest's skip): CPUs 0 and 1 are not
# both allowed here.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUAFF" >&2; exit 2; }
gpuaff=$(realpath -- "$1")

# shellcheck source=planned_processes.sh
source "$(dirname "$0")/planned_processes.sh"
need_cpus_0_1
planned_tmp watch

# Two GPUs on node 0 with CPUs 0-1: exclusive gives GPU 0 CPU 0, GPU 1 CPU 1.
root=$tmp/root
two_gpu_root "$root"
start_two_ranks "$root"
failures=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
# Waits (at most 10 s) for a line of FILE that matches the extended regex.
wait_line() {
  for _ in $(seq 200); do grep -qE -- "$2" "$1" && return 0; sleep 0.05; done
  return 1
}

log=$tmp/watch.jsonl
"$gpuaff" doctor --watch --root "$root" --interval 0.2 --format json --rebind >"$log" 2>"$tmp/watch.err" &
watch=$!
pids+=($watch)
# Each rank is reported started, with its plan (exclusive: GPU 0 CPU 0, GPU 1 CPU 1).
for i in 0 1; do
  if wait_line "$log" "\"event\":\"process_started\",\"pid\":${pids[$i]},.*\"expected_cpus\":\"$i\""; then ok "rank $i started, plan CPU $i"
  else bad "no process_started for rank $i"; fi
done
# A textfile watch beside it (the same node), for node_exporter.
textfiles=$tmp/textfile
mkdir -p "$textfiles"
"$gpuaff" doctor --watch --root "$root" --interval 0.2 --format prometheus --textfile "$textfiles/gpuaff.prom" 2>"$tmp/prom.err" &
pwatch=$!
pids+=($pwatch)

# Rank 1's (only) thread re-pinned to CPU 0, outside its plan.
python3 -c 'import os, sys; os.sched_setaffinity(int(sys.argv[1]), {0})' "${pids[1]}"
if wait_line "$log" "\"event\":\"thread_moved\",\"pid\":${pids[1]},.*\"tid\":${pids[1]},\"name\":\"sleep\",\"cpus\":\"0\",\"previous_cpus\":\"1\""; then
  ok "the moved thread is named: tid ${pids[1]} 'sleep', CPUs 1 -> 0"
else bad "no thread_moved for rank 1's thread"; fi
if wait_line "$log" "\"event\":\"thread_rebound\",\"pid\":${pids[1]},.*\"tid\":${pids[1]},.*\"cpus\":\"1\",\"previous_cpus\":\"0\""; then
  ok "--rebind put it back on CPU 1"
else bad "no thread_rebound for rank 1's thread"; fi
# The kernel's answer, not the watch's.
now=$(sed -n 's/^Cpus_allowed_list:\t*//p' "/proc/${pids[1]}/status")
if [[ $now == 1 ]]; then ok "the kernel says CPU 1 again"; else bad "Cpus_allowed_list is '$now', not 1"; fi
if wait_line "$log" "\"event\":\"thread_back\",\"pid\":${pids[1]}"; then ok "next check: thread_back"; else bad "no thread_back"; fi

# node_exporter, when installed, scrapes the textfile the watch keeps rewriting.
exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
for _ in $(seq 200); do [[ -s $textfiles/gpuaff.prom ]] && break; sleep 0.05; done
if [[ -n $exporter ]]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory="$textfiles" >"$tmp/exporter.log" 2>&1 &
  pids+=($!)
  # Ten scrapes 0.1 s apart while the watch rewrites every 0.2 s, in one
  # Python (its start is slow on a loaded CI machine): each must be whole.
  metrics=$tmp/metrics
  errors=$(python3 - "$port" "$metrics" <<'PY'
import sys, time, urllib.request
url = "http://127.0.0.1:%s/metrics" % sys.argv[1]
for _ in range(100):  # until node_exporter answers
    try:
        urllib.request.urlopen(url, timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
bad = 0
for _ in range(10):
    text = urllib.request.urlopen(url, timeout=2).read().decode()
    bad += "node_textfile_scrape_error 0" not in text.splitlines()
    time.sleep(0.1)
open(sys.argv[2], "w").write(text)
print(bad)
PY
  ) || errors=failed
  [[ $errors == 0 ]] || bad "$errors of 10 scrapes had node_textfile_scrape_error not 0 (or node_exporter did not answer)"
  if grep -qE '^gpuaff_watch_checks_total [0-9]+$' "$metrics" && grep -qF "gpuaff_healthy{gpu=\"1\",pci=\"0000:65:00.0\",pid=\"${pids[1]}\"" "$metrics"; then
    ok "10 scrapes without error while --watch rewrites; gpuaff_watch_checks_total and rank 1 served"
  else bad "the last scrape lacks gpuaff_watch_checks_total or rank 1"; fi
else
  echo "note: node_exporter is not installed; the textfile's series checked alone"
  grep -qE '^gpuaff_watch_events_total\{kind="thread_moved"\} [0-9]+$' "$textfiles/gpuaff.prom" && ok "textfile written" || bad "textfile lacks gpuaff_watch_events_total"
fi
left=$(find "$textfiles" -mindepth 1 ! -name gpuaff.prom | wc -l)
[[ $left -eq 0 ]] && ok "no temporary file left beside it" || bad "$left other file(s) in $textfiles"

# Rank 0 ends: gone.
kill -KILL "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
if wait_line "$log" "\"event\":\"process_gone\",\"pid\":${pids[0]}"; then ok "rank 0 gone"; else bad "no process_gone for rank 0"; fi
# SIGTERM: exit 0, after a whole line.
kill -TERM "$watch" "$pwatch"
rc=0; wait "$watch" || rc=$?
[[ $rc -eq 0 ]] && ok "SIGTERM: exit 0" || bad "--watch exited $rc on SIGTERM: $(cat "$tmp/watch.err")"
rc=0; wait "$pwatch" || rc=$?
[[ $rc -eq 0 ]] && ok "SIGTERM (textfile watch): exit 0" || bad "textfile --watch exited $rc: $(cat "$tmp/prom.err")"
python3 - "$log" <<'PY' && ok "every line is one JSON object" || bad "a line of the log is not JSON"
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)
PY
# exec gives a runtime found in the environment its documented switch
# against re-pinning (TensorRT-LLM, found by one of its TLLM_ variables), and
# never replaces a value the user set.
got=$(TLLM_LOG_LEVEL=info "$gpuaff" exec --root "$root" --gpu 0 --policy exclusive -- env | grep '^TLLM_NUMA_AWARE_WORKER_AFFINITY=' || true)
[[ $got == TLLM_NUMA_AWARE_WORKER_AFFINITY=0 ]] && ok "exec exports TLLM_NUMA_AWARE_WORKER_AFFINITY=0 for TensorRT-LLM" || bad "exec exported '$got'"
got=$(TLLM_LOG_LEVEL=info TLLM_NUMA_AWARE_WORKER_AFFINITY=1 "$gpuaff" exec --root "$root" --gpu 0 --policy exclusive -- env | grep '^TLLM_NUMA_AWARE_WORKER_AFFINITY=' || true)
[[ $got == TLLM_NUMA_AWARE_WORKER_AFFINITY=1 ]] && ok "the user's value is kept" || bad "the user's value became '$got'"
got=$(env -u TLLM_LOG_LEVEL "$gpuaff" exec --root "$root" --gpu 0 --policy exclusive -- env | grep -c '^TLLM_NUMA_AWARE_WORKER_AFFINITY=' || true)
[[ $got == 0 ]] && ok "no TensorRT-LLM found: nothing exported" || bad "exported without TensorRT-LLM"
# Usage mistakes: said, exit 2.
for args in "--pid 1 --watch" "--interval 5" "--watch --interval 0" "--watch --count x" "--watch --format prometheus"; do
  rc=0; "$gpuaff" doctor $args >/dev/null 2>"$tmp/err" || rc=$?
  [[ $rc -eq 2 && -s $tmp/err ]] && ok "doctor $args: exit 2, $(head -c 80 "$tmp/err")" || bad "doctor $args: exit $rc"
done
if ((failures > 0)); then
  echo "FAIL: $failures check(s); the watch's log:"; cat "$log"; cat "$tmp/watch.err"
  exit 1
fi
echo "PASS: doctor --watch names the moved thread, puts it back, and keeps the textfile whole"
