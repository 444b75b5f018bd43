#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The SPANK plugin spank_gpuaff.so under a real slurmd: srun launches on the
# one-node test cluster (tests/slurm/cluster.sh) with two fake GPUs, each
# checked against exact masks, exit codes and messages, and against what
# `gpuaff exec` gives in the same step. docs/slurm.md ("The SPANK plugin")
# says what each case shows and what was observed.
#   spank_test.sh GPUAFF PLUGIN
# Exit 0: every check passed; 1: a check failed; 77 (ctest's skip): the
# plugin was not built (no slurm/spank.h), Slurm or munge is missing, not
# root, no cgroup cpuset, or this machine is not the 2-CPU, 2-core machine
# the masks are written for.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 GPUAFF PLUGIN" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
gpuaff=$(realpath -- "$1")
source "$here/common.sh"  # skip, prepare_root, slurm_prologue, slurm_start_cluster
[[ -f $2 ]] || skip "the SPANK plugin $2 was not built (configure with Slurm's slurm/spank.h: apt-get install libslurm-dev)"
plugin=$(realpath -- "$2")

slurm_prologue spank  # tmp, cluster, root, blocker_pid and the cleanup trap
slurm_start_cluster   # exports SLURM_CONF and GPUAFF, enters $tmp

# plugstack LINE...: the plugstack.conf of the next srun (and its steps).
plugstack() {
  "$here/cluster.sh" plugstack "$cluster" "$@"
  echo "--- plugstack.conf: $(sed "s|$tmp|\$TMP|g; s|$plugin|spank_gpuaff.so|" "$cluster/etc/plugstack.conf" | paste -sd'|' -)"
}
# What each task runs (after task.sh's before=... line): its plan variable.
show_plan=(bash -c 'echo "plan=${GPUAFF_PLAN-unset}"')

failures=0
# step NAME SRUN_OPTIONS... -- TASK_ARGS...: one srun, each task running task.sh.
step() {
  local name=$1 opts=() rc=0
  shift
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  local shown="$*"
  echo "--- $name: srun ${opts[*]} task.sh ${shown//$tmp/\$TMP}"
  timeout 60 srun --label "${opts[@]}" bash "$here/task.sh" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  echo "$rc" >"$tmp/$name.rc"
  sort -s -n -k1,1 "$tmp/$name.out" | sed 's/^/    /'
  grep -E '^([0-9]+: )?gpuaff|^srun: error' "$tmp/$name.err" | sed "s|$tmp|\$TMP|g; s/^/    /" || true
}
field() { sed -n "s/^$2: $3=//p" "$tmp/$1.out" | head -n 1; }  # field NAME TASK KEY
message() { sed -n "s/^$2: \(gpuaff.*\)/\1/p" "$tmp/$1.err"; }  # the task's gpuaff lines
srun_exit() { sed -n 's/^srun: error: localhost: \(tasks* [0-9,-]*: Exited with exit code [0-9]*\)$/\1/p' "$tmp/$1.err"; }
expect() {  # expect WHAT ACTUAL EXPECTED
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', expected '$3'"; failures=$((failures + 1)); fi
}
expect_in() {  # expect_in WHAT TEXT PIECE
  if [[ $2 == *"$3"* ]]; then echo "ok: $1"; else
    echo "FAIL: $1: '$3' not in '$2'"; failures=$((failures + 1)); fi
}

# 0. The reference: `gpuaff exec --local-rank --policy exclusive` in the same
#    step, no plugin. Task N runs on CPU N with the plan GPUAFF_PLAN says.
plugstack
step exec_ref "-n2" "--gres=gpu:2" "--cpu-bind=none" -- \
  "$gpuaff" exec --local-rank --policy exclusive --root "$root" -- "${show_plan[@]}"
for t in 0 1; do
  expect "exec: task $t exit status" "$(field exec_ref $t rc)" 0
  exec_plan[$t]=$(field exec_ref $t plan)
  expect_in "exec: task $t has a plan" "${exec_plan[$t]}" "v1 gpu=$t pci=0000:e$((t + 1)):00.0 from=SLURM_LOCALID=$t policy=exclusive node=0 cpus=$t "
