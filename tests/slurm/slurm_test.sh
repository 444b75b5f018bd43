#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real srun launches of `gpuaff exec` on a one-node Slurm 22.05 cluster
# (tests/slurm/cluster.sh) with two fake GPUs, checking each task's CPU mask
# and gpuaff's exit status and messages. docs/slurm.md says what each case
# shows and what was observed.
#   slurm_test.sh GPUAFF
# Exit 0: every check passed; 1: a check failed; 77 (ctest's skip): Slurm or
# munge is not installed, not root, no cgroup cpuset, or this machine is not
# the 2-CPU, 2-core machine the exact masks below are written for.
# The roots are recordings of this machine with the two fake GPUs of
# tests/integration/prepare_root.sh: under --policy exclusive, GPU 0 -> CPU 0
# and GPU 1 -> CPU 1. Their device nodes ROOT/dev/nvidia0 and nvidia1 are the
# character devices 195:0 and 195:1 that gres.conf names, so the device cgroup
# of a task judges gpuaff's open of them as it judges the cluster's.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 GPUAFF" >&2; exit 2; }
gpuaff=$(realpath -- "$1")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"  # skip, prepare_root, slurm_prologue, slurm_start_cluster

slurm_prologue slurm  # tmp, cluster, root, blocker_pid and the cleanup trap
for gpu in 0 1; do
  [[ $(stat -c '%F %t:%T' "$root/dev/nvidia$gpu" 2>/dev/null) == "character special file c3:$gpu" ]] ||
    { echo "FAIL: prepare_root made no character device 195:$gpu at $root/dev/nvidia$gpu"; exit 1; }
done
slurm_start_cluster  # exports SLURM_CONF and GPUAFF, enters $tmp
show_mask=(grep Cpus_allowed_list /proc/self/status)

failures=0
# step NAME SRUN_OPTIONS... -- TASK_ARGS...: one srun, each task running task.sh.
step() {
  local name=$1 opts=()
  shift
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  local shown="$*"
  echo "--- $name: srun ${opts[*]} task.sh ${shown//$tmp/\$TMP}"
  timeout 60 srun --label "${opts[@]}" bash "$here/task.sh" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || true
  sort -s -n -k1,1 "$tmp/$name.out" | sed 's/^/    /'
  grep -E '^[0-9]+: gpuaff' "$tmp/$name.err" | sort -s -n -k1,1 | sed 's/^/    /' || true
}
field() { sed -n "s/^$2: $3=//p" "$tmp/$1.out" | head -n 1; }                       # field NAME TASK KEY
after() { sed -n "s/^$2: Cpus_allowed_list:[[:space:]]*//p" "$tmp/$1.out" | head -n 1; } # the command's mask
message() { sed -n "s/^$2: \(gpuaff.*\)/\1/p" "$tmp/$1.err"; }                         # gpuaff's stderr
expect() {  # expect WHAT ACTUAL EXPECTED
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', expected '$3'"; failures=$((failures + 1)); fi
}
expect_in() {  # expect_in WHAT TEXT PIECE
  if [[ $2 == *"$3"* ]]; then echo "ok: $1"; else
    echo "FAIL: $1: '$3' not in '$2'"; failures=$((failures + 1)); fi
}
devs=$cluster/dev

# 1. Both GPUs to the step, Slurm's binding off: each task starts with the
#    step's CPUs 0-1 and gpuaff binds task N to GPU N's share.
step gres "-n2" "--gres=gpu:2" "--cpu-bind=none" -- --devices "$devs" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- "${show_mask[@]}"
for t in 0 1; do
  expect "gres: task $t starts on the step's CPUs" "$(field gres $t before)" "0-1 cvd=0,1"
  expect "gres: task $t may open both GPUs" "$(field gres $t devices)" "nvidia0,nvidia1"
  expect "gres: task $t exit status" "$(field gres $t rc)" 0
  expect "gres: task $t bound to CPU $t" "$(after gres $t)" "$t"
  expect "gres: task $t says nothing" "$(message gres $t)" ""
done

