"""Row P (benchmarks/README.md): from `import gpuaff` to bound, in Python.

    python3 benchmarks/python_bind.py BUILD [--rounds=N]

BUILD is a build directory holding the module (BUILD/python) and the fixtures
(BUILD/fixtures). Each sample is a fresh interpreter that times, with its own
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
"""
import json
import os
import statistics
import subprocess
import sys

POLICIES = ["node", "socket", "exclusive", "core-complex", "unique-contiguous"]
QUOTED_PYTORCH_MS = {"node": 0.32, "socket": 1.05, "exclusive": 11.6, "core-complex": 96.5}

CHILD = r"""
import json, os, sys, threading, time
policy, root = sys.argv[1], sys.argv[2]
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(2)]
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


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = 15
    for a in sys.argv[1:]:
        if a.startswith("--rounds="):
            rounds = int(a.split("=", 1)[1])
    if len(args) != 1:
        sys.exit("usage: python_bind.py BUILD [--rounds=N]")
    build = args[0]
    root = os.path.join(build, "fixtures", "dgx-h100")
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


if __name__ == "__main__":
    main()