done

# 1. The plugin listed, no site default: `srun --gpuaff=exclusive` binds task N
#    to CPU N before it runs, with exec's GPUAFF_PLAN; without --gpuaff (or
#    with --gpuaff=off) nothing is bound.
plugstack "optional $plugin root=$root"
step flag "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" -- "${show_plan[@]}"
for t in 0 1; do
  expect "--gpuaff=exclusive: task $t starts on CPU $t" "$(field flag $t before)" "$t cvd=0,1"
  expect "--gpuaff=exclusive: task $t carries exec's GPUAFF_PLAN" "$(field flag $t plan)" "${exec_plan[$t]}"
  expect "--gpuaff=exclusive: task $t exit status" "$(field flag $t rc)" 0
  expect "--gpuaff=exclusive: task $t says nothing" "$(message flag $t)" ""
done
step no_flag "-n2" "--gres=gpu:2" "--cpu-bind=none" -- "${show_plan[@]}"
step flag_off "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=off" -- "${show_plan[@]}"
for name in no_flag flag_off; do
  for t in 0 1; do
    expect "$name: task $t is not bound" "$(field $name $t before)" "0-1 cvd=0,1"
    expect "$name: task $t has no plan" "$(field $name $t plan)" unset
    expect "$name: task $t says nothing" "$(message $name $t)" ""
  done
done
#    Slurm's own core binding (--cpu-bind=cores, and task/affinity's default
#    without --cpu-bind) puts task N on CPU N. The plugin replaces the default
#    one (contract section 6): without --cpu-bind, --gpuaff=node gives both
#    tasks node 0's CPUs 0-1, drawn from the step's cgroup (it kept Slurm's
#    one CPU before, with a warning). An explicit --cpu-bind=cores with
#    --gpuaff asks for two bindings: srun stops before anything runs, naming
#    --cpu-bind=none.
step cores "-n2" "--gres=gpu:2" "--cpu-bind=cores" -- "${show_plan[@]}"
step default_node "-n2" "--gres=gpu:2" "--gpuaff=node" -- "${show_plan[@]}"
for t in 0 1; do
  expect "--cpu-bind=cores: task $t on CPU $t (Slurm's binding)" "$(field cores $t before)" "$t cvd=0,1"
  expect "Slurm's default binding, --gpuaff=node: task $t on node 0's CPUs" "$(field default_node $t before)" "0-1 cvd=0,1"
  expect_in "Slurm's default binding, --gpuaff=node: task $t has a plan" "$(field default_node $t plan)" "v1 gpu=$t pci=0000:e$((t + 1)):00.0 from=SLURM_LOCALID=$t policy=node node=0 cpus=0-1 "
  expect "Slurm's default binding, --gpuaff=node: task $t says nothing" "$(message default_node $t)" ""
done
step cores_node "-n2" "--gres=gpu:2" "--cpu-bind=cores" "--gpuaff=node" -- "${show_plan[@]}"
expect "--cpu-bind=cores --gpuaff=node: no task runs" "$(cat "$tmp/cores_node.out")" ""
expect_in "--cpu-bind=cores --gpuaff=node: one line naming --cpu-bind=none" "$(cat "$tmp/cores_node.err")" \
  "srun: error: gpuaff: srun --cpu-bind=cores binds each task, and --gpuaff binds it to its GPU's CPUs instead; use --cpu-bind=none with --gpuaff"
