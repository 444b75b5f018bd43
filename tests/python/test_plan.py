# SPDX-License-Identifier: Apache-2.0
# Plans, GPU lists, launcher variables and errors: no binding is applied.
import json
import os
import re
import subprocess

import pytest

import gpuaff
from conftest import DGX_H100, FIXTURES, SOURCE_DIR, header_version

LAUNCHER_VARIABLES = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                      "PALS_LOCAL_RANKID", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                      "PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                      "SLURM_NODEID")


@pytest.fixture
def clean_env(monkeypatch):
    for v in LAUNCHER_VARIABLES + ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_each_gpu_gets_its_own_node(root, clean_env):
    # GPU g sits on node g, whose only CPU is g (conftest.py).
    for g in (0, 1):
        p = gpuaff.plan(gpu=g, root=root)
        assert p.cpus == {g}
        assert p.cpulist == str(g)
        assert p.node == g
        assert p.memory_nodes == {g}
        assert p.gpu == g
        assert p.pci == ("0000:17:00.0", "0000:97:00.0")[g]
        assert p.policy == "node"
        assert p.membind == "none"
        assert p.foreign  # read from a root, not this machine
        assert p.recommended_threads == 1


def test_dgx_h100_policies(clean_env):
    # DGX H100 (fixtures/README.md): node 0 = CPUs 0-55,112-167 (56 cores, SMT
    # siblings +112); GPU 0 (0000:1b:00.0) is on node 0, 4 GPUs per node.
    assert gpuaff.plan(gpu=0, root=DGX_H100).cpulist == "0-55,112-167"
    assert gpuaff.plan(gpu=4, root=DGX_H100, policy="socket").cpulist == "56-111,168-223"
    # exclusive: node 0's 56 cores split among its 4 GPUs, 14 cores each with their siblings.
    assert gpuaff.plan(gpu=1, root=DGX_H100, policy="exclusive").cpus == set(range(14, 28)) | set(range(126, 140))
    # one thread per core: the siblings are left out.
    assert gpuaff.plan(gpu=1, root=DGX_H100, policy="unique-contiguous", smt="one").cpus == set(range(14, 28))
    assert gpuaff.plan(gpu=0, root=DGX_H100, policy="exclusive", nproc=2).cpus == set(range(28)) | set(range(112, 140))


def test_same_answer_as_gpuaff_bind(clean_env):
    # The module plans with the CLI's own code: every field of `gpuaff bind --format json` agrees.
    cli = os.path.join(os.environ.get("GPUAFF_BINARY_DIR", ""), "tools", "gpuaff", "gpuaff")
    if not os.access(cli, os.X_OK):
        pytest.skip("the gpuaff CLI is not built in GPUAFF_BINARY_DIR")
    for kw, flags in (({"gpu": 3, "policy": "exclusive"}, ["--gpu", "3", "--policy", "exclusive"]),
                      ({"gpu": 5, "policy": "core-complex"}, ["--gpu", "5", "--policy", "core-complex"]),
                      ({"pci": "0000:1b:00.0", "policy": "unique-interleaved", "max_cores": 4},
                       ["--pci", "0000:1b:00.0", "--policy", "unique-interleaved", "--max-cores", "4"])):
        out = json.loads(subprocess.run([cli, "bind", "--root", DGX_H100, "--format", "json"] + flags, check=True,
                                        capture_output=True, text=True).stdout)
        p = gpuaff.plan(root=DGX_H100, **kw)
        assert (p.gpu, p.pci, p.node, p.policy, p.cpulist) == (out["gpu"], out["bdf"], out["node"], out["policy"],
                                                                out["cpus"])
        assert p.recommended_threads == out["recommended_threads"]


def test_topology_json(clean_env):
    p = gpuaff.plan(gpu=1, topology=os.path.join(SOURCE_DIR, "fixtures", "two-node-2cpu.json"))
    assert p.cpus == {1} and p.foreign


def test_gpus_and_visible_devices(root, clean_env):
    all_gpus = gpuaff.gpus(root=root)
    assert [(g["index"], g["pci"], g["numa_node"]) for g in all_gpus] == [(0, "0000:17:00.0", 0), (1, "0000:97:00.0", 1)]
    assert all(g["uuid"].startswith("GPU-") for g in all_gpus)
    # Visible GPU 0 is the machine's GPU 1 when only it is visible.
    assert [g["pci"] for g in gpuaff.gpus(root=root, visible_devices="1")] == ["0000:97:00.0"]
    assert gpuaff.plan(gpu=0, root=root, visible_devices="1").cpus == {1}
    clean_env.setenv("CUDA_VISIBLE_DEVICES", all_gpus[1]["uuid"])
    assert gpuaff.plan(gpu=0, root=root).pci == "0000:97:00.0"


