# SPDX-License-Identifier: Apache-2.0
"""Bind GPU training processes to the CPUs and memory near their GPU.

The plan is computed by gpuaff's C++ launch layer, exactly as ``gpuaff bind``
prints it, and applied as ``gpuaff exec`` applies it: every thread of the
process, checked, and never half-applied. See docs/python.md.

    import gpuaff
    plan = gpuaff.bind(local_rank=True, policy="exclusive")   # the whole process
    with gpuaff.bound(gpu=1):                                  # this thread only
        subprocess.Popen(...)                                  # the child starts bound
"""

import keyword
import os
import sys
import warnings

from . import _errors
from ._errors import (  # noqa: F401  (the public exception classes)
    EmptyResult,
    Error,
    InsufficientCores,
    InvalidArgument,
    IoError,
    NotFound,
    OutOfRange,
    ParseError,
    PermissionDenied,
    SystemCallError,
    UnknownLocality,
    Unsupported,
)
from . import _gpuaff
from ._gpuaff import HostBuffer, Machine, Plan, thread_affinity  # noqa: F401

_gpuaff._register_errors(_errors.BY_CODE)

__version__ = _gpuaff.__version__

#: The keywords plan(), bind(), bound(), use_executable() and doctor() take:
#: the rows of the library's option table that Python takes (every option of
#: ``gpuaff bind`` and ``gpuaff exec`` that names what to plan or apply).
OPTIONS = tuple(_gpuaff.option_names.split(", "))

#: The name of the variable a bound process carries its plan in (for ``gpuaff doctor``).
PLAN_VARIABLE = _gpuaff.plan_variable

_last_plan = None


def plan(**options):
    """The binding of one device, computed and checked; nothing is applied.

    Name the device with exactly one of ``gpu=N`` (a visible GPU's index),
    ``pci="0000:1b:00.0"`` (any PCI device) or ``local_rank=True`` (the GPU
    of the launcher's LOCAL_RANK, SLURM_LOCALID, ...). The other keywords are
    the command line's options, named like its flags (``--min-cores`` is
    ``min_cores=``): see ``OPTIONS`` and docs/python.md. Values are checked as
    the command line checks them; an unknown keyword, a wrong type or a bad
    value raises InvalidArgument.
    """
    return _gpuaff.plan(**options)


def load(**source):
    """The machine, read once: plan many GPUs and policies from it.

    Takes the keywords that name the machine (``root=``, ``topology=``,
    ``source=``, ``hwloc_xml=``, ``visible_devices=``; none: this machine),
    ``pci=`` for a device that is not a GPU, and ``unreachable=``,
    ``nic_env=``, ``mem_nodes=`` when plans will use them (they need parts of
    the machine a plain load leaves out). ``Machine.plan(**options)`` then
    takes the other keywords of ``plan()`` and reads nothing::

        m = gpuaff.load(root="fixtures/dgx-h100")
        plans = [m.plan(gpu=g, policy="exclusive") for g in range(len(m.gpus))]
    """
    return _gpuaff.load(**source)


def gpus(**source):
    """The visible GPUs (dicts of index, pci, numa_node, uuid) of this
    machine, or of ``root=`` / ``topology=``, after ``visible_devices=`` or
    CUDA_/HIP_/ROCR_VISIBLE_DEVICES."""
    return _gpuaff.gpus(**source)


def local_rank():
    """The local rank from the launcher's variables; InvalidArgument when none is set."""
    return _gpuaff.local_rank()


def local_size():
    """The number of the job's processes on this machine, or None when the launcher gives none."""
    return _gpuaff.local_size()


def _launch(apply, plan_or_none, options, running):
    """The library's launch (gpuaff/launch/launch.hpp): the plan, the binding
    ``apply`` asks for, the fallback and the variables, under the same rules
    as ``gpuaff exec``. Gives its warnings; raises what it fails with."""
    if plan_or_none is not None:
        if options:
            raise InvalidArgument("pass a Plan or keywords, not both (got %s)" % ", ".join(sorted(options)))
        if not isinstance(plan_or_none, Plan):
            raise InvalidArgument("%r is not a gpuaff.Plan; pass one from gpuaff.plan()" % (plan_or_none,))
    launched = _gpuaff.launch(plan_or_none, apply, running, **options)
    for w in launched.warnings:
        warnings.warn("gpuaff: " + w, RuntimeWarning, stacklevel=3)
    return launched


