# SPDX-License-Identifier: Apache-2.0
# Applying plans to this process: every thread, the calling thread under a
# guard, re-applying, and failures that leave every mask as it was.
import os
import subprocess
import sys
import threading

import pytest

import gpuaff
from conftest import DGX_H100, cpus_allowed


class Sleepers:
    """Threads that exist before a binding and wait until released."""

    def __init__(self, n=3):
        self.release = threading.Event()
        self.threads = [threading.Thread(target=self.release.wait) for _ in range(n)]
        for t in self.threads:
            t.start()

    def masks(self):
        return [cpus_allowed("self/task/%d" % t.native_id) for t in self.threads]

    def stop(self):
        self.release.set()
        for t in self.threads:
            t.join()


def all_masks():
    return {tid: cpus_allowed("self/task/" + tid) for tid in os.listdir("/proc/self/task")}


def test_bind_reaches_threads_created_before(bindable):
    sleepers = Sleepers()
    try:
        assert sleepers.masks() == ["0-1"] * 3
        p = gpuaff.bind(gpu=1, root=bindable)
        assert p.cpus == {1}
        assert sleepers.masks() == ["1"] * 3
        assert cpus_allowed() == "1"
        assert set(all_masks().values()) == {"1"}
    finally:
        sleepers.stop()


def test_reapply_after_a_library_reset(bindable):
    gpuaff.bind(gpu=0, root=bindable)
    os.sched_setaffinity(0, {0, 1})  # what an OpenMP runtime or NCCL may do
    assert cpus_allowed() == "0-1"
    assert gpuaff.reapply().cpus == {0}
    assert cpus_allowed() == "0"


def test_reapply_before_bind_is_an_error():
    out = subprocess.run([sys.executable, "-c", "import gpuaff; gpuaff.reapply()"], capture_output=True, text=True)
    assert out.returncode != 0
    assert "gpuaff._errors.InvalidArgument: nothing to re-apply: call gpuaff.bind() first" in out.stderr


def test_guard_binds_this_thread_only_and_restores(bindable):
    sleepers = Sleepers(1)
    try:
        with gpuaff.bound(gpu=1, root=bindable) as p:
            assert p.cpus == {1}
            assert gpuaff.thread_affinity() == {1}
            assert sleepers.masks() == ["0-1"]  # another thread keeps its mask
            with gpuaff.bound(gpu=0, root=bindable):  # guards nest
                assert gpuaff.thread_affinity() == {0}
            assert gpuaff.thread_affinity() == {1}
        assert gpuaff.thread_affinity() == {0, 1}
        with pytest.raises(KeyError):
            with gpuaff.bound(gpu=0, root=bindable):
                raise KeyError("inside")
        assert gpuaff.thread_affinity() == {0, 1}
    finally:
        sleepers.stop()


def test_guard_as_a_decorator_binds_each_call(bindable):
    # bound() as contextlib made it: a decorator too, each call its own block.
    @gpuaff.bound(gpu=1, root=bindable)
    def inside(x):
        return x, gpuaff.thread_affinity()

    assert inside(7) == (7, {1})
    assert gpuaff.thread_affinity() == {0, 1}
    assert inside(8) == (8, {1})  # a second call binds again
    assert gpuaff.thread_affinity() == {0, 1}
    assert inside.__name__ == "inside"


def test_a_guard_in_use_is_not_entered_again(bindable):
    guard = gpuaff.bound(gpu=1, root=bindable)
    with guard:
        with pytest.raises(RuntimeError, match="already in use"):
            with guard:
                pass
        assert gpuaff.thread_affinity() == {1}  # the refused entry changed nothing
    assert gpuaff.thread_affinity() == {0, 1}
    with guard:  # done with, it may guard another block
        assert gpuaff.thread_affinity() == {1}
    assert gpuaff.thread_affinity() == {0, 1}


def test_guard_with_memory_policy(bindable):
    # Node 0 exists on every machine; its memory policy is set for the block only.
    before = open("/proc/self/status").read().split("Mems_allowed_list:")[1].split()[0]
    with gpuaff.bound(gpu=0, root=bindable, membind="preferred") as p:
        assert p.membind == "preferred" and gpuaff.thread_affinity() == {0}
    assert gpuaff.thread_affinity() == {0, 1}
    assert open("/proc/self/status").read().split("Mems_allowed_list:")[1].split()[0] == before


