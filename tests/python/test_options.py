# SPDX-License-Identifier: Apache-2.0
"""The Python keywords are the library's option table: the type stubs
(python/gpuaff/__init__.pyi) are checked against it, a type checker refuses a
misspelt keyword, and every option of the command line's bind and exec is a
keyword (Python at parity with the CLI).

GPUAFF_UPDATE_STUBS=1 rewrites the generated block of the stubs instead of
checking it."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import gpuaff
from gpuaff import _gpuaff

SOURCE = os.environ.get("GPUAFF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
STUBS = os.path.join(SOURCE, "python", "gpuaff", "__init__.pyi")
BEGIN = "# BEGIN generated from the library's option table (tests/python/test_options.py)\n"
END = "# END generated\n"


def annotation(row):
    t = row["type"]
    if t == "flag":
        return "bool"
    if row["key"] == "gpu":
        return "Union[int, list[int]]"  # several GPUs per process: gpu=[0, 4]
    if row["key"] == "reserve_os_cores":
        return "Union[int, str]"  # a count, or 'auto' (the system's housekeeping CPUs)
    if t in ("count", "positive"):
        return "int"
    if t == "choice":
        return "Literal[%s]" % ", ".join('"%s"' % w for w in row["value_name"].split("|"))
    if t == "fraction":
        return "float"
    if row["key"] == "policy":
        return "Policy"
    return "str"


def keywords():
    return ["%s: Optional[%s] = ..." % (r["key"], annotation(r)) for r in _gpuaff.options()]


def expected_block():
    kw = ",\n    ".join(keywords())
    policies = ", ".join('"%s"' % p for p in _gpuaff.policy_names)
    return (BEGIN +
            "Policy = Literal[%s]\n\n" % policies +
            "def plan(\n    *,\n    %s,\n) -> Plan: ...\n" % kw +
            "def bind(\n    plan: Optional[Plan] = ...,\n    *,\n    %s,\n) -> Optional[Plan]: ...\n" % kw +
            "def bound(\n    plan: Optional[Plan] = ...,\n    *,\n    %s,\n) -> ContextManager[Optional[Plan]]: ...\n" % kw +
            "def use_executable(\n    plan: Optional[Plan] = ...,\n    context: Any = ...,\n    *,\n    %s,\n"
            ") -> Optional[Plan]: ...\n" % kw +
            "def doctor(\n    pid: int,\n    min_local: Optional[float] = ...,\n    *,\n    %s,\n"
            ") -> dict[str, Any]: ...\n" % kw +
            END)


def test_stubs_hold_the_option_table():
    text = open(STUBS).read()
    block = expected_block()
    if os.environ.get("GPUAFF_UPDATE_STUBS") == "1":
        start, end = text.index(BEGIN), text.index(END) + len(END)
        open(STUBS, "w").write(text[:start] + block + text[end:])
        text = open(STUBS).read()
    assert block in text, "python/gpuaff/__init__.pyi differs from the option table; expected:\n" + block


def test_every_bind_and_exec_option_of_the_command_line_is_a_keyword():
    # The command line's flags, from its own --help (not from the table the module uses).
    exe = os.path.join(os.environ.get("GPUAFF_BINARY_DIR", ""), "tools", "gpuaff", "gpuaff")
    if not os.access(exe, os.X_OK):
        pytest.skip("the gpuaff binary is not built here")
    flags = set()
    for command in ("bind", "exec"):
        out = subprocess.run([exe, command, "--help"], capture_output=True, text=True, check=True).stdout
        flags |= set(re.findall(r"^  (--[a-z][a-z-]*)", out, re.M))
    # Only how bind prints, what exec runs and how verbosely: nothing a plan or a binding depends on.
    printing = {"--format", "--dry-run", "--verbose", "--no-balanced", "--help"}
    missing = sorted(f for f in flags - printing if f[2:].replace("-", "_") not in gpuaff.OPTIONS)
    assert missing == []


def test_a_type_checker_refuses_a_misspelt_keyword_and_a_wrong_word(tmp_path):
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy is not installed (Debian: apt-get install mypy)")
    good = tmp_path / "good.py"
    good.write_text("import gpuaff\np = gpuaff.plan(gpu=0, policy='exclusive', nic_env=True, fallback='unbound')\n"
                    "print(p.cpulist)\n")
    bad = tmp_path / "bad.py"
    bad.write_text("import gpuaff\ngpuaff.plan(gpu=0, polcy='exclusive')\ngpuaff.bind(share='everything')\n")
    env = dict(os.environ, MYPYPATH=os.path.join(SOURCE, "python"))
    ok = subprocess.run([mypy, "--no-incremental", "--cache-dir=/dev/null", str(good)], capture_output=True,
                        text=True, env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    refused = subprocess.run([mypy, "--no-incremental", "--cache-dir=/dev/null", str(bad)], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
    assert refused.returncode == 1
    assert 'Unexpected keyword argument "polcy"' in refused.stdout
    assert '"share"' in refused.stdout


def test_help_shows_the_keywords():
    # help(gpuaff.plan) showed plan(**options): the signature lists the keywords
    # of the option table, keyword-only, so help(), IDEs and inspect see them.
    import inspect
    sig = inspect.signature(gpuaff.plan)
    assert list(sig.parameters) == list(gpuaff.OPTIONS)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values())
    assert "policy" in sig.parameters and "vendor" in sig.parameters
    bind = inspect.signature(gpuaff.bind)
    assert list(bind.parameters)[:1] == ["plan"] and "local_rank" in bind.parameters
    doctor = inspect.signature(gpuaff.doctor)
    assert list(doctor.parameters)[:2] == ["pid", "min_local"]
    assert doctor.parameters["pid"].default is inspect.Parameter.empty
    assert "vendor" in inspect.signature(gpuaff.load).parameters
    assert "policy" not in inspect.signature(gpuaff.load).parameters
    import pydoc
    assert "policy=None" in pydoc.render_doc(gpuaff.plan)
    # The signature comes from a stand-in that carries the function's place:
    # the source shown is the function's own.
    assert inspect.getsource(gpuaff.plan).startswith("def plan(**options):")
    assert inspect.getsource(gpuaff.doctor).startswith("def doctor(pid, min_local=None, **options):")


def test_import_loads_no_module_it_does_not_need():
    # inspect (with ast, dis, tokenize) was half of `import gpuaff` on Debian
    # 12's Python, imported only to build the signatures above; threading and
    # contextlib (with functools, collections) half of the rest, used only by
    # keep_bound() and bound() (benchmarks/README.md, row P). A process that
    # binds before it imports torch pays for every module gpuaff imports.
    probe = ("import sys; before = set(sys.modules); import gpuaff; "
             "print(sorted({'inspect', 'ast', 'dis', 'tokenize', 'threading', 'contextlib'} & (set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
