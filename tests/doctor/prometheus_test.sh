#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuaff doctor --all --format prometheus` through node_exporter's textfile
# collector, as a site runs it: two ranks started by `gpuaff exec` (GPU 0 on
# CPU 0, GPU 1 on CPU 1 of a root with two fake GPUs), the report written
# into the collector's directory, node_exporter (Debian's
# prometheus-node-exporter) started on 127.0.0.1 with only that collector,
# and its /metrics scraped: the file must parse (node_textfile_scrape_error
# 0) and carry each rank's series.
#   prometheus_test.sh GPUAFF
# Exit 0: passed; 1: a check failed; 77 (ctest's skip): node_exporter is not
# installed, or CPUs 0 and 1 are not both allowed here.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUAFF" >&2; exit 2; }
gpuaff=$(realpath -- "$1")
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
[[ -n $exporter ]] || skip "node_exporter is not installed (Debian: apt-get install prometheus-node-exporter)"
command -v python3 >/dev/null || skip "python3 is needed to scrape"

# shellcheck source=planned_processes.sh
source "$(dirname "$0")/planned_processes.sh"
need_cpus_0_1
planned_tmp prometheus

# Two GPUs on node 0 with CPUs 0-1: exclusive gives GPU 0 CPU 0, GPU 1 CPU 1.
root=$tmp/root
two_gpu_root "$root"
start_two_ranks "$root"

textfiles=$tmp/textfile
mkdir -p "$textfiles"
# node_exporter reads *.prom whole or not at all: --textfile writes a file
# beside it and renames it over, as its documentation asks.
rc=0
"$gpuaff" doctor --all --root "$root" --format prometheus --textfile "$textfiles/gpuaff.prom" || rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL: doctor --all exited $rc (both ranks should be healthy)"; cat "$textfiles/gpuaff.prom"; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$textfiles" >"$tmp/exporter.log" 2>&1 &
pids+=($!)
metrics=$tmp/metrics
scrape() {
  rm -f "$metrics"
  for _ in $(seq 100); do
    if python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=2).read())' "$port" "$metrics" 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
  [[ -s $metrics ]] || { echo "FAIL: node_exporter did not answer on 127.0.0.1:$port"; cat "$tmp/exporter.log"; exit 1; }
}
scrape

failures=0
expect_line() {  # a line of the scrape, exactly
  if grep -qxF -- "$1" "$metrics"; then echo "ok: $1"; else echo "FAIL: no line '$1' in the scrape"; failures=$((failures + 1)); fi
}
expect_line 'node_textfile_scrape_error 0'
# the two ranks at least (another test running beside this one may have planned processes too)
count=$(sed -n 's/^gpuaff_plan_processes \([0-9]*\)$/\1/p' "$metrics")
if [[ -n $count && $count -ge 2 ]]; then echo "ok: gpuaff_plan_processes $count"; else echo "FAIL: gpuaff_plan_processes is '$count', not 2 or more"; failures=$((failures + 1)); fi
for i in 0 1; do
  labels="gpu=\"$i\",pci=\"$([[ $i == 0 ]] && echo 0000:17:00.0 || echo 0000:65:00.0)\",pid=\"${pids[$i]}\",policy=\"exclusive\",rank=\"gpu=$i\""
  expect_line "gpuaff_healthy{$labels} 1"
  expect_line "gpuaff_plan_present{$labels} 1"
  expect_line "gpuaff_threads_outside_plan{$labels} 0"
  expect_line "gpuaff_threads{$labels} 1"
done
# The failure the metrics exist to report: rank 1 re-pinned to CPU 0, outside
# its plan (CPU 1). doctor exits 7 and still publishes the verdict (with
# `> F.tmp && mv F.tmp F` the file kept saying all was well, and F.tmp stayed).
python3 -c 'import os, sys; os.sched_setaffinity(int(sys.argv[1]), {0})' "${pids[1]}"
rc=0
"$gpuaff" doctor --all --root "$root" --format prometheus --textfile "$textfiles/gpuaff.prom" || rc=$?
if [[ $rc -eq 7 ]]; then echo "ok: doctor --textfile exits 7 with a rank off its plan"; else echo "FAIL: doctor --textfile exited $rc, not 7"; failures=$((failures + 1)); fi
left=$(find "$textfiles" -mindepth 1 ! -name gpuaff.prom | wc -l)
if [[ $left -eq 0 ]]; then echo "ok: no other file in the collector's directory"; else echo "FAIL: $left other file(s) left in $textfiles"; failures=$((failures + 1)); fi
scrape
expect_line 'node_textfile_scrape_error 0'
labels1="gpu=\"1\",pci=\"0000:65:00.0\",pid=\"${pids[1]}\",policy=\"exclusive\",rank=\"gpu=1\""
expect_line "gpuaff_healthy{$labels1} 0"
expect_line "gpuaff_threads_outside_plan{$labels1} 1"
# Mistakes are said, and write nothing: --textfile without --format prometheus,
# or into a directory that does not exist.
rc=0
"$gpuaff" doctor --all --root "$root" --textfile "$textfiles/x.prom" 2>"$tmp/err" || rc=$?
if [[ $rc -eq 2 && ! -e $textfiles/x.prom ]] && grep -q -- "add --format prometheus" "$tmp/err"; then echo "ok: --textfile needs --format prometheus"; else echo "FAIL: --textfile without prometheus: exit $rc, $(cat "$tmp/err")"; failures=$((failures + 1)); fi
rc=0
"$gpuaff" doctor --all --root "$root" --format prometheus --textfile "$tmp/missing/gpuaff.prom" 2>"$tmp/err" || rc=$?
if [[ $rc -eq 6 ]] && grep -q -- "--textfile $tmp/missing/gpuaff.prom: cannot create" "$tmp/err"; then echo "ok: a missing directory is named"; else echo "FAIL: missing directory: exit $rc, $(cat "$tmp/err")"; failures=$((failures + 1)); fi
if ((failures > 0)); then
  echo "FAIL: $failures check(s); the scrape's gpuaff lines:"
  grep gpuaff "$metrics" || true
  exit 1
fi
echo "PASS: node_exporter serves doctor's metrics"
