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
from ._gpuaff import Plan as Plan, thread_affinity as thread_affinity

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
def local_rank() -> int: ...
def local_size() -> Optional[int]: ...
def reapply() -> Plan: ...
def bind_process(cpus: Cpus, membind: str = ..., memory_nodes: Optional[Cpus] = ...) -> dict[str, Any]: ...

class WorkerInit:
    cpus: list[int]
    split: bool
    def __init__(self, cpus: Iterable[int], split: bool = ..., then: Optional[Callable[[int], None]] = ...) -> None: ...
    def cpus_of(self, worker_id: int, num_workers: int) -> list[int]: ...
    def __call__(self, worker_id: int) -> None: ...

def worker_init_fn(
    cpus: Union[Plan, Cpus, None] = ..., split: bool = ..., then: Optional[Callable[[int], None]] = ...
) -> WorkerInit: ...
def executable() -> str: ...
def executable_environment(plan: Plan) -> dict[str, str]: ...

# BEGIN generated from the library's option table (tests/python/test_options.py)
# END generated
