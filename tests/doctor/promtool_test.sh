#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuaff doctor --all --format prometheus` read by Prometheus's own parser
# (`promtool check metrics`), with processes whose GPUAFF_PLAN puts hostile
# text into a label: a byte that is not UTF-8, a double quote, a backslash
# and a newline in the plan's `from` field (the `rank` label). One such
# process once made the whole node's report unreadable to Prometheus.
#   promtool_test.sh GPUAFF
# Exit 0: passed; 1: a check failed; 77 (ctest's skip): promtool is not installed.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUAFF" >&2; exit 2; }
gpuaff=$(realpath -- "$1")
skip() { echo "SKIP: $*"; exit 77; }
promtool=$(command -v promtool || true)
[[ -n $promtool ]] || skip "promtool is not installed (Debian: apt-get install prometheus)"

# shellcheck source=planned_processes.sh
source "$(dirname "$0")/planned_processes.sh"
planned_tmp promtool

# Plans gpuaff could have written but for the `from` field, which is free text.
plan() { printf 'v1 gpu=0 pci=0000:17:00.0 from=%s policy=node node=0 cpus=0 mems=0 membind=none' "$1"; }
froms=($'LOCAL_RANK=\xff\xfe' 'say="hi"' 'back\slash' $'new\nline' $'LOCAL_RANK=\xc3(')
for f in "${froms[@]}"; do
  GPUAFF_PLAN=$(plan "$f") sleep 60 &
  pids+=($!)
done
wait_for_plans

rc=0
"$gpuaff" doctor --all --format prometheus >"$tmp/gpuaff.prom" 2>"$tmp/err" || rc=$?
# 0 or 7: the processes are not where their plans say; anything else is a failure to report.
[[ $rc -eq 0 || $rc -eq 7 ]] || { echo "FAIL: doctor --all exited $rc"; cat "$tmp/err"; exit 1; }
failures=0
for p in "${pids[@]}"; do
  if grep -aq "^gpuaff_healthy{pid=\"$p\"," "$tmp/gpuaff.prom"; then echo "ok: pid $p has a series"
  else echo "FAIL: no gpuaff_healthy series for pid $p"; failures=$((failures + 1)); fi
done
# promtool exits 1 when its parser fails, 3 when it only has lint notes on
# names and help texts: the parser's verdict is this test's.
lint=0
out=$("$promtool" check metrics <"$tmp/gpuaff.prom" 2>&1) || lint=$?
if [[ $lint -eq 0 || $lint -eq 3 ]]; then
  echo "ok: promtool check metrics parses the report${out:+ (lint notes: $out)}"
else
  echo "FAIL: promtool check metrics cannot read the report (exit $lint): $out"
  failures=$((failures + 1))
fi
if ((failures > 0)); then
  echo "FAIL: $failures check(s); the report's gpuaff_healthy lines:"
  grep -a '^gpuaff_healthy' "$tmp/gpuaff.prom" | LC_ALL=C cat -v || true
  exit 1
fi
echo "PASS: Prometheus's parser reads doctor's metrics whatever a plan's text holds"