# 1b. A step smaller than its job: a batch job of two tasks runs one step of
#    one task (two CPUs) with srun -E, which keeps the job's
#    SLURM_TASKS_PER_NODE (2) in the task's environment while
#    SLURM_STEP_TASKS_PER_NODE says 1. One process on this machine: GPU 0
#    alone takes part and exclusive gives it both cores, CPUs 0-1 (the job's
#    count would have split them with GPU 1: CPU 0).
cat >"$tmp/small_step.sh" <<EOF
#!/usr/bin/env bash
srun -E --label -n1 -c2 --cpu-bind=none bash "$here/task.sh" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- ${show_mask[*]}
EOF
echo "--- small_step: sbatch -n2 --gres=gpu:2, srun -E -n1 -c2 task.sh"
timeout 60 sbatch -W -n2 -c1 --gres=gpu:2 -o "$tmp/small_step.out" -e "$tmp/small_step.err" \
  "$tmp/small_step.sh" >/dev/null || true
sed 's/^/    /' "$tmp/small_step.out" || true
expect "small step: the task starts on the step's CPUs" "$(field small_step 0 before)" "0-1 cvd=0,1"
expect "small step: exit status" "$(field small_step 0 rc)" 0
expect "small step: the step's one task binds both cores of GPU 0" "$(after small_step 0)" "0-1"

# 2. --gpus-per-task=1 (Slurm binds one GPU to each task: --gpu-bind=per_task:1).
#    With ConstrainDevices=yes every task's CUDA_VISIBLE_DEVICES is 0, its own
#    GPU numbered within the task; the device cgroup lets it open only that one.
step per_task "-n2" "--gpus-per-task=1" "--cpu-bind=none" -- --devices "$devs" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- "${show_mask[@]}"
for t in 0 1; do
  expect "per_task: task $t sees one GPU as 0" "$(field per_task $t before)" "0-1 cvd=0"
  expect "per_task: task $t may open only its own GPU" "$(field per_task $t devices)" "nvidia$t"
done
#    --local-rank cannot work: one visible GPU, two tasks. Task 0 is told the
#    local size is too large (usage, 2), task 1 that it has no GPU 1 (not found, 4).
expect "per_task --local-rank: task 0 exit status" "$(field per_task 0 rc)" 2
expect_in "per_task --local-rank: task 0 message" "$(message per_task 0)" \
  "gpuaff: SLURM_STEP_TASKS_PER_NODE=2 (the launcher's processes on this machine) is more than the 1 GPU(s) this process sees in $root; when each process sees only its own GPU, use --gpu 0 (and --share machine)"
#    The one GPU task 1 sees is its own (gpuaff leaves out the GPU whose node
#    the task may not open): 0000:e2:00.0.
expect "per_task --local-rank: task 1 exit status" "$(field per_task 1 rc)" 4
expect_in "per_task --local-rank: task 1 message" "$(message per_task 1)" \
  "gpuaff: no GPU 1 (SLURM_LOCALID=1): 1 visible in $root (0 0000:e2:00.0); when the launcher gives each rank its own GPUs through *_VISIBLE_DEVICES, use --gpu 0"
#    The advice, --gpu 0 --share machine: in a batch job with
#    CUDA_VISIBLE_DEVICES set, gpuaff opens each GPU's node as CUDA does; the
#    GPU whose node the device cgroup denies (EPERM) is not the task's, so
#    CUDA_VISIBLE_DEVICES=0 names the task's own GPU: task N gets GPU N's CPU N.
step per_task_gpu0 "-n2" "--gpus-per-task=1" "--cpu-bind=none" -- \
  "$gpuaff" exec --gpu 0 --share machine --policy exclusive --root "$root" -- "${show_mask[@]}"
for t in 0 1; do
  expect "per_task --gpu 0: task $t exit status" "$(field per_task_gpu0 $t rc)" 0
  expect "per_task --gpu 0: task $t bound to its own GPU's CPU $t" "$(after per_task_gpu0 $t)" "$t"
  expect "per_task --gpu 0: task $t says nothing" "$(message per_task_gpu0 $t)" ""