expect "--cpu-bind=cores --gpuaff=node: srun fails" "$(cat "$tmp/cores_node.rc")" 255
#    Where Slurm's default binding and the plan disagree, the plan wins: the
#    site binds every task to GPU 1's share (gpu=1 nproc=2 exclusive: CPU 1);
#    task 0, which task/affinity put on CPU 0, ended with exit 5 before.
plugstack "optional $plugin root=$root gpu=1 nproc=2 policy=exclusive"
step default_gpu1 "-n2" "--gres=gpu:2" "--gpuaff" -- "${show_plan[@]}"
for t in 0 1; do
  expect "default binding, site gpu=1: task $t on CPU 1" "$(field default_gpu1 $t before)" "1 cvd=0,1"
  expect "default binding, site gpu=1: task $t exit status" "$(field default_gpu1 $t rc)" 0
done
#    Inside a Slurm task Slurm's own variables win: a LOCAL_RANK exported
#    before srun reaches every task (srun passes its environment on) and is
#    named; each task is still bound by its SLURM_LOCALID.
plugstack "optional $plugin root=$root"
step inherited "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" "--export=ALL,LOCAL_RANK=0" -- "${show_plan[@]}"
for t in 0 1; do
  expect "inherited LOCAL_RANK=0: task $t on CPU $t" "$(field inherited $t before)" "$t cvd=0,1"
done
expect "inherited LOCAL_RANK=0: task 0 says nothing" "$(message inherited 0)" ""
expect_in "inherited LOCAL_RANK=0: task 1 names it" "$(message inherited 1)" \
  "gpuaff: warning: LOCAL_RANK=0 in the task's environment (inherited from where srun ran) is not this task's SLURM_LOCALID=1"
#    local_rank=false in plugstack.conf names no device: an error, not GPU 0.
plugstack "optional $plugin root=$root local_rank=false"
step no_device "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" -- "${show_plan[@]}"
expect "local_rank=false: exit code" "$(srun_exit no_device)" "tasks 0-1: Exited with exit code 2"
expect_in "local_rank=false: task 0 message" "$(message no_device 0)" "gpuaff: plugstack.conf: local_rank=false leaves each task without a device"
plugstack "optional $plugin root=$root"

# 2. A policy that is not one: srun refuses it before anything runs, with
#    gpuaff's own words (as `gpuaff exec --policy exclusiv` says them).
exec_bad=$("$gpuaff" exec --gpu 0 --policy exclusiv --root "$root" -- true 2>&1 || true)
echo "    (gpuaff exec --policy exclusiv: $exec_bad)"
step bad_flag "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusiv" -- "${show_plan[@]}"
expect "--gpuaff=exclusiv: srun fails" "$(cat "$tmp/bad_flag.rc")" 255
expect "--gpuaff=exclusiv: no task runs" "$(cat "$tmp/bad_flag.out")" ""
expect_in "--gpuaff=exclusiv: gpuaff's message" "$(cat "$tmp/bad_flag.err")" \
  "srun: error: gpuaff: --gpuaff=exclusiv: ${exec_bad#gpuaff: }"
expect_in "--gpuaff=exclusiv: says 'did you mean'" "$(cat "$tmp/bad_flag.err")" "did you mean exclusive?"
expect_in "--gpuaff=exclusiv: srun names the option" "$(cat "$tmp/bad_flag.err")" "srun: error: Invalid --gpuaff argument: exclusiv"

# 3. default=on: every step is bound without the flag; --gpuaff=off opts out.
plugstack "optional $plugin root=$root policy=exclusive default=on"
step default_on "-n2" "--gres=gpu:2" "--cpu-bind=none" -- "${show_plan[@]}"
step default_off "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=off" -- "${show_plan[@]}"
for t in 0 1; do
  expect "default=on: task $t starts on CPU $t" "$(field default_on $t before)" "$t cvd=0,1"
  expect "default=on: task $t carries exec's GPUAFF_PLAN" "$(field default_on $t plan)" "${exec_plan[$t]}"
  expect "default=on --gpuaff=off: task $t is not bound" "$(field default_off $t before)" "0-1 cvd=0,1"
  expect "default=on --gpuaff=off: task $t has no plan" "$(field default_off $t plan)" unset
