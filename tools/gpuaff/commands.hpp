#pragma once
// The gpuaff commands, one file each (bind.cpp, topo.cpp, exec.cpp,
// record.cpp), as functions of typed option structs that main.cpp fills from
// the command line. Each returns the process exit code and writes its result
// to stdout, or one error line to stderr and nothing to stdout.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/plan.hpp"
#include "load.hpp"

namespace gpuaff::cli {

/// The options every command that computes a binding shares. The texts of
/// --policy, --unknown-node and --pci are parsed by the library when the
/// binding is planned, so that a bad one is a gpuaff error line (exit 2).
struct PlanOptions {
  SourceOptions source{};
  std::optional<int> gpu{};      ///< --gpu N
  std::string pci{};             ///< --pci BDF (empty: none)
  bool local_rank = false;       ///< --local-rank (exec)
  std::string policy = "node";   ///< --policy
  NvidiaOptions nvidia{};        ///< --scope, --smt, --balanced/--no-balanced, --min-cores, --max-cores
  int nproc = 0;                 ///< --nproc (0: every visible GPU)
  std::string unknown_node = "error";  ///< --unknown-node error|node0|N
  bool all_gpus = false;         ///< bind --gpu all
  Baseline baseline = Baseline::affinity;        ///< --baseline
  Unreachable unreachable = Unreachable::error;  ///< --unreachable
  std::vector<std::string> nvidia_flags{};       ///< the NVIDIA-mode flags given (--smt, ...), to check they apply
  Share share = Share::visible;        ///< --share visible|machine (bind, exec)
  bool nic_env = false;          ///< --nic-env (bind, exec): the GPU's RDMA NIC for NCCL, UCX, NVSHMEM
  MemNodes mem_nodes = MemNodes::cpu;  ///< --mem-nodes cpu|gpu|socket (bind, exec)
};

struct BindArgs {
  PlanOptions plan{};
  BindFormat format = BindFormat::cpulist;
  MemPolicy membind = MemPolicy::none;  ///< --membind: shown by numactl and json formats
  bool membind_given = false;           ///< numactl format prints a memory option only then
};

struct TopoArgs {
  PlanOptions plan{.policy = "exclusive"};  ///< the picture's policy and the table's job options
  TopoFormat format = TopoFormat::text;
  ColorMode color = ColorMode::automatic;
};

struct ExecArgs {
  PlanOptions plan{};
  MemPolicy membind = MemPolicy::none;
  Fallback fallback = Fallback::error;
  bool omp_threads = false;        ///< set OMP_NUM_THREADS to the recommended thread count
  bool verbose = false;            ///< say what was done on stderr
  bool dry_run = false;            ///< print the plan and the command; bind and run nothing
  std::vector<std::string> command{};
};

struct RecordArgs {
  std::string out{};
  std::string root = "/";
  std::vector<std::string> pci{};  ///< non-GPU devices to record too
  bool force = false;              ///< write into a directory that is not empty
};

struct DoctorArgs {
  PlanOptions plan{};
  int pid = 0;                 ///< --pid
  double min_local = 0.5;      ///< --min-local: the least fraction of pages on the GPU's node(s) that is healthy
  TopoFormat format = TopoFormat::text;
};

int run_bind(const BindArgs& args);
int run_doctor(const DoctorArgs& args);
int run_topo(const TopoArgs& args);
int run_exec(const ExecArgs& args);
int run_record(const RecordArgs& args);

/// The policy and job the options name.
/// Errors: Errc::invalid_argument for an unknown policy or --unknown-node value.
Result<PolicySpec> policy_spec(const PlanOptions& o);
Result<JobOptions> job_options(const PlanOptions& o);

/// The plan of bind and exec: the target (--gpu, --pci or --local-rank), read
/// with binding detail, bound with the options' policy.
Result<LaunchPlan> plan_binding(const PlanOptions& o, MemPolicy membind);

/// bind --gpu all: the plan of every GPU that takes part (0..nproc-1, or every visible GPU).
Result<std::vector<LaunchPlan>> plan_every_gpu(const PlanOptions& o, MemPolicy membind);

/// The plan as `bind --format json` prints it (exec --dry-run adds "command").
nlohmann::ordered_json plan_json(const LaunchPlan& p);

/// Whether the machine loads with every GPU but not with the visibility list
/// (--visible-devices or *_VISIBLE_DEVICES): the list names GPUs that are not
/// there, a mistake in the list, which --fallback unbound must not hide.
bool visibility_list_failed(const PlanOptions& o);

/// Prints the plan's warnings on stderr, "gpuaff: warning: ..." each.
void print_warnings(const LaunchPlan& p);

}  // namespace gpuaff::cli
