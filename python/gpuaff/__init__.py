"""Bind GPU training processes to the CPUs and memory near their GPU.

The plan is computed by gpuaff's C++ launch layer, exactly as ``gpuaff bind``
prints it, and applied as ``gpuaff exec`` applies it: every thread of the
process, checked, and never half-applied. See docs/python.md.

    import gpuaff
    plan = gpuaff.bind(local_rank=True, policy="exclusive")   # the whole process
    with gpuaff.bound(gpu=1):                                  # this thread only
        subprocess.Popen(...)                                  # the child starts bound
"""

import contextlib
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
from ._gpuaff import Plan, thread_affinity  # noqa: F401

_gpuaff._register_errors(_errors.BY_CODE)

__version__ = _gpuaff.__version__

#: The keywords plan(), bind(), bound() and use_executable() take.
OPTIONS = tuple(_gpuaff.option_names.split(", "))

_last_plan = None


def plan(**options):
    """The binding of one device, computed and checked; nothing is applied.

    Name the device with exactly one of ``gpu=N`` (a visible GPU's index),
    ``pci="0000:18:00.0"`` (any PCI device) or ``local_rank=True`` (the GPU
    of the launcher's LOCAL_RANK, SLURM_LOCALID, ...). The other keywords are
    the CLI's options: ``policy``, ``scope``, ``smt``, ``balanced``,
    ``min_cores``, ``max_cores``, ``nproc``, ``unknown_node``,
    ``visible_devices``, ``root`` (a recorded root), ``topology`` (a JSON
    file), ``membind``, ``share`` ("visible" or "machine"), ``baseline``
    ("affinity" or "cgroup"), ``unreachable`` ("error" or "nearest"). An
    unknown keyword raises InvalidArgument.
    """
    return _gpuaff.plan(**options)


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


def _plan_of(plan_or_none, options):
    if plan_or_none is not None:
        if options:
            raise InvalidArgument("pass a Plan or keywords, not both (got %s)" % ", ".join(sorted(options)))
        if not isinstance(plan_or_none, Plan):
            raise InvalidArgument("%r is not a gpuaff.Plan; pass one from gpuaff.plan()" % (plan_or_none,))
        return plan_or_none
    return plan(**options)


def _apply(p):
    global _last_plan
    done = p.apply()
    _last_plan = p
    for w in done["warnings"]:
        warnings.warn("gpuaff: " + w, RuntimeWarning, stacklevel=3)
    return p


def bind(plan=None, **options):
    """Binds the whole process (every thread that exists, the calling thread's
    memory policy with ``membind=``) to a plan, or to the plan the keywords
    name; returns the Plan. On failure it raises and no thread is changed."""
    return _apply(_plan_of(plan, options))


def reapply():
    """Binds every thread again to the last plan bind() applied: call it after
    a library reset the affinity (Intel OpenMP's KMP_AFFINITY, some BLAS
    builds, NCCL's initialisation). Returns that Plan."""
    if _last_plan is None:
        raise InvalidArgument("nothing to re-apply: call gpuaff.bind() first")
    return _apply(_last_plan)


@contextlib.contextmanager
def bound(plan=None, **options):
    """Binds the calling thread only, for the ``with`` block, then puts back
    exactly what it had. A process or thread started inside the block starts
    bound (it inherits this thread's mask). The mask is per thread, so threads
    may each start children under their own ``bound()`` at the same time.
    Yields the Plan."""
    p = _plan_of(plan, options)
    guard = _gpuaff.ThreadGuard(p)
    try:
        yield p
    finally:
        guard.restore()


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

    ``cpus``: the rank's set (a Plan, a cpulist or ids); default: the calling
    thread's CPUs now, i.e. the rank's after gpuaff.bind(). With ``split``
    (the default) worker i of n gets its own contiguous slice of the set, so
    workers do not compete with each other (one CPU each, shared round robin,
    when there are more workers than CPUs); with ``split=False`` every worker
    gets the whole set. ``then(worker_id)`` runs after, for chaining."""
    if cpus is None:
        cpus = thread_affinity()
    elif isinstance(cpus, Plan):
        cpus = cpus.cpus
    elif isinstance(cpus, str):
        cpus = _gpuaff.parse_cpulist(cpus)
    return WorkerInit(cpus, split, then)


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
    children inherit it; call this before the forkserver starts. Returns the Plan."""
    p = _plan_of(plan, options)
    path = executable()
    os.environ.update(executable_environment(p))
    if context is None:
        import multiprocessing as context
    context.set_executable(path)
    return p
