"""Builds the gpuaff Python package from the source tree, offline:

    python3 -m venv --system-site-packages env        # Debian: setuptools and pybind11 from apt
    env/bin/pip install --no-build-isolation --no-index ./python

The extension compiles the library's front door (../include only), with the
JSON reader when nlohmann_json's header is installed, so the package must be
built from a checkout, in place (pip >= 21.3 does). The version is
read from include/gpuaff/version.hpp, the one place it lives.
"""
import os
import re

from pybind11.setup_helpers import Pybind11Extension
from setuptools import setup
from setuptools.command.build_ext import build_ext

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


if not os.path.isdir(INCLUDE):
    raise SystemExit("gpuaff's Python package builds from a source checkout: %s is missing" % INCLUDE)

setup(
    name="gpuaff",
    version=version(),
    description="Bind GPU training processes to the CPUs and memory near their GPU",
    packages=["gpuaff"],
    package_dir={"gpuaff": os.path.join("gpuaff")},
    package_data={"gpuaff": ["py.typed", "*.pyi"]},
    ext_modules=[
        Pybind11Extension(
            "gpuaff._gpuaff",
            [os.path.join(HERE, "src", "module.cpp")],
            include_dirs=[INCLUDE],
            define_macros=json_macros(),
            cxx_std=20,
        )
    ],
    cmdclass={"build_ext": BuildWithLauncher},
    python_requires=">=3.8",
    zip_safe=False,
)
