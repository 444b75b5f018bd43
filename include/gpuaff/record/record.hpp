// SPDX-License-Identifier: Apache-2.0
#pragma once
// record_topology: copies what SysfsSource reads from a root (normally this
// machine) into a directory, so that SysfsSource on that directory gives the
// same Topology (`gpuaff record --out DIR`, then `--root DIR`). Exactly the
// files the reader read are copied, byte for byte, under the same relative
// paths; each symlink met on the way (sys/bus/pci/devices/* -> sys/devices/pci*)
// is recreated as a relative link inside the recording; proc/self/status is
// written fresh with the allowed set the load saw (live: sched_getaffinity).
// The process's cgroup cpuset files (proc/self/cgroup and the cpuset files
// source/cgroup.hpp reads) are copied too.
// With for_hwloc (the default) the files hwloc needs to load the recording
// through HWLOC_FSROOT are added (record/hwloc_files.hpp); SysfsSource ignores them.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/source/archive.hpp"
#include "gpuaff/record/hwloc_files.hpp"
#include "gpuaff/record/root_copy.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/cgroup.hpp"
#include "gpuaff/source/reserved.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

struct RecordOptions {
  std::string out_dir;                  ///< where to write; created if missing
  std::string root = "/";               ///< what to record; "/" is this machine
  std::vector<PciAddress> extra_pci{};  ///< non-GPU devices to record too (for --pci)
  bool allow_non_empty = false;         ///< write into a directory that already has entries
  bool for_hwloc = true;                ///< also copy what hwloc needs to load the recording (record/hwloc_files.hpp)
  /// SysfsOptions::probe_device_nodes: the GPUs whose device node this process
  /// may not open are left out of the recorded proc/driver/nvidia/gpus, so that
  /// a replay sees the GPUs the process saw (`gpuaff record` sets it as
  /// load_request() does: device_nodes_probe_due()).
  bool probe_device_nodes = false;
};

struct RecordSummary {
  std::string out_dir;
  int files = 0;                   ///< regular files written (each once), proc/self/status included
  int symlinks = 0;                ///< symlinks created
  std::uint64_t bytes = 0;         ///< total size of those files
  std::vector<std::string> paths;  ///< root-relative paths of the files written, sorted
  Topology topology;               ///< what was recorded (origin: the source root)
};