done
#    Under default=on an explicit --cpu-bind=cores is the same conflict, said
#    by srun before anything runs; --gpuaff=off keeps Slurm's binding.
step default_cores "-n2" "--gres=gpu:2" "--cpu-bind=cores" -- "${show_plan[@]}"
expect "default=on --cpu-bind=cores: srun fails" "$(cat "$tmp/default_cores.rc")" 1
expect "default=on --cpu-bind=cores: no task runs" "$(cat "$tmp/default_cores.out")" ""
expect_in "default=on --cpu-bind=cores: the conflict named" "$(cat "$tmp/default_cores.err")" "use --cpu-bind=none with --gpuaff"
step default_cores_off "-n2" "--gres=gpu:2" "--cpu-bind=cores" "--gpuaff=off" -- "${show_plan[@]}"
for t in 0 1; do
  expect "default=on --cpu-bind=cores --gpuaff=off: task $t on CPU $t (Slurm's)" "$(field default_cores_off $t before)" "$t cvd=0,1"
done
#    A bad policy in plugstack.conf ends each task before it runs, with exec's
#    message and exit code (2: a usage mistake).
plugstack "optional $plugin root=$root policy=exclusiv default=on"
step site_bad "-n2" "--gres=gpu:2" "--cpu-bind=none" -- "${show_plan[@]}"
for t in 0 1; do
  expect "site policy=exclusiv: task $t does not run" "$(field site_bad $t before)" ""
  expect "site policy=exclusiv: task $t message is exec's" "$(message site_bad $t)" "$exec_bad"
done
expect "site policy=exclusiv: exit code" "$(srun_exit site_bad)" "tasks 0-1: Exited with exit code 2"
#    A key gpuaff does not know: an error naming it, only where the plugin binds.
plugstack "optional $plugin root=$root membnd=local"
step site_key "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" -- "${show_plan[@]}"
expect "unknown key: exit code" "$(srun_exit site_key)" "tasks 0-1: Exited with exit code 2"
for t in 0 1; do
  expect "unknown key: task $t does not run" "$(field site_key $t before)" ""
  expect "unknown key: task $t message" "$(message site_key $t)" \
    "gpuaff: plugstack.conf: unknown option 'membnd'; did you mean membind? (policy=P, root=DIR, default=on|off, or any option of 'gpuaff exec' as KEY=VALUE)"
done
step site_key_off "-n2" "--gres=gpu:2" "--cpu-bind=none" -- "${show_plan[@]}"
for t in 0 1; do
  expect "unknown key, no --gpuaff: task $t runs unbound" "$(field site_key_off $t before)" "0-1 cvd=0,1"
  expect "unknown key, no --gpuaff: task $t says nothing" "$(message site_key_off $t)" ""
done
#    Any exec option passes through: membind=local (the task's memory policy).
plugstack "optional $plugin root=$root membind=local"
step site_membind "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" -- "${show_plan[@]}"
for t in 0 1; do
  expect "membind=local: task $t on CPU $t" "$(field site_membind $t before)" "$t cvd=0,1"
  expect_in "membind=local: task $t's plan binds memory to node 0" "$(field site_membind $t plan)" "cpus=$t mems=0 membind=local"
  expect "membind=local: task $t says nothing" "$(message site_membind $t)" ""
done

#    The fourth wave's first option, vendor= (added as a row of the option
#    table and nothing else in the plugin), reaches the plugin: the test
#    cluster's two GPUs are NVIDIA's, so vendor=nvidia binds as before and
#    vendor=amd is the machine's answer with exec's message and exit code (4).
exec_amd=$("$gpuaff" exec --gpu 0 --vendor amd --root "$root" -- true 2>&1 || true)
echo "    (gpuaff exec --vendor amd: $exec_amd)"
plugstack "optional $plugin root=$root vendor=nvidia"
step site_vendor "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" -- "${show_plan[@]}"
for t in 0 1; do
  expect "vendor=nvidia: task $t on CPU $t" "$(field site_vendor $t before)" "$t cvd=0,1"
  expect "vendor=nvidia: task $t carries exec's GPUAFF_PLAN" "$(field site_vendor $t plan)" "${exec_plan[$t]}"