def test_local_rank_and_size(root, clean_env):
    with pytest.raises(gpuaff.InvalidArgument, match="LOCAL_RANK"):
        gpuaff.local_rank()
    assert gpuaff.local_size() is None
    clean_env.setenv("SLURM_LOCALID", "1")
    clean_env.setenv("SLURM_TASKS_PER_NODE", "2(x3)")
    assert gpuaff.local_rank() == 1
    assert gpuaff.local_size() == 2
    assert gpuaff.plan(local_rank=True, root=root).cpus == {1}
    clean_env.setenv("LOCAL_RANK", "0")  # torchrun's variable comes first
    assert gpuaff.plan(local_rank=True, root=root).cpus == {0}
    clean_env.setenv("LOCAL_RANK", "one")
    with pytest.raises(ValueError, match="LOCAL_RANK='one'"):
        gpuaff.plan(local_rank=True, root=root)
    clean_env.setenv("LOCAL_RANK", "2")
    with pytest.raises(gpuaff.NotFound, match=r"LOCAL_RANK=2.*2 visible"):
        gpuaff.plan(local_rank=True, root=root)


def test_membind_words(root, clean_env):
    assert gpuaff.plan(gpu=0, root=root, membind="local").membind == "local"
    assert gpuaff.plan(gpu=0, root=root, membind="bind").membind == "local"  # a synonym
    with pytest.raises(gpuaff.InvalidArgument, match="membind='near' is not valid; use one of none, local"):
        gpuaff.plan(gpu=0, root=root, membind="near")


@pytest.mark.parametrize("kw,cls,builtin,text", [
    ({"gpu": 0, "polcy": "node"}, gpuaff.InvalidArgument, ValueError, "unknown option 'polcy'; did you mean policy\\?; use root, topology"),
    ({"gpu": 0, "policy": "nodes"}, gpuaff.InvalidArgument, ValueError, "unknown policy 'nodes'"),
    ({"gpu": "0"}, gpuaff.InvalidArgument, ValueError, "gpu='0' must be a non-negative int"),
    ({"gpu": -1}, gpuaff.InvalidArgument, ValueError, "gpu=-1 is not a non-negative integer"),
    ({"gpu": True}, gpuaff.InvalidArgument, ValueError, "gpu=True must be a non-negative int"),
    ({"gpu": 10**30}, gpuaff.InvalidArgument, ValueError, "gpu=1000000000000000000000000000000 is out of range: at most 2147483647"),
    ({"gpu": 0, "nproc": 1.5}, gpuaff.InvalidArgument, ValueError, "nproc=1.5 must be a positive int"),
    ({"gpu": 0, "balanced": 1}, gpuaff.InvalidArgument, ValueError, "balanced=1 must be True or False"),
    ({"gpu": 0, "smt": "two"}, gpuaff.InvalidArgument, ValueError, "smt='two' is not valid; use one of all, one"),
    ({"gpu": 0, "pci": "0000:97:00.0"}, gpuaff.InvalidArgument, ValueError, "each name the device"),
    ({"policy": "node"}, gpuaff.InvalidArgument, ValueError, "no device is named; name it with gpu=N, pci='BDF' or local_rank=True"),
    ({"gpu": 2}, gpuaff.NotFound, LookupError, r"no GPU 2 \(gpu=2\): 2 visible"),
    ({"pci": "0000:00:09.0"}, gpuaff.NotFound, LookupError, "0000:00:09.0"),
    ({"pci": "zz"}, gpuaff.InvalidArgument, ValueError, "pci='zz' is not a PCI address"),
    ({"gpu": 0, "unknown_node": "north"}, gpuaff.InvalidArgument, ValueError, "unknown_node='north' is not valid"),
    ({"gpu": 0, "visible_devices": "7"}, gpuaff.Error, Exception, "7"),
])
def test_errors(root, clean_env, kw, cls, builtin, text):
    with pytest.raises(cls, match=text) as info:
        gpuaff.plan(root=root, **kw)
    assert isinstance(info.value, builtin) and isinstance(info.value, gpuaff.Error)
    assert "\n" not in str(info.value)