def test_children_started_in_parallel_under_different_guards(bindable):
    # 16 threads, each starting a process under its own guard at the same moment:
    # thread i's child must have GPU (i % 2)'s CPU, never its neighbour's.
    plans = [gpuaff.plan(gpu=g, root=bindable) for g in (0, 1)]
    barrier = threading.Barrier(16)
    results = [None] * 16

    def start(i):
        with gpuaff.bound(plans[i % 2]):
            barrier.wait()
            out = subprocess.run(["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True, text=True)
            results[i] = out.stdout.split(":")[1].strip()

    threads = [threading.Thread(target=start, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["0", "1"] * 8
    assert gpuaff.thread_affinity() == {0, 1}


def test_failures_leave_every_mask_as_it_was(bindable):
    sleepers = Sleepers()
    try:
        before = all_masks()
        # Planned on a DGX H100: CPUs 0-55,112-167 do not exist here; checked before anything is applied.
        with pytest.raises(gpuaff.EmptyResult, match="do not exist here"):
            gpuaff.bind(gpu=0, root=DGX_H100)
        assert all_masks() == before
        # CPUs past the last possible one do not exist on this machine either:
        # the kernel narrows the first thread's mask to CPU 0, and every thread
        # changed so far is put back.
        last = int(open("/sys/devices/system/cpu/possible").read().strip().replace(",", "-").split("-")[-1])
        with pytest.raises(gpuaff.EmptyResult, match="every thread was put back"):
            gpuaff.bind_process("0,%d-%d" % (last + 1, last + 6))
        assert all_masks() == before
        with pytest.raises(gpuaff.Error):
            with gpuaff.bound(gpuaff.plan(gpu=0, root=DGX_H100)):
                pass
        assert all_masks() == before
        with pytest.raises(gpuaff.ParseError):
            gpuaff.bind_process("0-x")
        assert all_masks() == before
    finally:
        sleepers.stop()


def test_bind_process_takes_ids_or_a_cpulist(bindable):
    assert gpuaff.bind_process([1])["cpus"] == {1}
    assert cpus_allowed() == "1"
    assert gpuaff.bind_process("0-1")["cpus"] == {0, 1}
    for bad in ([-1], [8192], [2**70], ["1"]):
        with pytest.raises(gpuaff.InvalidArgument, match="is not a CPU id"):
            gpuaff.bind_process(bad)
    # bytes iterate as numbers: b"0" was read as CPU 48 (the byte '0'), not as the cpulist "0".
    before = cpus_allowed()
    for raw in (b"0", bytearray(b"0-1"), memoryview(b"1")):
        with pytest.raises(gpuaff.InvalidArgument, match="bytes"):
            gpuaff.bind_process(raw)
        with pytest.raises(gpuaff.InvalidArgument, match="decode"):
            gpuaff.worker_init_fn(raw)
    assert cpus_allowed() == before


def test_one_process_two_gpus_each_thread_its_gpus_share(bindable):
    # two-node-2cpu: GPU 0 is on CPU 0's node, GPU 1 on CPU 1's. A process that
    # drives both binds to the union; each worker thread that feeds one GPU
    # narrows itself to that GPU's share with bound(), and gets it back after.
    p = gpuaff.bind(gpu=[0, 1], root=bindable)
    assert p.gpus == [0, 1]
    assert p.cpus == {0, 1}
    assert os.sched_getaffinity(0) == {0, 1}
    seen = {}

    def feed(g):
        with gpuaff.bound(gpu=g, root=bindable):
            seen[g] = os.sched_getaffinity(0)  # this thread's mask
        seen[-1 - g] = os.sched_getaffinity(0)

    threads = [threading.Thread(target=feed, args=(g,)) for g in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0] == {0} and seen[1] == {1}
    assert seen[-1] == {0, 1} and seen[-2] == {0, 1}  # the union again after the block
    with pytest.raises(gpuaff.InvalidArgument, match="must be an int or a list of ints"):
        gpuaff.plan(gpu=[0, "1"], root=bindable)


def test_roles_bind_a_named_thread_and_give_data_workers_their_cpus(bindable):
    # two-node-2cpu: GPU 0 on CPU 0's node, GPU 1 on CPU 1's (one core each). A
    # process serving both has cores 0 and 1; roles "comm=1" give the comm role
    # the lowest core (CPU 0) and compute the other (CPU 1).
    p = gpuaff.bind(gpu=[0, 1], root=bindable, roles="comm=1")
    assert p.roles == {"comm": {0}, "compute": {1}}
    assert p.environment["OMP_PLACES"] == "{1}" and p.environment["OMP_PROC_BIND"] == "close"
    # A thread named as NCCL names its proxy thread is put on the comm role; the others keep the rank's CPUs.
    named = threading.Event()
    release = threading.Event()
    tids = {}

    def proxy():
        tids["proxy"] = threading.get_native_id()
        with open("/proc/self/task/%d/comm" % tids["proxy"], "w") as f:
            f.write("NCCL Proxy")
        named.set()
        release.wait()

    t = threading.Thread(target=proxy)
    t.start()
    try:
        named.wait(10)
        assert gpuaff.bind_role("comm", threads="NCCL*") == [tids["proxy"]]
        assert cpus_allowed("self/task/%d" % tids["proxy"]) == "0"
        assert gpuaff.thread_affinity() == {0, 1}  # the calling thread is not named like that
        with pytest.raises(gpuaff.NotFound, match=r"no thread of this process is named like 'NCL\*'"):
            gpuaff.bind_role("comm", threads="NCL*")
        with pytest.raises(gpuaff.InvalidArgument, match=r"the plan has no 'data' role \(it has comm, compute\)"):
            gpuaff.bind_role("data")
    finally:
        release.set()
        t.join()
    # The calling thread on its own role, by default.
    assert gpuaff.bind_role("compute") == [threading.get_native_id()]
    assert gpuaff.thread_affinity() == {1}
    # worker_init_fn takes the data role of the bound plan.
    q = gpuaff.bind(gpu=[0, 1], root=bindable, roles="data=1")
    assert gpuaff.worker_init_fn().cpus == [0]
    assert gpuaff.worker_init_fn(q).cpus == [0]
    assert gpuaff.worker_init_fn(gpuaff.plan(gpu=[0, 1], root=bindable)).cpus == [0, 1]  # no roles: the rank's CPUs


def test_keep_bound_puts_a_drifted_thread_back(bindable):
    # GPU 0 of the two-CPU root plans CPU 0 (as test_reapply above). A thread
    # that moves itself to CPUs 0-1 (what a runtime re-pinning does) is put
    # back on CPU 0 by the next check, and reported; the kernel says so.
    p = gpuaff.bind(gpu=0, root=bindable)
    assert p.cpus == {0}
    moved = threading.Event()
    release = threading.Event()

    def drifter():
        os.sched_setaffinity(0, {0, 1})
        moved.set()
        release.wait()

    t = threading.Thread(target=drifter, name="drifter")
    t.start()
    moved.wait()
    seen = []
    keeper = gpuaff.keep_bound(interval=3600, on_drift=seen.append)  # checks only when asked, here
    try:
        report = keeper.check()
        assert [(m["tid"], m["from"], m["to"]) for m in report["moved"]] == [(t.native_id, {0, 1}, {0})]
        assert report["failed"] == []
        assert cpus_allowed("self/task/%d" % t.native_id) == "0"
        assert seen == [report]
        assert keeper.check()["moved"] == []  # nothing drifted since
    finally:
        keeper.stop()
        release.set()
        t.join()


def test_keep_bound_needs_a_plan_and_a_sane_interval(bindable):
    out = subprocess.run([sys.executable, "-c", "import gpuaff; gpuaff.keep_bound()"], capture_output=True, text=True)
    assert out.returncode != 0 and "call gpuaff.bind() first" in out.stderr
    p = gpuaff.plan(gpu=0, root=bindable)
    for bad in (0, -1, "10", True):
        with pytest.raises(gpuaff.InvalidArgument):
            gpuaff.keep_bound(p, interval=bad)


class _FakeRay:
    """What gpuaff.ray_worker_setup reads of Ray (ray.get_runtime_context()),
    for a worker Ray assigned `gpus` (Ray is not installed here)."""

    def __init__(self, gpus):
        self.gpus = gpus

    def get_runtime_context(self):
        ray = self

        class Context:
            def get_accelerator_ids(self):
                return {"GPU": list(ray.gpus), "neuron_cores": []}

        return Context()


def test_ray_worker_setup_binds_the_gpu_ray_assigned(bindable, monkeypatch):
    # Ray called the hook with no argument in a worker it assigned GPU "1":
    # on two-node-2cpu GPU 1 (0000:97:00.0) is on node 1, whose one CPU is 1.
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(["1"]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    p = gpuaff.ray_worker_setup(root=bindable)
    assert p.cpus == {1}
    assert cpus_allowed() == "1"
    # Without Ray's context, CUDA_VISIBLE_DEVICES (what Ray sets for num_gpus) names it: GPU 0 -> CPU 0.
    monkeypatch.delitem(sys.modules, "ray")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert gpuaff.ray_worker_setup(root=bindable).cpus == {0}


def test_ray_worker_setup_without_a_gpu_is_an_error(monkeypatch):
    # A CPU-only worker: Ray's context lists no GPU and CUDA_VISIBLE_DEVICES is
    # empty (Ray sets it so for num_gpus=0): never a silent GPU 0.
    monkeypatch.setitem(sys.modules, "ray", _FakeRay([]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(gpuaff.InvalidArgument, match="no GPU is assigned to this Ray worker"):
        gpuaff.ray_worker_setup()
    with pytest.raises(gpuaff.InvalidArgument, match="leave out gpu="):
        gpuaff.ray_worker_setup(gpu=3)
