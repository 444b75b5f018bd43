// gpuaff: bind GPU processes to the right CPUs and NUMA memory.
// This file only wires the command line (CLI11) to the commands (bind.cpp,
// topo.cpp, exec.cpp, record.cpp); the word lists, rank variables, policy
// names and exit codes come from the tables they are defined in. The CLI
// contract is docs/cli.md and docs/contract.md section 3.

#include <array>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/version.hpp"
#include "output.hpp"
#include "policies.hpp"

namespace {

using namespace gpuaff::cli;
using gpuaff::Choice;

/// A decimal integer option: digits only, at least `least`, at most INT_MAX
/// (the value is an int; a larger one is out of range, said with the limit).
/// CLI11's NonNegativeNumber prints DBL_MAX in its message.
CLI::Validator integer_at_least(int least) {
  return CLI::Validator(
      [least](std::string& s) -> std::string {
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return std::string(least > 0 ? "expected a positive" : "expected a non-negative") + " integer, got '" + s + "'";
        std::size_t digits = s.find_first_not_of('0');
        std::string_view v = digits == std::string::npos ? std::string_view("0") : std::string_view(s).substr(digits);
        std::string max = std::to_string(std::numeric_limits<int>::max());
        if (v.size() > max.size() || (v.size() == max.size() && v > max))
          return "'" + s + "' is out of range: at most " + max;
        if (std::stoi(std::string(v)) < least)
          return "'" + s + "' is not allowed: at least " + std::to_string(least) +
                 " (leave the option out for its default)";
        return {};
      },
      "");
}
const CLI::Validator non_negative = integer_at_least(0);
const CLI::Validator positive = integer_at_least(1);

/// A path option given as '' is a mistake (an unset shell variable), never a
/// request for the default: `--root ''` must not read the live machine.
const CLI::Validator non_empty(
    [](std::string& s) -> std::string {
      return s.empty() ? std::string("an empty value is not a path; leave the option out for its default") : std::string();
    },
    "");

/// An option that takes one of the words of `choices` (gpuaff/launch/choices.hpp)
/// into `target`. The words are checked by CLI11 and shown once, as the type name.
template <class E, std::size_t N>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, E& target, const std::array<Choice<E>, N>& choices,
                        const std::string& help) {
  std::vector<std::string> words;
  for (const auto& c : choices) words.emplace_back(c.name);
  return app
      .add_option_function<std::string>(
          flag, [&target, &choices, flag](const std::string& s) { target = gpuaff::parse_choice(flag, s, choices).value(); },
          help)
      ->check(CLI::IsMember(words).description(""))
      ->type_name(gpuaff::choice_names(choices, "|"))
      ->default_str(std::string(gpuaff::name_of(choices, target)));
}

void add_source_options(CLI::App& app, SourceOptions& o) {
  auto* root = app.add_option("--root", o.root,
                              "Read the machine from a recorded root (a directory laid out like /, see "
                              "'gpuaff record'); default: this machine")
                   ->type_name("DIR")
                   ->check(non_empty);
  auto* json = app.add_option("--topology", o.topology_file,
                              "Read the machine from a JSON file written by 'gpuaff topo --format json'")
                   ->type_name("FILE.json")
                   ->check(non_empty);
  root->excludes(json);
  json->excludes(root);
  app.add_option("--source", o.source,
                 "Which reader reads --root or this machine: sysfs (gpuaff's own) or hwloc (see docs/hwloc.md)")
      ->type_name("sysfs|hwloc")
      ->capture_default_str();
  auto* xml = app.add_option("--hwloc-xml", o.hwloc_xml, "Read the machine from an hwloc XML file (lstopo --of xml)")
                  ->type_name("FILE.xml")
                  ->check(non_empty);
  xml->excludes(root)->excludes(json);
}

