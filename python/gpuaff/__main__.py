# SPDX-License-Identifier: Apache-2.0
"""`python -m gpuaff ARGS...` runs the `gpuaff` command installed with the
package (the wheel puts it in the environment's bin/), so that a pip user has
the command line even where bin/ is not on PATH."""
import os
import shutil
import sys
import sysconfig


def command() -> str:
    """The gpuaff binary of this environment: its scripts folder (a venv's
    bin/, or the user scheme's for pip --user), else the first on PATH."""
    schemes = [sysconfig.get_default_scheme()]
    if hasattr(sysconfig, "get_preferred_scheme"):
        schemes.append(sysconfig.get_preferred_scheme("user"))
    for scheme in schemes:
        try:
            path = os.path.join(sysconfig.get_path("scripts", scheme), "gpuaff")
        except KeyError:
            continue
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("gpuaff")
    if found:
        return found
    sys.exit("gpuaff: the gpuaff command is not installed with this package (a wheel built by tools/package.sh "
             "carries it; a build from the source tree has it in build/.../tools/gpuaff/gpuaff)")


def main() -> None:
    path = command()
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
