// SPDX-License-Identifier: Apache-2.0
#pragma once
// The process's cgroup cpuset under a root (docs/contract.md section 1): the
// CPUs and memory nodes the kernel lets the process use at all, however
// narrow a launcher made its affinity mask. `mpirun` binds each rank to a
// core or socket by default, `taskset` narrows a mask, but neither changes
// the cgroup: sched_setaffinity may widen a mask again up to the cpuset.
//
// Where it is:
//  - cgroup v2: proc/self/cgroup has the line `0::<path>`; the cpuset is
//    sys/fs/cgroup/<path>/cpuset.cpus.effective and cpuset.mems.effective.
//    Those files exist only where the cpuset controller is enabled; a cgroup
//    without them runs on its parent's cpuset, so the nearest ancestor that
//    has them decides.
//  - cgroup v1: a line `N:<controllers>:<path>` whose controllers include
//    `cpuset`; the files are under sys/fs/cgroup/cpuset/<path>/
//    (cpuset.effective_cpus, else cpuset.cpus; cpuset.effective_mems, else
//    cpuset.mems). A v1 cpuset line wins over the v2 line (hybrid hosts keep
//    cpuset on v1).
//  - Inside a container the path is often the host's (`/docker/<id>`, or
//    `/kubepods/...`) while the container's cgroup is mounted at the mount
//    point itself: a path that does not exist under the mount is walked up,
//    so the mount point's own files answer.
// No cgroup line, or no cpuset file on the way up, means no cgroup cpuset:
// the caller uses every online CPU.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/sysfs_reader.hpp"

namespace gpuaff {
inline namespace v0 {

/// A process's cgroup cpuset, as read from a root.
struct CgroupCpuset {
  bool has_cpus = false;       ///< a cpuset CPU file was found
  bool has_mems = false;       ///< a cpuset memory-node file was found
  CpuSet cpus{};               ///< the cpuset's CPUs (when has_cpus)
  CpuSet mems{};               ///< the cpuset's memory nodes (when has_mems)
  std::string cpus_file{};     ///< root-relative path of the CPU file read ("" when none)
  std::string mems_file{};     ///< root-relative path of the memory-node file read ("" when none)
  std::vector<std::string> files_read{};  ///< every root-relative file read (for the recorder)
};

namespace detail {

/// One line of proc/self/cgroup: "hierarchy:controllers:path".
struct CgroupLine {
  std::string_view controllers;
  std::string_view path;
  bool v2 = false;  ///< "0::path"
};

/// The cgroup path to use: the v1 line naming `cpuset` if any, else the v2
/// line; empty `path` when neither is present.
/// Errors: Errc::parse_error for a line without two colons, or a path that is
/// not absolute or has a ".." component.
inline Result<CgroupLine> pick_cgroup_line(const SysfsReader& r, std::string_view rel, std::string_view text) {
  CgroupLine v1, v2;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (trim(line).empty()) continue;
    std::size_t c1 = line.find(':');
    std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos)
      return r.bad(Errc::parse_error, rel, "line '", line.substr(0, 60), "' is not hierarchy:controllers:path");
    CgroupLine l{line.substr(c1 + 1, c2 - c1 - 1), line.substr(c2 + 1), false};
    // A removed cgroup is shown with " (deleted)" after its path.
    if (constexpr std::string_view deleted = " (deleted)"; l.path.ends_with(deleted))
      l.path.remove_suffix(deleted.size());
    if (l.path.empty() || l.path.front() != '/' || l.path.find("/../") != std::string_view::npos ||
        l.path.ends_with("/.."))
      return r.bad(Errc::parse_error, rel, "cgroup path '", l.path.substr(0, 60), "' is not an absolute path");
    if (line.substr(0, c1) == "0" && l.controllers.empty()) {
      l.v2 = true;
      v2 = l;
      continue;
    }
    std::string_view ctl = l.controllers;
    while (!ctl.empty()) {
      std::size_t comma = ctl.find(',');
      if (ctl.substr(0, comma) == "cpuset") v1 = l;
      ctl = comma == std::string_view::npos ? std::string_view() : ctl.substr(comma + 1);
    }
  }
  return v1.path.empty() ? v2 : v1;
}

/// "/a/b" -> "/a"; "/a" -> "/"; "/" stays "/".
inline std::string_view parent_cgroup(std::string_view path) {
  std::size_t slash = path.find_last_of('/');
  return slash == 0 || slash == std::string_view::npos ? std::string_view("/") : path.substr(0, slash);
}

/// Reads the first of `names` in the cgroup `path` under `mount`, or its
/// nearest ancestor that has one; records the file read in `file`.
inline Result<std::optional<CpuSet>> read_cgroup_set(SysfsReader& r, std::string_view mount, std::string_view path,
                                                     const std::vector<const char*>& names, std::string& file) {
  std::string text;
  while (true) {
    std::string dir(mount);
    if (path != "/") dir += path;
    dir += '/';
    for (const char* name : names) {
      std::string rel = dir + name;
      GPUAFF_TRY(bool have, r.get(rel, text));
      if (!have) continue;
      // A cpuset.*mems file lists memory nodes: say so, not "CPU id", when it is malformed.
      bool nodes = std::string_view(name).find("mems") != std::string_view::npos;
      auto parsed = r.cpus(rel, text, Form::list, Empty::error);
      if (!parsed && nodes)
        return r.bad(Errc::parse_error, rel, "is not a list of NUMA node ids such as 0-1 (found '",
                     trim(text).substr(0, 40), "')");
      GPUAFF_TRY(CpuSet set, std::move(parsed));
      file = rel;
      return std::optional<CpuSet>(set);
    }
    if (path == "/") return std::optional<CpuSet>();
    path = parent_cgroup(path);
  }
}

}  // namespace detail

