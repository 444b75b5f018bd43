// SPDX-License-Identifier: Apache-2.0
#pragma once
// The gpuaff commands, one file each (bind.cpp, topo.cpp, exec.cpp,
// record.cpp, doctor.cpp), as functions of typed argument structs that
// main.cpp fills from the command line through the option tables. What a
// launch asks for is the library's LaunchOptions, planned by the library's
// front door (gpuaff/launch/front.hpp); the commands only print. Each returns
// the process exit code and writes its result to stdout, or one error line
// to stderr and nothing to stdout.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuaff/launch/choices.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/source/load.hpp"
#include "readers.hpp"

namespace gpuaff::cli {

struct BindArgs {
  LaunchOptions options{};
  BindFormat format = BindFormat::cpulist;
};

struct TopoArgs {
  LaunchOptions options{.policy = PolicySpec{.kind = PolicyKind::exclusive}};  ///< the picture's policy and the job
  TopoFormat format = TopoFormat::text;
  ColorMode color = ColorMode::automatic;
  bool irqs = false;  ///< --irqs: each GPU's and NIC's interrupts against the roles
};

struct ExecArgs {
  LaunchOptions options{};
  bool verbose = false;  ///< say what was done on stderr
  bool dry_run = false;  ///< print the plan and the command; bind and run nothing
  std::vector<std::string> command{};
};

struct RecordArgs {
  std::string out{};
  std::string root = "/";
  std::vector<std::string> pci{};  ///< non-GPU devices to record too
  bool force = false;              ///< write into a directory that is not empty
};

struct DoctorArgs {
  LaunchOptions options{};
  int pid = 0;                     ///< 0 with all or merge
  bool all = false;                ///< every process of this machine that carries a plan
  std::vector<std::string> merge;  ///< --all --format json reports of several nodes
  double min_local = 0.5;
  DoctorFormat format = DoctorFormat::text;
  std::string textfile{};          ///< --textfile PATH: write the output there atomically
  bool watch = false;              ///< --watch: check every planned process each interval, print changes
  double interval = 10.0;          ///< --interval S
  long long count = 0;             ///< --count N: stop after N checks; 0: until stopped
  bool rebind = false;             ///< --rebind: put drifted threads back
  bool nics = false;               ///< --nics: the NICs' traffic against the ranks' sets
  std::string counters{};          ///< --counters FILE: a recorded counter sequence instead of this machine
  bool irqs = false;               ///< --irqs: the plan's devices' interrupts against its roles
  bool steer_irqs = false;         ///< --steer-irqs: apply the steering (root)
  std::string job{};               ///< --job ID: only that scheduler job's processes (--all, --watch, --nics)
};

struct ProbeArgs {
  ProbeFormat format = ProbeFormat::text;
  std::size_t size_mib = 256;
  double seconds = 0.5;
  int threads = 0;                 ///< 0: 8, at most the node's CPUs
  std::vector<int> gpus{};         ///< --gpu: the runtime's device indexes
  std::string gpu_nodes_out{};     ///< --gpu-nodes FILE
};

int run_bind(const BindArgs& args);
int run_probe(const ProbeArgs& args);
int run_doctor(const DoctorArgs& args);
/// doctor --nics (doctor_nics.cpp).
int run_doctor_nics(const DoctorArgs& args);
/// Writes `text` to `path` atomically for node_exporter's textfile collector; returns `code` or an error's (doctor.cpp).
int write_textfile(const std::string& path, const std::string& text, int code);
int run_topo(const TopoArgs& args);
int run_exec(const ExecArgs& args);
int run_record(const RecordArgs& args);

/// The plan as `bind --format json` prints it (exec --dry-run adds "command").
/// `cores` (optional) keeps the core siblings plan_threads() reads, for the
/// next plans of the same machine.
nlohmann::ordered_json plan_json(const LaunchPlan& p, const LaunchOptions& o, std::optional<Topology>* cores = nullptr);

/// Prints the plan's warnings on stderr, "gpuaff: warning: ..." each.
void print_warnings(const LaunchPlan& p);

}  // namespace gpuaff::cli
