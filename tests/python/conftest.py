# SPDX-License-Identifier: Apache-2.0
# Shared by the Python module's tests (run by ctest: python_* tests; see
# python/CMakeLists.txt for the environment it sets).
#
# The machine the bindings are planned on is fixtures/two-node-2cpu: 2 CPUs,
# each its own core and NUMA node, GPU 0 (0000:17:00.0) on node 0 and GPU 1
# (0000:97:00.0) on node 1. Every policy gives GPU 0 CPU 0 and GPU 1 CPU 1,
# which exist on the 2-CPU build and CI machines, so the plans can be applied
# here and each child's mask tells which GPU's plan it got.
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("GPUAFF_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
FIXTURES = os.environ.get("GPUAFF_FIXTURES_DIR", os.path.join(SOURCE_DIR, "build", "dev", "fixtures"))
ROOT = os.path.join(FIXTURES, "two-node-2cpu")
DGX_H100 = os.path.join(FIXTURES, "dgx-h100")

sys.path.insert(0, HERE)  # children.py, for spawned interpreters too (multiprocessing passes sys.path on)


def cpus_allowed(pid="self"):
    """Cpus_allowed_list of /proc/<pid>/status (a thread: 'self/task/<tid>')."""
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list in /proc/%s/status" % pid)


def header_version():
    """The version in include/gpuaff/version.hpp, where it is defined once."""
    import re

    text = open(os.path.join(SOURCE_DIR, "include", "gpuaff", "version.hpp")).read()
    return ".".join(re.search(r"#define GPUAFF_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH"))


def needs_cpus_0_and_1():
    allowed = os.sched_getaffinity(0)
    if not {0, 1} <= allowed:
        pytest.skip("needs CPUs 0 and 1 allowed to bind the two-node-2cpu plans here; allowed: %s" % sorted(allowed))


@pytest.fixture
def root():
    if not os.path.isdir(ROOT):
        pytest.fail("%s is missing: configure the build (CMake unpacks fixtures/*.tar.xz)" % ROOT)
    return ROOT


@pytest.fixture
def bindable(root):
    """The root, when its plans can be applied here; puts the calling thread's
    mask back after the test (a test that binds the whole process changes it)."""
    needs_cpus_0_and_1()
    saved = os.sched_getaffinity(0)
    # The tests read masks as "0-1" before and after a plan: start from exactly
    # CPUs 0 and 1, also on a machine with more (threads and children started
    # by the test inherit it).
    os.sched_setaffinity(0, {0, 1})
    yield root
    os.sched_setaffinity(0, saved)
