// SPDX-License-Identifier: Apache-2.0
#pragma once
// What hwloc (2.x, Linux backend) reads from a root directory, beyond the files
// gpuaff's own sysfs reader reads: the hex-mask twins of the *_list files
// (hwloc reads only masks: thread_siblings, core_siblings, cache shared_cpu_map,
// node cpumap, PCI local_cpus), PCI config space (bridges, hence which devices
// share a host bridge), and the cgroup cpuset files that give hwloc its allowed
// set (proc/mounts, proc/self/cgroup, <cgroup mount>/<path>/cpuset.*).
//
// `gpuaff record` calls copy_hwloc_extras() so that a recording loads with the
// hwloc source (HWLOC_FSROOT) as well as with the sysfs source. This header has
// no hwloc dependency: the recorder is part of the core library. Every file is
// read inside the root it records (detail/fs.hpp), /proc included, so that a
// recording's links can never make it copy a file of the machine it runs on.
//
// Not copied, because hwloc uses them only for descriptive attributes that a
// Topology does not hold: /proc/cpuinfo, DMI ids (which also hold serial
// numbers), cpufreq, block/net class links, udev data.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/record/root_copy.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// What copy_hwloc_extras() did.
struct HwlocRecordSummary {
  int files_copied = 0;                ///< regular files written under the output root
  int links_made = 0;                  ///< symlinks recreated (sys/bus/pci/devices/*, HMAT initiators)
  std::uint64_t bytes = 0;             ///< bytes written to regular files
  std::vector<std::string> paths{};    ///< root-relative paths of the files written (links resolved)
  std::vector<std::string> unreadable{};  ///< root-relative files that exist but could not be read (EACCES)
};

