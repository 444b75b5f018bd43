#include "commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "exit_codes.hpp"
#include "gpuaff/apply/apply.hpp"
#include "gpuaff/policy/policy.hpp"
#include "gpuaff/record/archive.hpp"
#include "gpuaff/record/record.hpp"
#include "report.hpp"

namespace gpuaff::cli {
namespace {

void print_line(std::FILE* f, std::string_view text) {
  std::string s = one_line(text);
  s += '\n';
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

void write_stdout(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// A non-negative decimal integer, the whole text; -1 otherwise.
int parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

Result<JobOptions> job_options(const PlanOptions& o) {
  JobOptions job{.nproc = o.nproc};
  if (o.unknown_node == "error") {
    job.unknown_node = UnknownNode::error;
  } else if (o.unknown_node == "node0") {
    job.unknown_node = UnknownNode::node0;
  } else if (int n = parse_index(o.unknown_node); n >= 0) {
    job.assume_node = n;
  } else {
    return fail(Errc::invalid_argument, "--unknown-node '", o.unknown_node,
                "' is not valid; use error, node0 or a NUMA node id such as 1");
  }
  return job;
}

Result<PolicySpec> policy_spec(const PlanOptions& o) {
  GPUAFF_TRY(PolicyKind kind, parse_policy(o.policy));
  PolicySpec spec{.kind = kind};
  spec.nvidia.scope = o.scope == "socket" ? Scope::socket : Scope::node;
  spec.nvidia.smt = o.smt == "one" ? Smt::one : Smt::all;
  spec.nvidia.balanced = o.balanced;
  spec.nvidia.min_cores = o.min_cores;
  spec.nvidia.max_cores = o.max_cores;
  return spec;
}

constexpr const char* rank_variables[] = {"LOCAL_RANK",     "SLURM_LOCALID",  "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID"};

/// The GPU index from the first launcher variable that is set.
Result<int> local_rank_from_environment(std::string* source) {
  for (const char* name : rank_variables) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    int v = parse_index(value);
    if (v < 0) {
      return fail(Errc::invalid_argument, "--local-rank: ", name, "='", std::string_view(value).substr(0, 40),
                  "' is not a non-negative integer; fix or unset ", name, ", or pass --gpu N");
    }
    if (source != nullptr) *source = std::string(name) + "=" + value;
    return v;
  }
  return fail(Errc::invalid_argument,
              "--local-rank: none of LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, "
              "PMI_LOCAL_RANK, PALS_LOCAL_RANKID is set; run under torchrun, srun or mpirun, or pass --gpu N");
}

std::string gpu_list(const Topology& topo) {
  std::string s;
  for (const auto& g : topo.gpus) {
    if (!s.empty()) s += ", ";
    s += std::to_string(g.index) + " " + std::string(g.address().to_string().view());
  }
  return s;
}

/// Everything a binding needs, computed before anything is applied.
struct Plan {
  Topology topo;        ///< with_pci_target's topology when --pci named the target
  int gpu = 0;          ///< index into topo.gpus
  int visible_gpu = -1; ///< the visible GPU index of the target, -1 for a non-GPU --pci device
  PolicySpec spec{};
  JobOptions job{};
  CpuSet cpus{};
  NodeSet memory{};
  int node = -1;
  std::string rank_source{};  ///< "LOCAL_RANK=1" with --local-rank
};

Result<Plan> make_plan(const PlanOptions& o) {
  Plan plan;
  GPUAFF_TRY(plan.spec, policy_spec(o));
  GPUAFF_TRY(plan.job, job_options(o));
  SourceOptions source = o.source;
  source.detail = SysfsDetail::binding;  // bind and exec: read only what the binding needs
  std::optional<PciAddress> pci;
  if (!o.pci.empty()) {
    auto a = PciAddress::parse(o.pci);
    if (!a) return fail(Errc::invalid_argument, "--pci: ", a.error().message());
    pci = *a;
    source.extra_pci.push_back(*a);
  }
  int wanted = o.gpu.value_or(0);
  if (o.local_rank) {
    GPUAFF_TRY(wanted, local_rank_from_environment(&plan.rank_source));
  }
  GPUAFF_TRY(Topology topo, load_topology(source));
  if (pci) {
    for (const auto& g : topo.gpus)
      if (g.address() == *pci) plan.visible_gpu = g.index;
    int index = 0;
    GPUAFF_TRY(plan.topo, with_pci_target(topo, *pci, &index));
    plan.gpu = index;
  } else {
    int count = static_cast<int>(topo.gpus.size());
    if (wanted >= count) {
      std::string why = plan.rank_source.empty() ? "--gpu " + std::to_string(wanted) : plan.rank_source;
      if (count == 0) {
        return fail(Errc::not_found, "no GPU is visible in ", topo.origin.view(), " (", why,
                    "); check CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES and --visible-devices, or name a device "
                    "with --pci BDF");
      }
      std::string hint = plan.rank_source.empty()
                             ? "pick one of them"
                             : "when the launcher gives each rank its own GPUs through *_VISIBLE_DEVICES, use --gpu 0";
      return fail(Errc::not_found, "no GPU ", wanted, " (", why, "): ", count, " visible in ", topo.origin.view(),
                  " (", gpu_list(topo), "); ", hint);
    }
    plan.topo = std::move(topo);
    plan.gpu = wanted;
    plan.visible_gpu = wanted;
  }
  GPUAFF_TRY(plan.cpus, bind(plan.topo, plan.gpu, plan.spec, plan.job));
  GPUAFF_TRY(plan.memory, memory_nodes(plan.topo, plan.gpu, plan.job));
  GPUAFF_TRY(plan.node, resolve_gpu_node(plan.topo, plan.gpu, plan.job));
  return plan;
}

std::string mask_of(const Topology& topo, const CpuSet& cpus) {
  // As wide as the machine, like the kernel's masks.
  int bits = std::max(topo.online.last(), topo.allowed.last()) + 1;
  return cpus.to_mask(std::max(bits, 1));
}

}  // namespace

int report_error(const Error& e) {
  print_line(stderr, "gpuaff: " + std::string(e.message()));
  return exit_code(e.code());
}

// ---- bind --------------------------------------------------------------------

int run_bind(const BindArgs& args) {
  auto plan = make_plan(args.plan);
  if (!plan) return report_error(plan.error());
  const Plan& p = *plan;
  const Gpu& target = p.topo.gpus[static_cast<std::size_t>(p.gpu)];
  if (args.format == "cpulist") {
    write_stdout(p.cpus.to_list() + '\n');
  } else if (args.format == "mask") {
    write_stdout(mask_of(p.topo, p.cpus) + '\n');
  } else if (args.format == "numactl") {
    write_stdout("--physcpubind=" + p.cpus.to_list() + " --membind=" + p.memory.to_list() + '\n');
  } else {
    nlohmann::ordered_json j;
    j["gpu"] = p.visible_gpu >= 0 ? nlohmann::ordered_json(p.visible_gpu) : nlohmann::ordered_json(nullptr);
    j["bdf"] = std::string(target.address().to_string().view());
    j["node"] = p.node;
    j["policy"] = std::string(to_string(p.spec.kind));
    j["cpus"] = p.cpus.to_list();
    j["mask"] = mask_of(p.topo, p.cpus);
    j["memory_nodes"] = p.memory.to_list();
    j["recommended_threads"] = recommended_threads(p.topo, p.cpus);
    j["origin"] = std::string(p.topo.origin.view());
    write_stdout(j.dump(2) + '\n');
  }
  return exit_ok;
}

// ---- topo --------------------------------------------------------------------

int run_topo(const TopoArgs& args) {
  auto spec = policy_spec(args.plan);
  if (!spec) return report_error(spec.error());
  auto job = job_options(args.plan);
  if (!job) return report_error(job.error());
  auto topo = load_topology(args.plan.source);
  if (!topo) return report_error(topo.error());
  if (args.format == "json") {
    write_stdout(to_json(*topo) + '\n');
    return exit_ok;
  }
  ReportOptions o;
  bool color = args.color == "always";
  if (args.color == "auto") {
    const char* no_color = std::getenv("NO_COLOR");
    color = ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || *no_color == '\0');
  }
  o.color = color ? Color::always : Color::never;
  // Every GPU under each policy, with the job's NVIDIA options: one bind_table,
  // so the facts the bindings share are derived once.
  std::vector<PolicySpec> specs;
  for (PolicyKind kind : all_policy_kinds) {
    PolicySpec s = *spec;
    s.kind = kind;
    specs.push_back(s);
  }
  auto table = bind_table(*topo, specs, *job);
  for (std::size_t k = 0; k < specs.size(); ++k) {
    o.table.push_back(PolicyRow{.policy = std::string(to_string(specs[k].kind)), .per_gpu = std::move(table[k])});
    if (specs[k].kind == spec->kind) o.picture = o.table.back();
  }
  for (std::size_t g = 0; g < topo->gpus.size(); ++g)
  {
    o.resolved_nodes.push_back(resolve_gpu_node(*topo, static_cast<int>(g), *job));
    o.inferred_nodes.push_back(resolve_gpu_node(*topo, static_cast<int>(g), JobOptions{.nproc = job->nproc}));
  }
  const auto& a = args.plan;
  o.job = "nproc " + (a.nproc > 0 ? std::to_string(a.nproc) : std::string("all")) + ", unknown node " +
          a.unknown_node + "; NVIDIA modes: scope " + a.scope + ", smt " + a.smt + ", " +
          (a.balanced ? "balanced" : "not balanced") +
          (a.min_cores > 0 ? ", min cores " + std::to_string(a.min_cores) : std::string()) +
          (a.max_cores > 0 ? ", max cores " + std::to_string(a.max_cores) : std::string());
  write_stdout(render_report(*topo, o));
  return exit_ok;
}

// ---- exec --------------------------------------------------------------------

namespace {

std::string command_text(const std::vector<std::string>& command) {
  std::string s;
  for (const auto& a : command) s += (s.empty() ? "" : " ") + a;
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

/// Replaces this process with the command; returns only on failure.
int exec_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  int e = errno;
  bool missing = e == ENOENT || e == ENOTDIR;
  print_line(stderr, "gpuaff: cannot run '" + command.front() + "': " + std::strerror(e) +
                         (missing ? "; check the command name and PATH" : "; check that it is an executable file"));
  return missing ? exit_command_not_found : exit_cannot_execute;
}

Result<MemoryOptions> memory_options(const ExecArgs& args, const NodeSet& nodes) {
  MemoryOptions m{.policy = MemPolicy::none, .nodes = nodes,
                  .on_refused = args.fallback == "unbound" ? OnRefused::cpu_only : OnRefused::error};
  if (args.membind == "none") m.policy = MemPolicy::none;
  else if (args.membind == "local" || args.membind == "bind") m.policy = MemPolicy::bind;
  else if (args.membind == "preferred") m.policy = MemPolicy::preferred;
  else if (args.membind == "interleave") m.policy = MemPolicy::interleave;
  else
    return fail(Errc::invalid_argument, "--membind '", args.membind,
                "' is not valid; use none, local, preferred or interleave");
  return m;
}

/// This machine's online CPUs, from sysfs.
Result<CpuSet> read_live_online() {
  std::FILE* f = std::fopen("/sys/devices/system/cpu/online", "r");
  if (f == nullptr) return fail(Errc::io_error, "cannot read /sys/devices/system/cpu/online");
  char buf[4096] = {};
  std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  return CpuSet::parse_list(std::string_view(buf, n));
}

/// Plans and applies the binding; the command has not run yet.
Result<std::string> bind_for_exec(const ExecArgs& args) {
  GPUAFF_TRY(Plan plan, make_plan(args.plan));
  GPUAFF_TRY(MemoryOptions memory, memory_options(args, plan.memory));
  bool foreign = reads_another_machine(args.plan.source);
  if (foreign) {
    // A plan made from a recording names that machine's CPU ids: they must exist here.
    auto online = read_live_online();
    if (online && !plan.cpus.is_subset_of(*online)) {
      return fail(Errc::empty_result, "CPUs ", (plan.cpus - *online).to_list(), " of the binding (planned from ",
                  plan.topo.origin.view(), ") do not exist here (online: ", online->to_list(),
                  "); plan from this machine (leave out --root/--topology) or run it where those CPUs exist");
    }
  }
  auto applied = bind_process(plan.cpus, memory);
  if (!applied) {
    Error e = applied.error();
    if (foreign) e.prepend("cannot apply the binding planned from " + std::string(plan.topo.origin.view()) + " here: ");
    return Unexpected<Error>(e);
  }
  ProcessBinding& done = *applied;
  // The kernel silently drops CPUs outside the cgroup's cpuset: check what was set.
  GPUAFF_TRY(CpuSet now, thread_affinity());
  if (now != plan.cpus) {
    return fail(Errc::empty_result, "the kernel bound this process to CPUs ", now.to_list(), " instead of ",
                plan.cpus.to_list(), " (a cgroup cpuset or container limit excludes the others); plan from this "
                "machine (leave out --root/--topology) or widen the container's CPU set");
  }
  for (const auto& w : done.warnings) print_line(stderr, "gpuaff: warning: " + w);
  int threads = recommended_threads(plan.topo, plan.cpus);
  if (args.omp_threads) ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  const Gpu& target = plan.topo.gpus[static_cast<std::size_t>(plan.gpu)];
  std::string what = (plan.visible_gpu >= 0 ? "GPU " + std::to_string(plan.visible_gpu) : std::string("device")) +
                     " " + std::string(target.address().to_string().view()) + " node " + std::to_string(plan.node);
  if (!plan.rank_source.empty()) what += " (" + plan.rank_source + ")";
  what += ", policy " + std::string(to_string(plan.spec.kind)) + ": CPUs " + plan.cpus.to_list() + ", memory " +
          std::string(to_string(memory.policy));
  if (memory.policy != MemPolicy::none) what += " nodes " + plan.memory.to_list();
  if (memory.policy != MemPolicy::none && !done.memory_applied) what += " (not applied)";
  what += ", " + std::to_string(done.threads_bound) + " thread(s) bound";
  if (args.omp_threads) what += ", OMP_NUM_THREADS=" + std::to_string(threads);
  return what;
}

}  // namespace

int run_exec(const ExecArgs& args) {
  if (args.command.empty()) {
    return report_error(make_error(Errc::invalid_argument, "exec needs a command after '--'; e.g. gpuaff exec "
                                                           "--local-rank -- python train.py"));
  }
  auto bound = bind_for_exec(args);
  if (!bound) {
    if (args.fallback != "unbound") return report_error(bound.error());
    print_line(stderr, "gpuaff: warning: " + one_line(bound.error().message()) + "; running '" +
                           command_text(args.command) + "' unbound (--fallback unbound)");
  } else if (args.verbose) {
    print_line(stderr, "gpuaff: " + *bound + "; exec " + command_text(args.command));
  }
  return exec_command(args.command);
}

// ---- record ------------------------------------------------------------------

/// `record --out FILE.tar`: the recording is made in a scratch directory beside
/// FILE.tar, written into that one tar file, and the directory removed.
int record_to_tar(const RecordArgs& args, const std::vector<PciAddress>& extra) {
  std::filesystem::path parent = std::filesystem::path(args.out).parent_path();
  std::string scratch = (parent.empty() ? std::filesystem::path(".") : parent) / ".gpuaff-record-XXXXXX";
  if (::mkdtemp(scratch.data()) == nullptr) {
    return report_error(make_error(Errc::io_error, "cannot create a scratch directory beside '", args.out,
                                   "': ", std::strerror(errno)));
  }
  auto summary = record_topology(RecordOptions{.out_dir = scratch, .root = args.root, .extra_pci = extra});
  auto tar = summary ? write_tar(scratch, args.out, args.force) : Result<TarSummary>(unexpected(summary.error()));
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  if (!tar) return report_error(tar.error());
  write_stdout("recorded " + std::to_string(summary->files) + " files and " + std::to_string(summary->symlinks) +
               " symlinks from " + args.root + " into " + args.out + "; replay with: mkdir r && tar -xf " + args.out +
               " -C r && gpuaff topo --root r\n");
  return exit_ok;
}

int run_record(const RecordArgs& args) {
  std::vector<PciAddress> extra;
  for (const auto& text : args.pci) {
    auto a = PciAddress::parse(text);
    if (!a) return report_error(make_error(Errc::invalid_argument, "--pci: ", a.error().message()));
    extra.push_back(*a);
  }
  if (args.out.ends_with(".tar")) return record_to_tar(args, extra);
  std::error_code ec;
  if (!args.force && std::filesystem::is_directory(args.out, ec) && !std::filesystem::is_empty(args.out, ec)) {
    return report_error(make_error(Errc::invalid_argument, "output directory '", args.out,
                                   "' is not empty; choose a new directory, or pass --force to write into it"));
  }
  auto summary = record_topology(RecordOptions{
      .out_dir = args.out, .root = args.root, .extra_pci = extra, .allow_non_empty = args.force});
  if (!summary) return report_error(summary.error());
  write_stdout("recorded " + std::to_string(summary->files) + " files and " + std::to_string(summary->symlinks) +
               " symlinks from " + args.root + " into " + args.out + "; replay with: gpuaff topo --root " + args.out +
               '\n');
  return exit_ok;
}

}  // namespace gpuaff::cli
