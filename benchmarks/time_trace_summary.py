#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises a clang -ftime-trace JSON file: where one translation unit's
compile time goes (benchmarks/README.md, row 6).

    clang++ -std=c++20 -O2 -Iinclude -ftime-trace -c tu.cpp -o tu.o
    benchmarks/time_trace_summary.py tu.json [--top=N]

Prints the compiler's phase totals (front end, back end, template
instantiation, ...), the headers by inclusive parse time, split into the
standard library and the rest, and the costliest instantiations and
optimised functions. Source times are inclusive: a header's time contains
the headers it includes, so the "direct" list (headers the TU or a gpuaff
header includes) is the one whose times add up.
"""

import argparse
import collections
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="the .json file clang -ftime-trace wrote beside the object file")
    ap.add_argument("--top", type=int, default=12, help="entries per list (default 12)")
    args = ap.parse_args()

    with open(args.trace, encoding="utf-8") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]

    def seconds(us: float) -> str:
        return f"{us / 1e6:7.3f} s"

    totals = {e["name"][len("Total "):]: e["dur"] for e in events if e["name"].startswith("Total ")}
    print("== phases (clang's totals; nested phases are part of their parents)")
    for name in ("ExecuteCompiler", "Frontend", "Source", "ParseClass", "InstantiateClass", "InstantiateFunction",
                 "PerformPendingInstantiations", "Backend", "Optimizer", "CodeGenPasses"):
        if name in totals:
            print(f"{seconds(totals[name])}  {name}")

    # A header's Source event spans its parse, the headers it includes included.
    # The direct children of the TU and of non-standard headers are the ones
    # a library can choose; the standard headers they pull in are attributed
    # to the first one that includes them (later inclusions cost nothing).
    sources = sorted((e for e in events if e["name"] == "Source"), key=lambda e: (e["ts"], -e["dur"]))
    stack = []  # enclosing Source events: (end time, path)
    direct = collections.Counter()
    inclusive = collections.Counter()
    for e in sources:
        path = e["args"]["detail"]
        while stack and stack[-1][0] <= e["ts"]:
            stack.pop()
        inclusive[path] += e["dur"]
        parent = stack[-1][1] if stack else None
        if parent is None or not is_standard(parent):
            direct[path] += e["dur"]
        stack.append((e["ts"] + e["dur"], path))

    print(f"\n== headers included by the TU or by a non-standard header (inclusive parse time), top {args.top}")
    for path, us in direct.most_common(args.top):
        print(f"{seconds(us)}  {'[std] ' if is_standard(path) else ''}{path}")
    std_direct = sum(us for p, us in direct.items() if is_standard(p))
    print(f"{seconds(std_direct)}  standard headers included directly by non-standard code, together")

    for kind in ("InstantiateFunction", "InstantiateClass", "ParseClass", "OptFunction"):
        c = collections.Counter()
        for e in events:
            if e["name"] == kind:
                c[e.get("args", {}).get("detail", "")] += e["dur"]
        if not c:
            continue
        print(f"\n== {kind}, top {args.top}")
        for detail, us in c.most_common(args.top):
            print(f"{seconds(us)}  {detail[:140]}")
    return 0


def is_standard(path: str) -> bool:
    """Whether a header belongs to the C++ or C library (not to the project)."""
    return "/c++/" in path or path.startswith("/usr/include/") or "/lib/gcc/" in path or "/lib/clang/" in path


if __name__ == "__main__":
    sys.exit(main())
