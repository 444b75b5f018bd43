# SPDX-License-Identifier: Apache-2.0
"""Builds the gpuaff Python package from the source tree, offline:

    python3 -m venv --system-site-packages env        # Debian: setuptools and pybind11 from apt
    env/bin/pip install --no-build-isolation --no-index ./python

The extension compiles the library's front door (../include only), with the
JSON reader when nlohmann_json's header is installed, so the package must be
built from a checkout, in place (pip >= 21.3 does). The version is
read from include/gpuaff/version.hpp, the one place it lives.

With GPUAFF_CLI naming a built `gpuaff` binary (tools/package.sh builds a
static one), the package also installs it as the `gpuaff` command, the way
tools written in compiled languages ship in wheels: pip copies it into the
environment's bin/ (no Python wrapper in front of it), and `python -m gpuaff`
runs it.
"""
import os
import re

from pybind11.setup_helpers import Pybind11Extension
from setuptools import setup
from setuptools.command.build_ext import build_ext
try:
    from setuptools.command.build_scripts import build_scripts
except ImportError:  # setuptools < 69 (Debian 12's 66) has distutils' only
    from distutils.command.build_scripts import build_scripts

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
INCLUDE = os.path.join(TOP, "include")

def json_macros():
    """GPUAFF_PYTHON_HAS_JSON when nlohmann_json (Debian: nlohmann-json3-dev) is installed."""
    for d in ("/usr/include", "/usr/local/include"):
        if os.path.exists(os.path.join(d, "nlohmann", "json.hpp")):
            return [("GPUAFF_PYTHON_HAS_JSON", "1")]
    return []


def version():
    text = open(os.path.join(INCLUDE, "gpuaff", "version.hpp")).read()
    return ".".join(re.search(r"#define GPUAFF_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH"))


class BuildWithLauncher(build_ext):
    """Builds the extension, then gpuaff-python (src/launcher.cpp) beside it."""

    def run(self):
        super().run()
        out_dir = os.path.dirname(self.get_ext_fullpath("gpuaff._gpuaff"))
        objects = self.compiler.compile([os.path.join(HERE, "src", "launcher.cpp")], output_dir=self.build_temp,
                                        include_dirs=[INCLUDE], extra_postargs=["-std=c++20"])
        self.compiler.link_executable(objects, "gpuaff-python", output_dir=out_dir, target_lang="c++")


def cli_scripts():
    """The gpuaff binary named by GPUAFF_CLI, installed as the `gpuaff` command."""
    cli = os.environ.get("GPUAFF_CLI", "")
    if not cli:
        return []
    if os.path.basename(cli) != "gpuaff" or not os.access(cli, os.X_OK):
        raise SystemExit("GPUAFF_CLI=%s: not an executable named gpuaff (tools/package.sh builds one)" % cli)
    return [cli]


class CopyBinaryScripts(build_scripts):
    """Copies the scripts byte for byte: the `gpuaff` script is a binary, which
    setuptools' own step would read as Python to rewrite its #! line."""

    def copy_scripts(self):
        self.mkpath(self.build_dir)
        outfiles = []
        for script in self.scripts:
            out = os.path.join(self.build_dir, os.path.basename(script))
            self.copy_file(script, out)
            os.chmod(out, 0o755)
            outfiles.append(out)
        return outfiles, outfiles


if not os.path.isdir(INCLUDE):
    raise SystemExit("gpuaff's Python package builds from a source checkout: %s is missing" % INCLUDE)

setup(
    name="gpuaff",
    version=version(),
    description="Bind GPU training processes to the CPUs and memory near their GPU",
    license="Apache-2.0",
    license_files=["LICENSE"],  # a link to the tree's LICENSE: copy the tree's top with python/
    classifiers=["License :: OSI Approved :: Apache Software License"],
    packages=["gpuaff"],
    package_dir={"gpuaff": os.path.join("gpuaff")},
    # fixtures/: what tools/package.sh copies in (recorded machines to try it on); none in a source build
    package_data={"gpuaff": ["py.typed", "*.pyi", "fixtures/*"]},
    ext_modules=[
        Pybind11Extension(
            "gpuaff._gpuaff",
            [os.path.join(HERE, "src", "module.cpp")],
            include_dirs=[INCLUDE],
            define_macros=json_macros(),
            cxx_std=20,
            # After Python's own flags, which carry -g: with debug information
            # the module is 16 times larger (38 MB against 2.3 MB of object
            # code) and takes twice as long to compile.
            extra_compile_args=["-g0"],
        )
    ],
    cmdclass={"build_ext": BuildWithLauncher, "build_scripts": CopyBinaryScripts},
    scripts=cli_scripts(),
    python_requires=">=3.8",
    zip_safe=False,
)
