// SPDX-License-Identifier: Apache-2.0
#pragma once
// The options only the command line has (how a result is printed, which
// process doctor reads, where record writes), in the same row type as the
// library's launch options (gpuaff/launch/options.hpp): main.cpp registers
// both tables, --help shows their help lines, and docs/cli.md's option
// tables are checked against both by tests/cli/options_doc_test.

#include <array>

#include "gpuaff/launch/options.hpp"

namespace gpuaff::cli {

/// The commands: main.cpp creates them from this table, the man page and the
/// shell completion (docgen.cpp) list them from it.
struct CommandInfo {
  std::string_view name;
  unsigned bit;  ///< the OptionCommand bit of the options it takes
  std::string_view summary;
};
inline constexpr auto commands = std::to_array<CommandInfo>({
    {"bind", for_bind, "Print the CPUs (and memory nodes) a GPU's process should use"},
    {"topo", for_topo, "Describe the machine: CPUs, NUMA nodes, GPUs, and every policy's binding"},
    {"exec", for_exec, "Bind this process (every thread, and memory if asked), then run COMMAND"},
    {"record", for_record, "Copy the files gpuaff reads into DIR (or FILE.tar), to replay with --root DIR"},
    {"doctor", for_doctor, "Check a running process against its plan: threads, memory, environment"},
    {"probe", for_probe, "Measure this machine: memory bandwidth and latency between nodes, GPU copies from each node"},
});

inline constexpr auto cli_options = std::to_array<OptionInfo>({
    {"format", "--format", "cpulist|mask|numactl|json|env", OptionType::choice, for_bind, "cpulist",
     "cpulist: one line, e.g. 0-3,8; mask: hex like Cpus_allowed; numactl: --physcpubind=... (and a memory option "
     "with --membind); json: an object with gpu, bdf, node, policy, cpus, mask, memory_nodes, recommended_threads, "
     "env (and nic_set, nic_path with --nic-env); env: NAME=value lines (quoted where a shell needs it) of --nic-env's variables, for eval. With "
     "--gpu all: json prints an array, the others one line per GPU, 'N <binding>'"},
    {"format", "--format", "text|json|dra", OptionType::choice, for_topo, "text",
     "text: a report for people and bug reports; json: one object; dra: per GPU, the attributes a Kubernetes DRA "
     "driver or node labeller publishes (resource.kubernetes.io/numaNode, pciBusID) and gpuaff's own: CPU node, "
     "the socket's CPU nodes, memory nodes, NIC set"},
    {"format", "--format", "text|json|prometheus", OptionType::choice, for_doctor, "text",
     "text: a report; json: one object (with --all: the node's processes and its GPUs' NIC sets, for --merge); "
     "prometheus: the text exposition format for node_exporter's textfile collector (gpuaff_* metrics)"},
    {"all", "--all", "", OptionType::flag, for_doctor, "",
     "check every process of this machine that carries a GPUAFF_PLAN, each against its own plan (exit 7 when one "
     "is off)"},
    {"merge", "--merge", "FILE", OptionType::path, for_doctor, "",
     "read the --all --format json reports of several nodes (may be repeated) and print one table by node and "
     "rank, with whether each GPU index uses the same NIC set (rail) on every node"},
    {"textfile", "--textfile", "PATH", OptionType::path, for_doctor, "",
     "with --format prometheus: write PATH atomically (a file beside it, then renamed over it) for node_exporter's "
     "textfile collector, whatever the verdict; the exit code still says it (7 when a process is off)"},
    {"watch", "--watch", "", OptionType::flag, for_doctor, "",
     "keep checking every process of this machine that carries a GPUAFF_PLAN (as --all), each --interval, until "
     "SIGINT or SIGTERM (exit 0), printing only what changed: a process started or gone, a thread moved off its "
     "plan or role or new outside it (its name, tid and the runtime that likely moved it), pages off the planned "
     "nodes; --format json: one object per line and event; --format prometheus --textfile PATH: PATH rewritten "
     "each interval"},
    {"count", "--count", "N", OptionType::positive, for_doctor, "",
     "with --watch: stop after N checks (exit 0), for scripts and tests; default: until stopped"},
    {"rebind", "--rebind", "", OptionType::flag, for_doctor, "",
     "with --watch: put back each thread found off its plan or role (sched_setaffinity: the CPUs it had while it "
     "was inside, else its role's or the plan's), saying which it moved and which it could not, and why; needs "
     "the processes' user or CAP_SYS_NICE"},
    {"nics", "--nics", "", OptionType::flag, for_doctor, "",
     "sample every RDMA NIC's byte counters twice, --interval apart, and check the traffic against the NIC sets of "
     "the node's planned processes (their GPUAFF_PLAN, UCX_NET_DEVICES, NVSHMEM_HCA_LIST, NCCL_IB_HCA): an idle NIC "
     "of a rank's set, traffic outside every set, ranks piled on one NIC (exit 7); with --watch: sampled each "
     "interval, each problem an event when it appears and when it clears"},
    {"counters", "--counters", "FILE", OptionType::path, for_doctor, "",
     "with --nics: read the samples from FILE, a recorded counter sequence (docs/doctor.md), instead of this "
     "machine's counters; the first and last samples are compared, nothing waits"},
    {"irqs", "--irqs", "", OptionType::flag, for_topo | for_doctor, "",
     "show the MSI vectors of each GPU (and its NIC set): where the kernel routes them (proc/irq/N/"
     "smp_affinity_list, effective_affinity_list), whether they land on the main or comm role (--roles, or the "
     "process's plan), and the commands that would steer them off (printed, never run)"},
    {"steer_irqs", "--steer-irqs", "", OptionType::flag, for_doctor, "",
     "with --pid and --irqs: apply the steering printed (writes /proc/irq/N/smp_affinity_list; needs root)"},
    {"job", "--job", "ID", OptionType::text, for_doctor, "",
     "with --all, --watch or --nics: only the processes of this scheduler job, those whose SLURM_JOB_ID, PBS_JOBID "
     "or LSB_JOBID is ID (a node shared by several jobs); the others are counted in a note"},
    {"interval", "--interval", "S", OptionType::text, for_doctor, "10",
     "with --watch: seconds between two checks; with --nics: between the two samples of the NICs' counters; a "
     "decimal number from 0.1 to 86400"},
    {"color", "--color", "auto|always|never", OptionType::choice, for_topo, "auto",
     "colour the picture: auto (on a terminal, unless NO_COLOR is set), always, never"},
    {"dry_run", "--dry-run", "", OptionType::flag, for_exec, "",
     "print what would be done (bind --format json plus \"command\") and exit; bind and run nothing"},
    {"verbose", "--verbose", "", OptionType::flag, for_exec, "", "say on stderr what was bound"},
    {"pid", "--pid", "PID", OptionType::positive, for_doctor, "",
     "the process to check (or --all, or --merge)"},
    {"min_local", "--min-local", "FRACTION", OptionType::fraction, for_doctor, "0.5",
     "the least fraction of resident pages on the GPU's memory node(s) that counts as healthy"},
    {"out", "--out", "DIR|FILE.tar", OptionType::path, for_record, "",
     "the directory to write (created), or FILE.tar: one tar file (required)"},
    {"root", "--root", "DIR", OptionType::path, for_record, "/", "the root to record; / is this machine"},
    {"pci", "--pci", "BDF", OptionType::text, for_record, "",
     "also record these non-GPU devices (e.g. the NIC used with --pci); may be repeated"},
    {"force", "--force", "", OptionType::flag, for_record, "",
     "write into DIR even when it is not empty, or overwrite FILE.tar"},
    {"format", "--format", "text|json", OptionType::choice, for_probe, "text",
     "text: tables, a picture and the contradictions found; json: one object (nodes, memory, gpus, contradictions)"},
    {"size", "--size", "MIB", OptionType::positive, for_probe, "256",
     "the buffer measured, in MiB (bound to each memory node in turn; also the size of each GPU copy)"},
    {"seconds", "--seconds", "S", OptionType::text, for_probe, "0.5",
     "how long each bandwidth measurement runs (latency: half of it); a decimal number above 0, at most 60"},
    {"threads", "--threads", "N", OptionType::positive, for_probe, "8",
     "reading threads per CPU node (at most its allowed CPUs), each pinned to one CPU"},
    {"probe_gpu", "--gpu", "N[,N...]", OptionType::text, for_probe, "",
     "also measure host-to-device and device-to-host copies of GPU N (the runtime's numbering) from a buffer on "
     "each memory node, in a child process that loads libcuda.so.1 or libamdhip64.so (GPUAFF_GPU_RUNTIME=PATH "
     "names another); exit 8 when there is no runtime or GPU"},
    {"gpu_nodes", "--gpu-nodes", "FILE", OptionType::path, for_probe, "",
     "with --gpu: write each GPU's measured best node to FILE ('BDF NODE' lines), for bind/exec --gpu-nodes FILE "
     "on machines whose firmware reports numa_node -1"},
});

/// The default `command` shows for `o` (--help, the man page): topo draws the
/// exclusive policy; every other default is the row's.
constexpr std::string_view option_default(const OptionInfo& o, unsigned command) {
  if (command == for_topo && o.key == "policy") return "exclusive";
  return o.default_text;
}

/// The value `command`'s --help and usage errors show for `o`: bind's --gpu
/// also takes "all"; every other is the row's.
constexpr std::string_view option_value_name(const OptionInfo& o, unsigned command) {
  if (command == for_bind && o.key == "gpu") return "N[,N...]|all";
  return o.value_name;
}

/// `message` as the command line spells options: `--nproc 4` for `nproc=4`.
inline std::string cli_spelling(std::string_view message) {
  return spell_options(message, Spelling::command_line,
                       {std::span<const OptionInfo>(launch_options), std::span<const OptionInfo>(cli_options)});
}

}  // namespace gpuaff::cli