def test_gpus_takes_machine_options_only(root, clean_env):
    with pytest.raises(gpuaff.InvalidArgument, match="unknown option 'policy'; use root, topology, source, visible_devices"):
        gpuaff.gpus(root=root, policy="node")


def test_machine_errors(root, tmp_path, clean_env):
    with pytest.raises(gpuaff.InvalidArgument, match="each name a machine"):
        gpuaff.plan(gpu=0, root=root, topology=str(tmp_path / "t.json"))
    with pytest.raises(gpuaff.IoError) as info:
        gpuaff.plan(gpu=0, root=str(tmp_path / "missing"))
    assert isinstance(info.value, OSError) and "missing" in str(info.value)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(gpuaff.Error, match="bad.json") as info:
        gpuaff.plan(gpu=0, topology=str(bad))
    assert info.value.code in ("parse_error", "io_error")


def test_a_garbled_file_gives_its_error_escaped(tmp_path, clean_env):
    # A sysfs file holding bytes that are not UTF-8 (0xff 0xfe) must raise the
    # reader's error, its bytes written as \\xHH as the command line prints
    # them, never a UnicodeDecodeError from turning the message into a str.
    import shutil

    root = tmp_path / "dgx"
    shutil.copytree(DGX_H100, root, symlinks=True)
    (root / "sys/devices/system/node/node0/cpulist").write_bytes(b"0-55,\xff\xfe112-167\n")
    with pytest.raises(gpuaff.Error) as info:
        gpuaff.plan(gpu=0, root=str(root))
    assert info.value.code == "parse_error"
    assert "node0/cpulist" in str(info.value) and "\\xff\\xfe" in str(info.value)


def test_version_agrees_with_the_header():
    assert gpuaff.__version__ == header_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", gpuaff.__version__)


def test_stubs_name_every_function():
    # The stubs (gpuaff/_gpuaff.pyi) declare what the extension defines, and the package is marked typed.
    import ast

    pkg = os.path.dirname(gpuaff.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    tree = ast.parse(open(os.path.join(pkg, "_gpuaff.pyi")).read())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    defined = {n for n in dir(gpuaff._gpuaff) if not n.startswith("__")}
    assert defined - declared == set()
    for name in ("plan", "bind", "bound", "reapply", "worker_init_fn", "use_executable", "gpus", "local_rank"):
        assert getattr(gpuaff, name).__doc__


def test_ray_actor_recipe(clean_env):
    # docs/python.md, Ray: the actor sees one GPU (here the DGX H100's GPU 5,
    # 0000:c3:00.0, the second of node 1's four).
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "5")
    mine = gpuaff.gpus(root=DGX_H100)[0]["pci"]
    assert mine == "0000:c3:00.0"
    # Alone in its visible list, exclusive gives it all of node 1 (56-111,168-223) ...
    assert gpuaff.plan(gpu=0, root=DGX_H100, policy="exclusive").cpulist == "56-111,168-223"
    # ... among the machine's 8 it gets the second 14-core quarter of node 1: cores 70-83, siblings +112.
    p = gpuaff.plan(pci=mine, root=DGX_H100, visible_devices="0,1,2,3,4,5,6,7", policy="exclusive")
    assert p.cpulist == "70-83,182-195"
    # share="machine" gives the same slice without naming the machine's GPUs.
    assert gpuaff.plan(gpu=0, root=DGX_H100, policy="exclusive", share="machine").cpulist == "70-83,182-195"


def test_deployment_options(clean_env):
    # The contract's deployment options are keywords too, with the CLI's words
    # and usage rules. The DGX H100's GPU 0 is on node 0 (CPUs 0-55,112-167).
    assert gpuaff.plan(gpu=0, root=DGX_H100, baseline="affinity", unreachable="error").cpulist == "0-55,112-167"
    # Errors name keywords as Python writes them, never the command line's flags.
    with pytest.raises(gpuaff.InvalidArgument, match="share='machine' applies to the policies that split"):
        gpuaff.plan(gpu=0, root=DGX_H100, policy="node", share="machine")
    with pytest.raises(gpuaff.InvalidArgument, match="smt= does not apply to policy='exclusive'"):
        gpuaff.plan(gpu=0, root=DGX_H100, policy="exclusive", smt="one")
    for key in ("nproc", "max_cores"):
        with pytest.raises(gpuaff.InvalidArgument, match=key + "=0"):
            gpuaff.plan(gpu=0, root=DGX_H100, policy="single", **{key: 0})
    with pytest.raises(gpuaff.InvalidArgument, match="baseline"):
        gpuaff.plan(gpu=0, root=DGX_H100, baseline="cgroups")


