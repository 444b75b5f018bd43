// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs the built gpuaff binary (path in the GPUAFF_EXE environment variable,
// set by CMake from $<TARGET_FILE:gpuaff_cli>) with a controlled environment
// and captures its exit code, stdout and stderr. Also writes small sysfs trees
// for the tests that need a machine no fixture has.

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace cli_test {

struct Run {
  int rc = -1;
  std::string out;
  std::string err;

  /// The stderr lines (without the newline).
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  bool one_error_line() const {
    auto lines = err_lines();
    return lines.size() == 1 && lines[0].rfind("gpuaff: ", 0) == 0 && err.back() == '\n';
  }
};

/// Variables the tests control: removed from the inherited environment, so a
/// developer's CUDA_VISIBLE_DEVICES or an outer launcher's LOCAL_RANK cannot leak in.
inline const std::vector<std::string>& controlled_variables() {
  static const std::vector<std::string> v{"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                          "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID",
                                          "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                          "PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                                          "SLURM_NODEID",
                                          "OMP_NUM_THREADS", "NO_COLOR", "CUDA_DEVICE_ORDER"};
  return v;
}

inline std::string exe() {
  const char* p = std::getenv("GPUAFF_EXE");
  return p == nullptr ? std::string() : std::string(p);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh empty directory under the build tree's temp area.
inline std::filesystem::path temp_dir(const std::string& name) {
  auto base = std::filesystem::temp_directory_path() / ("gpuaff-cli-test-" + std::to_string(::getpid()));
  auto dir = base / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// How long one run may take before it is killed, and the rc it then reports.
inline constexpr int run_timeout_s = 30;
inline constexpr int timed_out = 1000;

/// Runs `program args...` (argv[0] = program) with the controlled environment.
inline Run run_program(const std::string& program, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}) {
  auto dir = temp_dir("io");
  std::string out_path = (dir / "out").string();
  std::string err_path = (dir / "err").string();
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    bool controlled = false;
    for (const auto& c : controlled_variables()) controlled = controlled || key == c;
    if (!controlled && env.count(key) == 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::string path = program;
  std::vector<char*> argv{path.data()};
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  Run r;
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int n = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || n < 0) ::_exit(200);
    ::dup2(n, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execve(path.c_str(), argv.data(), envp.data());
    ::_exit(201);
  }
  // A command that hangs (a FIFO read without a writer) fails its test
  // instead of hanging the suite: killed after run_timeout_s, rc = timed_out.
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 10) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) break;
    if (waited_ms >= run_timeout_s * 1000) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.rc = timed_out;
      r.out = slurp(out_path);
      r.err = slurp(err_path);
      return r;
    }
    ::usleep(10000);
  }
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

/// Runs the gpuaff binary.
inline Run tool(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  return run_program(exe(), args, env);
}