void add_policy_options(CLI::App& app, PlanOptions& o, const std::string& policy_help) {
  app.add_option("--policy", o.policy, policy_help)->type_name("P")->capture_default_str();
  add_choice(app, "--scope", o.nvidia.scope, gpuaff::scope_choices, "NVIDIA modes: the GPU's node or its whole socket");
  add_choice(app, "--smt", o.nvidia.smt, gpuaff::smt_choices,
             "NVIDIA modes: every hardware thread of a chosen core, or one");
  auto* balanced = app.add_flag_callback(
      "--balanced", [&o] { o.nvidia.balanced = true; }, "NVIDIA modes: every GPU gets the same number of cores (default)");
  auto* unbalanced = app.add_flag_callback(
      "--no-balanced", [&o] { o.nvidia.balanced = false; }, "NVIDIA modes: each node's GPUs split that node's cores");
  balanced->excludes(unbalanced);
  unbalanced->excludes(balanced);
  app.add_option("--min-cores", o.nvidia.min_cores, "NVIDIA modes: fail when a GPU gets fewer physical cores")
      ->type_name("N")
      ->check(non_negative);
  app.add_option("--max-cores", o.nvidia.max_cores, "NVIDIA modes: keep at most N physical cores per GPU")
      ->type_name("N")
      ->check(positive);
  app.add_option("--nproc", o.nproc, "only GPUs 0..N-1 take part (the job's processes on this machine); default: all")
      ->type_name("N")
      ->check(positive);
  app.add_option_function<std::string>(
         "--visible-devices", [&o](const std::string& v) { o.source.visible.list = v; },
         "GPUs the job sees, like CUDA_VISIBLE_DEVICES (indices or GPU-/MIG- UUID prefixes); overrides "
         "CUDA_/HIP_/ROCR_VISIBLE_DEVICES")
      ->type_name("LIST");
  app.add_option("--unknown-node", o.unknown_node,
                 "GPUs whose PCI numa_node is -1 (VMs): error, node0 (as PyTorch does), or a node id N")
      ->type_name("error|node0|N")
      ->capture_default_str();
}

/// --gpu N; with `all_allowed` (bind) also --gpu all: every GPU of the process.
void add_target_options(CLI::App& app, PlanOptions& o, bool all_allowed = false) {
  CLI::Option* gpu = nullptr;
  if (all_allowed) {
    gpu = app.add_option_function<std::string>(
                 "--gpu",
                 [&o](const std::string& s) {
                   if (s == "all") o.all_gpus = true;
                   else o.gpu = std::stoi(s);  // checked below: at most 9 digits
                 },
                 "the GPU: its index among the visible GPUs, or all (one result per GPU)")
              ->type_name("N|all")
              ->check(CLI::Validator(
                  [](std::string& s) -> std::string {
                    return s == "all" ? std::string() : non_negative(s);
                  },
                  ""));
  } else {
    gpu = app.add_option("--gpu", o.gpu, "the GPU: its index among the visible GPUs")->type_name("N")->check(non_negative);
  }
  auto* pci = app.add_option("--pci", o.pci, "the device by PCI address (any device, a NIC too)")->type_name("BDF");
  gpu->excludes(pci);
  pci->excludes(gpu);
}

/// --baseline, --unreachable and --share, for bind and exec.
void add_launch_options(CLI::App& app, PlanOptions& o) {
  add_choice(app, "--baseline", o.baseline, gpuaff::baseline_choices,
             "the CPUs bindings are drawn from: affinity (this process's allowed set, as a launcher or taskset "
             "left it) or cgroup (its cgroup cpuset, ignoring a narrower mask set by mpirun or srun)");
  add_choice(app, "--unreachable", o.unreachable, gpuaff::unreachable_choices,
             "when no allowed CPU is on the GPU's node (a pod on the other socket): error, or nearest (the "
             "allowed CPUs of the closest node(s) by NUMA distance)");
  add_choice(app, "--share", o.share, gpuaff::share_choices,
             "exclusive, core-complex, single-unique, unique-interleaved, unique-contiguous: split the node among "
             "the GPUs that take part (visible), or among every GPU of the host (machine: processes that each see "
             "one GPU get disjoint slices)");
}

/// The NVIDIA-mode flags given on `app`'s command line, for check_nvidia_options_apply.
std::vector<std::string> nvidia_flags_given(const CLI::App& app) {
  std::vector<std::string> given;
  for (const char* flag : {"--scope", "--smt", "--balanced", "--no-balanced", "--min-cores", "--max-cores"})
    if (app.count(flag) > 0) given.emplace_back(flag);
  return given;
}

/// "gpuaff: <what>; see 'gpuaff <command> --help'" for a parse error.
int usage_error(const CLI::App& app, const CLI::Error& e) {
  std::string where = "gpuaff";
  for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
  std::string line = "gpuaff: " + one_line(e.what()) + "; see '" + where + " --help'\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return exit_usage;
}

/// "bind, topo, exec or record": the commands, for messages.
std::string command_names(const CLI::App& app) {
  std::vector<const CLI::App*> subs = app.get_subcommands({});
  std::string out;
  for (std::size_t i = 0; i < subs.size(); ++i)
    out += (i == 0 ? "" : i + 1 == subs.size() ? " or " : ", ") + subs[i]->get_name();
  return out;
}