/// The cgroup cpuset of the process that `root` describes ("/" or a
/// recording; see the top of this file).
/// Errors: Errc::io_error (a file exists but cannot be read), Errc::parse_error
/// (a malformed proc/self/cgroup line, an empty or malformed cpuset file),
/// naming the file and the root; Errc::not_found when `root` is neither a
/// directory nor a tar file.
inline Result<CgroupCpuset> read_cgroup_cpuset(const std::string& root) {
  return detail::read_from_root<CgroupCpuset>(root, [](detail::SysfsReader& r, CgroupCpuset& out) -> Result<void> {
    const std::string rel = "proc/self/cgroup";
    std::string text;
    GPUAFF_TRY(bool have, r.get(rel, text));
    if (!have) return {};
    GPUAFF_TRY(detail::CgroupLine line, detail::pick_cgroup_line(r, rel, text));
    if (line.path.empty()) return {};
    const std::string path(line.path);  // `text` is reused below
    // v2 files, or v1's (the effective set first, then the configured one).
    std::string_view mount = line.v2 ? "sys/fs/cgroup" : "sys/fs/cgroup/cpuset";
    std::vector<const char*> cpu_names{"cpuset.cpus.effective"};
    std::vector<const char*> mem_names{"cpuset.mems.effective"};
    if (!line.v2) {
      cpu_names = {"cpuset.effective_cpus", "cpuset.cpus"};
      mem_names = {"cpuset.effective_mems", "cpuset.mems"};
    }
    GPUAFF_TRY(auto cpus, detail::read_cgroup_set(r, mount, path, cpu_names, out.cpus_file));
    GPUAFF_TRY(auto mems, detail::read_cgroup_set(r, mount, path, mem_names, out.mems_file));
    out.has_cpus = cpus.has_value();
    out.has_mems = mems.has_value();
    if (cpus) out.cpus = *cpus;
    if (mems) out.mems = *mems;
    return {};
  });
}

}  // namespace v0
}  // namespace gpuaff
