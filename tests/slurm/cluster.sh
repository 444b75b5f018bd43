#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A one-node Slurm cluster on 127.0.0.1, kept entirely under one private
# directory: its own munged (key, socket, pid, log, seed), slurmctld and slurmd
# (slurm.conf, gres.conf, cgroup.conf, plugstack.conf, state, spool, logs,
# pid files). Nothing under /etc is read or written: every Slurm command finds
# the configuration through SLURM_CONF=DIR/etc/slurm.conf, and Slurm reaches
# this munged through AuthInfo=socket=DIR/munge/munge.socket.
#
#   cluster.sh start DIR    write the configuration, start the daemons, wait
#                           (at most 30 s) until node `localhost` is idle
#   cluster.sh stop DIR     cancel the cluster's jobs, stop the daemons by their
#                           pid files (TERM, then KILL after 10 s)
#   cluster.sh status DIR   the daemons' pids and `sinfo`
#   cluster.sh plugstack DIR [LINE...]
#                           write DIR/etc/plugstack.conf: one line per LINE
#                           (none: empty). srun and each step's slurmstepd
#                           read it when they start, so it takes effect for
#                           the next srun, with no restart.
#
# Needs (Debian 12): slurm-wlm (22.05) and munge; installs nothing. Runs as
# root: slurmd needs it to create cgroups and start tasks as the job's user.
# The node is the live machine (CPUs, boards, sockets, cores, threads from
# `slurmd -C`) with two fake GPUs: character devices DIR/dev/nvidia0 and
# DIR/dev/nvidia1 (major 195, as NVIDIA's), declared in gres.conf with
# AutoDetect=off. Cores are confined by task/cgroup and bound by task/affinity;
# proctrack/cgroup tracks the tasks; cgroup v1 or v2, whichever the kernel has
# mounted at /sys/fs/cgroup. Slurm's own cgroups are named after the node
# (/sys/fs/cgroup/<controller>/slurm_localhost on v1): two such clusters on one
# machine would share them, so run one at a time.
#
# GPUAFF_SLURM_NODE_EXTRA: words added to the node's line of slurm.conf
# (CpuSpecList=0, say: tests/slurm/core_spec_test.sh).
#
# Exit codes: 0 done; 1 failed (the message says which daemon, and its log);
# 2 bad usage; 77 this machine cannot host the cluster (a package missing,
# not root, no cgroup cpuset controller): the caller's skip.
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR, or $0 plugstack DIR [LINE...]" >&2; exit 2; }
die() { echo "cluster.sh: $*" >&2; exit 1; }
cannot() { echo "cluster.sh: cannot host the cluster here: $*" >&2; exit 77; }