void add_mem_nodes_option(CLI::App& app, PlanOptions& o) {
  add_choice(app, "--mem-nodes", o.mem_nodes, gpuaff::mem_nodes_choices,
             "the nodes memory is bound to: cpu (the GPU's CPU node), gpu (the GPU's own memory nodes: GH200/GB200 "
             "coherent mode), socket (every CPU node of the GPU's socket)");
}

/// Registers `gpuaff bind` and its options into `args`.
CLI::App* add_bind_command(CLI::App& app, BindArgs& args) {
  const std::string exit_codes_help = gpuaff::cli::exit_codes_help();
  const std::string policies_help = gpuaff::cli::policies_help();
  auto* bind = app.add_subcommand("bind", "Print the CPUs (and memory nodes) a GPU's process should use");
  add_source_options(*bind, args.plan.source);
  add_target_options(*bind, args.plan, true);
  add_policy_options(*bind, args.plan, "binding policy: " + policies_help);
  add_launch_options(*bind, args.plan);
  add_choice(*bind, "--membind", args.membind, gpuaff::membind_choices,
             "the memory policy to show: none (default), local (strict: only the GPU's node(s); 'bind' is a "
             "synonym), preferred, interleave; with --format numactl it adds --membind=, --preferred= or "
             "--interleave=");
  add_choice(*bind, "--format", args.format, gpuaff::bind_format_choices,
             "cpulist: one line, e.g. 0-3,8; mask: hex like Cpus_allowed; numactl: --physcpubind=... (and a "
             "memory option with --membind); json: an object with gpu, bdf, node, policy, cpus, mask, "
             "memory_nodes, recommended_threads, env. With --gpu all: json prints an array, the others one line per "
             "GPU, 'N <binding>'");
  add_mem_nodes_option(*bind, args.plan);
  bind->add_flag("--nic-env", args.plan.nic_env,
                 "choose the GPU's RDMA NIC (nearest PCIe path, shared fairly) and show NCCL_IB_HCA, "
                 "UCX_NET_DEVICES, NVSHMEM_HCA_LIST under \"env\" (with --format json)");
  bind->footer(std::string("Examples:\n"
                           "  gpuaff bind --gpu 0                              CPUs of GPU 0's NUMA node\n"
                           "  gpuaff bind --gpu 3 --policy exclusive            GPU 3's share of its node's cores\n"
                           "  gpuaff bind --pci 0000:17:00.0 --format numactl   numactl's --physcpubind=...\n"
                           "  gpuaff bind --gpu all                             every GPU, one line each\n"
                           "  gpuaff bind --gpu 1 --policy unique-contiguous --smt one --nproc 4\n"
                           "  gpuaff bind --root fixtures/dgx-h100 --gpu 7 --format json\n"
                           "  gpuaff bind --gpu 2 --nic-env --format json        the NIC beside GPU 2, under \"env\"\n") +
               policies_table() + exit_codes_help);
  return bind;
}

/// Registers `gpuaff topo` and its options into `args`.
CLI::App* add_topo_command(CLI::App& app, TopoArgs& args) {
  const std::string exit_codes_help = gpuaff::cli::exit_codes_help();
  const std::string policies_help = gpuaff::cli::policies_help();
  auto* topo = app.add_subcommand("topo", "Describe the machine: CPUs, NUMA nodes, GPUs, and every policy's binding");
  add_source_options(*topo, args.plan.source);
  add_policy_options(*topo, args.plan,
                     "the policy drawn in the core picture (default exclusive: it shows which cores each GPU owns; "
                     "node would mark shared cores '+'): " + policies_help);
  add_choice(*topo, "--format", args.format, gpuaff::topo_format_choices,
             "text: a report for people and bug reports; json: one object");
  add_choice(*topo, "--color", args.color, gpuaff::color_choices,
             "colour the picture: auto (on a terminal, unless NO_COLOR is set), always, never");
  topo->footer(std::string("Examples:\n"
                           "  gpuaff topo                                  this machine\n"
                           "  gpuaff topo --root fixtures/p4d.24xlarge      a recorded machine\n"
                           "  gpuaff topo --policy unique-contiguous --nproc 4\n"
                           "  gpuaff topo --format json > machine.json      then: gpuaff bind --topology machine.json ...\n") +
               exit_codes_help);
  return topo;
}