namespace detail {

/// The error for a directory, link or file of the recording that cannot be made.
inline Unexpected<Error> record_io_error(int e, std::string_view what, std::string_view path) {
  return unexpected(make_sys_error(Errc::io_error, e, "cannot ", what, " '", path, "' (", errno_text(e),
                                   "); check that the output directory is writable"));
}

/// The error for a copy into the recording that failed.
inline Unexpected<Error> record_copy_error(const RootCopy::Failure& f) {
  return f.planted_link() ? unexpected(f.planted_link_error()) : record_io_error(f.error, f.what, f.path);
}

/// Refuses a tar file as the root (a recording already) and an output that is
/// not a directory, or a directory with entries unless allow_non_empty.
inline Result<void> check_record_paths(const RecordOptions& options) {
  if (options.out_dir.empty())
    return fail(Errc::invalid_argument, "no output directory given; pass out=DIR");
  const std::string& out = options.out_dir;
  struct stat st {};
  if (::stat(options.root.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    return fail(Errc::invalid_argument, "root=", options.root,
                " is a file: a tar file is a recording already; record reads a directory or this machine (to record "
                "it again, unpack it first: mkdir r && tar -xf FILE.tar -C r)");
  if (::stat(out.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return fail(Errc::invalid_argument, "output '", out, "' exists and is not a directory; choose a new directory");
    std::vector<std::string> entries;
    int e = list_directory(out, entries);
    if (e != 0) return unexpected(make_sys_error(Errc::io_error, e, "cannot list output directory '", out, "' (", errno_text(e), ")"));
    if (!entries.empty() && !options.allow_non_empty)
      return fail(Errc::invalid_argument, "output directory '", out,
                  "' is not empty; choose a new directory so that old files cannot mix into the recording");
  }
  return {};
}

/// The entries of the driver's GPU list (proc/driver/nvidia/gpus) in `from`;
/// none when the root has no such directory.
inline Result<std::vector<std::string>> driver_gpu_names(RootDir& from, const std::string& root) {
  std::vector<std::string> names;
  if (from.is_directory(nvidia_driver_gpus)) {
    if (int e = from.list(nvidia_driver_gpus, names); e != 0)
      return unexpected(make_sys_error(Errc::io_error, e, "cannot list '", nvidia_driver_gpus, "' in '", root,
                                       "': ", errno_text(e)));
  }
  return names;
}

/// "proc/driver/nvidia/gpus/NAME/" of each GPU in the driver's list that the
/// process may not open (`denied`): none of its files is recorded.
inline std::vector<std::string> denied_driver_dirs(const std::vector<std::string>& names,
                                                   const std::vector<PciAddress>& denied) {
  std::vector<std::string> dirs;
  for (const std::string& n : names) {
    auto a = PciAddress::parse(n);
    if (a && std::find(denied.begin(), denied.end(), *a) != denied.end())
      dirs.push_back(std::string(nvidia_driver_gpus) + "/" + n + "/");
  }
  return dirs;
}

/// Whether `rel` lies under one of `denied_dirs` (denied_driver_dirs).
inline bool left_out_of_recording(const std::string& rel, const std::vector<std::string>& denied_dirs) {
  return std::any_of(denied_dirs.begin(), denied_dirs.end(), [&](const std::string& p) { return rel.rfind(p, 0) == 0; });
}

/// Copies every file the reader read, but proc/self/status (written last, from
/// the allowed set) and the files of denied GPUs; `paths` gets each one copied.
inline Result<void> copy_files_read(const SysfsSource& source, RootCopy& copy,
                                    const std::vector<std::string>& denied_dirs, std::vector<std::string>& paths) {
  for (const std::string& rel : source.files_read()) {
    if (rel == "proc/self/status") continue;  // written below from the allowed set
    if (left_out_of_recording(rel, denied_dirs)) continue;
    std::string resolved;
    std::uint64_t bytes = 0;
    if (auto f = copy.copy_with_links(rel, resolved, bytes); f.error != 0) return record_copy_error(f);
    paths.push_back(resolved);
  }
  return {};
}

/// The process's cgroup cpuset (--baseline cgroup replays it). Optional: a
/// root without one, or whose cgroup files cannot be parsed, records none.
/// proc/self is a link to this process's pid: the recording keeps the name.
inline Result<void> copy_cgroup_files(const std::string& root, RootCopy& copy, std::vector<std::string>& paths) {
  if (auto cgroup = read_cgroup_cpuset(root)) {
    for (const std::string& rel : cgroup->files_read) {
      std::uint64_t bytes = 0;
      bool under_proc_self = rel.rfind("proc/self/", 0) == 0;
      std::string resolved = rel;
      auto f = under_proc_self ? copy.copy_as_named(rel, bytes) : copy.copy_with_links(rel, resolved, bytes);
      if (f.error != 0) return record_copy_error(f);
      paths.push_back(resolved);
    }
  }
  // What the system reserved (isolcpus, nohz_full, cgroup partitions):
  // reserve_os_cores=auto and roles replay it. Optional as the cpuset is.
  if (auto reserved = read_system_reservations(root)) {
    for (const std::string& rel : reserved->files_read) {
      if (std::find(paths.begin(), paths.end(), rel) != paths.end() || rel == "proc/self/cgroup") continue;
      std::uint64_t bytes = 0;
      std::string resolved = rel;
      if (auto f = copy.copy_with_links(rel, resolved, bytes); f.error != 0) return record_copy_error(f);
      paths.push_back(resolved);
    }
  }
  return {};
}

/// The driver's GPU list is its directory: each listed GPU keeps its entry
/// even without an information file, and an empty list (a container given no
/// NVIDIA GPU) stays an empty directory, so a recording made in a container
/// replays that container (docs/contract.md section 2).
/// A GPU the process may not open is left out (denied_driver_dirs).
inline Result<void> make_driver_gpu_dirs(RootDir& from, const std::string& out, std::vector<std::string> names,
                                         const std::vector<std::string>& denied_dirs) {
  if (!from.is_directory(nvidia_driver_gpus)) return {};
  names.emplace_back();  // the directory itself
  for (const std::string& n : names) {
    if (!n.empty() && !PciAddress::parse(n)) continue;
    std::string rel = std::string(nvidia_driver_gpus) + (n.empty() ? "" : "/" + n);
    if (!n.empty() && left_out_of_recording(rel + "/", denied_dirs)) continue;
    if (int e = make_directories(path_under(out, rel)); e != 0) return record_io_error(e, "create directory", rel);
  }
  return {};
}

/// proc/self/status with the allowed CPUs and memory nodes the load saw.
inline Result<void> write_allowed_status(RootCopy& copy, const Topology& t) {
  std::string status = "Cpus_allowed:\t" + t.allowed.to_mask() + "\nCpus_allowed_list:\t" + t.allowed.to_list() + "\n";
  if (!t.mems_allowed.empty())
    status += "Mems_allowed:\t" + t.mems_allowed.to_mask() + "\nMems_allowed_list:\t" + t.mems_allowed.to_list() + "\n";
  if (auto f = copy.write("proc/self/status", status); f.error != 0) return record_copy_error(f);
  return {};
}

/// Sorts summary.paths and counts what is on disk now: a file copied twice is
/// one file.
inline void count_recorded_files(RecordSummary& summary) {
  std::sort(summary.paths.begin(), summary.paths.end());
  summary.paths.erase(std::unique(summary.paths.begin(), summary.paths.end()), summary.paths.end());
  summary.files = static_cast<int>(summary.paths.size());
  summary.bytes = 0;
  for (const auto& p : summary.paths) {
    struct stat fst {};
    if (::lstat(path_under(summary.out_dir, p).c_str(), &fst) == 0) summary.bytes += static_cast<std::uint64_t>(fst.st_size);
  }
}

}  // namespace detail

/// Records `options.root` into `options.out_dir` (see the top of this file).
/// Errors: Errc::invalid_argument (empty out_dir, or out_dir not empty without
/// allow_non_empty), Errc::io_error (a directory, link or file cannot be made or
/// copied), and every error of SysfsSource::load() on the root. GPU visibility
/// variables are not applied: a recording holds every GPU.
inline Result<RecordSummary> record_topology(const RecordOptions& options) {
  GPUAFF_TRY_VOID(detail::check_record_paths(options));
  const std::string& out = options.out_dir;

  // Every part is read; one that cannot be read is left out with a note (the
  // recording of a machine with a broken file is what a bug report needs),
  // while what every answer needs still stops the recording.
  SysfsSource source(SysfsOptions{.root = options.root,
                                  .visible = {.use_environment = false},
                                  .extra_pci = options.extra_pci,
                                  .needs = TopologyParts::none(),
                                  .probe_device_nodes = options.probe_device_nodes});
  auto topo = source.load();
  if (!topo) {
    Error err = topo.error();
    err.prepend("cannot record: ");
    return unexpected(err);
  }

  RecordSummary summary;
  summary.out_dir = out;
  if (int e = detail::make_directories(out); e != 0) return detail::record_io_error(e, "create directory", out);

  detail::RootDir from(options.root, detail::is_host_root(options.root));
  detail::RootCopy copy(from, out);
  // A GPU the process may not open is not recorded as the driver's: none of
  // its proc/driver/nvidia/gpus/BDF files (the probe read its information).
  GPUAFF_TRY(std::vector<std::string> names, detail::driver_gpu_names(from, options.root));
  std::vector<std::string> denied = detail::denied_driver_dirs(names, source.denied_gpus());
  GPUAFF_TRY_VOID(detail::copy_files_read(source, copy, denied, summary.paths));
  GPUAFF_TRY_VOID(detail::copy_cgroup_files(options.root, copy, summary.paths));
  GPUAFF_TRY_VOID(detail::make_driver_gpu_dirs(from, out, names, denied));

  if (options.for_hwloc) {
    HwlocRecordSummary extra;
    GPUAFF_TRY_VOID(detail::copy_hwloc_extras(from, copy, extra, denied));
    summary.paths.insert(summary.paths.end(), extra.paths.begin(), extra.paths.end());
  }
  summary.symlinks = copy.links_made();

  // Written last: the hwloc extras copy the process's own status file, but the
  // recording must hold the allowed set the load saw (live: this thread's).
  GPUAFF_TRY_VOID(detail::write_allowed_status(copy, *topo));
  summary.paths.emplace_back("proc/self/status");

  detail::count_recorded_files(summary);
  summary.topology = *topo;
  return summary;
}

}  // namespace v0
}  // namespace gpuaff