[[ $# -ge 2 ]] || usage
action=$1
[[ -n $2 ]] || usage
[[ $# -eq 2 || $action == plugstack ]] || usage
dir=$(realpath -m -- "$2")
shift 2
conf=$dir/etc/slurm.conf
export SLURM_CONF=$conf
wait_s=30

# --- pid-file helpers ------------------------------------------------------

# The pid in FILE when that process is alive and runs PROGRAM; empty otherwise
# (a stale pid file, a pid since reused by another program, a zombie). The
# kernel's `comm` is the name the program was started by (Debian starts
# /usr/sbin/slurmctld, a link to slurmctld-wlm).
live_pid() {
  local file=$1 program=$2 pid comm state
  [[ -s $file ]] || return 0
  pid=$(tr -dc '0-9' 2>/dev/null <"$file") || return 0
  [[ -n $pid ]] || return 0
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0
  state=$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 0
  [[ $comm == "$program" && $state != Z ]] && echo "$pid"
  return 0
}

# Stops the daemon whose pid FILE names, running PROGRAM: TERM, up to 10 s, KILL.
stop_daemon() {
  local file=$1 program=$2 pid i
  pid=$(live_pid "$file" "$program")
  if [[ -z $pid ]]; then rm -f "$file"; return 0; fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    [[ -n $(live_pid "$file" "$program") ]] || break
    sleep 0.1
  done
  if [[ -n $(live_pid "$file" "$program") ]]; then
    echo "cluster.sh: $program (pid $pid) ignored TERM for 10 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$file"
}

# Waits until DAEMON's pid file names a live PROGRAM, at most 10 s.
wait_pid_file() {
  local file=$1 program=$2 log=$3 i
  for ((i = 0; i < 100; i++)); do
    [[ -n $(live_pid "$file" "$program") ]] && return 0
    sleep 0.1
  done
  echo "cluster.sh: $program did not start (no live pid in $file after 10 s); last lines of $log:" >&2
  tail -n 15 "$log" >&2 2>/dev/null || true
  stop_all
  exit 1
}

stop_all() {
  # Jobs first: their slurmstepd processes outlive slurmd.
  if [[ -n $(live_pid "$dir/run/slurmctld.pid" slurmctld) ]]; then
    local i
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    [[ -z $jobs ]] || scancel --quiet $jobs 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.1
    done
    [[ -z $(squeue -h -o %i 2>/dev/null) ]] ||
      echo "cluster.sh: jobs still listed after 15 s: $(squeue -h -o '%i %T' | tr '\n' ' ')" >&2
  fi
  stop_daemon "$dir/run/slurmd.pid" slurmd
  stop_daemon "$dir/run/slurmctld.pid" slurmctld
  stop_daemon "$dir/run/munged.pid" munged
}

# --- start -----------------------------------------------------------------

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
  local cgroup_plugin=$1 ctld_port=$2 slurmd_port=$3 hw
  # The node as slurmd sees this machine: "NodeName=vm CPUs=2 Boards=1 ... RealMemory=..."
  hw=$(slurmd -C | head -n 1) || die "slurmd -C failed"
  local field value node_hw=""
  for field in CPUs Boards SocketsPerBoard CoresPerSocket ThreadsPerCore; do
    value=$(grep -o "\b$field=[0-9]*" <<<"$hw" | head -n 1)
    [[ -n $value ]] || die "slurmd -C does not report $field: '$hw'"
    node_hw+=" $value"
  done
  cat >"$dir/etc/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh: a one-node test cluster under $dir.
ClusterName=gpuaff-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/etc/plugstack.conf
TmpFS=$dir/tmp
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost$node_hw RealMemory=1 Gres=gpu:2 State=UNKNOWN${GPUAFF_SLURM_NODE_EXTRA:+ $GPUAFF_SLURM_NODE_EXTRA}
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  cat >"$dir/etc/gres.conf" <<EOF
# Two fake GPUs: character devices made with mknod, nothing behind them.
AutoDetect=off
NodeName=localhost Name=gpu File=$dir/dev/nvidia0
NodeName=localhost Name=gpu File=$dir/dev/nvidia1
EOF
  cat >"$dir/etc/cgroup.conf" <<EOF
CgroupPlugin=$cgroup_plugin
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainDevices=yes
ConstrainRAMSpace=no
ConstrainSwapSpace=no
EOF
  : >"$dir/etc/plugstack.conf"
}

start() {
  local prog
  for prog in munged munge unmunge slurmctld slurmd sinfo squeue scancel srun; do
    command -v "$prog" >/dev/null || cannot "$prog not found (Debian: apt-get install slurm-wlm munge)"
  done
  command -v python3 >/dev/null || cannot "python3 not found (used to pick free ports)"
  [[ $(id -u) -eq 0 ]] || cannot "not root (slurmd creates cgroups and starts tasks as other users)"
  # Which cgroup version the kernel mounts at /sys/fs/cgroup decides the plugin.
  local fstype cgroup_plugin
  fstype=$(stat -f -c %T /sys/fs/cgroup 2>/dev/null || echo none)
  if [[ $fstype == cgroup2fs ]]; then
    cgroup_plugin=cgroup/v2
    grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null || cannot "cgroup v2 without the cpuset controller"
  elif [[ -d /sys/fs/cgroup/cpuset && -d /sys/fs/cgroup/freezer && -d /sys/fs/cgroup/devices ]]; then
    cgroup_plugin=cgroup/v1
  else
    cannot "no cgroup v2 at /sys/fs/cgroup and no cgroup v1 cpuset, freezer and devices hierarchies under it"
  fi
  if [[ -n $(live_pid "$dir/run/slurmctld.pid" slurmctld) || -n $(live_pid "$dir/run/munged.pid" munged) ]]; then
    die "a cluster is already running under $dir; stop it first: $0 stop $dir"
  fi

  mkdir -p "$dir"
  chmod 711 "$dir"  # munged wants every directory above its socket searchable by all
  mkdir -p "$dir"/{etc,munge,state,spool,log,run,tmp,dev}
  chmod 755 "$dir/munge"
  local gpu
  for gpu in 0 1; do
    [[ -c $dir/dev/nvidia$gpu ]] || mknod -m 666 "$dir/dev/nvidia$gpu" c 195 "$gpu" ||
      cannot "mknod $dir/dev/nvidia$gpu failed"
  done
  write_config "$cgroup_plugin" "$(free_port)" "$(free_port)"

  # munged: its own key, socket, pid, log and seed; munged refuses a key that
  # others may read.
  if [[ ! -s $dir/munge/munge.key ]]; then
    (umask 077; head -c 1024 /dev/urandom >"$dir/munge/munge.key")
  fi
  chmod 400 "$dir/munge/munge.key"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >>"$dir/log/munged.start" 2>&1 ||
    { cat "$dir/log/munged.start" >&2; stop_all; die "munged did not start (log: $dir/log/munged.log)"; }
  wait_pid_file "$dir/run/munged.pid" munged "$dir/log/munged.log"
  munge -n -S "$dir/munge/munge.socket" | unmunge -S "$dir/munge/munge.socket" >/dev/null ||
    { stop_all; die "munged runs but a credential does not round-trip through $dir/munge/munge.socket"; }

  slurmctld -c -f "$conf" >>"$dir/log/slurmctld.start" 2>&1 ||
    { cat "$dir/log/slurmctld.start" >&2; stop_all; die "slurmctld did not start (log: $dir/log/slurmctld.log)"; }
  wait_pid_file "$dir/run/slurmctld.pid" slurmctld "$dir/log/slurmctld.log"
  slurmd -N localhost -f "$conf" >>"$dir/log/slurmd.start" 2>&1 ||
    { cat "$dir/log/slurmd.start" >&2; stop_all; die "slurmd did not start (log: $dir/log/slurmd.log)"; }
  wait_pid_file "$dir/run/slurmd.pid" slurmd "$dir/log/slurmd.log"

  local state="" i
  for ((i = 0; i < wait_s * 2; i++)); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    [[ $state == idle ]] && break
    sleep 0.5
  done
  if [[ $state != idle ]]; then
    echo "cluster.sh: node localhost is '${state:-not listed}', not idle, after ${wait_s} s; last lines of the logs:" >&2
    tail -n 8 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 2>/dev/null || true
    stop_all
    exit 1
  fi
  echo "cluster up: SLURM_CONF=$conf ($cgroup_plugin; node localhost idle)"
}

status() {
  local name prog pid rc=0
  for name in munged:munged slurmctld:slurmctld slurmd:slurmd; do
    prog=${name#*:}
    pid=$(live_pid "$dir/run/${name%%:*}.pid" "$prog")
    if [[ -n $pid ]]; then echo "$prog: running, pid $pid"; else echo "$prog: not running"; rc=3; fi
  done
  if [[ -n $(live_pid "$dir/run/slurmctld.pid" slurmctld) ]]; then
    sinfo -N -o '%N %T %c %G' || rc=3
  fi
  return $rc
}

# Writes the plugstack.conf the cluster's slurm.conf names (PlugStackConfig).
plugstack() {
  [[ -d $dir/etc ]] || die "no cluster configuration under $dir (start it first)"
  local tmp=$dir/etc/plugstack.conf.new
  if [[ $# -eq 0 ]]; then : >"$tmp"; else printf '%s\n' "$@" >"$tmp"; fi
  mv -f "$tmp" "$dir/etc/plugstack.conf"
}

case $action in
  start) start ;;
  plugstack) plugstack "$@" ;;
  stop) stop_all; echo "cluster under $dir stopped" ;;
  status) status ;;
  *) usage ;;
esac
