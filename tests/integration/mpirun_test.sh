#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mpirun starts two ranks of `gpuaff exec --local-rank`; Open MPI tells each
# its local rank in OMPI_COMM_WORLD_LOCAL_RANK, so rank 0 must run on CPU 0
# and rank 1 on CPU 1 (see prepare_root.sh for why).
#   mpirun_test.sh GPUAFF
set -euo pipefail
gpuaff=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/prepare_root.sh"
command -v mpirun >/dev/null || skip "mpirun not installed (Debian: openmpi-bin)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prepare_root "$gpuaff" "$tmp/root"

as_root=()
[[ $(id -u) -eq 0 ]] && as_root=(--allow-run-as-root)
# --bind-to none: Open MPI's own core binding would only be replaced by gpuaff's.
# The ranks never call MPI, so only the launcher is needed: no network transport.
out=$(OMPI_MCA_plm_rsh_agent=false OMPI_MCA_btl=self timeout 60 \
  mpirun "${as_root[@]}" --oversubscribe --bind-to none --tag-output -np 2 \
  "$gpuaff" exec --local-rank --policy exclusive --root "$tmp/root" -- \
  sh -c 'grep Cpus_allowed_list /proc/self/status' 2>"$tmp/err") || {
  echo "FAIL: mpirun exited $?"; cat "$tmp/err"; exit 1; }
echo "$out"
# --tag-output prefixes each line with [jobid,rank]<stdout>:
r0=$(grep -E '^\[[0-9]+,0\]<stdout>:' <<<"$out" | sed 's/.*<stdout>:[[:space:]]*//')
r1=$(grep -E '^\[[0-9]+,1\]<stdout>:' <<<"$out" | sed 's/.*<stdout>:[[:space:]]*//')
ok=1
[[ $r0 == $'Cpus_allowed_list:\t0' ]] || { echo "FAIL: rank 0 got '$r0', expected CPU 0"; ok=0; }
[[ $r1 == $'Cpus_allowed_list:\t1' ]] || { echo "FAIL: rank 1 got '$r1', expected CPU 1"; ok=0; }
if [[ $ok != 1 ]]; then cat "$tmp/err"; exit 1; fi
echo "PASS: rank 0 on CPU 0, rank 1 on CPU 1"