def test_every_option_of_bind_and_exec_is_a_keyword(root, clean_env):
    # nic_env, mem_nodes, fallback and omp_threads, which plan() once refused.
    p = gpuaff.plan(gpu=0, root=root, fallback="unbound", omp_threads=True, mem_nodes="socket", membind="local")
    assert p.fallback == "unbound"
    assert p.environment["OMP_NUM_THREADS"] == str(p.recommended_threads)
    assert p.environment[gpuaff.PLAN_VARIABLE].startswith("v1 gpu=0 pci=0000:17:00.0 from=gpu=0 policy=node")
    with pytest.raises(gpuaff.NotFound, match="nic_env=True: "):
        gpuaff.plan(gpu=0, root=root, nic_env=True)  # this root has no RDMA NIC: the CLI's error, Python's words
    with pytest.raises(gpuaff.InvalidArgument, match="mem_nodes='gpu' has no effect without a memory policy"):
        gpuaff.bind(gpu=0, root=root, mem_nodes="gpu")


@pytest.mark.parametrize("kw", [{"pci": ""}, {"root": ""}, {"topology": ""}, {"root": "/x\0junk"},
                                {"visible_devices": "\0"}])
def test_empty_and_nul_strings_are_refused_as_the_cli_refuses_them(clean_env, kw):
    with pytest.raises(gpuaff.InvalidArgument):
        gpuaff.plan(gpu=0, **kw) if "pci" not in kw else gpuaff.plan(**kw)


def test_a_lone_surrogate_is_a_value_error_naming_the_argument(root, clean_env):
    # '\udcff' is what os.fsdecode() makes of the byte 0xff: a str with no
    # UTF-8 form. pybind11's cast raised a RuntimeError that named nothing.
    calls = [
        ("root=", lambda: gpuaff.plan(gpu=0, root="/x\udcff")),
        ("visible_devices=", lambda: gpuaff.plan(gpu=0, root=root, visible_devices="0\udcff")),
        ("cpulist=", lambda: gpuaff._gpuaff.parse_cpulist("0-\udcff")),
        ("cpus=", lambda: gpuaff.bind_process("\udcff")),
        ("membind=", lambda: gpuaff.bind_process("0", membind="\udcff")),
        ("a keyword=", lambda: gpuaff.plan(gpu=0, root=root, **{"po\udcffcy": "node"})),
    ]
    for name, call in calls:
        with pytest.raises(gpuaff.InvalidArgument, match="lone surrogate") as caught:
            call()
        assert isinstance(caught.value, ValueError)
        assert str(caught.value).startswith(name), str(caught.value)


def test_planning_while_another_thread_changes_os_environ(root, clean_env):
    # The library read the environment (getenv) with the GIL released, while a
    # Python thread's os.environ[k] = v calls putenv() holding it: putenv may
    # reallocate and free the variable array getenv walks. The plan reads a
    # copy taken when it is called. A stress test: many new variables, so the
    # array is reallocated again and again while plans are made.
    import threading

    clean_env.setenv("LOCAL_RANK", "1")
    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            os.environ["GPUAFF_TEST_CHURN_%d" % (i % 3000)] = "x" * (i % 64)
            i += 1

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(400):
            assert gpuaff.plan(local_rank=True, root=root).gpu == 1
    finally:
        stop.set()
        t.join()
        for k in [k for k in os.environ if k.startswith("GPUAFF_TEST_CHURN_")]:
            del os.environ[k]



def test_loaded_machine_plans_every_gpu_and_policy(clean_env):
    # One gpuaff.load() of the DGX H100 root, then every GPU under several
    # policies. DGX H100 (fixtures/README.md): GPUs 0-3 on node 0 (CPUs 0-55 and
    # their siblings 112-167), GPUs 4-7 on node 1 (56-111, 168-223). node: the
    # GPU's node; exclusive: the node's 56 cores split 4 ways, 14 each, GPU 3 the
    # last quarter (cores 42-55 and their siblings).
    m = gpuaff.load(root=DGX_H100)
    assert [g["index"] for g in m.gpus] == list(range(8))
    assert m.plan(gpu=3).cpulist == "0-55,112-167"
    assert m.plan(gpu=5, policy="node").cpulist == "56-111,168-223"
    assert m.plan(gpu=3, policy="exclusive").cpulist == "42-55,154-167"
    # The same answers as a plan that reads the root itself, for every GPU and policy.
    for policy in ("node", "socket", "exclusive", "core-complex", "unique-contiguous", "single-unique"):
        for g in range(8):
            assert m.plan(gpu=g, policy=policy).cpus == gpuaff.plan(gpu=g, root=DGX_H100, policy=policy).cpus


