#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# torchrun --nproc_per_node 2 on a recording with four GPUs on node 0 (CPUs
# 0-1, two cores; see prepare_root.sh): torchrun sets LOCAL_WORLD_SIZE=2, which
# must stand for --nproc 2, so that exclusive splits the two cores between the
# two workers (worker 0 on CPU 0, worker 1 on CPU 1). Were the local size
# ignored, all four GPUs would take part and two cores cannot be split four
# ways: the workers would fail.
#   torchrun_local_size_test.sh GPUAFF
set -euo pipefail
gpuaff=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/prepare_root.sh"
command -v torchrun >/dev/null || skip "torchrun not installed (Debian: python3-torch)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prepare_root "$gpuaff" "$tmp/root" 4
# Without a job size the four GPUs all take part: the binding is refused.
if "$gpuaff" bind --root "$tmp/root" --gpu 0 --policy exclusive >/dev/null 2>&1; then
  echo "FAIL: four GPUs on two cores should not split under exclusive"; exit 1
fi

out=$(timeout 100 torchrun --standalone --nproc_per_node 2 --no_python --redirects 1 --tee 1 \
  --log_dir "$tmp/logs" \
  "$gpuaff" exec --local-rank --policy exclusive --root "$tmp/root" -- \
  sh -c 'grep Cpus_allowed_list /proc/self/status' 2>"$tmp/err") || {
  echo "FAIL: torchrun exited $?"; cat "$tmp/err"; exit 1; }
echo "$out"
r0=$(grep '^\[default0\]:' <<<"$out" | sed 's/^\[default0\]://')
r1=$(grep '^\[default1\]:' <<<"$out" | sed 's/^\[default1\]://')
ok=1
[[ $r0 == $'Cpus_allowed_list:\t0' ]] || { echo "FAIL: worker 0 got '$r0', expected CPU 0"; ok=0; }
[[ $r1 == $'Cpus_allowed_list:\t1' ]] || { echo "FAIL: worker 1 got '$r1', expected CPU 1"; ok=0; }
if [[ $ok != 1 ]]; then cat "$tmp/err"; exit 1; fi
echo "PASS: LOCAL_WORLD_SIZE=2 stood for --nproc 2: worker 0 on CPU 0, worker 1 on CPU 1"