done
#    `gpuaff record` inside such a task leaves the other task's GPU out of the
#    recorded driver list, so a replay outside the job sees what the task saw.
step per_task_record "-n2" "--gpus-per-task=1" "--cpu-bind=none" -- \
  bash -c 'out=$2.$SLURM_PROCID; "$GPUAFF" record --root "$1" --out "$out" >/dev/null && echo "recorded=$(ls "$out/proc/driver/nvidia/gpus" | paste -sd, -)"' \
  record "$root" "$tmp/task_record"
expect "per_task record: task 0 records its own GPU only" "$(field per_task_record 0 recorded)" 0000:e1:00.0
expect "per_task record: task 1 records its own GPU only" "$(field per_task_record 1 recorded)" 0000:e2:00.0
expect_in "per_task record: task 1 says why GPU 0 is left out" "$(message per_task_record 1)" \
  "gpuaff: note: dev/nvidia0 cannot be opened (EPERM (Operation not permitted)): GPU 0000:e1:00.0 is not this process's"
for t in 0 1; do
  expect "per_task record: replay of task $t outside the job" \
    "$("$gpuaff" bind --root "$tmp/task_record.$t" --gpu 0 --share machine --policy exclusive 2>&1)" "$t"
done
#    --gpu-bind=none: Slurm leaves CUDA_VISIBLE_DEVICES unset, each task may
#    open both GPUs, and --local-rank binds task N to GPU N's share again.
step per_task_nobind "-n2" "--gpus-per-task=1" "--gpu-bind=none" "--cpu-bind=none" -- --devices "$devs" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- "${show_mask[@]}"
for t in 0 1; do
  expect "per_task --gpu-bind=none: task $t environment" "$(field per_task_nobind $t before)" "0-1 cvd=unset"
  expect "per_task --gpu-bind=none: task $t may open both GPUs" "$(field per_task_nobind $t devices)" "nvidia0,nvidia1"
  expect "per_task --gpu-bind=none: task $t exit status" "$(field per_task_nobind $t rc)" 0
  expect "per_task --gpu-bind=none: task $t bound to CPU $t" "$(after per_task_nobind $t)" "$t"
done

# 3. Slurm's default core binding (--cpu-bind=cores): task N starts on CPU N
#    only, inside the step's cgroup cpuset 0-1. Each task records itself as
#    gpuaff would read it live (--own-root), so gpuaff sees the narrowed mask.
narrowed() {  # the narrowed-mask text for a task on CPU $1 (cgroup v1 or v2 path in between)
  echo "this process may run on CPUs $1 only, narrower than its cgroup's 0-1 (sys/fs/cgroup/"
}
fix="a launcher or taskset bound it first; pass --baseline cgroup to draw from the cgroup, or start it unbound (mpirun --bind-to none, srun --cpu-bind=none)"
#    --policy exclusive: one allowed core cannot be split between two GPUs: exit 5,
#    the narrowed mask and both fixes named in the error.
step cores_exclusive "-n2" "--gres=gpu:2" "--cpu-bind=cores" -- --own-root "$tmp/task_exclusive" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root @ROOT@ -- "${show_mask[@]}"
for t in 0 1; do
  expect "cores exclusive: task $t starts on CPU $t" "$(field cores_exclusive $t before)" "$t cvd=0,1"
  expect "cores exclusive: task $t exit status" "$(field cores_exclusive $t rc)" 5
  m=$(message cores_exclusive $t)
  expect_in "cores exclusive: task $t error" "$m" \
    "gpuaff: exclusive: only 1 physical cores on node 0 but 2 GPUs (allowed CPUs of the node: $t); use --policy node to share them, or fewer processes (--nproc N); $(narrowed $t)"
  expect_in "cores exclusive: task $t names the fixes" "$m" "$fix"
done
#    The default policy (node) binds within the narrowed mask, with the warning.
step cores_node "-n2" "--gres=gpu:2" "--cpu-bind=cores" -- --own-root "$tmp/task_node" -- \
  "$gpuaff" exec --local-rank --root @ROOT@ -- "${show_mask[@]}"
for t in 0 1; do
  expect "cores node: task $t exit status" "$(field cores_node $t rc)" 0
  expect "cores node: task $t stays on CPU $t" "$(after cores_node $t)" "$t"
  m=$(message cores_node $t)
  expect_in "cores node: task $t warning" "$m" "gpuaff: warning: $(narrowed $t)"
  expect_in "cores node: task $t warning names the fixes" "$m" "$fix"