def test_loaded_machine_refuses_what_belongs_to_the_load(clean_env):
    m = gpuaff.load(root=DGX_H100)
    with pytest.raises(gpuaff.InvalidArgument, match="root= belongs to gpuaff.load"):
        m.plan(gpu=0, root=DGX_H100)
    with pytest.raises(gpuaff.InvalidArgument, match="visible_devices= belongs to gpuaff.load"):
        m.plan(gpu=0, visible_devices="1")
    # NIC variables need the NICs, which a plain load leaves out.
    with pytest.raises(gpuaff.InvalidArgument, match="nic_env"):
        m.plan(gpu=0, nic_env=True)
    # A plan option is not a load option.
    with pytest.raises(gpuaff.InvalidArgument, match="unknown option 'policy'"):
        gpuaff.load(root=DGX_H100, policy="node")
    # The visibility list given to the load stays: GPU 0 is the host's GPU 6.
    v = gpuaff.load(root=DGX_H100, visible_devices="6,7")
    assert len(v.gpus) == 2
    assert v.plan(gpu=0).cpulist == "56-111,168-223"


def test_recommended_threads_counts_cores_whatever_the_policy_read(clean_env):
    # DGX H100, GPU 3 on node 0: CPUs 0-55 and their SMT siblings 112-167, 56 physical
    # cores. `node` needs no core siblings to bind, so its plan is made without them;
    # the thread count still counts cores (56), never CPUs (112).
    p = gpuaff.plan(gpu=3, root=DGX_H100, policy="node")
    assert p.cpulist == "0-55,112-167"
    assert p.recommended_threads == 56
    assert gpuaff.plan(gpu=3, root=DGX_H100, policy="node", omp_threads=True).environment["OMP_NUM_THREADS"] == "56"
    cli = os.path.join(os.environ.get("GPUAFF_BINARY_DIR", ""), "tools", "gpuaff", "gpuaff")
    if os.access(cli, os.X_OK):
        out = json.loads(subprocess.run([cli, "bind", "--root", DGX_H100, "--gpu", "3", "--format", "json"], check=True,
                                        capture_output=True, text=True).stdout)
        assert out["recommended_threads"] == 56


def test_nic_sets_through_the_option_table(clean_env):
    # b300-16nics: GPU k shares its switch with mlx5_2k and mlx5_2k+1 (PIX) and no
    # other GPU reaches them there, so its set is both. NCCL_IB_HCA is left to
    # NCCL unless nic_libs names it.
    b300 = os.path.join(FIXTURES, "b300-16nics")
    p = gpuaff.plan(gpu=5, root=b300, nic_env=True)
    assert p.nic_set == ["mlx5_10:1", "mlx5_11:1"]
    assert p.nic_path == "PIX"
    assert p.environment["UCX_NET_DEVICES"] == "mlx5_10:1,mlx5_11:1"
    assert p.environment["NVSHMEM_HCA_LIST"] == "mlx5_10:1,mlx5_11:1"
    assert "NCCL_IB_HCA" not in p.environment
    rails = gpuaff.plan(gpu=0, root=DGX_H100, nic_env=True, nic_libs="nccl-rails")
    # the DGX H100's eight compute ConnectX-7, not its storage ports mlx5_1, 2, 7, 8;
    # GPU k's NIC is rail k, the only NIC (plane 0) of its set
    assert rails.environment["NCCL_IB_HCA"] == ("=mlx5_0:1:0:0,mlx5_3:1:1:0,mlx5_4:1:2:0,mlx5_5:1:3:0,"
                                                "mlx5_6:1:4:0,mlx5_9:1:5:0,mlx5_10:1:6:0,mlx5_11:1:7:0")
    assert rails.environment["NCCL_NET_MERGE_POLICY"] == "RAIL"
    assert "UCX_NET_DEVICES" not in rails.environment
    plain = gpuaff.plan(gpu=0, root=DGX_H100)
    assert plain.nic_set == [] and plain.nic_path is None
    # GPU 5's host buffers live on node 1 (GPUs 4-7): its host NIC set is the
    # rails there, the compute NICs of GPUs 4-7 (b300: two each, mlx5_8..mlx5_15)
    assert p.host_nic_set == ["mlx5_%d:1" % k for k in range(8, 16)]
    host = gpuaff.plan(gpu=5, root=b300, nic_env=True, nic_libs="ucx-host")
    assert host.environment["UCX_NET_DEVICES"] == ",".join("mlx5_%d:1" % k for k in range(8, 16))
    with pytest.raises(gpuaff.InvalidArgument, match="nic_libs='ucx' names the variables nic_env=True writes"):
        gpuaff.plan(gpu=0, root=DGX_H100, nic_libs="ucx")
    with pytest.raises(gpuaff.InvalidArgument, match="did you mean nvshmem"):
        gpuaff.plan(gpu=0, root=DGX_H100, nic_env=True, nic_libs="nvshmen")


