#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# torchrun starts two workers of `gpuaff exec --local-rank`; each gets
# LOCAL_RANK, so worker 0 must run on CPU 0 and worker 1 on CPU 1 (see
# prepare_root.sh). Flags are spelled as torch 1.13 (Debian 12) accepts them:
# --nproc_per_node and --no_python (newer torch also takes the dashed forms).
# --redirects 1 --tee 1: torch 1.13's default output handling fails here, and
# the tee prefixes each line with [default<rank>]: so the ranks can be told apart.
#   torchrun_test.sh GPUAFF
set -euo pipefail
gpuaff=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/prepare_root.sh"
command -v torchrun >/dev/null || skip "torchrun not installed (Debian: python3-torch)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prepare_root "$gpuaff" "$tmp/root"

# --standalone: a local rendezvous on a free port, so parallel runs do not collide.
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
echo "PASS: worker 0 on CPU 0, worker 1 on CPU 1"
