// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checking a running process against its plan (`gpuaff doctor`, docs/doctor.md):
// what /proc/PID says about it — its environment, every thread's allowed CPUs,
// its resident pages per NUMA node — compared with the binding planned for its
// GPU. Reads only below /proc/PID; never changes the process.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/detail/status_field.hpp"
#include "gpuaff/launch/launcher.hpp"
#include "gpuaff/launch/plan_variable.hpp"
#include "gpuaff/launch/published_plan.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// One thread of the process, as /proc/PID/task/TID/status has it.
struct ThreadState {
  int tid = 0;
  std::string name;  ///< comm (at most 15 characters)
  CpuSet cpus;       ///< Cpus_allowed_list
};

/// A setting in the process's environment known to fight an outside binding.
struct FightingSetting {
  std::string name;
  std::string value;
  std::string_view why;
};

/// Variables that move threads on their own or make a library ignore the mask it was given.
inline constexpr std::pair<std::string_view, std::string_view> fighting_variables[] = {
    {"KMP_AFFINITY", "the Intel/LLVM OpenMP runtime pins its threads itself"},
    {"GOMP_CPU_AFFINITY", "GNU OpenMP pins its threads to the CPUs it lists"},
    {"OMP_PROC_BIND", "OpenMP binds its threads to places itself"},
    {"OMP_PLACES", "OpenMP places can name CPUs outside the binding"},
    {"NCCL_IGNORE_CPU_AFFINITY", "NCCL ignores the process's mask for its threads"},
    {"TLLM_NUMA_AWARE_WORKER_AFFINITY", "TensorRT-LLM sets its workers' affinity itself, replacing the one given"},
    {"MV2_ENABLE_AFFINITY", "MVAPICH2 pins ranks itself"},
    {"I_MPI_PIN", "Intel MPI pins ranks itself"},
};

/// Who a thread is, from its name where the name says it ("" when unknown).
inline std::string_view thread_owner(std::string_view name) {
  constexpr std::pair<std::string_view, std::string_view> prefixes[] = {
      {"pt_", "PyTorch"},      {"cuda", "CUDA runtime"}, {"NCCL", "NCCL"},  {"nccl", "NCCL"},
      {"python", "Python"},    {"omp_", "OpenMP"},       {"gomp", "OpenMP"}, {"ucx", "UCX"},
      {"tokio", "Rust tokio"}, {"ray::", "Ray"},
  };
  for (const auto& [p, who] : prefixes)
    if (name.substr(0, p.size()) == p) return who;
  return {};
}

namespace detail {

/// The NAME=VALUE entries of an environ file (NUL-separated).
inline std::map<std::string, std::string> parse_environ(std::string_view text) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    std::size_t end = text.find('\0');
    std::string_view entry = text.substr(0, end);
    std::size_t eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) out.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

/// Resident pages per node: the sum of the "N<node>=<pages>" fields of every
/// line of a numa_maps file.
inline std::map<int, long long> parse_numa_maps(std::string_view text) {
  std::map<int, long long> pages;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t e = text.find_first_of(" \n", i);
    if (e == std::string_view::npos) e = text.size();
    std::string_view field = text.substr(i, e - i);
    std::size_t eq = field.find('=');
    if (field.size() > 2 && field[0] == 'N' && eq != std::string_view::npos) {
      long long node = 0;
      long long n = 0;
      std::string_view id = field.substr(1, eq - 1);
      std::string_view count = field.substr(eq + 1);
      if (!id.empty() && leading_number(id, 10, 1 << 20, node) == id.size() && !count.empty() &&
          leading_number(count, 10, 1LL << 50, n) == count.size())
        pages[static_cast<int>(node)] += n;
    }
    i = e + 1;
  }
  return pages;
}

[[gnu::cold]] inline Unexpected<Error> proc_error(int pid, std::string_view what, int err) {
  if (err == ENOENT || err == ESRCH)
    return unexpected(make_sys_error(Errc::not_found, err, "no process ", pid, " (/proc/", pid, "/", what,
                                     " is missing); check the PID with ps"));
  if (err == EACCES || err == EPERM) {
    if (::geteuid() == 0)
      return unexpected(make_sys_error(Errc::permission_denied, err, "cannot read /proc/", pid, "/", what,
                                       ": permission denied even to root (a hidepid mount of /proc, a security "
                                       "module, or a process of another PID namespace); run doctor where the "
                                       "process is visible, such as inside its container"));
    return unexpected(make_sys_error(Errc::permission_denied, err, "cannot read /proc/", pid, "/", what,
                                     ": permission denied; run doctor as the process's user or as root"));
  }
  return unexpected(make_sys_error(Errc::io_error, err, "cannot read /proc/", pid, "/", what, ": ", detail::errno_text(err)));
}

/// The lines of a /proc/PID/cgroup file that decide which device nodes the
/// process may open: cgroup v1's devices controller (`5:devices:/path`) and
/// the cgroup v2 line (`0::/path`, whose device rules are eBPF programs), as
/// they are, joined by ", " in the file's order; "" when it has neither.
inline std::string device_cgroup_lines(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    std::size_t a = line.find(':');
    std::size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::string_view controllers = line.substr(a + 1, b - a - 1);
    bool devices = controllers.empty() && line.substr(0, a) == "0";
    for (std::string_view c : comma_items(controllers)) devices = devices || c == "devices";
    if (devices) out += (out.empty() ? "" : ", ") + std::string(line);
  }
  return out;
}

}  // namespace detail

