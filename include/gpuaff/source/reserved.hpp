// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the system itself reserved, under a root (docs/contract.md section 7):
// the CPUs the kernel keeps free of housekeeping work, and so the
// housekeeping CPUs the OS, interrupts and daemons run on.
//
//  - sys/devices/system/cpu/isolated: the CPUs of `isolcpus=` (taken out of
//    the scheduler's load balancing). An empty file: none.
//  - sys/devices/system/cpu/nohz_full: the CPUs of `nohz_full=` (no
//    scheduler tick while one task runs). An empty file or "(null)" (a kernel
//    built with NO_HZ_FULL booted without it): none.
//  - cgroup v2 isolated partitions: `cpuset.cpus.partition` of the process's
//    cgroup and its ancestors; the nearest that reads `isolated` makes its
//    `cpuset.cpus.effective` isolated (Documentation/admin-guide/cgroup-v2.rst,
//    "cpuset.cpus.partition"). The root cgroup's `cpuset.cpus.isolated`
//    (Linux 6.7 and later) lists every isolated partition's CPUs and
//    isolcpus's: read too, where it exists.
// A missing file means the kernel does not say: nothing reserved there.
// Slurm's specialized cores (CpuSpecList, CoreSpecCount) and the cores
// RestrictedCoresPerGPU keeps for GPU jobs are never in a step's cgroup
// cpuset: a step sees them only by their absence (`outside_cgroup` below).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "gpuaff/source/sysfs_reader.hpp"

namespace gpuaff {
inline namespace v0 {

/// The CPUs the system reserved, as read from a root.
struct SystemReservations {
  CpuSet isolated{};        ///< sys/devices/system/cpu/isolated (isolcpus=)
  CpuSet nohz_full{};       ///< sys/devices/system/cpu/nohz_full (nohz_full=)
  /// The process's cgroup v2 partition state: "root", "isolated", "member"
  /// (or the kernel's "... invalid (reason)"); "" without cgroup v2 cpusets.
  std::string partition{};
  std::string partition_file{};  ///< root-relative path of the partition file that decided
  CpuSet partition_cpus{};       ///< the CPUs of the nearest isolated partition (empty: none)
  CpuSet cgroup_isolated{};      ///< sys/fs/cgroup/cpuset.cpus.isolated (Linux 6.7+)
  std::vector<std::string> files_read{};  ///< every root-relative file read (for the recorder)

  /// Every CPU the system keeps free of housekeeping work.
  CpuSet reserved() const { return isolated | nohz_full | partition_cpus | cgroup_isolated; }
  /// Whether the system declared any such CPU.
  bool declared() const { return !reserved().empty(); }
  /// The housekeeping CPUs among `online`: those not reserved.
  CpuSet housekeeping(const CpuSet& online) const { return online - reserved(); }
  /// The files that declared reserved CPUs, for messages ("sys/devices/system/cpu/isolated=2-7").
  std::string sources() const {
    std::string s;
    auto add = [&s](std::string_view name, const CpuSet& c) {
      if (c.empty()) return;
      s += std::string(s.empty() ? "" : ", ") + std::string(name) + "=" + c.to_list();
    };
    add("sys/devices/system/cpu/isolated", isolated);
    add("sys/devices/system/cpu/nohz_full", nohz_full);
    add(partition_file.empty() ? std::string_view("cpuset.cpus.partition") : std::string_view(partition_file), partition_cpus);
    add("sys/fs/cgroup/cpuset.cpus.isolated", cgroup_isolated);
    return s;
  }
};

namespace detail {

/// A reserved-CPU file's list: empty, blank or "(null)" is none.
inline Result<CpuSet> reserved_list(SysfsReader& r, const std::string& rel, bool& have) {
  std::string text;
  GPUAFF_TRY(have, r.get(rel, text));
  if (!have) return CpuSet{};
  std::string_view t = trim(text);
  if (t.empty() || t == "(null)") return CpuSet{};
  return r.cpus(rel, t, Form::list, Empty::allowed);
}

}  // namespace detail

/// The reservations of the system `root` describes ("/" or a recording; see
/// the top of this file).
/// Errors: Errc::io_error (a file exists but cannot be read), Errc::parse_error
/// (a malformed list, naming the file and the root); Errc::not_found when
/// `root` is neither a directory nor a tar file.
inline Result<SystemReservations> read_system_reservations(const std::string& root) {
  return detail::read_from_root<SystemReservations>(root, [](detail::SysfsReader& r, SystemReservations& out) -> Result<void> {
    bool have = false;
    GPUAFF_TRY(out.isolated, detail::reserved_list(r, "sys/devices/system/cpu/isolated", have));
    GPUAFF_TRY(out.nohz_full, detail::reserved_list(r, "sys/devices/system/cpu/nohz_full", have));
    GPUAFF_TRY(out.cgroup_isolated, detail::reserved_list(r, "sys/fs/cgroup/cpuset.cpus.isolated", have));
    const std::string rel = "proc/self/cgroup";
    std::string text;
    GPUAFF_TRY(bool cg, r.get(rel, text));
    if (!cg) return {};
    GPUAFF_TRY(detail::CgroupLine line, detail::pick_cgroup_line(r, rel, text));
    if (line.path.empty() || !line.v2) return {};
    // The process's own partition state first, then each ancestor's: the
    // nearest `isolated` decides (a member of an isolated partition runs on
    // its CPUs).
    std::string path(line.path);
    bool first = true;
    while (true) {
      std::string dir = "sys/fs/cgroup";
      if (path != "/") dir += path;
      std::string file = dir + "/cpuset.cpus.partition";
      GPUAFF_TRY(bool has, r.get(file, text));
      if (has) {
        std::string state(detail::trim(text));
        if (first) {
          out.partition = state;
          out.partition_file = file;
          first = false;
        }
        if (state == "isolated") {
          out.partition = state;
          out.partition_file = file;
          std::string cpus_text;
          std::string cpus_rel = dir + "/cpuset.cpus.effective";
          GPUAFF_TRY(bool has_cpus, r.get(cpus_rel, cpus_text));
          if (!has_cpus)
            return r.bad(Errc::parse_error, file, "says 'isolated' and ", cpus_rel,
                         " is missing: the partition's CPUs are unknown");
          GPUAFF_TRY(out.partition_cpus, r.cpus(cpus_rel, cpus_text, detail::Form::list, detail::Empty::allowed));
          return {};
        }
      }
      if (path == "/") return {};
      path = std::string(detail::parent_cgroup(path));
    }
  });
}

/// The online CPUs a cgroup cpuset leaves out: where a Slurm step runs, its
/// node's specialized cores (CpuSpecList, CoreSpecCount) and the cores kept
/// for other jobs are among them. Empty without a cgroup cpuset.
inline CpuSet outside_cgroup(const CpuSet& online, const CgroupCpuset& cgroup) {
  return cgroup.has_cpus ? online - cgroup.cpus : CpuSet{};
}

}  // namespace v0
}  // namespace gpuaff