/// Registers `gpuaff exec` and its options into `args`.
CLI::App* add_exec_command(CLI::App& app, ExecArgs& args) {
  const std::string exit_codes_help = gpuaff::cli::exit_codes_help();
  const std::string policies_help = gpuaff::cli::policies_help();
  auto* exec = app.add_subcommand("exec", "Bind this process (every thread, and memory if asked), then run COMMAND");
  add_source_options(*exec, args.plan.source);
  add_target_options(*exec, args.plan);
  auto* local_rank = exec->add_flag("--local-rank", args.plan.local_rank,
                                    "the GPU index is the first set of " +
                                        gpuaff::variable_list(gpuaff::local_rank_variables));
  local_rank->excludes("--gpu")->excludes("--pci");
  exec->get_option("--gpu")->excludes(local_rank);
  exec->get_option("--pci")->excludes(local_rank);
  add_policy_options(*exec, args.plan, "binding policy: " + policies_help);
  add_launch_options(*exec, args.plan);
  add_choice(*exec, "--membind", args.membind, gpuaff::membind_choices,
             "memory policy: none (kernel default: first touch on the node of the CPU, so already near the "
             "GPU), local (strict: only the GPU's node(s), like numactl --membind; 'bind' is a synonym), "
             "preferred (the GPU's node first), interleave (over the GPU's nodes)");
  add_choice(*exec, "--fallback", args.fallback, gpuaff::fallback_choices,
             "when the machine refuses the binding: error (exit with the error), or unbound (one warning line, "
             "then run COMMAND anyway; a refused memory policy keeps the CPU binding). Usage mistakes "
             "always exit 2");
  exec->add_flag("--dry-run", args.dry_run,
                 "print what would be done (bind --format json plus \"command\") and exit; bind and run nothing");
  exec->add_flag("--omp-threads", args.omp_threads,
                 "set OMP_NUM_THREADS to the recommended thread count of the binding");
  add_mem_nodes_option(*exec, args.plan);
  exec->add_flag("--nic-env", args.plan.nic_env,
                 "export the GPU's RDMA NIC (nearest PCIe path, shared fairly) as NCCL_IB_HCA, UCX_NET_DEVICES, "
                 "NVSHMEM_HCA_LIST");
  exec->add_flag("--verbose", args.verbose, "say on stderr what was bound");
  exec->add_option("command", args.command, "the command and its arguments, after --")->type_name("COMMAND...");
  exec->footer(std::string("Examples:\n"
                           "  gpuaff exec --gpu 0 -- ./trainer --epochs 3\n"
                           "  torchrun --nproc-per-node 8 --no-python gpuaff exec --local-rank --policy exclusive -- "
                           "python train.py\n"
                           "  srun --ntasks-per-node 8 gpuaff exec --local-rank -- ./trainer\n"
                           "  mpirun -np 8 --bind-to none gpuaff exec --local-rank --policy core-complex -- ./trainer\n"
                           "  mpirun -np 8 gpuaff exec --local-rank --baseline cgroup -- ./trainer\n"
                           "  gpuaff exec --gpu 0 --dry-run -- ./trainer      show the plan, run nothing\n"
                           "COMMAND is run with execvp (PATH is searched; no shell, no temporary files).\n") +
               exit_codes_help);
  return exec;
}

/// Registers `gpuaff record` and its options into `args`.
CLI::App* add_record_command(CLI::App& app, RecordArgs& args) {
  const std::string exit_codes_help = gpuaff::cli::exit_codes_help();
  auto* record =
      app.add_subcommand("record", "Copy the files gpuaff reads into DIR (or FILE.tar), to replay with --root DIR");
  record->add_option("--out", args.out, "the directory to write (created), or FILE.tar: one tar file")
      ->type_name("DIR|FILE.tar")
      ->required()
      ->check(non_empty);
  record->add_option("--root", args.root, "the root to record (default: this machine)")
      ->type_name("DIR")
      ->check(non_empty)
      ->capture_default_str();
  record->add_option("--pci", args.pci, "also record these non-GPU devices (e.g. the NIC used with --pci)")
      ->type_name("BDF");
  record->add_flag("--force", args.force, "write into DIR even when it is not empty, or overwrite FILE.tar");
  record->footer(std::string("Examples:\n"
                             "  gpuaff record --out /tmp/node17 && tar czf node17.tgz -C /tmp node17\n"
                             "  gpuaff topo --root /tmp/node17                 replay it anywhere\n"
                             "  gpuaff record --out node17.tar                 one file for a bug report;\n"
                             "  mkdir r && tar -xf node17.tar -C r && gpuaff topo --root r   replays it\n") +
                 exit_codes_help);
  return record;
}

