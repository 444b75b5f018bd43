# SPDX-License-Identifier: Apache-2.0
# Children of torch.multiprocessing and multiprocessing, bound per plan: under
# the thread guard (spawn), through gpuaff-python (spawn and forkserver), and
# DataLoader workers through worker_init_fn.
import os
import subprocess
import sys

import pytest

import gpuaff
from conftest import HERE, cpus_allowed

torch = pytest.importorskip("torch")
import torch.multiprocessing  # noqa: E402
import torch.utils.data  # noqa: E402

import children  # noqa: E402


def test_torch_spawn_under_the_guard(bindable, tmp_path):
    # Two torch.multiprocessing.spawn calls, each under its GPU's guard; each
    # child's mask is read from /proc/<pid>/status while it waits.
    release = str(tmp_path / "release")
    contexts = []
    try:
        for g in (0, 1):
            with gpuaff.bound(gpu=g, root=bindable):
                contexts.append(torch.multiprocessing.spawn(children.spawned_rank, args=(release,), nprocs=2,
                                                            join=False))
        assert gpuaff.thread_affinity() == {0, 1}
        masks = [[cpus_allowed(p.pid) for p in ctx.processes] for ctx in contexts]
        assert masks == [["0", "0"], ["1", "1"]]
    finally:
        open(release, "w").close()
        for ctx in contexts:
            while not ctx.join(60):
                pass


def run_script(code):
    """Runs `code` in a fresh interpreter (a start method's server and
    set_executable are per process), returning its stdout lines."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE] + sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


SCRIPT = """
import multiprocessing, sys
import gpuaff, children
from conftest import cpus_allowed
ctx = multiprocessing.get_context(sys.argv[1] if len(sys.argv) > 1 else %r)
gpuaff.use_executable(gpu=%d, root=%r, context=ctx)
q = ctx.Queue()
ps = [ctx.Process(target=children.report_mask, args=(q,)) for _ in range(2)]
for p in ps: p.start()
masks = sorted(q.get(timeout=60) for _ in ps)
for p in ps: p.join()
print(cpus_allowed(), *masks)
"""


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_the_executable_binds_children(bindable, method):
    # The parent stays unbound; its children (the forkserver's, or each spawned one) start on GPU 1's CPU.
    assert run_script(SCRIPT % (method, 1, bindable)) == ["0-1", "1", "1"]
    assert run_script(SCRIPT % (method, 0, bindable)) == ["0-1", "0", "0"]


def test_the_executable_refuses_to_run_unbound(tmp_path):
    exe = gpuaff.executable()
    env = {"PATH": os.environ.get("PATH", "")}
    out = subprocess.run([exe, "-c", "print('ran')"], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout) == (2, "")
    assert "GPUAFF_PYTHON and GPUAFF_CPUS must be set" in out.stderr
    env.update(GPUAFF_PYTHON=sys.executable, GPUAFF_CPUS="0-x")
    out = subprocess.run([exe, "-c", "print('ran')"], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout) == (2, "") and "GPUAFF_CPUS" in out.stderr
    env.update(GPUAFF_CPUS="0", GPUAFF_MEMBIND="near")
    out = subprocess.run([exe, "-c", "print('ran')"], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout) == (2, "") and "GPUAFF_MEMBIND 'near'" in out.stderr
    env.update(GPUAFF_MEMBIND="none", GPUAFF_PYTHON=str(tmp_path / "nopython"))
    out = subprocess.run([exe, "-c", "print('ran')"], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout) == (2, "") and "nopython" in out.stderr


def test_the_executable_runs_python_bound(bindable):
    env = dict(os.environ, **gpuaff.executable_environment(gpuaff.plan(gpu=1, root=bindable)))
    code = "import sys; print(open('/proc/self/status').read().split('Cpus_allowed_list:')[1].split()[0], sys.argv[1:])"
    out = subprocess.run([gpuaff.executable(), "-c", code, "a b"], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "1 ['a b']", out.stderr


def load_masks(loader):
    return sorted({(int(w), m) for batch in loader for w, m in zip(batch[0], batch[1])})


@pytest.mark.parametrize("context", [None, "spawn"])
def test_dataloader_workers(bindable, context):
    dataset = children.MaskDataset(8)
    common = dict(num_workers=2, batch_size=2, multiprocessing_context=context)
    # split (the default): worker i of 2 gets the i-th half of the rank's CPUs {0, 1}.
    split = torch.utils.data.DataLoader(dataset, worker_init_fn=gpuaff.worker_init_fn("0-1"), **common)
    assert load_masks(split) == [(0, "0"), (1, "1")]
    # split=False: every worker gets the rank's whole set, here GPU 1's after bind().
    gpuaff.bind(gpu=1, root=bindable)
    whole = torch.utils.data.DataLoader(dataset, worker_init_fn=gpuaff.worker_init_fn(split=False), **common)
    assert load_masks(whole) == [(0, "1"), (1, "1")]


def test_worker_slices():
    init = gpuaff.worker_init_fn(range(8))
    # floor(i * 8 / 3) .. floor((i + 1) * 8 / 3): sizes 2, 3, 3, disjoint, covering all 8.
    assert [init.cpus_of(i, 3) for i in range(3)] == [[0, 1], [2, 3, 4], [5, 6, 7]]
    assert [init.cpus_of(i, 1) for i in range(1)] == [list(range(8))]
    # More workers than CPUs: one CPU each, round robin.
    assert [gpuaff.worker_init_fn("4,6").cpus_of(i, 3) for i in range(3)] == [[4], [6], [4]]
    assert gpuaff.worker_init_fn("0-3", split=False).cpus_of(1, 2) == [0, 1, 2, 3]
    with pytest.raises(gpuaff.EmptyResult):
        gpuaff.worker_init_fn("")
