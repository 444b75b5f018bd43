#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuaff doctor --job ID` on a node shared by two jobs: four ranks started by
# `gpuaff exec` on the two-GPU root of planned_processes.sh (exclusive: GPU 0
# on CPU 0, GPU 1 on CPU 1), two in Slurm job 1001 and two in job 1002 (their
# SLURM_JOB_ID), and one more in a PBS job. Then one rank of job 1002 is
# re-pinned off its plan: the check of job 1001 must stay healthy (exit 0)
# and list only its own two pids, the check of job 1002 and the check of every
# process must find it (exit 7), and --watch and --nics must keep to the job.
#   job_test.sh GPUAFF
# Exit 0: passed; 1: a check failed; 77 (ctest's skip): CPUs 0 and 1 are not
# both allowed here.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUAFF" >&2; exit 2; }
gpuaff=$(realpath -- "$1")

# shellcheck source=planned_processes.sh
source "$(dirname "$0")/planned_processes.sh"
need_cpus_0_1
planned_tmp job

root=$tmp/root
two_gpu_root "$root"
# pids[0..1]: job 1001, GPUs 0 and 1; pids[2..3]: job 1002; pids[4]: PBS job 77.pbs01.
start() {  # start VARIABLE=VALUE GPU
  env -u SLURM_JOB_ID -u PBS_JOBID -u LSB_JOBID "$1" "$gpuaff" exec --root "$root" --gpu "$2" --policy exclusive \
    -- sleep 60 >/dev/null &
  pids+=($!)
}
start SLURM_JOB_ID=1001 0
start SLURM_JOB_ID=1001 1
start SLURM_JOB_ID=1002 0
start SLURM_JOB_ID=1002 1
start PBS_JOBID=77.pbs01 0
wait_for_plans

failures=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The pids of a doctor --all --format json report, sorted, space-separated.
report_pids() { python3 -c 'import json, sys; print(" ".join(str(p["pid"]) for p in json.load(open(sys.argv[1]))["processes"]))' "$1"; }
sorted() { printf '%s\n' "$@" | sort -n | tr '\n' ' ' | sed 's/ $//'; }

# Rank 1 of job 1002 re-pinned to CPU 0, outside its plan (CPU 1).
python3 -c 'import os, sys; os.sched_setaffinity(int(sys.argv[1]), {0})' "${pids[3]}"

rc=0
"$gpuaff" doctor --all --root "$root" --job 1001 --format json >"$tmp/1001.json" || rc=$?
[[ $rc -eq 0 ]] && ok "job 1001 is healthy: exit 0 (job 1002's rank off its plan is not its problem)" ||
  bad "doctor --all --job 1001 exited $rc, not 0"
got=$(report_pids "$tmp/1001.json")
want=$(sorted "${pids[0]}" "${pids[1]}")
[[ $got == "$want" ]] && ok "job 1001's report lists its two pids ($got)" || bad "job 1001's report lists '$got', not '$want'"
# Three planned processes of this test are in other jobs; processes of other
# tests running beside this one may add to the count.
if python3 -c 'import json, re, sys
notes = json.load(open(sys.argv[1]))["notes"]
hits = [n for n in notes if n.startswith("--job 1001: 2 planned process(es) of the job checked, ")]
m = re.search(r"checked, (\d+) of other jobs", hits[0]) if hits else None
sys.exit(0 if m and int(m.group(1)) >= 3 else 1)' "$tmp/1001.json"; then
  ok "a note counts the planned processes of other jobs left out"
else bad "no note counting what --job 1001 left out: $(cat "$tmp/1001.json")"; fi

job=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("job"))' "$tmp/1001.json")
[[ $job == 1001 ]] && ok "the report says which job it is (\"job\": \"1001\")" || bad "the report's job is '$job', not 1001"

rc=0
"$gpuaff" doctor --all --root "$root" --job 1002 >"$tmp/1002.txt" || rc=$?
grep -q "^node .*: 2 process(es) of job 1002 carry a GPUAFF_PLAN, 1 not healthy$" "$tmp/1002.txt" &&
  ok "the text report's first line names the job" || bad "job 1002's first line: $(head -1 "$tmp/1002.txt")"
[[ $rc -eq 7 ]] && ok "job 1002 is not healthy: exit 7" || bad "doctor --all --job 1002 exited $rc, not 7"
grep -q "${pids[3]}" "$tmp/1002.txt" && ! grep -q "${pids[0]}" "$tmp/1002.txt" &&
  ok "job 1002's text report names its pid ${pids[3]} and not job 1001's" || bad "job 1002's report: $(cat "$tmp/1002.txt")"

rc=0
"$gpuaff" doctor --all --root "$root" --job 77.pbs01 --format json >"$tmp/pbs.json" || rc=$?
got=$(report_pids "$tmp/pbs.json")
[[ $rc -eq 0 && $got == "${pids[4]}" ]] && ok "the PBS job (PBS_JOBID=77.pbs01) is its one pid, healthy" ||
  bad "doctor --all --job 77.pbs01: exit $rc, pids '$got' (want ${pids[4]})"