done
plugstack "optional $plugin root=$root vendor=amd"
step site_amd "-n2" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff=exclusive" -- "${show_plan[@]}"
expect "vendor=amd: exit code (exec's)" "$(srun_exit site_amd)" "tasks 0-1: Exited with exit code 4"
for t in 0 1; do
  expect "vendor=amd: task $t does not run" "$(field site_amd $t before)" ""
  expect_in "vendor=amd: task $t names the vendor" "$(message site_amd $t)" "gpuaff: vendor=amd: $root has no GPU of that vendor"
done
expect_in "exec --vendor amd: the same words, spelled as flags" "$exec_amd" "gpuaff: --vendor amd: $root has no GPU of that vendor"

# 4. Another job holds CPU 0; a step planned on the recording (gpu=0 nproc=2:
#    CPU 0) gets only CPU 1. Exec's error and exit code 5, then fallback=unbound.
timeout 120 srun --job-name=gpuaff-blocker -n1 -w localhost --cpus-per-task=1 \
  sh -c "grep Cpus_allowed_list /proc/self/status >'$tmp/blocker.mask'; exec sleep 100" \
  >"$tmp/blocker.out" 2>&1 &
blocker_pid=$!
for ((i = 0; i < 100; i++)); do [[ -s $tmp/blocker.mask ]] && break; sleep 0.2; done
expect "busy: the other job holds CPU 0" "$(cat "$tmp/blocker.mask" 2>/dev/null)" $'Cpus_allowed_list:\t0'
plugstack
step busy_exec "-n1" "--gres=gpu:2" "--cpu-bind=none" -- \
  "$gpuaff" exec --gpu 0 --nproc 2 --policy exclusive --root "$root" -- "${show_plan[@]}"
expect "busy, exec: exit status" "$(field busy_exec 0 rc)" 5
busy_msg=$(message busy_exec 0 | sed 's/for thread [0-9]*/for thread T/')
expect_in "busy, exec: error" "$busy_msg" "gpuaff: cannot apply the binding planned from $root here: CPUs 0 are not in this process's allowed set"
plugstack "optional $plugin root=$root gpu=0 nproc=2 policy=exclusive"
step busy "-n1" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff" -- "${show_plan[@]}"
expect "busy, plugin: the task does not run" "$(field busy 0 before)" ""
expect "busy, plugin: exit code (exec's)" "$(srun_exit busy)" "task 0: Exited with exit code 5"
expect "busy, plugin: exec's message" "$(message busy 0 | sed 's/for thread [0-9]*/for thread T/')" "$busy_msg"
plugstack "optional $plugin root=$root gpu=0 nproc=2 policy=exclusive fallback=unbound"
step busy_fallback "-n1" "--gres=gpu:2" "--cpu-bind=none" "--gpuaff" -- "${show_plan[@]}"
expect "busy, fallback=unbound: runs unbound on the step's CPU 1" "$(field busy_fallback 0 before)" "1 cvd=0,1"
expect "busy, fallback=unbound: exit status" "$(field busy_fallback 0 rc)" 0
expect "busy, fallback=unbound: no plan" "$(field busy_fallback 0 plan)" unset
expect "busy, fallback=unbound: exec's warning" "$(message busy_fallback 0 | sed 's/for thread [0-9]*/for thread T/')" \
  "gpuaff: warning: ${busy_msg#gpuaff: }; running the task unbound (fallback=unbound)"
blocker_job=$(squeue -h -n gpuaff-blocker -o %i)
[[ -z $blocker_job ]] || scancel "$blocker_job"
wait "$blocker_pid" 2>/dev/null || true
blocker_pid=""

if [[ $failures -ne 0 ]]; then
  echo "FAIL: $failures check(s) failed; slurmd log tail:"
  tail -n 20 "$cluster/log/slurmd.log"
  exit 1
fi
echo "PASS: every SPANK plugin case behaved as checked"
