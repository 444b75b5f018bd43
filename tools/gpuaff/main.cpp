// gpuaff: bind GPU processes to the right CPUs and NUMA memory.
// This file only wires the command line (CLI11) to the commands (bind.cpp,
// topo.cpp, exec.cpp, record.cpp); the word lists, rank variables, policy
// names and exit codes come from the tables they are defined in. The CLI
// contract is docs/cli.md and docs/contract.md section 3.

#include <array>
#include <cstdio>
#include <exception>
#include <string>
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

/// Accepts a non-negative decimal integer (CLI11's NonNegativeNumber prints DBL_MAX in its message).
const CLI::Validator non_negative(
    [](std::string& s) -> std::string {
      bool ok = !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
      return ok ? std::string() : "expected a non-negative integer, got '" + s + "'";
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
                   ->type_name("DIR");
  auto* json = app.add_option("--topology", o.topology_file,
                              "Read the machine from a JSON file written by 'gpuaff topo --format json'")
                   ->type_name("FILE.json");
  root->excludes(json);
  json->excludes(root);
  app.add_option("--source", o.source,
                 "Which reader reads --root or this machine: sysfs (gpuaff's own) or hwloc (see docs/hwloc.md)")
      ->type_name("sysfs|hwloc")
      ->capture_default_str();
  auto* xml = app.add_option("--hwloc-xml", o.hwloc_xml, "Read the machine from an hwloc XML file (lstopo --of xml)")
                  ->type_name("FILE.xml");
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
      ->check(non_negative);
  app.add_option("--nproc", o.nproc, "only GPUs 0..N-1 take part (the job's processes on this machine); default: all")
      ->type_name("N")
      ->check(non_negative);
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

void add_target_options(CLI::App& app, PlanOptions& o) {
  auto* gpu = app.add_option("--gpu", o.gpu, "the GPU: its index among the visible GPUs")
                  ->type_name("N")
                  ->check(non_negative);
  auto* pci = app.add_option("--pci", o.pci, "the device by PCI address (any device, a NIC too)")->type_name("BDF");
  gpu->excludes(pci);
  pci->excludes(gpu);
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
  add_target_options(*bind, args.plan);
  add_policy_options(*bind, args.plan, "binding policy: " + policies_help);
  add_choice(*bind, "--format", args.format, gpuaff::bind_format_choices,
             "cpulist: one line, e.g. 0-3,8; mask: hex like Cpus_allowed; numactl: --physcpubind=... "
             "--membind=...; json: an object with gpu, bdf, node, policy, cpus, mask, memory_nodes, "
             "recommended_threads, env");
  add_mem_nodes_option(*bind, args.plan);
  bind->add_flag("--nic-env", args.plan.nic_env,
                 "choose the GPU's RDMA NIC (nearest PCIe path, shared fairly) and show NCCL_IB_HCA, "
                 "UCX_NET_DEVICES, NVSHMEM_HCA_LIST under \"env\" (with --format json)");
  bind->footer(std::string("Examples:\n"
                           "  gpuaff bind --gpu 0                              CPUs of GPU 0's NUMA node\n"
                           "  gpuaff bind --gpu 3 --policy exclusive            GPU 3's share of its node's cores\n"
                           "  gpuaff bind --pci 0000:17:00.0 --format numactl   for: numactl $(gpuaff bind ...) cmd\n"
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
  add_choice(*exec, "--membind", args.membind, gpuaff::membind_choices,
             "memory policy: none (kernel default: first touch), local (only the GPU's node(s); 'bind' "
             "is a synonym), preferred (the GPU's node first), interleave (over the GPU's nodes)");
  add_choice(*exec, "--fallback", args.fallback, gpuaff::fallback_choices,
             "when binding fails: error (exit with the error), or unbound (one warning line, then run "
             "COMMAND anyway; a refused memory policy keeps the CPU binding)");
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
                           "  mpirun -np 8 gpuaff exec --local-rank --policy core-complex --membind local -- ./trainer\n"
                           "  gpuaff exec --local-rank --fallback unbound --verbose -- python train.py\n"
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
      ->required();
  record->add_option("--root", args.root, "the root to record (default: this machine)")
      ->type_name("DIR")
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
    std::string line = std::string("gpuaff: unknown command '") + argv[1] + "'; use " + command_names(app) +
                       " (see 'gpuaff --help')\n";
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

  if (bind->parsed()) {
    if (!bind_args.plan.gpu && bind_args.plan.pci.empty()) {
      return report_error(gpuaff::make_error(gpuaff::Errc::invalid_argument,
                                             "bind needs --gpu N or --pci BDF; see 'gpuaff bind --help'"));
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