def bind(plan=None, **options):
    """Binds the whole process (every thread that exists, the calling thread's
    memory policy with ``membind=``) to a plan, or to the plan the keywords
    name, and sets in ``os.environ`` what the plan gives the process's
    children: GPUAFF_PLAN (the plan, which ``gpuaff doctor --pid`` checks),
    the NIC variables with ``nic_env=True``, OMP_NUM_THREADS with
    ``omp_threads=True``. Returns the Plan. On failure it raises and no thread
    is changed; with ``fallback="unbound"`` what the machine refuses is a
    warning instead and None is returned (a usage mistake still raises)."""
    global _last_plan
    launched = _launch("process", plan, options, "running")
    if launched.plan is None:
        return None
    _last_plan = launched.plan
    os.environ.update(launched.environment)
    return launched.plan


def reapply():
    """Binds every thread again to the last plan bind() applied: call it after
    a library reset the affinity (Intel OpenMP's KMP_AFFINITY, some BLAS
    builds, NCCL's initialisation). Returns that Plan."""
    if _last_plan is None:
        raise InvalidArgument("nothing to re-apply: call gpuaff.bind() first")
    return _launch("process", _last_plan, {}, "running").plan


class KeepBound:
    """What keep_bound() returns: the background thread that puts drifted
    threads back. ``moved`` and ``failed`` list every thread it moved or could
    not move (dicts with ``tid``, ``name``, ``to``; ``from`` or ``error``);
    ``stop()`` ends it (also on leaving a ``with`` block)."""

    def __init__(self, plan, interval, on_drift):
        self.plan = plan
        self.interval = interval
        self.on_drift = on_drift
        self.moved = []
        self.failed = []
        import threading  # here, not at import: with its imports, half of `import gpuaff`

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuaff-keep-bound", daemon=True)
        self._thread.start()

    def check(self):
        """Puts drifted threads back now; returns this check's report."""
        report = _gpuaff._rebind_drifted(self.plan)
        self.moved += report["moved"]
        self.failed += report["failed"]
        for f in report["failed"]:
            warnings.warn("gpuaff: thread %d '%s' could not be put back on CPUs %s: %s"
                          % (f["tid"], f["name"], sorted(f["to"]), f["error"]), RuntimeWarning, stacklevel=2)
        if (report["moved"] or report["failed"]) and self.on_drift is not None:
            self.on_drift(report)
        return report

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception as e:  # a check that fails says so and keeps watching
                warnings.warn("gpuaff: keep_bound check failed: %s" % e, RuntimeWarning)

    def stop(self):
        """Ends the background thread (after its current check)."""
        import threading

        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def keep_bound(plan=None, interval=10.0, on_drift=None):
    """Opt-in remedy for runtimes that re-pin threads after bind(): every
    ``interval`` seconds a background thread puts each thread of this process
    found off ``plan`` (default: the last plan bind() applied) back, one
    sched_setaffinity each (the main thread on its ``main`` role, NCCL's
    threads on ``comm`` when the plan has roles). ``on_drift(report)`` is
    called after a check that moved or failed to move a thread; a thread that
    could not be moved is also a RuntimeWarning. Returns a KeepBound
    (``stop()``, usable with ``with``)."""
    plan = plan if plan is not None else _last_plan
    if plan is None:
        raise InvalidArgument("nothing to keep: call gpuaff.bind() first, or pass plan=")
    if not isinstance(plan, Plan):
        raise InvalidArgument("%r is not a gpuaff.Plan; pass one from gpuaff.plan()" % (plan,))
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0.01 <= interval <= 86400:
        raise InvalidArgument("interval=%r must be a number of seconds from 0.01 to 86400" % (interval,))
    return KeepBound(plan, float(interval), on_drift)