done
#    --baseline cgroup: drawn from the step's cpuset, task N gets CPU N, silently.
step cores_cgroup "-n2" "--gres=gpu:2" "--cpu-bind=cores" -- --own-root "$tmp/task_cgroup" -- \
  "$gpuaff" exec --local-rank --policy exclusive --baseline cgroup --root @ROOT@ -- "${show_mask[@]}"
for t in 0 1; do
  expect "cores --baseline cgroup: task $t exit status" "$(field cores_cgroup $t rc)" 0
  expect "cores --baseline cgroup: task $t bound to CPU $t" "$(after cores_cgroup $t)" "$t"
  expect "cores --baseline cgroup: task $t says nothing" "$(message cores_cgroup $t)" ""
done
#    A recording made outside the job stands for the process (its allowed set
#    0-1), so the launcher's narrowing is not seen: no warning, task N on CPU N.
step cores_recorded "-n2" "--gres=gpu:2" "--cpu-bind=cores" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- "${show_mask[@]}"
for t in 0 1; do
  expect "cores, outside recording: task $t exit status" "$(field cores_recorded $t rc)" 0
  expect "cores, outside recording: task $t bound to CPU $t" "$(after cores_recorded $t)" "$t"
  expect "cores, outside recording: task $t says nothing" "$(message cores_recorded $t)" ""
done

# 4. Another job holds CPU 0; a step planned on the recording (CPU 0 for GPU 0)
#    gets only CPU 1 in its cgroup: the kernel refuses CPU 0.
timeout 120 srun --job-name=gpuaff-blocker -n1 -w localhost --cpus-per-task=1 \
  sh -c "grep Cpus_allowed_list /proc/self/status >'$tmp/blocker.mask'; exec sleep 100" \
  >"$tmp/blocker.out" 2>&1 &
blocker_pid=$!
for ((i = 0; i < 100; i++)); do [[ -s $tmp/blocker.mask ]] && break; sleep 0.2; done
expect "busy: the other job holds CPU 0" "$(cat "$tmp/blocker.mask" 2>/dev/null)" $'Cpus_allowed_list:\t0'
#    Exit 5 (cannot bind: the machine refused), not 2 (usage).
step busy "-n1" "--gres=gpu:2" "--cpu-bind=none" -- \
  "$gpuaff" exec --gpu 0 --nproc 2 --policy exclusive --root "$root" -- "${show_mask[@]}"
expect "busy: the step has CPU 1 only" "$(field busy 0 before)" "1 cvd=0,1"
expect "busy: exit status" "$(field busy 0 rc)" 5
expect "busy: the command did not run" "$(after busy 0)" ""
m=$(message busy 0)
expect_in "busy: error" "$m" "gpuaff: cannot apply the binding planned from $root here: CPUs 0 are not in this process's allowed set (cgroup/taskset)"
expect_in "busy: error names the fix" "$m" "choose CPUs from Cpus_allowed_list in /proc/self/status; every thread was put back as it was"
#    --fallback unbound: a warning, and the command runs on the step's CPU 1.
step busy_fallback "-n1" "--gres=gpu:2" "--cpu-bind=none" -- \
  "$gpuaff" exec --gpu 0 --nproc 2 --policy exclusive --fallback unbound --root "$root" -- "${show_mask[@]}"
expect "busy --fallback unbound: exit status" "$(field busy_fallback 0 rc)" 0
expect "busy --fallback unbound: runs unbound on CPU 1" "$(after busy_fallback 0)" 1
expect_in "busy --fallback unbound: warning" "$(message busy_fallback 0)" \
  "gpuaff: warning: cannot apply the binding planned from $root here: CPUs 0 are not in this process's allowed set"
expect_in "busy --fallback unbound: warning says it runs unbound" "$(message busy_fallback 0)" \
  "; running 'grep Cpus_allowed_list /proc/self/status' unbound (--fallback unbound)"
blocker_job=$(squeue -h -n gpuaff-blocker -o %i)
[[ -z $blocker_job ]] || scancel "$blocker_job"
wait "$blocker_pid" 2>/dev/null || true
blocker_pid=""