/// Runs the gpuaff binary with stdout on a pseudo-terminal, through util-linux's
/// script(1); returns rc -1 when script is not available. Arguments must not need quoting.
inline Run tool_on_terminal(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  std::string command = exe();
  for (const auto& a : args) command += " " + a;
  for (const char* script : {"/usr/bin/script", "/bin/script"}) {
    if (::access(script, X_OK) == 0) return run_program(script, {"-qec", command, "/dev/null"}, env);
  }
  return Run{};
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

/// A machine for a sysfs tree: CPUs grouped into cores (sibling lists), each
/// node's CPUs and package, and PCI devices.
struct FakeDevice {
  std::string bdf;
  std::string vendor = "0x10de";
  std::string cls = "0x030200";
  int node = 0;
  std::string local_cpus;
};
struct FakeMachine {
  std::vector<std::string> cores;            ///< per core: its thread list, e.g. "0,8"
  std::vector<int> core_package;             ///< per core
  std::vector<std::string> node_cpus;        ///< per node id 0..n-1
  std::vector<std::string> node_distances;   ///< per node: "10 21"
  std::string online;
  std::string allowed;
  std::string mems_allowed = "0";
  std::vector<FakeDevice> devices;
};

/// One NUMA node with CPUs 0-1 (two cores of one package) and two GPUs on it,
/// 0000:17:00.0 and 0000:65:00.0: plans from it apply on any machine that
/// allows CPUs 0 and 1.
inline FakeMachine two_cpu_machine() {
  FakeMachine m;
  m.cores = {"0", "1"};
  m.core_package = {0, 0};
  m.node_cpus = {"0-1"};
  m.node_distances = {"10"};
  m.online = "0-1";
  m.allowed = "0-1";
  m.devices = {{.bdf = "0000:17:00.0", .local_cpus = "0-1"}, {.bdf = "0000:65:00.0", .local_cpus = "0-1"}};
  return m;
}

/// Writes the files docs/contract.md section 1 lists, with PCI device directories
/// under sys/devices/pci0000:00 and sys/bus/pci/devices symlinks to them.
inline void write_machine(const std::filesystem::path& root, const FakeMachine& m) {
  namespace fs = std::filesystem;
  fs::path cpu = root / "sys/devices/system/cpu";
  write_file(cpu / "online", m.online + "\n");
  write_file(cpu / "possible", m.online + "\n");
  write_file(cpu / "present", m.online + "\n");
  for (std::size_t c = 0; c < m.cores.size(); ++c) {
    std::stringstream ids(m.cores[c]);
    for (std::string id; std::getline(ids, id, ',');) {
      fs::path d = cpu / ("cpu" + id);
      if (id != "0") write_file(d / "online", "1\n");
      write_file(d / "topology/physical_package_id", std::to_string(m.core_package[c]) + "\n");
      write_file(d / "topology/core_cpus_list", m.cores[c] + "\n");
      write_file(d / "topology/thread_siblings_list", m.cores[c] + "\n");
      write_file(d / "topology/core_id", std::to_string(c) + "\n");
      write_file(d / "topology/die_id", "0\n");
      // One L3 per package: every CPU of the cores of the same package.
      std::string l3;
      for (std::size_t k = 0; k < m.cores.size(); ++k)
        if (m.core_package[k] == m.core_package[c]) l3 += (l3.empty() ? "" : ",") + m.cores[k];
      write_file(d / "cache/index3/level", "3\n");
      write_file(d / "cache/index3/type", "Unified\n");
      write_file(d / "cache/index3/shared_cpu_list", l3 + "\n");
    }
  }
  fs::path node = root / "sys/devices/system/node";
  std::string nodes = m.node_cpus.size() == 1 ? "0" : "0-" + std::to_string(m.node_cpus.size() - 1);
  write_file(node / "possible", nodes + "\n");
  write_file(node / "online", nodes + "\n");
  write_file(node / "has_cpu", nodes + "\n");
  for (std::size_t n = 0; n < m.node_cpus.size(); ++n) {
    write_file(node / ("node" + std::to_string(n)) / "cpulist", m.node_cpus[n] + "\n");
    write_file(node / ("node" + std::to_string(n)) / "distance", m.node_distances[n] + "\n");
  }
  fs::create_directories(root / "sys/bus/pci/devices");
  for (const auto& d : m.devices) {
    fs::path dir = root / "sys/devices/pci0000:00" / d.bdf;
    write_file(dir / "vendor", d.vendor + "\n");
    write_file(dir / "device", "0x2330\n");
    write_file(dir / "class", d.cls + "\n");
    write_file(dir / "numa_node", std::to_string(d.node) + "\n");
    write_file(dir / "local_cpulist", d.local_cpus + "\n");
    fs::create_directory_symlink("../../../devices/pci0000:00/" + d.bdf, root / "sys/bus/pci/devices" / d.bdf);
  }
  write_file(root / "proc/self/status", "Name:\tgpuaff\nCpus_allowed_list:\t" + m.allowed +
                                            "\nMems_allowed_list:\t" + m.mems_allowed + "\n");
}

/// Whether this process may run on every CPU in `ids`.
inline bool cpus_allowed_here(std::initializer_list<int> ids) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  for (int id : ids)
    if (!CPU_ISSET(id, &set)) return false;
  return true;
}

}  // namespace cli_test