class _Bound:
    """What bound() returns: the guard of one ``with`` block (or, used as a
    decorator, of each call of the function)."""

    def __init__(self, plan, options):
        self._plan, self._options, self._launched = plan, options, None

    def __enter__(self):
        if self._launched is not None:
            raise RuntimeError("gpuaff.bound(): this guard is already in use; call bound() again for another block")
        self._launched = _launch("thread", self._plan, self._options, "running the block")
        return self._launched.plan

    def __exit__(self, *exc):
        launched, self._launched = self._launched, None
        launched.restore()
        return False

    def __call__(self, function):
        import functools

        @functools.wraps(function)
        def bound_call(*args, **kwargs):
            with _Bound(self._plan, self._options):
                return function(*args, **kwargs)

        return bound_call


def bound(plan=None, **options):
    """Binds the calling thread only, for the ``with`` block, then puts back
    exactly what it had. A process or thread started inside the block starts
    bound (it inherits this thread's mask). The mask is per thread, so threads
    may each start children under their own ``bound()`` at the same time.
    Yields the Plan; its ``environment`` holds the variables a child should
    get (GPUAFF_PLAN, the NIC variables, OMP_NUM_THREADS), which bound() does
    not put in the process-wide os.environ: pass ``env={**os.environ,
    **plan.environment}``. With ``fallback="unbound"`` a binding the machine
    refuses is a warning and the block runs unbound, yielding None. As a
    decorator (``@gpuaff.bound(gpu=1)``), each call of the function is such
    a block."""
    return _Bound(plan, options)


def bind_process(cpus, membind="none", memory_nodes=None):
    """Binds every thread of the process to ``cpus`` (a cpulist or CPU ids);
    on failure every thread is put back. Prefer bind(), which plans first."""
    return _gpuaff.bind_process(cpus, membind, memory_nodes)


