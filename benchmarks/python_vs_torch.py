# SPDX-License-Identifier: Apache-2.0
"""Row PT (benchmarks/README.md): gpuaff's plan beside PyTorch's own binding
functions, per call, on the machine this runs on (its live /sys), in one
process, interleaved.

    python3 benchmarks/python_vs_torch.py [BUILD] [--rounds=N] [--calls=N]

BUILD is a build directory holding the module (BUILD/python); without it the
installed gpuaff is used. PyTorch's functions are those its torchrun
--numa-binding applies (torch.numa.binding, PyTorch 2.8 and later): for each
affinity mode and each visible GPU, `_get_logical_cpus_to_bind_to(gpu_index=g,
numa_options=NumaOptions(affinity_mode=M))`, the set of CPUs it would bind
the rank to. Beside it, `gpuaff.plan(gpu=g, policy=M)` (the same input) and
`gpuaff.plan(pci=<GPU g's address>, policy=M)`. Each column is timed by a
batch of calls (--calls, default 50) per round; the table shows the medians
over the rounds (--rounds, default 15) of the time per call, in the calling
thread's CPU time and in wall time. The answers are compared first; a
difference is printed (PyTorch reads numa_node -1 as node 0 and ignores the
allowed set in some releases: the two do not always agree, and where they
differ, the table still times both).

Without PyTorch, without CUDA, without a GPU, or with a PyTorch older than
2.8, it says so and exits 0 with nothing timed.
"""
import os
import statistics
import sys
import time


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    rounds = int(opts.get("rounds", 15))
    calls = int(opts.get("calls", 50))
    if args:
        sys.path.insert(0, os.path.join(args[0], "python"))
    import gpuaff

    try:
        import torch
    except ImportError:
        print("row PT: PyTorch is not installed here; nothing timed")
        return 0
    try:
        from torch.numa import binding as tb
    except ImportError:
        print(f"row PT: PyTorch {torch.__version__} has no torch.numa.binding (2.8 and later); nothing timed")
        return 0
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print(f"row PT: PyTorch {torch.__version__} sees no CUDA GPU here; nothing timed")
        return 0
    get = getattr(tb, "_get_logical_cpus_to_bind_to", None)
    if get is None:
        names = sorted(n for n in dir(tb) if n.startswith("_get"))
        print(f"row PT: torch.numa.binding of PyTorch {torch.__version__} has no _get_logical_cpus_to_bind_to "
              f"(it has {', '.join(names)}); nothing timed")
        return 0

    gpus = torch.cuda.device_count()
    addresses = []
    for g in range(gpus):
        p = torch.cuda.get_device_properties(g)
        bus = getattr(p, "pci_bus_id", None)
        dom = getattr(p, "pci_domain_id", 0)
        dev = getattr(p, "pci_device_id", 0)
        addresses.append(f"{dom:04x}:{bus:02x}:{dev:02x}.0" if bus is not None else None)
    print(f"row PT: PyTorch {torch.__version__}, {gpus} GPU(s) at {addresses}, {os.cpu_count()} CPUs, "
          f"gpuaff {gpuaff.__version__}; {rounds} rounds of {calls} calls per column")

    modes = ["node", "socket", "exclusive", "core-complex"]
    rows = []
    for mode in modes:
        options = tb.NumaOptions(affinity_mode=tb.AffinityMode(mode))
        columns = {"torch": lambda g, o=options: get(gpu_index=g, numa_options=o),
                   "gpuaff gpu=": lambda g, m=mode: gpuaff.plan(gpu=g, policy=m)}
        if all(addresses):
            columns["gpuaff pci="] = lambda g, m=mode: gpuaff.plan(pci=addresses[g], policy=m)
        # The answers first, compared.
        notes = []
        for g in range(gpus):
            try:
                t = sorted(columns["torch"](g))
            except Exception as e:  # PyTorch's own refusal, shown as it is
                notes.append(f"GPU {g}: PyTorch raised {type(e).__name__}: {e}")
                t = None
            try:
                a = sorted(columns["gpuaff gpu="](g).cpus)
            except Exception as e:
                notes.append(f"GPU {g}: gpuaff raised {type(e).__name__}: {e}")
                a = None
            if t is not None and a is not None and t != a:
                notes.append(f"GPU {g}: PyTorch {len(t)} CPUs, gpuaff {len(a)} CPUs (answers differ)")
        usable = {}
        for name, f in columns.items():
            try:
                for g in range(gpus):
                    f(g)
                usable[name] = f
            except Exception:
                pass
        samples = {name: ([], []) for name in usable}
        for r in range(rounds):
            order = list(usable.items())
            if r % 2:
                order.reverse()
            for name, f in order:
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    for g in range(gpus):
                        f(g)
                n = calls * gpus
                samples[name][0].append((time.process_time() - c0) / n)
                samples[name][1].append((time.perf_counter() - w0) / n)
        rows.append((mode, {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in samples.items()}, notes))

    def us(x):
        return f"{x * 1e6:.1f} us"

    print()
    print("| mode | PyTorch's function (CPU / wall) | gpuaff.plan(gpu=g) | ratio (CPU) | gpuaff.plan(pci=...) | ratio (CPU) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, m, notes in rows:
        t = m.get("torch")
        cells = [mode, f"{us(t[0])} / {us(t[1])}" if t else "refused"]
        for k in ("gpuaff gpu=", "gpuaff pci="):
            v = m.get(k)
            cells.append(f"{us(v[0])} / {us(v[1])}" if v else "-")
            if v and t:
                ratio = t[0] / v[0]
                cells.append(f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower")
            else:
                cells.append("-")
        print("| " + " | ".join(cells) + " |")
        for n in notes:
            print(f"   {mode}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
