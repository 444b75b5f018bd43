# SPDX-License-Identifier: Apache-2.0
# A user installs the package from the source tree into their own environment
# with pip, offline, with the system's setuptools and pybind11 (a venv with
# --system-site-packages, as Debian's pip installs nothing outside one). The
# tree is copied first: pip builds in place and must not write into the checkout.
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SOURCE_DIR, header_version


def test_pip_install_into_a_venv(tmp_path):
    try:
        import pybind11  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as e:
        pytest.skip("needs setuptools and pybind11 in %s: %s" % (sys.executable, e))
    tree = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE_DIR, "include"), tree / "include")
    shutil.copytree(os.path.join(SOURCE_DIR, "tools", "gpuaff"), tree / "tools" / "gpuaff")
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), tree / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # Unoptimised, without debug info (Python adds -g): this checks that it builds
    # and runs, not how fast; compiling the module is most of the test.
    env = dict(os.environ, CFLAGS="-O0 -g0")
    env.pop("PYTHONPATH", None)  # the build tree's package must not stand in for the installed one
    out = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", str(tree / "python")],
                         capture_output=True, text=True, env=env, timeout=840)
    assert out.returncode == 0, out.stdout + out.stderr
    code = ("import gpuaff, importlib.metadata as m, os; p = gpuaff.plan(gpu=1, root=%r); "
            "print(gpuaff.__file__.startswith(%r), gpuaff.__version__, m.version('gpuaff'), p.cpulist, "
            "os.access(gpuaff.executable(), os.X_OK))" % (ROOT, str(venv)))
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    version = header_version()
    assert out.stdout.split() == ["True", version, version, "1", "True"]
