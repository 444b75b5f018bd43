#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run by srun as each task of a test step (tests/slurm/slurm_test.sh): prints
# what Slurm gave the task, then runs COMMAND and prints its exit status.
#   task.sh [--own-root BASE] [--devices DIR] [--] COMMAND [ARGS...]
# Output, one line each (srun --label puts the task number in front):
#   before=<Cpus_allowed_list> cvd=<CUDA_VISIBLE_DEVICES or unset>
#   devices=<the fake GPU nodes in DIR this task may open>      (with --devices)
#   ...COMMAND's own output...
#   rc=<COMMAND's exit status>
# --own-root BASE: records this task as gpuaff sees it (its own affinity mask
# and cgroup) into BASE.<SLURM_PROCID>, adds the two fake GPUs of
# tests/integration/prepare_root.sh, and puts that path in place of every
# argument @ROOT@. GPUAFF must be set to the gpuaff binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
own_root="" devices=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --own-root) own_root=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "task.sh: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
echo "before=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status) cvd=${CUDA_VISIBLE_DEVICES-unset}"
if [[ -n $devices ]]; then
  # Opening a device node with no driver behind it fails with ENXIO when the
  # device cgroup allows it, EPERM when it does not.
  python3 - "$devices" <<'PY'
import errno, os, sys
ok = []
for name in sorted(os.listdir(sys.argv[1])):
    try:
        os.close(os.open(os.path.join(sys.argv[1], name), os.O_RDONLY))
        ok.append(name)
    except OSError as e:
        if e.errno != errno.EPERM:
            ok.append(name)
print("devices=" + ",".join(ok))
PY
fi
args=("$@")
if [[ -n $own_root ]]; then
  source "$here/../integration/prepare_root.sh"
  root=$own_root.$SLURM_PROCID
  "$GPUAFF" record --out "$root" >/dev/null
  add_fake_gpus "$root" 2
  for i in "${!args[@]}"; do [[ ${args[$i]} == @ROOT@ ]] && args[$i]=$root; done
fi
rc=0
"${args[@]}" || rc=$?
echo "rc=$rc"