def test_ranks_per_gpu_through_the_option_table(clean_env):
    # dgx-h100, policy exclusive: GPU 3's share is cores 42-55 (siblings +112);
    # three ranks on it get 5, 5 and 4 of those cores, the larger parts first.
    parts = [gpuaff.plan(gpu=3, root=DGX_H100, policy="exclusive", ranks_per_gpu=3, part=p) for p in range(3)]
    assert [p.part for p in parts] == [(0, 3), (1, 3), (2, 3)]
    expect = [range(42, 47), range(47, 52), range(52, 56)]
    for p, cores in zip(parts, expect):
        assert set(p.cpus) == set(cores) | {c + 112 for c in cores}
    assert gpuaff.plan(gpu=3, root=DGX_H100).part is None
    with pytest.raises(gpuaff.InvalidArgument, match=r"ranks_per_gpu=3 needs part=P \(0\.\.2\)"):
        gpuaff.plan(gpu=3, root=DGX_H100, ranks_per_gpu=3)


def test_locality_domains_through_the_option_table(clean_env):
    # dgx-h100, policy exclusive: GPU 3's share is cores 42-55 (siblings +112).
    # Two domains per GPU make GPU 3's domains units 6 and 7: cores 42-48 and 49-55.
    lower, upper = (gpuaff.plan(gpu=u, root=DGX_H100, policy="exclusive", domains_per_gpu=2) for u in (6, 7))
    assert lower.part == (0, 2) and upper.part == (1, 2)
    assert set(lower.cpus) == set(range(42, 49)) | set(range(154, 161))
    assert set(upper.cpus) == set(range(49, 56)) | set(range(161, 168))
    m = gpuaff.load(root=DGX_H100)
    assert m.plan(gpu=7, policy="exclusive", domains_per_gpu=2).cpus == upper.cpus
    with pytest.raises(gpuaff.InvalidArgument, match="more than 64 domains per GPU"):
        gpuaff.plan(gpu=0, root=DGX_H100, domains_per_gpu=65)


def test_vendor_numbering_reaches_python(clean_env):
    # dgx-h100-intel-vga: the dgx-h100 with an Intel VGA at 0000:00:02.0. CUDA's
    # GPU 0 is the first NVIDIA GPU (0000:1b:00.0); Level Zero's is the Intel one.
    vga = os.path.join(FIXTURES, "dgx-h100-intel-vga")
    assert gpuaff.plan(root=vga, gpu=0).pci == "0000:1b:00.0"
    assert [g["pci"] for g in gpuaff.gpus(root=vga)][:1] == ["0000:1b:00.0"]
    assert len(gpuaff.gpus(root=vga)) == 8
    assert [g["pci"] for g in gpuaff.gpus(root=vga, vendor="intel")] == ["0000:00:02.0"]
    m = gpuaff.load(root=vga, vendor="intel")
    assert m.plan(gpu=0).pci == "0000:00:02.0"
    with pytest.raises(gpuaff.InvalidArgument, match="vendor= belongs to gpuaff.load"):
        gpuaff.load(root=vga).plan(gpu=0, vendor="intel")
    with pytest.raises(gpuaff.NotFound, match="vendor='amd': .* has no GPU of that vendor"):
        gpuaff.plan(root=vga, gpu=0, vendor="amd")
    with pytest.raises(gpuaff.InvalidArgument, match="did you mean nvidia"):
        gpuaff.plan(root=vga, gpu=0, vendor="nvdia")
