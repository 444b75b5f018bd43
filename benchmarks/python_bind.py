# SPDX-License-Identifier: Apache-2.0
"""Row P (benchmarks/README.md): from `import gpuaff` to bound, in Python.

    python3 benchmarks/python_bind.py BUILD [--rounds=N] [--other-work-mb=N]

BUILD is a build directory holding the module (BUILD/python) and the fixtures
(BUILD/fixtures, or its GPUAFF_FIXTURES_DIR). Each sample is a fresh interpreter that times, with its own
CPU clock (time.process_time: user + system of this process, so the wait for
a CPU on a shared machine is not counted):
  import   `import gpuaff`
  plan     gpuaff.plan(gpu=7, root=<dgx-h100>, policy=P): one rank's plan,
           reading the recorded DGX H100 root (8 GPUs, 224 CPUs)
  apply    binding every thread of the process (3 threads: the interpreter's
           and two started before) to this machine's allowed CPUs, as bind()
           does after the plan (the DGX H100's CPUs do not exist here)
Samples of the policies are interleaved; the table shows medians.

PyTorch's own binding (torch.distributed's numa binding, 2.8 and later) is not
in Debian's torch 1.13, so its figures on the same root are quoted from
gpuaff's issue tracker, where they were measured in-process: node 0.32 ms,
socket 1.05 ms, exclusive 11.6 ms, core-complex 96.5 ms, 7,248 files opened
for 8 GPUs. They are not measured here.

Two more tables measure that comparison on every run instead, in one process:
every GPU of the DGX H100 root, then of the 1152-CPU one (big-1152), planned
side by side, per mode, by
  reader   a reader of exactly the files each PyTorch mode reads, written here
           from the modes' semantics (../shared/REFERENCE.md in the project's
           brief; not PyTorch's code): the GPU's numa_node (-1 -> 0) and its
           node's cpulist; socket: + node/possible, each possible node's
           cpulist and the physical_package_id of its lowest CPU; exclusive:
           + every GPU's numa_node and each node CPU's thread_siblings_list;
           core-complex: + every GPU's numa_node and, per node CPU, its cache
           indexes' level and type and the last level's shared_cpu_list. The
           GPUs' PCI addresses are given (PyTorch asks CUDA for them), which
           flatters it; os.sched_getaffinity is called per plan as PyTorch
           does, the root's online CPUs standing for the allowed set.
  as it runs  the reader, plus what PyTorch's binding does on every call
           before it binds (`_get_validated_logical_cpus_to_bind_to`): it
           looks numactl up on PATH (it refuses to bind without the binary,
           even in process: ../shared/REFERENCE.md) and refuses an empty
           answer. PATH is the one a container gets by default (Docker's, for
           Debian and Ubuntu images), so the lookup stats 4 folders; a venv,
           conda or an NGC image puts more before /usr/bin. Shown beside the
           reader, not instead of it: the target is the reader
  finding  the same reader, but it finds GPU g itself from the files that say
           which device GPU g is (docs/contract.md section 2: every PCI
           device's class, the vendor of the display and accelerator ones,
           the NVIDIA driver's list): the input gpuaff.plan(gpu=g) starts from
  pci=     gpuaff.plan(pci=<GPU g's address>, root=..., policy=P): the same
           input as the reader, each call reading what its answer needs
           (docs/contract.md section 1, "What each answer reads"). The target:
           faster than the reader in every mode
  per call gpuaff.plan(gpu=g, root=..., policy=P): the same, GPU g found by
           index (from the NVIDIA driver's list where it exists, else the PCI
           scan)
  loaded   m = gpuaff.load(root=...) once, then m.plan(gpu=g, policy=P)
  load+8   gpuaff.load() and the 8 plans, the load counted
Then each way once per round, after other work (N MB copied, 64 by default:
more than this machine's last-level cache, as importing a framework touches
before a worker binds; on a CPU with a larger one pass more), which is the
call a worker makes: once, with the caches holding what came before, not
the binder's code, data or the kernel's structures for its files.
Medians of interleaved rounds (wall time, perf_counter); the answers of the
readers and of gpuaff are compared first and must agree. Each column also
counts the read system calls one GPU's plan makes (/proc/self/io syscr;
Python's open().read() makes two per file, gpuaff one).
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

POLICIES = ["node", "socket", "exclusive", "core-complex", "unique-contiguous"]
QUOTED_PYTORCH_MS = {"node": 0.32, "socket": 1.05, "exclusive": 11.6, "core-complex": 96.5}

CHILD = r"""
import json, os, sys, threading, time
policy, root = sys.argv[1], sys.argv[2]
stop = threading.Event()
# daemon threads: a plan that raises ends the interpreter instead of leaving it
# waiting for them at exit
threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(2)]
for t in threads: t.start()
t0 = time.process_time()
import gpuaff
t1 = time.process_time()
plan = gpuaff.plan(gpu=7, root=root, policy=policy)
t2 = time.process_time()
gpuaff.bind_process(os.sched_getaffinity(0))
t3 = time.process_time()
stop.set()
for t in threads: t.join()
print(json.dumps({"import": t1 - t0, "plan": t2 - t1, "apply": t3 - t2, "cpus": plan.cpulist}))
"""


def fixtures_dir(build):
    """BUILD/fixtures, or the folder the build was configured to unpack them
    into (GPUAFF_FIXTURES_DIR, as tests/run.sh sets for every build tree)."""
    here = os.path.join(build, "fixtures")
    if os.path.isdir(here):
        return here
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("GPUAFF_FIXTURES_DIR:"):
                    configured = line.split("=", 1)[1].strip()
                    if os.path.isdir(configured):
                        return configured
    except OSError:
        pass
    sys.exit("python_bind.py: no fixtures in %s nor at its GPUAFF_FIXTURES_DIR: build the tree first "
             "(cmake --build %s)" % (here, build))


# ---- the PyTorch-equivalent reader (semantics of ../shared/REFERENCE.md) -------------


def _read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()


def _cpulist(text):
    out = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


class Reader:
    """What PyTorch's numa binding reads, per mode, for GPU g (bus ids given)."""

    def __init__(self, root, bdfs, allowed):
        self.root, self.bdfs, self.allowed = root, bdfs, allowed

    def node_of(self, g):
        n = int(_read(self.root, "sys/bus/pci/devices/%s/numa_node" % self.bdfs[g]))
        return 0 if n < 0 else n

    def allowed_of(self, node):
        os.sched_getaffinity(0)
        return _cpulist(_read(self.root, "sys/devices/system/node/node%d/cpulist" % node)) & self.allowed

    def package_of(self, cpu):
        return int(_read(self.root, "sys/devices/system/cpu/cpu%d/topology/physical_package_id" % cpu))

    def peers(self, g):
        nodes = [self.node_of(i) for i in range(len(self.bdfs))]
        same = [i for i in range(len(self.bdfs)) if nodes[i] == nodes[g]]
        return nodes[g], same.index(g), len(same)

    def decide(self, mode, g):
        """GPU g's answer under `mode` ("core-complex": the method core_complex)."""
        return getattr(self, mode.replace("-", "_"))(g)

    def node(self, g):
        return self.allowed_of(self.node_of(g))

    def socket(self, g):
        mine = self.allowed_of(self.node_of(g))
        s = self.package_of(min(mine))
        out = set()
        for n in sorted(_cpulist(_read(self.root, "sys/devices/system/node/possible"))):
            cpus = self.allowed_of(n)
            if cpus and self.package_of(min(cpus)) == s:
                out |= cpus
        return out

    def exclusive(self, g):
        node, r, d = self.peers(g)
        cpus = self.allowed_of(node)
        cores = {}
        for c in sorted(cpus):
            sib = _cpulist(_read(self.root, "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % c)) & cpus
            cores.setdefault(min(sib), sib)
        keys = sorted(cores)
        per, extra = divmod(len(keys), d)
        if per < 1:
            raise RuntimeError("only %d physical cores on node %d but %d GPUs" % (len(keys), node, d))
        start = r * per + min(r, extra)
        out = set()
        for k in keys[start:start + per + (1 if r < extra else 0)]:
            out |= cores[k]
        return out

    def last_level(self, c):
        best, best_level, k = None, 0, 0
        base = "sys/devices/system/cpu/cpu%d/cache/index" % c
        while os.path.exists(os.path.join(self.root, base + "%d/level" % k)):
            level = int(_read(self.root, base + "%d/level" % k))
            kind = _read(self.root, base + "%d/type" % k).strip()
            if kind in ("Unified", "Data") and level > best_level:
                best, best_level = k, level
            k += 1
        return None if best is None else _cpulist(_read(self.root, base + "%d/shared_cpu_list" % best))

    def core_complex(self, g):
        node, r, _ = self.peers(g)
        cpus = self.allowed_of(node)
        groups = {}
        for c in sorted(cpus):
            llc = self.last_level(c) or {c}
            groups.setdefault(min(llc), set()).add(c)
        order = sorted(groups, key=lambda k: (-len(groups[k]), k))
        return groups[order[r % len(order)]]


# The PATH a container gets when its image sets none (Docker's default).
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class AsItRuns(Reader):
    """The reader and the checks PyTorch makes on each answer before binding:
    numactl looked up on PATH, and an empty answer refused."""

    def decide(self, mode, g):
        cpus = Reader.decide(self, mode, g)
        shutil.which("numactl", path=CONTAINER_PATH)  # PyTorch raises when it is None; its cost is the same
        if not cpus:
            raise RuntimeError("Must bind to a non-empty set of CPU indices")
        return cpus


class FindingReader(Reader):
    """The reader, but it finds GPU g itself, from the same files gpuaff.plan(gpu=g)
    must read to know which device that is (docs/contract.md section 2): every
    PCI device's class, the vendor of those of a display or accelerator class,
    and the NVIDIA driver's list of the process's GPUs. PyTorch gets the
    address from CUDA instead, which enumerates the GPUs through the driver."""

    GPU_VENDORS = (0x10DE, 0x1002, 0x8086)

    def __init__(self, root, allowed):
        Reader.__init__(self, root, [], allowed)

    def find(self):
        devices = sorted(os.listdir(os.path.join(self.root, "sys/bus/pci/devices")))
        driver_dir = os.path.join(self.root, "proc/driver/nvidia/gpus")
        driver = set(os.listdir(driver_dir)) if os.path.isdir(driver_dir) else None
        gpus = []
        for bdf in devices:
            cls = int(_read(self.root, "sys/bus/pci/devices/%s/class" % bdf), 16)
            if cls >> 8 not in (0x0300, 0x0302, 0x0380, 0x1200):
                continue
            vendor = int(_read(self.root, "sys/bus/pci/devices/%s/vendor" % bdf), 16)
            if vendor not in self.GPU_VENDORS or (cls >> 8 == 0x1200 and vendor != 0x1002):
                continue
            if vendor == 0x10DE and driver is not None and bdf not in driver:
                continue
            gpus.append(bdf)
        self.bdfs = gpus


def read_calls(f):
    """The read system calls f() makes (/proc/self/io syscr, less what reading
    that file costs, measured around nothing)."""
    def syscr():
        with open("/proc/self/io") as io:
            return int(re.search(r"syscr: (\d+)", io.read()).group(1))
    a = syscr()
    b = syscr()
    f()
    return syscr() - b - (b - a)


MODES = ["node", "socket", "exclusive", "core-complex"]


def side_by_side(build, rounds, fixture, other_work_mb):
    import time

    sys.path.insert(0, os.path.join(build, "python"))
    import gpuaff

    root = os.path.join(fixtures_dir(build), fixture)
    bdfs = [g["pci"] for g in gpuaff.gpus(root=root)]
    allowed = _cpulist(_read(root, "sys/devices/system/cpu/online"))
    reader = Reader(root, bdfs, allowed)
    as_it_runs = AsItRuns(root, bdfs, allowed)
    finding = FindingReader(root, allowed)
    gpus = range(len(bdfs))
    machine = gpuaff.load(root=root)

    def run_reader(mode):
        return [sorted(reader.decide(mode, g)) for g in gpus]

    def run_as_it_runs(mode):
        return [sorted(as_it_runs.decide(mode, g)) for g in gpus]

    def run_finding(mode):
        out = []
        for g in gpus:
            finding.find()  # per plan, as gpuaff.plan(gpu=g) reads them per call
            out.append(sorted(finding.decide(mode, g)))
        return out

    def run_per_call(mode):
        return [sorted(gpuaff.plan(gpu=g, root=root, policy=mode).cpus) for g in gpus]

    def run_per_call_pci(mode):
        return [sorted(gpuaff.plan(pci=bdfs[g], root=root, policy=mode).cpus) for g in gpus]

    def run_loaded(mode):
        return [sorted(machine.plan(gpu=g, policy=mode).cpus) for g in gpus]

    def run_load_and_plan(mode):
        m = gpuaff.load(root=root)
        return [sorted(m.plan(gpu=g, policy=mode).cpus) for g in gpus]

    ways = [("reader", run_reader), ("as it runs", run_as_it_runs), ("finding", run_finding),
            ("per call pci", run_per_call_pci), ("per call", run_per_call), ("loaded", run_loaded),
            ("load+8", run_load_and_plan)]
    reads = {}
    for mode in MODES:
        want = run_reader(mode)
        for name, way in ways[1:]:
            if way(mode) != want:
                sys.exit("python_bind.py: %s and the PyTorch-equivalent reader disagree on %s" % (name, mode))
        for name in ("reader", "finding", "per call pci", "per call"):
            reads[(mode, name)] = read_calls(lambda: dict(ways)[name](mode)) / len(bdfs)
    times = {(m, w): [] for m in MODES for w, _ in ways}
    for r in range(rounds):
        for i in range(len(ways)):
            name, way = ways[(i + r) % len(ways)]
            for mode in MODES:
                t0 = time.perf_counter()
                way(mode)
                times[(mode, name)].append(time.perf_counter() - t0)

    def count(reads_per_gpu):  # a mean over the GPUs: 4.5 where half read a file more
        return "%d" % reads_per_gpu if reads_per_gpu == int(reads_per_gpu) else "%.1f" % reads_per_gpu

    def ratio(r):
        x = r if r >= 1 else 1 / r
        return ("%.2fx" if x < 2 else "%.1fx") % x + (" faster" if r >= 1 else " slower")

    print()
    print("| P | %d GPUs of %s planned in one process, per mode (median of %d interleaved rounds, wall; read system "
          "calls per GPU) | the PyTorch-equivalent reader, addresses given | gpuaff.plan(pci=address) per call, the "
          "same input | ratio (target: faster) | PyTorch as it runs: the reader and its checks | ratio | "
          "gpuaff.plan(gpu=g) per call | ratio to the reader | the reader finding GPU g itself | gpuaff per call "
          "(gpu=g) against it | gpuaff loaded: 8 x Machine.plan | ratio to the reader | gpuaff.load + 8 plans | "
          "verdict, calls back to back |" % (len(bdfs), fixture, rounds))
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in MODES:
        med = {w: statistics.median(times[(mode, w)]) * 1e3 for w, _ in ways}
        pci = med["reader"] / med["per call pci"]
        checked = med["as it runs"] / med["per call pci"]
        per, loaded = med["reader"] / med["per call"], med["reader"] / med["loaded"]
        same_input = med["finding"] / med["per call"]
        verdict = "holds" if pci > 1 else "DOES NOT HOLD"
        print("| P | %s | %.3f ms (%s reads) | %.3f ms (%s reads) | %s | %.3f ms | %s | %.3f ms (%s reads) | %s "
              "| %.3f ms (%s reads) | %s | %.3f ms | %s | %.3f ms | %s |"
              % (mode, med["reader"], count(reads[(mode, "reader")]), med["per call pci"],
                 count(reads[(mode, "per call pci")]), ratio(pci), med["as it runs"], ratio(checked), med["per call"],
                 count(reads[(mode, "per call")]), ratio(per), med["finding"], count(reads[(mode, "finding")]),
                 ratio(same_input), med["loaded"], ratio(loaded), med["load+8"], verdict))

    # One call after other work, as a worker binds once, after importing its
    # framework (hundreds of MB of code and data): the caches hold what that
    # work touched, not the plan's code, data or the kernel's structures for
    # its files. Copying more than the last-level cache stands for it. GPU g
    # turns with the round.
    junk = bytearray(other_work_mb << 20)

    def other_work():
        return len(bytes(junk))

    one = [("reader", reader.decide), ("as it runs", as_it_runs.decide),
           ("per call pci", lambda mode, g: gpuaff.plan(pci=bdfs[g], root=root, policy=mode).cpus),
           ("per call", lambda mode, g: gpuaff.plan(gpu=g, root=root, policy=mode).cpus)]
    cold = {(m, w): [] for m in MODES for w, _ in one}
    for r in range(rounds):
        g = r % len(bdfs)
        for mode in MODES:
            for i in range(len(one)):
                name, way = one[(i + r) % len(one)]
                other_work()
                t0 = time.perf_counter()
                way(mode, g)
                cold[(mode, name)].append(time.perf_counter() - t0)
    print()
    print("| P | one call after other work (%d MB copied), %s, per mode (median of %d rounds, GPU g = round mod %d, "
          "wall) | the PyTorch-equivalent reader | PyTorch as it runs | gpuaff.plan(pci=address) | ratio to the "
          "reader | ratio to PyTorch as it runs | gpuaff.plan(gpu=g) | ratio to the reader | verdict, one call |"
          % (other_work_mb, fixture, rounds, len(bdfs)))
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in MODES:
        med = {w: statistics.median(cold[(mode, w)]) * 1e3 for w, _ in one}
        pci = med["reader"] / med["per call pci"]
        checked = med["as it runs"] / med["per call pci"]
        per = med["reader"] / med["per call"]
        print("| P | %s | %.3f ms | %.3f ms | %.3f ms | %s | %s | %.3f ms | %s | %s |"
              % (mode, med["reader"], med["as it runs"], med["per call pci"], ratio(pci), ratio(checked),
                 med["per call"], ratio(per), "holds" if pci > 1 else "DOES NOT HOLD"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    usage = "usage: python_bind.py BUILD [--rounds=N] [--other-work-mb=N]"

    def positive(option, text):
        if not text.isdigit() or int(text) < 1:
            sys.exit("python_bind.py: %s=%s is not a positive whole number (%s)" % (option, text, usage))
        return int(text)

    rounds = 15
    other_work_mb = 64
    for a in sys.argv[1:]:
        if a.startswith("--rounds="):
            rounds = positive("--rounds", a.split("=", 1)[1])
        elif a.startswith("--other-work-mb="):
            other_work_mb = positive("--other-work-mb", a.split("=", 1)[1])
        elif a.startswith("--"):
            sys.exit("python_bind.py: unknown option %s (%s)" % (a, usage))
    if len(args) != 1:
        sys.exit(usage)
    build = args[0]
    root = os.path.join(fixtures_dir(build), "dgx-h100")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    samples = {p: [] for p in POLICIES}
    for r in range(rounds):
        order = POLICIES[r % len(POLICIES):] + POLICIES[:r % len(POLICIES)]
        for p in order:
            out = subprocess.run([sys.executable, "-c", CHILD, p, root], capture_output=True, text=True, env=env)
            if out.returncode != 0:
                sys.exit("python_bind.py: the child failed for %s: %s" % (p, out.stderr.strip()))
            samples[p].append(json.loads(out.stdout))
    print("| P | `import gpuaff` + plan of GPU 7 on dgx-h100 + bind every thread, per policy (median of %d fresh "
          "interpreters, CPU time) | import | plan | apply | total | PyTorch on the same root (quoted, not measured) |"
          % rounds)
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for p in POLICIES:
        med = {k: statistics.median(s[k] for s in samples[p]) * 1e3 for k in ("import", "plan", "apply")}
        total = statistics.median((s["import"] + s["plan"] + s["apply"]) * 1e3 for s in samples[p])
        quoted = "%.2f ms" % QUOTED_PYTORCH_MS[p] if p in QUOTED_PYTORCH_MS else "-"
        print("| P | %s (GPU 7: %s) | %.2f ms | %.2f ms | %.3f ms | %.2f ms | %s |"
              % (p, samples[p][0]["cpus"], med["import"], med["plan"], med["apply"], total, quoted))
    for fixture in ("dgx-h100", "big-1152"):
        side_by_side(build, max(rounds, 21), fixture, other_work_mb)


if __name__ == "__main__":
    main()