# 5. The job-wide doctor: a two-task step whose tasks gpuaff exec bound (task N
#    on GPU N's CPU N) keeps running; `srun --overlap` puts `gpuaff doctor --all
#    --format json` into the same job on the node (one per node on a real
#    cluster), and `doctor --merge` reads the reports into one table.
timeout 120 srun --job-name=gpuaff-ranks -n2 --gres=gpu:2 --cpu-bind=none \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- sleep 60 >"$tmp/ranks.out" 2>&1 &
ranks_pid=$!
ranks_job=""
for ((i = 0; i < 150; i++)); do
  ranks_job=$(squeue -h -n gpuaff-ranks -t RUNNING -o %i)
  if [[ -n $ranks_job ]] && "$gpuaff" doctor --all --root "$root" --format json 2>/dev/null |
      python3 -c 'import json, sys; sys.exit(0 if sum(p["gpu_source"].startswith("SLURM_LOCALID=") for p in json.load(sys.stdin)["processes"]) == 2 else 1)'; then
    break
  fi
  sleep 0.2
done
rc=0
timeout 60 srun --overlap --jobid="$ranks_job" -n1 "$gpuaff" doctor --all --root "$root" --format json \
  >"$tmp/doctor-node.json" 2>"$tmp/doctor-node.err" || rc=$?
# doctor --all checks every process of the machine that carries a plan, and
# tests running beside this one may have bound processes of their own: its
# exit status is 7 exactly when one of those is off its plan (this job's two
# tasks are judged one by one below).
others_off=$(python3 - "$tmp/doctor-node.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print(sum(not p["healthy"] and not p["gpu_source"].startswith("SLURM_LOCALID=") for p in report["processes"]))
PY
) || others_off="an unreadable report"
want=0
[[ $others_off == 0 ]] || want=7
expect "doctor --all in the job (srun --overlap), other processes off: $others_off: exit status" "$rc" "$want"
rc=0
"$gpuaff" doctor --merge "$tmp/doctor-node.json" >"$tmp/merged.out" 2>&1 || rc=$?
expect "doctor --merge: exit status" "$rc" "$want"
for t in 0 1; do
  row=$(python3 - "$tmp/doctor-node.json" "$t" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for p in report["processes"]:
    if p["gpu_source"] == "SLURM_LOCALID=" + sys.argv[2]:
        print(p["gpu"], p["expected_cpus"], p["healthy"])
PY
)
  expect "doctor --all: task $t (SLURM_LOCALID=$t) on GPU $t's CPU $t, healthy" "$row" "$t $t True"
  expect_in "doctor --merge: a healthy row for task $t" "$(cat "$tmp/merged.out")" "SLURM_LOCALID=$t  $t"
done
# 5b. The same with --job "$SLURM_JOB_ID", as docs/doctor.md runs it on a
#     node shared by several jobs: the step's own SLURM_JOB_ID picks exactly
#     the job's two tasks, whatever else runs here, so the exit status is 0.
rc=0
timeout 60 srun --overlap --jobid="$ranks_job" -n1 \
  sh -c 'exec "$0" doctor --all --job "$SLURM_JOB_ID" --root "$1" --format json' "$gpuaff" "$root" \
  >"$tmp/doctor-job.json" 2>"$tmp/doctor-job.err" || rc=$?
expect "doctor --all --job \$SLURM_JOB_ID in the job: exit status" "$rc" 0
sources=$(python3 -c 'import json, sys; print(" ".join(sorted(p["gpu_source"] for p in json.load(open(sys.argv[1]))["processes"])))' \
  "$tmp/doctor-job.json" 2>&1) || true
expect "doctor --all --job \$SLURM_JOB_ID: the job's two tasks, nothing else" "$sources" "SLURM_LOCALID=0 SLURM_LOCALID=1"
[[ -z $ranks_job ]] || scancel "$ranks_job"
wait "$ranks_pid" 2>/dev/null || true

if [[ $failures -ne 0 ]]; then
  echo "FAIL: $failures check(s) failed; slurmd log tail:"
  tail -n 20 "$cluster/log/slurmd.log"
  exit 1
fi
echo "PASS: every Slurm case behaved as checked"