class WorkerInit:
    """A DataLoader ``worker_init_fn`` (picklable, so it works with every
    start method). See worker_init_fn()."""

    def __init__(self, cpus, split=True, then=None):
        self.cpus = sorted(cpus)
        self.split = split
        self.then = then
        if not self.cpus:
            raise EmptyResult("worker_init_fn: the rank's CPU set is empty")

    def cpus_of(self, worker_id, num_workers):
        """The CPUs of worker ``worker_id`` out of ``num_workers``."""
        cpus = self.cpus
        if not self.split:
            return list(cpus)
        if num_workers <= len(cpus):
            # Contiguous, disjoint, sizes differing by at most one.
            return cpus[worker_id * len(cpus) // num_workers:(worker_id + 1) * len(cpus) // num_workers]
        return [cpus[worker_id % len(cpus)]]  # more workers than CPUs: one CPU each, shared round robin

    def __call__(self, worker_id):
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        num_workers = info.num_workers if info is not None else 1
        bind_process(self.cpus_of(worker_id, num_workers))
        if self.then is not None:
            self.then(worker_id)


def worker_init_fn(cpus=None, split=True, then=None):
    """A ``worker_init_fn`` for torch.utils.data.DataLoader that binds each
    worker process inside the rank's CPUs.

    ``cpus``: the rank's set (a Plan, a cpulist or ids); a Plan with roles
    (``roles="data=4,..."``) gives its data role. Default: the data role of
    the plan gpuaff.bind() applied, when it has one; else the calling
    thread's CPUs now, i.e. the rank's after gpuaff.bind(). With ``split``
    (the default) worker i of n gets its own contiguous slice of the set, so
    workers do not compete with each other (one CPU each, shared round robin,
    when there are more workers than CPUs); with ``split=False`` every worker
    gets the whole set. ``then(worker_id)`` runs after, for chaining."""
    if cpus is None and _last_plan is not None and "data" in (_last_plan.roles or {}):
        cpus = _last_plan.roles["data"]
    elif cpus is None:
        cpus = thread_affinity()
    elif isinstance(cpus, Plan):
        cpus = (cpus.roles or {}).get("data", cpus.cpus)
    elif isinstance(cpus, (str, bytes, bytearray, memoryview)):
        cpus = _gpuaff.parse_cpulist(cpus)  # bytes: refused there, not read as ids
    return WorkerInit(cpus, split, then)


def _ray_gpu_ids():
    """The GPU ids Ray assigned this worker, and where they were read: Ray's
    runtime context when ``ray`` is imported in this process and assigned
    any, else the CUDA_VISIBLE_DEVICES Ray sets for a task or actor with
    ``num_gpus``; ``(None, why)`` when neither names a GPU."""
    ray = sys.modules.get("ray")
    if ray is not None and hasattr(ray, "get_runtime_context"):
        try:
            ids = ray.get_runtime_context().get_accelerator_ids().get("GPU") or []
        except Exception as e:  # a worker before ray.init(): no context yet
            ids, why = [], "ray.get_runtime_context() failed (%s)" % e
        else:
            why = "Ray's runtime context assigned no GPU"
        if ids:
            return [str(i) for i in ids], "ray.get_runtime_context().get_accelerator_ids()['GPU']"
    else:
        why = "ray is not imported in this process"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() not in ("", "-1", "NoDevFiles"):
        return [v.strip() for v in visible.split(",")], "CUDA_VISIBLE_DEVICES=" + visible
    why += ", and CUDA_VISIBLE_DEVICES is %s" % ("unset" if visible is None else "'%s'" % visible)
    return None, why


def ray_worker_setup(**options):
    """Binds this Ray worker by the GPU(s) Ray assigned it: the function to
    give Ray as ``runtime_env={"worker_process_setup_hook": gpuaff.ray_worker_setup}``
    (or by name, ``"gpuaff.ray_worker_setup"``), or to call first thing in a
    GPU actor's ``__init__``. Ray calls it with no argument; other options
    (``policy=``, ``roles=``, ...) through ``functools.partial``.

    The GPUs are read from Ray's runtime context
    (``get_accelerator_ids()["GPU"]``), else from the CUDA_VISIBLE_DEVICES Ray
    sets; they become ``visible_devices=`` and the process is bound to them
    all (``gpu=0``, or ``gpu=[0, 1, ...]`` for several). A worker Ray gave no
    GPU raises InvalidArgument: never a silent GPU 0. Returns the Plan
    applied (see bind())."""
    if any(k in options for k in ("gpu", "pci", "local_rank", "visible_devices")):
        raise InvalidArgument("ray_worker_setup: the GPUs are the ones Ray assigned; leave out gpu=, pci=, "
                              "local_rank= and visible_devices= (or call gpuaff.bind() with them instead)")
    ids, source = _ray_gpu_ids()
    if not ids:
        raise InvalidArgument("ray_worker_setup: no GPU is assigned to this Ray worker (%s); give the task or actor "
                              "num_gpus=..., or install the hook only in GPU actors' runtime_env" % source)
    options["visible_devices"] = ",".join(ids)
    options["gpu"] = 0 if len(ids) == 1 else list(range(len(ids)))
    return bind(**options)


def bind_role(role, threads=None, plan=None):
    """Binds threads of this process to role ``role`` ("main", "comm",
    "data", "compute") of ``plan`` (default: the plan gpuaff.bind() applied;
    it must have been made with ``roles=``). ``threads``: None for the calling
    thread, or a shell pattern matched against each thread's name
    (/proc/self/task/TID/comm; NCCL names its threads "NCCL ...": "NCCL*").
    Threads a bound thread starts later inherit its mask; call it once the
    library has started its threads (NCCL: after the first collective).
    Returns the ids of the threads bound. Raises InvalidArgument for a role
    the plan does not have, NotFound when no thread's name matches."""
    import fnmatch

    p = plan if plan is not None else _last_plan
    if p is None:
        raise InvalidArgument("bind_role: no plan: call gpuaff.bind(roles=...) first, or pass plan=")
    roles = p.roles or {}
    if role not in roles:
        raise InvalidArgument("bind_role: the plan has no %r role (it has %s); plan with roles=main=N,comm=N,data=N"
                              % (role, ", ".join(sorted(roles)) or "none"))
    cpus = roles[role]
    if threads is None:
        import threading

        os.sched_setaffinity(0, cpus)
        return [threading.get_native_id()]
    bound_ids, names = [], []
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                name = f.read().rstrip("\n")
        except OSError:
            continue  # the thread ended
        names.append(name)
        if fnmatch.fnmatchcase(name, threads):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except ProcessLookupError:
                continue
            bound_ids.append(int(tid))
    if not bound_ids:
        raise NotFound("bind_role: no thread of this process is named like %r (names: %s)"
                       % (threads, ", ".join(sorted(set(names)))[:300]))
    return bound_ids


def executable():
    """The path of gpuaff-python, the executable for multiprocessing.set_executable."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuaff-python")
    if not os.access(path, os.X_OK):
        raise Unsupported("%s is missing; rebuild the gpuaff Python package (pip install ./python, or the "
                          "gpuaff_python CMake target)" % path)
    return path


def executable_environment(plan):
    """The variables gpuaff-python reads: the interpreter and the plan's CPUs and memory."""
    env = {"GPUAFF_PYTHON": sys.executable, "GPUAFF_CPUS": plan.cpulist, "GPUAFF_MEMBIND": plan.membind}
    env["GPUAFF_MEMS"] = ",".join(str(n) for n in sorted(plan.memory_nodes))
    return env


def use_executable(plan=None, context=None, **options):
    """Makes interpreters that ``multiprocessing`` (or ``torch.multiprocessing``)
    starts from now on, with the spawn and forkserver start methods, bind to a
    plan before Python imports anything: sets the variables gpuaff-python
    reads in os.environ and calls ``set_executable`` on ``context`` (default:
    the multiprocessing module). The forkserver process starts bound and its
    children inherit it; call this before the forkserver starts. The plan's
    ``environment`` (GPUAFF_PLAN, NIC variables, OMP_NUM_THREADS) goes into
    os.environ too. Returns the Plan; with ``fallback="unbound"``, None when
    planning failed on what the machine refuses (nothing is set then)."""
    launched = _launch("later", plan, options, "starting interpreters")
    p = launched.plan
    if p is None:
        return None
    path = executable()
    os.environ.update(executable_environment(p))
    os.environ.update(launched.environment)
    if context is None:
        import multiprocessing as context
    context.set_executable(path)
    return p


def host_buffer(size, nodes=None, *, plan=None, fault="touch", huge="none"):
    """``size`` bytes of host memory on NUMA ``nodes`` (a cpulist such as "0" or ids),
    or on ``plan.host_nodes``: mapped, bound (mbind), faulted in (``fault="touch"``:
    by this thread; ``"populate"``: by the kernel, MADV_POPULATE_WRITE) and checked
    page by page with the kernel (``.placement``). ``huge``: "none", "transparent"
    or "hugetlb". What cannot be placed raises, naming the node and the limit
    (Mems_allowed_list, the memory cgroup, free memory, huge pages). The result
    has the buffer protocol (memoryview, numpy, torch.frombuffer); see pinned_tensor."""
    if nodes is None:
        if plan is None:
            raise InvalidArgument("host_buffer needs nodes= (e.g. \"0\") or plan= (its host_nodes)")
        nodes = sorted(plan.host_nodes)
    return _gpuaff.host_buffer(size, nodes, fault, huge)


def _cuda_host_register(torch):
    """cudaHostRegister and cudaHostUnregister of the CUDA runtime torch loaded:
    torch.cuda.cudart()'s, else the same library through ctypes."""
    cudart = torch.cuda.cudart()
    if hasattr(cudart, "cudaHostRegister") and hasattr(cudart, "cudaHostUnregister"):
        return (lambda p, n: int(cudart.cudaHostRegister(p, n, 0)),  # cudaHostRegisterDefault
                lambda p: int(cudart.cudaHostUnregister(p)))
    import ctypes
    lib = None
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 4))  # the one torch loaded
            break
        except OSError:
            continue
    if lib is None:
        raise Unsupported("pinned_tensor: torch.cuda.cudart() has no cudaHostRegister and no CUDA runtime "
                          "(libcudart.so) is loaded in this process")
    lib.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    lib.cudaHostUnregister.argtypes = [ctypes.c_void_p]
    return (lambda p, n: int(lib.cudaHostRegister(p, n, 0)), lambda p: int(lib.cudaHostUnregister(p)))