namespace detail {

/// The cgroup files hwloc reads for its allowed set, derived from the live
/// proc/mounts and proc/self/{cgroup,cpuset}; also returns the filtered mounts text.
inline std::vector<std::string> hwloc_cgroup_paths(RootDir& from, std::string& mounts_out) {
  std::vector<std::string> paths;
  std::string mounts;
  mounts_out.clear();
  if (from.read("proc/mounts", mounts) != 0) return paths;
  std::string cgroup_text;
  std::string cpuset_text;
  (void)from.read("proc/self/cgroup", cgroup_text);
  (void)from.read("proc/self/cpuset", cpuset_text);
  std::string v2_path;  // "0::/x" line
  std::string v1_path;  // "N:...cpuset...:/x" line
  std::size_t pos = 0;
  while (pos < cgroup_text.size()) {
    std::size_t eol = cgroup_text.find('\n', pos);
    std::string_view line(cgroup_text.data() + pos, (eol == std::string::npos ? cgroup_text.size() : eol) - pos);
    pos = eol == std::string::npos ? cgroup_text.size() : eol + 1;
    std::size_t c1 = line.find(':');
    std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    std::string_view path = line.substr(c2 + 1);
    if (line.substr(0, c1) == "0" && ctrls.empty()) v2_path = path;
    std::size_t f = ctrls.find("cpuset");
    if (f != std::string_view::npos) v1_path = path;
  }
  if (v1_path.empty() && !cpuset_text.empty()) {
    v1_path = cpuset_text;
    while (!v1_path.empty() && (v1_path.back() == '\n' || v1_path.back() == ' ')) v1_path.pop_back();
  }
  pos = 0;
  while (pos < mounts.size()) {
    std::size_t eol = mounts.find('\n', pos);
    std::string line = mounts.substr(pos, (eol == std::string::npos ? mounts.size() : eol) - pos);
    pos = eol == std::string::npos ? mounts.size() : eol + 1;
    // fields: device mountpoint type options ...
    std::vector<std::string> f;
    std::size_t p = 0;
    while (p < line.size() && f.size() < 4) {
      std::size_t sp = line.find(' ', p);
      f.push_back(line.substr(p, (sp == std::string::npos ? line.size() : sp) - p));
      p = sp == std::string::npos ? line.size() : sp + 1;
    }
    if (f.size() < 4) continue;
    const std::string& mnt = f[1];
    const std::string& type = f[2];
    bool v1 = type == "cpuset" || (type == "cgroup" && (f[3].find("cpuset") != std::string::npos));
    bool v2 = type == "cgroup2";
    if (!v1 && !v2) continue;
    mounts_out += line;
    mounts_out += '\n';
    if (v2) {
      paths.push_back(path_under(mnt, "cgroup.controllers"));
      if (!v2_path.empty()) {
        paths.push_back(path_under(path_under(mnt, v2_path), "cpuset.cpus.effective"));
        paths.push_back(path_under(path_under(mnt, v2_path), "cpuset.mems.effective"));
      }
    } else if (!v1_path.empty()) {
      for (const char* leaf : {"cpuset.cpus", "cpuset.mems", "cpuset.effective_cpus", "cpuset.effective_mems", "cpus",
                               "mems", "effective_cpus", "effective_mems"})
        paths.push_back(path_under(path_under(mnt, v1_path), leaf));
    }
  }
  return paths;
}

/// Entry names of a root-relative directory, empty when it cannot be listed.
inline std::vector<std::string> listing(RootDir& from, const std::string& rel) {
  std::vector<std::string> names;
  if (from.list(rel, names) != 0) names.clear();
  return names;
}

/// Root-relative paths of the files hwloc reads from the root `from` that are
/// worth recording (see the header comment). Only paths that exist are listed.
inline std::vector<std::string> hwloc_record_paths(RootDir& from) {
  std::vector<std::string> out;
  auto add_if = [&](const std::string& rel) {
    if (from.exists(rel)) out.push_back(rel);
  };
  auto add_files_in = [&](const std::string& rel_dir, std::initializer_list<const char*> names) {
    for (const char* n : names) add_if(path_under(rel_dir, n));
  };
  for (const char* f : {"proc/self/cgroup", "proc/self/cpuset", "proc/meminfo"}) add_if(f);

  const std::string cpu = "sys/devices/system/cpu";
  add_files_in(cpu, {"online", "possible", "present", "offline", "kernel_max"});
  for (const auto& name : listing(from, cpu)) {
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    std::string c = cpu + "/" + name;
    add_files_in(c, {"online", "cpu_capacity"});
    add_files_in(c + "/topology",
                 {"physical_package_id", "core_id", "die_id", "cluster_id", "book_id", "drawer_id", "thread_siblings",
                  "thread_siblings_list", "core_cpus", "core_cpus_list", "core_siblings", "core_siblings_list",
                  "package_cpus", "package_cpus_list", "die_cpus", "die_cpus_list", "cluster_cpus",
                  "cluster_cpus_list", "book_siblings", "drawer_siblings"});
    for (const auto& idx : listing(from, c + "/cache")) {
      if (idx.compare(0, 5, "index") != 0) continue;
      add_files_in(c + "/cache/" + idx,
                   {"level", "type", "size", "id", "shared_cpu_map", "shared_cpu_list", "coherency_line_size",
                    "number_of_sets", "ways_of_associativity", "physical_line_partition"});
    }
  }

  const std::string node = "sys/devices/system/node";
  add_files_in(node, {"possible", "online", "has_cpu", "has_memory", "has_normal_memory", "has_generic_initiator"});
  for (const auto& name : listing(from, node)) {
    if (name.size() < 5 || name.compare(0, 4, "node") != 0 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos)
      continue;
    std::string n = node + "/" + name;
    add_files_in(n, {"cpumap", "cpulist", "distance", "meminfo"});
    for (const auto& hp : listing(from, n + "/hugepages"))
      add_if(n + "/hugepages/" + hp + "/nr_hugepages");
    // HMAT: accessK/initiators holds symlinks named nodeN plus performance files
    for (const auto& acc : listing(from, n)) {
      if (acc.compare(0, 6, "access") != 0) continue;
      for (const auto& e : listing(from, n + "/" + acc + "/initiators")) {
        if (e.compare(0, 4, "node") == 0) {
          out.push_back(n + "/" + acc + "/initiators/" + e + "/cpumap");  // goes through the link
        } else {
          add_if(n + "/" + acc + "/initiators/" + e);
        }
      }
    }
  }

  const std::string pci = "sys/bus/pci/devices";
  for (const auto& bdf : listing(from, pci)) {
    add_files_in(pci + "/" + bdf,
                 {"class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision", "local_cpus",
                  "local_cpulist", "numa_node", "current_link_speed", "current_link_width", "config"});
  }
  const std::string nv = "proc/driver/nvidia/gpus";
  for (const auto& bdf : listing(from, nv)) add_files_in(nv + "/" + bdf, {"information", "numa_status"});
  return out;
}

/// The error for a file that could not be written into the recording.
inline Unexpected<Error> hwloc_write_failure(const RootCopy::Failure& f) {
  if (f.planted_link()) return Unexpected<Error>(f.planted_link_error());
  return Unexpected<Error>(make_sys_error(Errc::io_error, f.error, "cannot write '", f.path,
                                          "' while recording for hwloc: ", detail::errno_text(f.error),
                                          "; check that the output directory is writable and has space"));
}

/// Copies the hwloc extras from `from` with `copy` (which may already hold the
/// links of other files), adding to `summary`; none whose root-relative path
/// starts with one of `left_out` (the driver entries of GPUs the process may
/// not open: record/record.hpp).
/// Errors: Errc::io_error naming the file that could not be written.
inline Result<void> copy_hwloc_extras(RootDir& from, RootCopy& copy, HwlocRecordSummary& summary,
                                      const std::vector<std::string>& left_out = {}) {
  std::string mounts;
  std::vector<std::string> paths = hwloc_record_paths(from);
  for (auto& p : hwloc_cgroup_paths(from, mounts)) paths.push_back(join_path(normalise_in_root("", p)));
  for (const auto& rel : paths) {
    bool skip = false;
    for (const auto& prefix : left_out) skip = skip || rel.rfind(prefix, 0) == 0;
    if (skip) continue;
    std::uint64_t bytes = 0;
    std::string copied = rel;
    // proc/self is a link to this process's pid: those files keep their names.
    RootCopy::Failure f = rel.compare(0, 5, "proc/") == 0 ? copy.copy_as_named(rel, bytes)
                                                          : copy.copy_with_links(rel, copied, bytes);
    if (f.error != 0 && f.writing()) return hwloc_write_failure(f);
    if (f.error == EACCES || f.error == EPERM) summary.unreadable.push_back(rel);
    if (f.error != 0) continue;
    ++summary.files_copied;
    summary.bytes += bytes;
    summary.paths.push_back(copied);
  }
  if (!mounts.empty()) {
    // Only the cgroup/cpuset mounts: hwloc looks for nothing else in this file.
    if (RootCopy::Failure f = copy.write("proc/mounts", mounts); f.error != 0) return hwloc_write_failure(f);
    ++summary.files_copied;
    summary.bytes += mounts.size();
    summary.paths.emplace_back("proc/mounts");
  }
  summary.links_made = copy.links_made();
  return {};
}

}  // namespace detail

/// Copies, from the root `from` (normally "/") into the recording `to`, the files
/// hwloc needs to load the recording with HWLOC_FSROOT (see the header comment),
/// keeping sysfs symlinks as links. Files that already exist in `to` are
/// overwritten with the same content. Unreadable files (EACCES: PCI config space
/// beyond 64 bytes for non-root, some cgroup files) are listed, not fatal.
/// Errors: Errc::io_error naming the file that could not be written under `to`.
inline Result<HwlocRecordSummary> copy_hwloc_extras(const std::string& from, const std::string& to) {
  HwlocRecordSummary summary;
  if (!detail::is_directory(to)) {
    return fail(Errc::io_error, "recording directory '", to, "' does not exist; create it first");
  }
  detail::RootDir dir(from, detail::is_host_root(from));
  detail::RootCopy copy(dir, to);
  GPUAFF_TRY_VOID(detail::copy_hwloc_extras(dir, copy, summary));
  return summary;
}

}  // namespace v0
}  // namespace gpuaff