/// Registers `gpuaff doctor` and its options into `args`.
CLI::App* add_doctor_command(CLI::App& app, DoctorArgs& args) {
  const std::string exit_codes_help = gpuaff::cli::exit_codes_help();
  const std::string policies_help = gpuaff::cli::policies_help();
  auto* doctor = app.add_subcommand("doctor", "Check a running process against its plan: threads, memory, environment");
  doctor->add_option("--pid", args.pid, "the process to check")->type_name("PID")->required();
  add_source_options(*doctor, args.plan.source);
  doctor->add_option("--gpu", args.plan.gpu, "its GPU (default: its own local rank variable)")->type_name("N");
  add_policy_options(*doctor, args.plan, "the policy it was bound with: " + policies_help);
  add_mem_nodes_option(*doctor, args.plan);
  doctor->add_option("--min-local", args.min_local,
                     "the least fraction of resident pages on the GPU's memory node(s) that counts as healthy")
      ->type_name("FRACTION")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  add_choice(*doctor, "--format", args.format, gpuaff::topo_format_choices, "text: for people; json: one object");
  doctor->footer(std::string("Examples:\n"
                             "  gpuaff doctor --pid 4242                      its GPU from its LOCAL_RANK and CUDA_VISIBLE_DEVICES\n"
                             "  gpuaff doctor --pid 4242 --gpu 3 --policy exclusive --format json\n") +
                 exit_codes_help);
  return doctor;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"gpuaff binds GPU processes to the CPUs and NUMA memory closest to their GPU.", "gpuaff"};
  app.set_version_flag("--version", std::string("gpuaff ") + gpuaff::version_string);
  app.require_subcommand(1);
  app.footer(std::string("Examples:\n"
                         "  gpuaff topo                               this machine, GPUs, nodes, bindings\n"
                         "  gpuaff bind --gpu 0 --policy exclusive     CPUs for GPU 0, one line\n"
                         "  torchrun --nproc-per-node 8 --no-python gpuaff exec --local-rank -- python train.py\n"
                         "  gpuaff record --out /tmp/machine           record this machine for a bug report\n"
                         "Run 'gpuaff <command> --help' for each command's options.\n") +
             gpuaff::cli::exit_codes_help());

  BindArgs bind_args;
  TopoArgs topo_args;
  ExecArgs exec_args;
  RecordArgs record_args;
  DoctorArgs doctor_args;
  CLI::App* bind = add_bind_command(app, bind_args);
  CLI::App* topo = add_topo_command(app, topo_args);
  CLI::App* exec = add_exec_command(app, exec_args);
  CLI::App* record = add_record_command(app, record_args);
  CLI::App* doctor = add_doctor_command(app, doctor_args);

  auto is_command = [&](const std::string& name) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(name)) return true;
    return false;
  };
  if (argc == 1) {
    std::string line = "gpuaff: a command is needed: " + command_names(app) + "; see 'gpuaff --help'\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return exit_usage;
  }
  if (argv[1][0] != '-' && !is_command(argv[1])) {
    std::string line = "gpuaff: " + one_line(std::string("unknown command '") + argv[1] + "'; use " +
                                             command_names(app) + " (see 'gpuaff --help')") + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return exit_usage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: printed on stdout, exit 0
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return usage_error(app, e);
  }

  bind_args.plan.nvidia_flags = nvidia_flags_given(*bind);
  exec_args.plan.nvidia_flags = nvidia_flags_given(*exec);
  bind_args.membind_given = bind->count("--membind") > 0;
  if (bind->parsed()) {
    if (!bind_args.plan.gpu && !bind_args.plan.all_gpus && bind_args.plan.pci.empty()) {
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument,
                                             "bind needs --gpu N, --gpu all or --pci BDF; see 'gpuaff bind --help'"));
    }
    return run_bind(bind_args);
  }
  if (topo->parsed()) return run_topo(topo_args);
  if (exec->parsed()) {
    const auto& p = exec_args.plan;
    if (!p.gpu && p.pci.empty() && !p.local_rank) {
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument,
                                             "exec needs --gpu N, --pci BDF or --local-rank; see 'gpuaff exec --help'"));
    }
    return run_exec(exec_args);
  }
  if (record->parsed()) return run_record(record_args);
  if (doctor->parsed()) return run_doctor(doctor_args);
  return exit_usage;
} catch (const std::exception& e) {
  std::string line = "gpuaff: internal error: " + one_line(e.what()) + "; please report this with 'gpuaff topo' output\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return exit_internal;
}