def pinned_tensor(buffer, dtype=None):
    """A torch tensor over a ``host_buffer``, pinned for CUDA: the pages are
    registered with cudaHostRegister (through torch.cuda.cudart()), so copies to
    and from the GPU are DMA from the buffer's nodes. The tensor keeps the buffer
    alive; the pages are unregistered, then unmapped, when the buffer's last user
    is gone. ``dtype`` (default torch.uint8) must divide the buffer's size.
    Raises Unsupported without torch or without CUDA."""
    try:
        import torch
    except ImportError as e:
        raise Unsupported("pinned_tensor needs torch (import torch failed: %s); the buffer itself works "
                          "without it (memoryview(buffer))" % e) from None
    if not torch.cuda.is_available():
        raise Unsupported("pinned_tensor needs torch with CUDA and a GPU: torch %s has CUDA %s and sees %d GPU(s); "
                          "the buffer itself works without it (memoryview(buffer))"
                          % (torch.__version__, torch.version.cuda, torch.cuda.device_count()))
    if not isinstance(buffer, _gpuaff.HostBuffer):
        raise InvalidArgument("pinned_tensor takes a gpuaff.host_buffer(...), not %s" % type(buffer).__name__)
    torch.cuda.init()
    register, unregister_at = _cuda_host_register(torch)
    rc = register(buffer.address, buffer.mapped)
    if rc != 0:
        raise SystemCallError("cudaHostRegister of %d bytes at 0x%x failed (cudaError %d)"
                              % (buffer.mapped, buffer.address, rc))
    address = buffer.address

    def unregister():
        unregister_at(address)

    buffer._set_on_free(unregister)
    # torch.frombuffer holds a reference to the buffer for as long as the storage lives.
    return torch.frombuffer(buffer, dtype=dtype if dtype is not None else torch.uint8)


