#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuaff doctor --nics` end to end on recorded counters: eight processes carry
# the GPUAFF_PLAN of dgx-h100's GPUs 0-7 (as `gpuaff exec` leaves it; their
# GPUs are found by address in the fixture, so each one's NIC set is its GPU's
# ConnectX-7), rank 1 with UCX_NET_DEVICES=mlx5_0:1, and the first two samples
# of tests/doctor/nic_counters/dgx-h100.txt replayed with --counters (nothing
# waits). The expected findings are those reasoned in nic_traffic_test.cpp:
# mlx5_3 idle in rank 1's set, ranks 0 and 1 piled on mlx5_0, the storage port
# mlx5_1 a note; exit 7. Then the JSON and Prometheus forms, and usage errors.
#   nics_cli_test.sh GPUAFF FIXTURES_DIR
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 GPUAFF FIXTURES_DIR" >&2; exit 2; }
gpuaff=$(realpath -- "$1")
root=$2/dgx-h100
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=planned_processes.sh
source "$(dirname "$0")/planned_processes.sh"
planned_tmp nics
fail() { echo "FAIL: $*" >&2; exit 1; }

# The first two samples (0 and 10 s) of the sequence.
sed '/^sample 20$/,$d' "$here/nic_counters/dgx-h100.txt" >"$tmp/two.txt"
gpus=(1b 43 52 61 9d c3 d1 df)
for k in 0 1 2 3 4 5 6 7; do
  plan="v1 gpu=$k pci=0000:${gpus[$k]}:00.0 from=LOCAL_RANK=$k policy=exclusive node=$((k / 4)) cpus=0 mems=0 membind=none"
  if [[ $k == 1 ]]; then
    env GPUAFF_PLAN="$plan" UCX_NET_DEVICES=mlx5_0:1 sleep 120 &
  else
    env GPUAFF_PLAN="$plan" sleep 120 &
  fi
  pids+=($!)
done
wait_for_plans

set +e
"$gpuaff" doctor --nics --root "$root" --counters "$tmp/two.txt" >"$tmp/text" 2>"$tmp/err"
rc=$?
set -e
cat "$tmp/text"
[[ $rc == 7 ]] || fail "exit $rc, not 7 (stderr: $(cat "$tmp/err"))"
# Eight planned processes or more: another program's planned processes may run here too (they have
# no GPU of this root, so no set, and change no finding).
grep -Eq "^NIC traffic over 10.0 s: 12 port\(s\), ([89]|[1-9][0-9]+) planned process\(es\), 2 problem\(s\)$" "$tmp/text" ||
  fail "summary line"
grep -q "^problem: NIC mlx5_3:1 of LOCAL_RANK=1's set carries nothing" "$tmp/text" || fail "mlx5_3 idle in rank 1's set"
grep -q "^problem: LOCAL_RANK=0, LOCAL_RANK=1 all use NIC mlx5_0:1 .* while mlx5_3:1 of their sets carries nothing$" \
  "$tmp/text" || fail "ranks 0 and 1 piled on mlx5_0"
grep -q "^note: NIC mlx5_1:1 moves 2.00 GB/s .* no GPU's rail" "$tmp/text" || fail "storage note"

set +e
"$gpuaff" doctor --nics --root "$root" --counters "$tmp/two.txt" --format json >"$tmp/json"
rc=$?
set -e
[[ $rc == 7 ]] || fail "json: exit $rc"
python3 - "$tmp/json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
kinds = sorted((f["kind"], f["nic"], f["problem"]) for f in j["findings"])
assert kinds == [("idle_in_set", "mlx5_3:1", True), ("outside_sets", "mlx5_1:1", False),
                 ("piled", "mlx5_0:1", True)], kinds
nic0 = next(n for n in j["nics"] if n["nic"] == "mlx5_0:1")
assert nic0["tx_bytes"] == 400_000_000_000 and nic0["set_of"] == ["LOCAL_RANK=0"], nic0
mine = [r for r in j["ranks"] if r["rank"].startswith("LOCAL_RANK=")]
assert j["healthy"] is False and len(mine) == 8, j["ranks"]
assert next(r for r in mine if r["rank"] == "LOCAL_RANK=1")["listed"] == ["mlx5_0"], mine
PY

"$gpuaff" doctor --nics --root "$root" --counters "$tmp/two.txt" --format prometheus >"$tmp/prom" || true
grep -q '^gpuaff_nic_transmit_bytes_per_second{nic="mlx5_0:1",ranks="LOCAL_RANK=0"} 4e+10$' "$tmp/prom" ||
  fail "prometheus: mlx5_0's rate"
grep -q '^gpuaff_nic_problem{nic="mlx5_0:1",kind="piled",ranks="LOCAL_RANK=0,LOCAL_RANK=1"} 1$' "$tmp/prom" ||
  fail "prometheus: the piled problem"
grep -q '^gpuaff_nic_healthy 0$' "$tmp/prom" || fail "prometheus: healthy 0"
# Prometheus's own parser, where installed (Debian: prometheus).
if command -v promtool >/dev/null; then
  promtool check metrics <"$tmp/prom" || fail "promtool check metrics refused the report"
fi

# --nics as one of --watch's checks, on this machine (the eight planned
# processes above are watched too): three checks 0.1 s apart exit 0 as any
# watch that --count stops. A machine without sys/class/infiniband (CI's)
# has no counters: one note says so, once, and no error.
"$gpuaff" doctor --watch --nics --count 3 --interval 0.1 >"$tmp/watch" 2>"$tmp/err" ||
  fail "--watch --nics: exit $? ($(cat "$tmp/err"))"
[[ ! -s $tmp/err ]] || fail "--watch --nics wrote on stderr: $(cat "$tmp/err")"
grep -q " watching node .*, NIC traffic from the second check$" "$tmp/watch" || fail "--watch --nics: the first line"
if [[ ! -d /sys/class/infiniband ]]; then
  n=$(grep -c " note NICs: no RDMA NIC under sys/class/infiniband" "$tmp/watch" || true)
  [[ $n == 1 ]] || fail "--watch --nics without RDMA NICs: the note $n times, not once"
  if grep -q " nic_" "$tmp/watch"; then fail "--watch --nics without RDMA NICs: a NIC event"; fi
fi

# Usage mistakes are never silent.
for bad in "--interval 0" "--interval 1e9" "--interval x"; do
  # shellcheck disable=SC2086
  if "$gpuaff" doctor --nics $bad 2>"$tmp/err"; then fail "$bad accepted"; fi
  grep -q "is not a duration in seconds" "$tmp/err" || fail "$bad: $(cat "$tmp/err")"
done
if "$gpuaff" doctor --all --counters "$tmp/two.txt" 2>"$tmp/err"; then fail "--counters without --nics"; fi
grep -q "add --nics" "$tmp/err" || fail "--counters without --nics: $(cat "$tmp/err")"
printf 'sample 0\nmlx5_0/ports/1/counters/port_xmit_data 1\n' >"$tmp/one.txt"
set +e
"$gpuaff" doctor --nics --counters "$tmp/one.txt" 2>"$tmp/err"
rc=$?
set -e
[[ $rc != 0 && $rc != 7 ]] || fail "a one-sample sequence: exit $rc"
grep -q "holds 1 sample(s)" "$tmp/err" || fail "one sample: $(cat "$tmp/err")"
echo PASS
