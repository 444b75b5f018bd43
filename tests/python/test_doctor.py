# SPDX-License-Identifier: Apache-2.0
# gpuaff.doctor() and `gpuaff doctor --format json` are one document
# (gpuaff/doctor/document.hpp): the same keys at every level, the same values
# (a cpulist in JSON is a set in Python, a node id key a string in JSON and an
# int in Python), roles included.
import json
import os
import subprocess
import sys
import time

import pytest

import gpuaff
from conftest import DGX_H100

TOOL = os.path.join(os.environ.get("GPUAFF_BINARY_DIR", ""), "tools", "gpuaff", "gpuaff")


def same(py, js, path="verdict"):
    """Asserts that the Python value `py` is the JSON value `js`, key for key."""
    if isinstance(py, dict):
        assert isinstance(js, dict), path
        assert [str(k) for k in py] == list(js), path
        for k in py:
            same(py[k], js[str(k)], "%s.%s" % (path, k))
    elif isinstance(py, list):
        assert isinstance(js, list) and len(py) == len(js), path
        for i, (a, b) in enumerate(zip(py, js)):
            same(a, b, "%s[%d]" % (path, i))
    elif isinstance(py, set):
        assert py == gpuaff._gpuaff.parse_cpulist(js), path
    else:
        assert py == js, path


@pytest.mark.skipif(not os.access(TOOL, os.X_OK), reason="the gpuaff tool is not built beside the module")
def test_doctor_dict_is_the_cli_json():
    # A process of its own (sleep), checked against GPU 1 of the DGX H100
    # recording with roles: main and comm take one core each of GPU 1's 14
    # (cores 14 and 15), so "roles" is in the document and each thread has a role.
    child = subprocess.Popen(["sleep", "30"])
    try:
        # Until it sleeps: while the loader still maps pages, two reads differ.
        for _ in range(500):
            with open("/proc/%d/stat" % child.pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "S":
                    break
            time.sleep(0.01)
        options = dict(root=DGX_H100, gpu=1, policy="exclusive", roles="main=1,comm=1")
        py = gpuaff.doctor(child.pid, **options)
        cli = subprocess.run([TOOL, "doctor", "--pid", str(child.pid), "--root", DGX_H100, "--gpu", "1", "--policy",
                              "exclusive", "--roles", "main=1,comm=1", "--format", "json"],
                             capture_output=True, text=True, check=False)
    finally:
        child.kill()
        child.wait()
    assert cli.returncode in (0, 7), cli.stderr
    js = json.loads(cli.stdout)
    assert list(py) == ["pid", "gpu", "bdf", "gpu_source", "plan_from", "policy", "expected_cpus", "memory_nodes",
                        "host_nodes", "roles", "healthy", "threads", "memory", "environment", "problems", "notes"]
    assert py["bdf"] == "0000:43:00.0"
    assert py["expected_cpus"] == gpuaff._gpuaff.parse_cpulist("14-27,126-139")
    assert py["roles"]["main"] == {14, 126}
    assert py["roles"]["comm"] == {15, 127}
    assert all("role" in t for t in py["threads"])
    assert isinstance(py["memory"]["pages_by_node"], dict)
    # Messages differ only in how options are spelled: compare with the words as each front end writes them.
    for key in ("problems", "notes"):
        assert len(py[key]) == len(js[key])
        py[key] = js[key] = []
    # Resident pages are read twice, a moment apart: the same nodes, counts as they were then.
    assert [str(n) for n in py["memory"]["pages_by_node"]] == list(js["memory"]["pages_by_node"])
    py["memory"] = js["memory"] = {}
    same(py, js)


# A rank bound in place by gpuaff.bind() (the recipe docs/python.md gives
# first) is exec'd without GPUAFF_PLAN, and os.environ changes never reach
# /proc/PID/environ; the plan it publishes must make it as visible to doctor
# as a rank started by `gpuaff exec`. On two-node-2cpu, GPU 1 is alone on node 1
# with CPU 1, so exclusive gives it CPU 1 and memory node 1.
BOUND_IN_PLACE = r"""
import os, sys, json, gpuaff
assert "GPUAFF_PLAN" not in os.environ
gpuaff.bind(root=sys.argv[1], gpu=1, policy="exclusive")
own = gpuaff.doctor(os.getpid())
print(json.dumps({"policy": own["policy"], "plan_from": own["plan_from"], "cpus": sorted(own["expected_cpus"])}),
      flush=True)
sys.stdin.read()  # until the test has looked at this process
"""


@pytest.mark.skipif(not os.access(TOOL, os.X_OK), reason="the gpuaff tool is not built beside the module")
def test_a_process_bound_in_place_is_seen_by_doctor(root):
    from conftest import needs_cpus_0_and_1

    needs_cpus_0_and_1()
    env = {k: v for k, v in os.environ.items() if k != "GPUAFF_PLAN"}
    child = subprocess.Popen([sys.executable, "-c", BOUND_IN_PLACE, root], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        own = json.loads(child.stdout.readline())
        # gpuaff.doctor(os.getpid()) right after bind(): checked against the plan it applied.
        assert own == {"policy": "exclusive", "plan_from": "GPUAFF_PLAN", "cpus": [1]}
        with open("/proc/%d/environ" % child.pid, "rb") as f:
            assert b"GPUAFF_PLAN=" not in f.read()  # what makes this test mean something

        def doctor(*args):
            return subprocess.run([TOOL, "doctor", "--all", *args], capture_output=True, text=True, check=False,
                                   env=env)

        js = doctor("--format", "json")
        assert js.returncode in (0, 7), js.stderr
        mine = [v for v in json.loads(js.stdout)["processes"] if v["pid"] == child.pid]
        assert len(mine) == 1, js.stdout
        assert mine[0]["policy"] == "exclusive"
        assert mine[0]["expected_cpus"] == "1"
        assert mine[0]["gpu"] == 1

        text = doctor()
        assert text.returncode in (0, 7), text.stderr
        assert any(line.split()[:1] == [str(child.pid)] for line in text.stdout.splitlines()), text.stdout

        prom = doctor("--format", "prometheus")
        assert prom.returncode in (0, 7), prom.stderr
        assert 'pid="%d"' % child.pid in prom.stdout
    finally:
        child.stdin.close()
        child.wait(timeout=60)