rc=0
"$gpuaff" doctor --all --root "$root" --format json >"$tmp/every.json" || rc=$?
got=" $(report_pids "$tmp/every.json") "
all_in=1
for p in "${pids[@]}"; do [[ $got == *" $p "* ]] || all_in=0; done
[[ $rc -eq 7 && $all_in -eq 1 ]] && ok "without --job every planned process is checked (exit 7)" ||
  bad "doctor --all without --job: exit $rc, pids '$got'"

# --merge: the reports of one job merge; two jobs' reports are a usage error
# naming both (a report without --job, one job's or not, merges with either).
"$gpuaff" doctor --all --root "$root" --job 1002 --format json >"$tmp/1002.json" || true
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["node"] = "other"; json.dump(r, open(sys.argv[2], "w"))' \
  "$tmp/1001.json" "$tmp/1001-other.json"
rc=0
"$gpuaff" doctor --merge "$tmp/1001.json" --merge "$tmp/1001-other.json" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 0 ]] && ok "--merge of two nodes' reports of job 1001: exit 0" || bad "--merge of job 1001's reports exited $rc"
rc=0
err=$("$gpuaff" doctor --merge "$tmp/1001-other.json" --merge "$tmp/1002.json" 2>&1 >/dev/null) || rc=$?
[[ $rc -eq 2 && $err == *"job 1001's report and"*"job 1002's"* ]] && ok "--merge of two jobs' reports: exit 2 naming both jobs" ||
  bad "--merge of two jobs' reports: exit $rc: $err"

# A job with no planned process here: 0 checked, and the note asks whether the id is right.
rc=0
"$gpuaff" doctor --all --root "$root" --job 999999 >"$tmp/none.txt" || rc=$?
[[ $rc -eq 0 ]] && grep -q "0 process(es) of job 999999 carry a GPUAFF_PLAN" "$tmp/none.txt" &&
  grep -q "is the job's id right" "$tmp/none.txt" && ok "a job with no planned process here says so" ||
  bad "doctor --all --job 999999: exit $rc: $(cat "$tmp/none.txt")"

# --watch keeps to the job: the first check reports job 1001's two ranks started, no other pid.
"$gpuaff" doctor --watch --count 1 --interval 0.1 --root "$root" --job 1001 --format json >"$tmp/watch.jsonl"
started=$(python3 -c 'import json, sys
print(" ".join(sorted(str(e["pid"]) for e in map(json.loads, open(sys.argv[1])) if e["event"] == "process_started")))' "$tmp/watch.jsonl")
want=$(printf '%s\n' "${pids[0]}" "${pids[1]}" | sort | tr '\n' ' ' | sed 's/ $//')
[[ $started == "$want" ]] && ok "--watch --job 1001 starts with its two ranks only" || bad "--watch --job 1001 started '$started', not '$want'"

# Two jobs' watchers on one node, each with its textfile in node_exporter's
# folder: node_exporter refuses a series two files both hold, so every series
# carries job_id and none is in both files (gpuaff_plan_processes, the
# watch's counters and the processes' gauges alike).
for j in 1001 1002; do
  "$gpuaff" doctor --watch --count 1 --interval 0.1 --root "$root" --job $j --format prometheus \
    --textfile "$tmp/job$j.prom" >/dev/null
done
if python3 -c 'import sys
series = {}
for path, job in ((sys.argv[1], "1001"), (sys.argv[2], "1002")):
    names = {l.rsplit(" ", 1)[0] for l in open(path) if l.strip() and not l.startswith("#")}
    unlabelled = sorted(n for n in names if not n.endswith("job_id=\"%s\"}" % job))
    if unlabelled: sys.exit("%s: series without job_id=\"%s\": %s" % (path, job, ", ".join(unlabelled)))
    series[job] = names
if "gpuaff_plan_processes{job_id=\"1001\"}" not in series["1001"]: sys.exit("no gpuaff_plan_processes of job 1001")
both = series["1001"] & series["1002"]
if both: sys.exit("series in both jobs\x27 files: " + ", ".join(sorted(both)))' "$tmp/job1001.prom" "$tmp/job1002.prom"; then
  ok "--watch --job: two jobs' textfiles share no series, each labelled job_id"
else bad "--watch --job textfiles (see the line above)"; fi

# --nics reads only the job's ranks (a recorded root without NICs: a note,
# and the note of what --job left out).
out=$("$gpuaff" doctor --nics --interval 0.1 --root "$root" --job 1002 2>&1 || true)
grep -q -- "--job 1002: 2 planned process(es) of the job read" <<<"$out" && ok "--nics --job 1002 reads its two ranks" ||
  bad "--nics --job 1002: $out"

# Usage mistakes are errors (exit 2), never a silent check of everything.
for args in "--pid ${pids[0]} --job 1001" "--merge $tmp/1001.json --job 1001" "--all --job" "--all --job 1,2" "--all --job a=b"; do
  rc=0
  # shellcheck disable=SC2086  # the arguments: separate words
  err=$("$gpuaff" doctor --root "$root" $args 2>&1 >/dev/null) || rc=$?
  [[ $rc -eq 2 && $err == *--job* ]] && ok "doctor $args: exit 2 naming --job" || bad "doctor $args: exit $rc: $err"
done

[[ $failures -eq 0 ]] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
