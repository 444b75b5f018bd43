# SPDX-License-Identifier: Apache-2.0
# Type stubs of the gpuaff package. The keyword block is generated from the
# library's option table (gpuaff/launch/options.hpp) and checked against it
# by tests/python/test_options.py; rewrite it with GPUAFF_UPDATE_STUBS=1.
from typing import Any, Callable, ContextManager, Iterable, Literal, Optional, Union

from ._errors import (
    EmptyResult as EmptyResult,
    Error as Error,
    InsufficientCores as InsufficientCores,
    InvalidArgument as InvalidArgument,
    IoError as IoError,
    NotFound as NotFound,
    OutOfRange as OutOfRange,
    ParseError as ParseError,
    PermissionDenied as PermissionDenied,
    SystemCallError as SystemCallError,
    UnknownLocality as UnknownLocality,
    Unsupported as Unsupported,
)
from ._gpuaff import HostBuffer as HostBuffer, Machine as Machine, Plan as Plan, thread_affinity as thread_affinity

__version__: str
OPTIONS: tuple[str, ...]
PLAN_VARIABLE: str

Cpus = Union[str, Iterable[int]]

def gpus(
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
) -> list[dict[str, Any]]: ...
def load(
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    hwloc_xml: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
    pci: Optional[str] = ...,
    unreachable: Optional[str] = ...,
    nic_env: Optional[bool] = ...,
    mem_nodes: Optional[str] = ...,
) -> Machine: ...
def local_rank() -> int: ...
def local_size() -> Optional[int]: ...
def reapply() -> Plan: ...

class KeepBound:
    plan: Plan
    interval: float
    moved: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    def check(self) -> dict[str, Any]: ...
    def stop(self) -> None: ...
    def __enter__(self) -> KeepBound: ...
    def __exit__(self, *exc: object) -> None: ...

def keep_bound(
    plan: Optional[Plan] = ..., interval: float = ..., on_drift: Optional[Callable[[dict[str, Any]], object]] = ...
) -> KeepBound: ...
def bind_process(cpus: Cpus, membind: str = ..., memory_nodes: Optional[Cpus] = ...) -> dict[str, Any]: ...
def host_buffer(
    size: int,
    nodes: Optional[Cpus] = ...,
    *,
    plan: Optional[Plan] = ...,
    fault: Literal["touch", "populate"] = ...,
    huge: Literal["none", "transparent", "hugetlb"] = ...,
) -> HostBuffer: ...
def pinned_tensor(buffer: HostBuffer, dtype: Any = ...) -> Any: ...

class WorkerInit:
    cpus: list[int]
    split: bool
    def __init__(self, cpus: Iterable[int], split: bool = ..., then: Optional[Callable[[int], None]] = ...) -> None: ...
    def cpus_of(self, worker_id: int, num_workers: int) -> list[int]: ...
    def __call__(self, worker_id: int) -> None: ...

def worker_init_fn(
    cpus: Union[Plan, Cpus, None] = ..., split: bool = ..., then: Optional[Callable[[int], None]] = ...
) -> WorkerInit: ...
def bind_role(role: str, threads: Optional[str] = ..., plan: Optional[Plan] = ...) -> list[int]: ...
def ray_worker_setup(**options: Any) -> Plan: ...
def executable() -> str: ...
def executable_environment(plan: Plan) -> dict[str, str]: ...

# BEGIN generated from the library's option table (tests/python/test_options.py)
Policy = Literal["node", "socket", "exclusive", "core-complex", "all", "single", "single-unique", "unique-interleaved", "unique-contiguous"]