def doctor(pid, min_local=None, **options):
    """Checks running process ``pid``: against the plan it carries in
    GPUAFF_PLAN (left by ``gpuaff exec`` or bind()) when no keyword shapes a
    plan, else against the plan the keywords give its GPU (its own local rank
    and *_VISIBLE_DEVICES unless ``gpu=``). Returns a dict with the keys of
    ``gpuaff doctor --format json``: ``healthy``, ``problems``, ``notes``
    (where the plan came from), ``bdf``, ``threads``, ``roles``, ``memory``
    (``pages_by_node`` keyed by node id, ``local_fraction``, ``mappings``:
    the largest and the host buffers off ``host_nodes``), ``expected_cpus``,
    ``host_nodes``, ...; CPU and node lists are sets."""
    return _gpuaff.doctor(pid, min_local, **options)


def _with_keywords(function, keys, leading=()):
    """Gives `function` the signature help(), IDEs and inspect show: its leading
    parameters, then every keyword of the option table it takes (keyword-only,
    default None: the option's own default).

    inspect.signature() follows __wrapped__, so `function` wraps a do-nothing
    function of that signature, compiled here. Building an inspect.Signature
    instead would import inspect, which was half of `import gpuaff` on
    Debian 12's Python (benchmarks/README.md, row P). The stand-in carries
    `function`'s file and line, so inspect.getsource() still shows `function`."""
    params = []
    for p in leading:  # "name" (required) or ("name", default), a literal default
        params.append(p if isinstance(p, str) else "%s=%r" % p)
    params += ["*"] + [k + "=None" for k in keys]
    for name in [p if isinstance(p, str) else p[0] for p in leading] + list(keys):
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ImportError("gpuaff: option %r of the option table is not a Python name" % name)
    namespace = {"__name__": __name__}  # the stand-in's __module__: gpuaff
    exec("def %s(%s): pass" % (function.__name__, ", ".join(params)), namespace)  # names checked above
    stand_in = namespace[function.__name__]
    stand_in.__code__ = stand_in.__code__.replace(co_filename=function.__code__.co_filename,
                                                  co_firstlineno=function.__code__.co_firstlineno)
    function.__wrapped__ = stand_in
    return function


_MACHINE_KEYS = ("root", "topology", "source", "hwloc_xml", "visible_devices", "vendor")
_with_keywords(plan, OPTIONS)
_with_keywords(bind, OPTIONS, (("plan", None),))
_with_keywords(bound, OPTIONS, (("plan", None),))
_with_keywords(use_executable, OPTIONS, (("plan", None), ("context", None)))
_with_keywords(doctor, OPTIONS, ("pid", ("min_local", None)))
_with_keywords(load, _MACHINE_KEYS + ("pci", "unreachable", "nic_env", "mem_nodes"))
_with_keywords(gpus, ("root", "topology", "source", "visible_devices", "vendor"))
