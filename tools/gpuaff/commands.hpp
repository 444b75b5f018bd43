#pragma once
// The gpuaff commands, as functions of plain option structs filled by the
// argument parser (main.cpp). Each returns the process exit code and writes
// its result to stdout, or one error line to stderr and nothing to stdout.

#include <optional>
#include <string>
#include <vector>

#include "load.hpp"

namespace gpuaff::cli {

/// The options every command that computes a binding shares.
struct PlanOptions {
  SourceOptions source{};
  std::optional<int> gpu{};      ///< --gpu N
  std::string pci{};             ///< --pci BDF (empty: none)
  bool local_rank = false;       ///< --local-rank (exec)
  std::string policy = "node";   ///< --policy
  std::string scope = "node";    ///< --scope node|socket
  std::string smt = "all";       ///< --smt all|one
  bool balanced = true;          ///< --balanced / --no-balanced
  int min_cores = 0;             ///< --min-cores
  int max_cores = 0;             ///< --max-cores
  int nproc = 0;                 ///< --nproc (0: every visible GPU)
  std::string unknown_node = "error";  ///< --unknown-node error|node0|N
};

struct BindArgs {
  PlanOptions plan{};
  std::string format = "cpulist";  ///< cpulist|mask|numactl|json
};

struct TopoArgs {
  PlanOptions plan{.policy = "exclusive"};  ///< the picture's policy and the table's job options
  std::string format = "text";              ///< text|json
  std::string color = "auto";               ///< auto|always|never
};

struct ExecArgs {
  PlanOptions plan{};
  std::string membind = "none";    ///< none|local|preferred|interleave
  std::string fallback = "error";  ///< error|unbound
  bool omp_threads = false;        ///< set OMP_NUM_THREADS to the recommended thread count
  bool verbose = false;            ///< say what was done on stderr
  std::vector<std::string> command{};
};

struct RecordArgs {
  std::string out{};
  std::string root = "/";
  std::vector<std::string> pci{};  ///< non-GPU devices to record too
  bool force = false;              ///< write into a directory that is not empty
};

int run_bind(const BindArgs& args);
int run_topo(const TopoArgs& args);
int run_exec(const ExecArgs& args);
int run_record(const RecordArgs& args);

/// Prints "gpuaff: <message>" on stderr and returns the exit code of its class.
int report_error(const Error& e);

}  // namespace gpuaff::cli
