# SPDX-License-Identifier: Apache-2.0
"""gpuaff's exceptions: one class per kind of error of the C++ library (its
``Errc``), all deriving from :class:`Error`, and from the matching builtin
where one fits, so ``except ValueError`` or ``except OSError`` also work."""


class Error(Exception):
    """Any gpuaff error. ``str(e)`` is the library's one-line message;
    ``e.code`` names the kind ("invalid_argument", ...); ``e.sys_errno`` is
    the errno of the failing system call, or 0."""

    code = "error"
    sys_errno = 0


class InvalidArgument(Error, ValueError):
    """A value given by the caller (keyword, environment variable) is wrong."""


class ParseError(Error, ValueError):
    """A file or string does not have the expected syntax."""


class IoError(Error, OSError):
    """A file of the machine's description could not be read."""


class NotFound(Error, LookupError):
    """A GPU, node, device or file that is needed does not exist."""


class OutOfRange(Error, ValueError):
    """An id beyond what gpuaff or the kernel can hold."""


class EmptyResult(Error):
    """The binding would be empty, or the kernel narrowed it (cgroup cpuset)."""


class UnknownLocality(Error):
    """The device's NUMA node cannot be determined (see unknown_node=)."""


class InsufficientCores(Error):
    """Fewer physical cores than the policy needs."""


class PermissionDenied(Error, PermissionError):
    """The kernel refused (EPERM), e.g. set_mempolicy in a container."""


class SystemCallError(Error, OSError):
    """Another system call failed; see sys_errno."""


class Unsupported(Error, NotImplementedError):
    """Not available in this build or on this kernel."""


# The C++ Errc names, as the extension reports them.
BY_CODE = {
    "invalid_argument": InvalidArgument,
    "parse_error": ParseError,
    "io_error": IoError,
    "not_found": NotFound,
    "out_of_range": OutOfRange,
    "empty_result": EmptyResult,
    "unknown_locality": UnknownLocality,
    "insufficient_cores": InsufficientCores,
    "permission_denied": PermissionDenied,
    "system_error": SystemCallError,
    "unsupported": Unsupported,
}