def plan(
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    hwloc_xml: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
    vendor: Optional[Literal["auto", "nvidia", "amd", "intel"]] = ...,
    gpu: Optional[Union[int, list[int]]] = ...,
    pci: Optional[str] = ...,
    local_rank: Optional[bool] = ...,
    policy: Optional[Policy] = ...,
    scope: Optional[Literal["node", "socket"]] = ...,
    smt: Optional[Literal["all", "one"]] = ...,
    balanced: Optional[bool] = ...,
    min_cores: Optional[int] = ...,
    max_cores: Optional[int] = ...,
    nproc: Optional[int] = ...,
    unknown_node: Optional[str] = ...,
    share: Optional[Literal["visible", "machine"]] = ...,
    baseline: Optional[Literal["affinity", "cgroup"]] = ...,
    unreachable: Optional[Literal["error", "nearest"]] = ...,
    reserve_os_cores: Optional[Union[int, str]] = ...,
    ranks_per_gpu: Optional[int] = ...,
    part: Optional[int] = ...,
    domains_per_gpu: Optional[int] = ...,
    membind: Optional[Literal["none", "local", "bind", "preferred", "interleave"]] = ...,
    dra_metadata: Optional[str] = ...,
    gpu_nodes: Optional[str] = ...,
    mem_nodes: Optional[Literal["cpu", "gpu", "socket"]] = ...,
    nic_env: Optional[bool] = ...,
    nic_libs: Optional[str] = ...,
    omp_threads: Optional[bool] = ...,
    roles: Optional[str] = ...,
    priority_cores: Optional[bool] = ...,
    fallback: Optional[Literal["error", "unbound"]] = ...,
) -> Plan: ...
def bind(
    plan: Optional[Plan] = ...,
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    hwloc_xml: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
    vendor: Optional[Literal["auto", "nvidia", "amd", "intel"]] = ...,
    gpu: Optional[Union[int, list[int]]] = ...,
    pci: Optional[str] = ...,
    local_rank: Optional[bool] = ...,
    policy: Optional[Policy] = ...,
    scope: Optional[Literal["node", "socket"]] = ...,
    smt: Optional[Literal["all", "one"]] = ...,
    balanced: Optional[bool] = ...,
    min_cores: Optional[int] = ...,
    max_cores: Optional[int] = ...,
    nproc: Optional[int] = ...,
    unknown_node: Optional[str] = ...,
    share: Optional[Literal["visible", "machine"]] = ...,
    baseline: Optional[Literal["affinity", "cgroup"]] = ...,
    unreachable: Optional[Literal["error", "nearest"]] = ...,
    reserve_os_cores: Optional[Union[int, str]] = ...,
    ranks_per_gpu: Optional[int] = ...,
    part: Optional[int] = ...,
    domains_per_gpu: Optional[int] = ...,
    membind: Optional[Literal["none", "local", "bind", "preferred", "interleave"]] = ...,
    dra_metadata: Optional[str] = ...,
    gpu_nodes: Optional[str] = ...,
    mem_nodes: Optional[Literal["cpu", "gpu", "socket"]] = ...,
    nic_env: Optional[bool] = ...,
    nic_libs: Optional[str] = ...,
    omp_threads: Optional[bool] = ...,
    roles: Optional[str] = ...,
    priority_cores: Optional[bool] = ...,
    fallback: Optional[Literal["error", "unbound"]] = ...,
) -> Optional[Plan]: ...
def bound(
    plan: Optional[Plan] = ...,
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    hwloc_xml: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
    vendor: Optional[Literal["auto", "nvidia", "amd", "intel"]] = ...,
    gpu: Optional[Union[int, list[int]]] = ...,
    pci: Optional[str] = ...,
    local_rank: Optional[bool] = ...,
    policy: Optional[Policy] = ...,
    scope: Optional[Literal["node", "socket"]] = ...,
    smt: Optional[Literal["all", "one"]] = ...,
    balanced: Optional[bool] = ...,
    min_cores: Optional[int] = ...,
    max_cores: Optional[int] = ...,
    nproc: Optional[int] = ...,
    unknown_node: Optional[str] = ...,
    share: Optional[Literal["visible", "machine"]] = ...,
    baseline: Optional[Literal["affinity", "cgroup"]] = ...,
    unreachable: Optional[Literal["error", "nearest"]] = ...,
    reserve_os_cores: Optional[Union[int, str]] = ...,
    ranks_per_gpu: Optional[int] = ...,
    part: Optional[int] = ...,
    domains_per_gpu: Optional[int] = ...,
    membind: Optional[Literal["none", "local", "bind", "preferred", "interleave"]] = ...,
    dra_metadata: Optional[str] = ...,
    gpu_nodes: Optional[str] = ...,
    mem_nodes: Optional[Literal["cpu", "gpu", "socket"]] = ...,
    nic_env: Optional[bool] = ...,
    nic_libs: Optional[str] = ...,
    omp_threads: Optional[bool] = ...,
    roles: Optional[str] = ...,
    priority_cores: Optional[bool] = ...,
    fallback: Optional[Literal["error", "unbound"]] = ...,
) -> ContextManager[Optional[Plan]]: ...
def use_executable(
    plan: Optional[Plan] = ...,
    context: Any = ...,
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    hwloc_xml: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
    vendor: Optional[Literal["auto", "nvidia", "amd", "intel"]] = ...,
    gpu: Optional[Union[int, list[int]]] = ...,
    pci: Optional[str] = ...,
    local_rank: Optional[bool] = ...,
    policy: Optional[Policy] = ...,
    scope: Optional[Literal["node", "socket"]] = ...,
    smt: Optional[Literal["all", "one"]] = ...,
    balanced: Optional[bool] = ...,
    min_cores: Optional[int] = ...,
    max_cores: Optional[int] = ...,
    nproc: Optional[int] = ...,
    unknown_node: Optional[str] = ...,
    share: Optional[Literal["visible", "machine"]] = ...,
    baseline: Optional[Literal["affinity", "cgroup"]] = ...,
    unreachable: Optional[Literal["error", "nearest"]] = ...,
    reserve_os_cores: Optional[Union[int, str]] = ...,
    ranks_per_gpu: Optional[int] = ...,
    part: Optional[int] = ...,
    domains_per_gpu: Optional[int] = ...,
    membind: Optional[Literal["none", "local", "bind", "preferred", "interleave"]] = ...,
    dra_metadata: Optional[str] = ...,
    gpu_nodes: Optional[str] = ...,
    mem_nodes: Optional[Literal["cpu", "gpu", "socket"]] = ...,
    nic_env: Optional[bool] = ...,
    nic_libs: Optional[str] = ...,
    omp_threads: Optional[bool] = ...,
    roles: Optional[str] = ...,
    priority_cores: Optional[bool] = ...,
    fallback: Optional[Literal["error", "unbound"]] = ...,
) -> Optional[Plan]: ...
def doctor(
    pid: int,
    min_local: Optional[float] = ...,
    *,
    root: Optional[str] = ...,
    topology: Optional[str] = ...,
    source: Optional[str] = ...,
    hwloc_xml: Optional[str] = ...,
    visible_devices: Optional[str] = ...,
    vendor: Optional[Literal["auto", "nvidia", "amd", "intel"]] = ...,
    gpu: Optional[Union[int, list[int]]] = ...,
    pci: Optional[str] = ...,
    local_rank: Optional[bool] = ...,
    policy: Optional[Policy] = ...,
    scope: Optional[Literal["node", "socket"]] = ...,
    smt: Optional[Literal["all", "one"]] = ...,
    balanced: Optional[bool] = ...,
    min_cores: Optional[int] = ...,
    max_cores: Optional[int] = ...,
    nproc: Optional[int] = ...,
    unknown_node: Optional[str] = ...,
    share: Optional[Literal["visible", "machine"]] = ...,
    baseline: Optional[Literal["affinity", "cgroup"]] = ...,
    unreachable: Optional[Literal["error", "nearest"]] = ...,
    reserve_os_cores: Optional[Union[int, str]] = ...,
    ranks_per_gpu: Optional[int] = ...,
    part: Optional[int] = ...,
    domains_per_gpu: Optional[int] = ...,
    membind: Optional[Literal["none", "local", "bind", "preferred", "interleave"]] = ...,
    dra_metadata: Optional[str] = ...,
    gpu_nodes: Optional[str] = ...,
    mem_nodes: Optional[Literal["cpu", "gpu", "socket"]] = ...,
    nic_env: Optional[bool] = ...,
    nic_libs: Optional[str] = ...,
    omp_threads: Optional[bool] = ...,
    roles: Optional[str] = ...,
    priority_cores: Optional[bool] = ...,
    fallback: Optional[Literal["error", "unbound"]] = ...,
) -> dict[str, Any]: ...
# END generated
