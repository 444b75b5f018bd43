#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The prologue of slurm_test.sh and spank_test.sh, sourced by both once they
# have set `here` (this directory) and `gpuaff` (the CLI, an absolute path).
# Sourcing it defines skip and prepare_root (tests/integration/prepare_root.sh)
# and fails (exit 1) when $gpuaff is not an executable. Then, in order:
#   slurm_prologue NAME   skips (77) without Slurm, munge or python3, without
#                         root, or on a machine other than the 2-CPU, 2-core
#                         one the exact masks are written for; makes
#                         tmp=/tmp/gpuaff-NAME.XXXXXX, cluster=$tmp/cluster
#                         and an EXIT trap that stops the cluster, ends the
#                         srun of $blocker_pid (when set) and removes $tmp;
#                         records the machine with two fake GPUs into
#                         root=$tmp/root.
#   slurm_start_cluster   starts the test cluster (cluster.sh) and prints its
#                         output; skips (77) when it cannot start here, a
#                         failure (exit 1) instead with GPUAFF_REQUIRE_SLURM=1.
#                         Exports SLURM_CONF and GPUAFF and enters $tmp.
source "$here/../integration/prepare_root.sh"  # skip, prepare_root

[[ -x $gpuaff ]] || { echo "FAIL: $gpuaff is not an executable"; exit 1; }

slurm_prologue() {
  local name=$1 prog
  for prog in srun sinfo squeue scancel slurmctld slurmd munged python3; do
    command -v "$prog" >/dev/null || skip "$prog not installed (Debian: apt-get install slurm-wlm munge)"
  done
  [[ $(id -u) -eq 0 ]] || skip "not root: slurmd must create cgroups"
  [[ $(cat /sys/devices/system/cpu/online) == 0-1 ]] ||
    skip "the exact masks are written for a machine with CPUs 0-1 online (this one: $(cat /sys/devices/system/cpu/online))"
  grep -q 'ThreadsPerCore=1\b' <<<"$(slurmd -C)" || skip "CPUs 0 and 1 are one core here (slurmd -C); the test needs two cores"

  tmp=$(mktemp -d "/tmp/gpuaff-$name.XXXXXX")
  chmod 711 "$tmp"  # munged wants every directory above its socket searchable
  cluster=$tmp/cluster
  blocker_pid=""
  trap slurm_cleanup EXIT

  prepare_root "$gpuaff" "$tmp/root"
  root=$tmp/root
}

slurm_cleanup() {
  set +e
  "$here/cluster.sh" stop "$cluster" >/dev/null
  if [[ -n $blocker_pid ]]; then
    kill -TERM "$blocker_pid" 2>/dev/null
    wait "$blocker_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}

slurm_start_cluster() {
  local rc=0
  "$here/cluster.sh" start "$cluster" >"$tmp/cluster.out" 2>&1 || rc=$?
  if [[ $rc -eq 77 ]]; then skip "$(tail -n 1 "$tmp/cluster.out")"; fi
  if [[ $rc -ne 0 ]]; then
    # The daemons' start depends on the host (cgroup layout, kernel, container
    # limits), not on gpuaff: a skip with the reason, unless the run demands
    # Slurm (GPUAFF_REQUIRE_SLURM=1, as on the machines docs/slurm.md names).
    cat "$tmp/cluster.out"
    [[ ${GPUAFF_REQUIRE_SLURM:-0} == 1 ]] && { echo "FAIL: the test cluster did not start (cluster.sh exited $rc)"; exit 1; }
    skip "the test cluster did not start here (cluster.sh exited $rc; its output is above)"
  fi
  cat "$tmp/cluster.out"
  export SLURM_CONF=$cluster/etc/slurm.conf
  export GPUAFF=$gpuaff
  cd "$tmp"
}
