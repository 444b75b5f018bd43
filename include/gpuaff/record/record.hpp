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
#include "gpuaff/record/hwloc_files.hpp"
#include "gpuaff/record/root_copy.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/cgroup.hpp"
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

/// Records `options.root` into `options.out_dir` (see the top of this file).
/// Errors: Errc::invalid_argument (empty out_dir, or out_dir not empty without
/// allow_non_empty), Errc::io_error (a directory, link or file cannot be made or
/// copied), and every error of SysfsSource::load() on the root. GPU visibility
/// variables are not applied: a recording holds every GPU.
inline Result<RecordSummary> record_topology(const RecordOptions& options) {
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
    int e = detail::list_directory(out, entries);
    if (e != 0) return unexpected(make_sys_error(Errc::io_error, e, "cannot list output directory '", out, "' (", detail::errno_text(e), ")"));
    if (!entries.empty() && !options.allow_non_empty)
      return fail(Errc::invalid_argument, "output directory '", out,
                  "' is not empty; choose a new directory so that old files cannot mix into the recording");
  }

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
  auto io_fail = [&](int e, std::string_view what, std::string_view path) {
    return unexpected(make_sys_error(Errc::io_error, e, "cannot ", what, " '", path, "' (", detail::errno_text(e),
                                     "); check that the output directory is writable"));
  };
  auto copy_fail = [&](const detail::RootCopy::Failure& f) {
    return f.planted_link() ? unexpected(f.planted_link_error()) : io_fail(f.error, f.what, f.path);
  };
  if (int e = detail::make_directories(out); e != 0) return io_fail(e, "create directory", out);

  detail::RootDir from(options.root, detail::is_host_root(options.root));
  detail::RootCopy copy(from, out);
  // A GPU the process may not open is not recorded as the driver's: none of
  // its proc/driver/nvidia/gpus/BDF files (the probe read its information).
  std::vector<std::string> names;
  if (from.is_directory(detail::nvidia_driver_gpus)) {
    if (int e = from.list(detail::nvidia_driver_gpus, names); e != 0)
      return unexpected(make_sys_error(Errc::io_error, e, "cannot list '", detail::nvidia_driver_gpus, "' in '",
                                       options.root, "': ", detail::errno_text(e)));
  }
  std::vector<std::string> denied;  // "proc/driver/nvidia/gpus/NAME/" of each
  for (const std::string& n : names) {
    auto a = PciAddress::parse(n);
    const auto& d = source.denied_gpus();
    if (a && std::find(d.begin(), d.end(), *a) != d.end())
      denied.push_back(std::string(detail::nvidia_driver_gpus) + "/" + n + "/");
  }
  auto left_out = [&](const std::string& rel) {
    return std::any_of(denied.begin(), denied.end(), [&](const std::string& p) { return rel.rfind(p, 0) == 0; });
  };
  for (const std::string& rel : source.files_read()) {
    if (rel == "proc/self/status") continue;  // written below from the allowed set
    if (left_out(rel)) continue;
    std::string resolved;
    std::uint64_t bytes = 0;
    if (auto f = copy.copy_with_links(rel, resolved, bytes); f.error != 0) return copy_fail(f);
    summary.paths.push_back(resolved);
  }

  // The process's cgroup cpuset (--baseline cgroup replays it). Optional: a
  // root without one, or whose cgroup files cannot be parsed, records none.
  // proc/self is a link to this process's pid: the recording keeps the name.
  if (auto cgroup = read_cgroup_cpuset(options.root)) {
    for (const std::string& rel : cgroup->files_read) {
      std::uint64_t bytes = 0;
      bool under_proc_self = rel.rfind("proc/self/", 0) == 0;
      std::string resolved = rel;
      auto f = under_proc_self ? copy.copy_as_named(rel, bytes) : copy.copy_with_links(rel, resolved, bytes);
      if (f.error != 0) return copy_fail(f);
      summary.paths.push_back(resolved);
    }
  }

  // The driver's GPU list is its directory: each listed GPU keeps its entry
  // even without an information file, and an empty list (a container given no
  // NVIDIA GPU) stays an empty directory, so a recording made in a container
  // replays that container (docs/contract.md section 2).
  // A GPU the process may not open is left out (see above).
  if (from.is_directory(detail::nvidia_driver_gpus)) {
    names.emplace_back();  // the directory itself
    for (const std::string& n : names) {
      if (!n.empty() && !PciAddress::parse(n)) continue;
      std::string rel = std::string(detail::nvidia_driver_gpus) + (n.empty() ? "" : "/" + n);
      if (!n.empty() && left_out(rel + "/")) continue;
      if (int e = detail::make_directories(detail::path_under(out, rel)); e != 0) return io_fail(e, "create directory", rel);
    }
  }

  if (options.for_hwloc) {
    HwlocRecordSummary extra;
    GPUAFF_TRY_VOID(detail::copy_hwloc_extras(from, copy, extra, denied));
    summary.paths.insert(summary.paths.end(), extra.paths.begin(), extra.paths.end());
  }
  summary.symlinks = copy.links_made();

  // Written last: the hwloc extras copy the process's own status file, but the
  // recording must hold the allowed set the load saw (live: this thread's).
  const Topology& t = *topo;
  std::string status = "Cpus_allowed:\t" + t.allowed.to_mask() + "\nCpus_allowed_list:\t" + t.allowed.to_list() + "\n";
  if (!t.mems_allowed.empty())
    status += "Mems_allowed:\t" + t.mems_allowed.to_mask() + "\nMems_allowed_list:\t" + t.mems_allowed.to_list() + "\n";
  if (auto f = copy.write("proc/self/status", status); f.error != 0) return copy_fail(f);
  summary.paths.emplace_back("proc/self/status");

  // Count what is on disk now: a file copied twice is one file.
  std::sort(summary.paths.begin(), summary.paths.end());
  summary.paths.erase(std::unique(summary.paths.begin(), summary.paths.end()), summary.paths.end());
  summary.files = static_cast<int>(summary.paths.size());
  summary.bytes = 0;
  for (const auto& p : summary.paths) {
    struct stat fst {};
    if (::lstat(detail::path_under(out, p).c_str(), &fst) == 0) summary.bytes += static_cast<std::uint64_t>(fst.st_size);
  }
  summary.topology = t;
  return summary;
}

}  // namespace v0
}  // namespace gpuaff