/// The lines of process `pid`'s /proc/PID/cgroup (pid 0: this process's,
/// /proc/self/cgroup) that decide which device nodes it may open
/// (detail::device_cgroup_lines); "" on a kernel without cgroups.
/// Errors: those of process_environ.
inline Result<std::string> process_device_cgroup(int pid) {
  std::string text;
  std::string path = pid == 0 ? std::string("/proc/self/cgroup") : "/proc/" + std::to_string(pid) + "/cgroup";
  int e = detail::read_whole_file(path, text);
  if (e == ENOENT && pid != 0) {  // no cgroup support, or no such process
    std::string ignored;
    if (detail::read_whole_file("/proc/" + std::to_string(pid) + "/stat", ignored) == 0) return std::string();
  }
  if (e == ENOENT && pid == 0) return std::string();
  if (e != 0 && pid == 0)
    return unexpected(make_sys_error(Errc::io_error, e, "cannot read /proc/self/cgroup: ", detail::errno_text(e)));
  if (e != 0) return detail::proc_error(pid, "cgroup", e);
  return detail::device_cgroup_lines(text);
}

/// The environment of process `pid` (/proc/PID/environ).
/// Errors: Errc::not_found (no such process, or one that has exited and is a
/// zombie: its memory, environment and threads are gone), Errc::permission_denied,
/// Errc::io_error.
inline Result<std::map<std::string, std::string>> process_environ(int pid) {
  std::string text;
  // A zombie still has /proc/PID, with an empty environment and no memory:
  // say that it has exited rather than check nothing, or call it missing.
  if (detail::read_whole_file(std::string("/proc/") + std::to_string(pid) + "/status", text) == 0) {
    auto state = detail::status_field(text, "State");
    if (state && !state->empty() && (state->front() == 'Z' || state->front() == 'X')) {
      auto parent = detail::status_field(text, "PPid");
      return fail(Errc::not_found, "process ", pid, " has exited: it is a zombie waiting for its parent (PID ",
                  parent ? *parent : std::string_view("?"), ") to reap it; there is nothing left to check");
    }
  }
  if (int e = detail::read_whole_file(std::string("/proc/") + std::to_string(pid) + "/environ", text); e != 0)
    return detail::proc_error(pid, "environ", e);
  auto vars = detail::parse_environ(text);
  // A process that bound itself in place (Python's bind()) published its plan
  // instead: its environ is the one it was exec'd with.
  if (vars.find(std::string(plan_variable)) == vars.end())
    if (auto published = published_plan_value(pid)) vars.emplace(std::string(plan_variable), std::move(*published));
  return vars;
}

/// An Environment (launch/launcher.hpp) over a parsed environ.
inline Environment environment_of(const std::map<std::string, std::string>& vars) {
  return [&vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

/// Every thread of process `pid`, by thread id. A thread that ends while it is
/// read is left out.
/// Errors: those of process_environ; Errc::parse_error for a status without a
/// readable Cpus_allowed_list.
inline Result<std::vector<ThreadState>> process_threads(int pid) {
  std::string dir = std::string("/proc/") + std::to_string(pid) + "/task";
  std::vector<std::string> tids;
  if (int e = detail::list_directory(dir, tids); e != 0) return detail::proc_error(pid, "task", e);
  std::vector<ThreadState> out;
  std::string text;
  for (const auto& t : tids) {
    if (!detail::is_decimal(t)) continue;
    int e = detail::read_whole_file(dir + "/" + t + "/status", text);
    if (e == ENOENT || e == ESRCH) continue;  // ended meanwhile
    if (e != 0) return detail::proc_error(pid, "task/" + t + "/status", e);
    ThreadState s;
    s.tid = std::stoi(t);
    if (auto name = detail::status_field(text, "Name")) s.name = std::string(*name);
    auto list = detail::status_field(text, "Cpus_allowed_list");
    if (!list) return fail(Errc::parse_error, dir, "/", t, "/status has no Cpus_allowed_list line");
    GPUAFF_TRY(s.cpus, CpuSet::parse_list(*list));
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const ThreadState& a, const ThreadState& b) { return a.tid < b.tid; });
  return out;
}

/// Resident pages of process `pid` per node (/proc/PID/numa_maps; empty when
/// the kernel has no NUMA support).
inline Result<std::map<int, long long>> process_pages_by_node(int pid) {
  std::string text;
  int e = detail::read_whole_file(std::string("/proc/") + std::to_string(pid) + "/numa_maps", text);
  if (e == ENOENT) {
    std::string ignored;
    if (detail::read_whole_file(std::string("/proc/") + std::to_string(pid) + "/stat", ignored) == 0) return std::map<int, long long>{};
  }
  if (e != 0) return detail::proc_error(pid, "numa_maps", e);
  return detail::parse_numa_maps(text);
}

/// The settings of `vars` known to fight an outside binding.
inline std::vector<FightingSetting> fighting_settings(const std::map<std::string, std::string>& vars) {
  std::vector<FightingSetting> out;
  for (const auto& [name, why] : fighting_variables) {
    auto it = vars.find(std::string(name));
    if (it != vars.end()) out.push_back({it->first, it->second, why});
  }
  return out;
}

}  // namespace v0
}  // namespace gpuaff
