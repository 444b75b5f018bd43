#pragma once
// record_topology: copies what SysfsSource reads from a root (normally this
// machine) into a directory, so that SysfsSource on that directory gives the
// same Topology (`gpuaff record --out DIR`, then `--root DIR`). Exactly the
// files the reader read are copied, byte for byte, under the same relative
// paths; each symlink met on the way (sys/bus/pci/devices/* -> sys/devices/pci*)
// is recreated as a relative link inside the recording; proc/self/status is
// written fresh with the allowed set the load saw (live: sched_getaffinity).
// With for_hwloc (the default) the files hwloc needs to load the recording
// through HWLOC_FSROOT are added (record/hwloc_files.hpp); SysfsSource ignores them.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/record/hwloc_files.hpp"
#include "gpuaff/result.hpp"
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

/// Lexically normalised root-relative path of `base_dir/target` (absolute
/// targets start at the root; ".." stops at the root), as components.
inline std::vector<std::string> normalise_in_root(std::string_view base_dir, std::string_view target) {
  std::vector<std::string> in;
  if (target.empty() || target[0] != '/') split_path(base_dir, in);
  split_path(target, in);
  std::vector<std::string> out;
  for (auto& c : in) {
    if (c == "..") {
      if (!out.empty()) out.pop_back();
    } else {
      out.push_back(std::move(c));
    }
  }
  return out;
}

/// The shortest relative link from directory `from_dir` to `to` (both root-relative components).
inline std::string relative_link(const std::vector<std::string>& from_dir, const std::vector<std::string>& to) {
  std::size_t common = 0;
  while (common < from_dir.size() && common < to.size() && from_dir[common] == to[common]) ++common;
  std::string s;
  for (std::size_t i = common; i < from_dir.size(); ++i) s += "../";
  for (std::size_t i = common; i < to.size(); ++i) {
    s += to[i];
    if (i + 1 < to.size()) s += '/';
  }
  if (s.empty()) s = ".";
  return s;
}

inline std::string parent_of(std::string_view rel) {
  std::size_t slash = rel.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(rel.substr(0, slash));
}

}  // namespace detail

/// Records `options.root` into `options.out_dir` (see the top of this file).
/// Errors: Errc::invalid_argument (empty out_dir, or out_dir not empty without
/// allow_non_empty), Errc::io_error (a directory, link or file cannot be made or
/// copied), and every error of SysfsSource::load() on the root. GPU visibility
/// variables are not applied: a recording holds every GPU.
inline Result<RecordSummary> record_topology(const RecordOptions& options) {
  if (options.out_dir.empty())
    return fail(Errc::invalid_argument, "no output directory given; pass --out DIR");
  const std::string& out = options.out_dir;
  struct stat st {};
  if (::stat(out.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return fail(Errc::invalid_argument, "output '", out, "' exists and is not a directory; choose a new directory");
    std::vector<std::string> entries;
    int e = detail::list_directory(out, entries);
    if (e != 0) return unexpected(make_sys_error(Errc::io_error, e, "cannot list output directory '", out, "' (errno ", e, ")"));
    if (!entries.empty() && !options.allow_non_empty)
      return fail(Errc::invalid_argument, "output directory '", out,
                  "' is not empty; choose a new directory so that old files cannot mix into the recording");
  }

  SysfsSource source(SysfsOptions{.root = options.root, .visible = {.use_environment = false},
                                  .extra_pci = options.extra_pci});
  auto topo = source.load();
  if (!topo) {
    Error err = topo.error();
    err.prepend("cannot record: ");
    return unexpected(err);
  }

  RecordSummary summary;
  summary.out_dir = out;
  auto out_path = [&](std::string_view rel) {
    std::string p = out;
    if (p.back() != '/') p += '/';
    p += rel;
    return p;
  };
  auto io_fail = [&](int e, std::string_view what, std::string_view path) {
    return unexpected(make_sys_error(Errc::io_error, e, "cannot ", what, " '", path, "' (errno ", e,
                                     "); check that the output directory is writable"));
  };
  if (int e = detail::make_directories(out); e != 0) return io_fail(e, "create directory", out);

  detail::RootResolver resolver(options.root);
  std::set<std::string> links_made;
  std::string data;
  for (const std::string& rel : source.files_read()) {
    if (rel == "proc/self/status") continue;  // written below from the allowed set
    std::vector<detail::RootResolver::Link> links;
    std::string resolved;
    if (int e = resolver.resolve(rel, resolved, &links); e != 0) return io_fail(e, "resolve", resolver.host_path(rel));
    for (const auto& link : links) {
      if (!links_made.insert(link.path).second) continue;
      std::string parent = detail::parent_of(link.path);
      std::vector<std::string> from;
      detail::split_path(parent, from);
      std::string target = detail::relative_link(from, detail::normalise_in_root(parent, link.target));
      std::string at = out_path(link.path);
      if (int e = detail::make_directories(out_path(parent)); e != 0) return io_fail(e, "create directory", out_path(parent));
      if (::symlink(target.c_str(), at.c_str()) != 0) {
        int e = errno;
        std::string existing(4096, '\0');
        ssize_t n = e == EEXIST ? ::readlink(at.c_str(), existing.data(), existing.size()) : -1;
        if (n < 0 || std::string_view(existing.data(), static_cast<std::size_t>(n)) != target)
          return io_fail(e, "create symlink", at);
        continue;
      }
      ++summary.symlinks;
    }
    if (int e = detail::read_whole_file(resolver.host_path(resolved), data); e != 0)
      return io_fail(e, "read", resolver.host_path(resolved));
    if (int e = detail::make_directories(out_path(detail::parent_of(resolved))); e != 0)
      return io_fail(e, "create directory", out_path(detail::parent_of(resolved)));
    if (int e = detail::write_whole_file(out_path(resolved), data); e != 0) return io_fail(e, "write", out_path(resolved));
    summary.paths.push_back(resolved);
  }

  if (options.for_hwloc) {
    GPUAFF_TRY(auto extra, copy_hwloc_extras(options.root, out));
    summary.symlinks += extra.links_made;
    summary.paths.insert(summary.paths.end(), extra.paths.begin(), extra.paths.end());
  }

  // Written last: the hwloc extras copy the process's own status file, but the
  // recording must hold the allowed set the load saw (live: this thread's).
  const Topology& t = *topo;
  std::string status = "Cpus_allowed:\t" + t.allowed.to_mask() + "\nCpus_allowed_list:\t" + t.allowed.to_list() + "\n";
  if (!t.mems_allowed.empty())
    status += "Mems_allowed:\t" + t.mems_allowed.to_mask() + "\nMems_allowed_list:\t" + t.mems_allowed.to_list() + "\n";
  if (int e = detail::make_directories(out_path("proc/self")); e != 0) return io_fail(e, "create directory", out_path("proc/self"));
  if (int e = detail::write_whole_file(out_path("proc/self/status"), status); e != 0)
    return io_fail(e, "write", out_path("proc/self/status"));
  summary.paths.emplace_back("proc/self/status");

  // Count what is on disk now: a file copied twice is one file.
  std::sort(summary.paths.begin(), summary.paths.end());
  summary.paths.erase(std::unique(summary.paths.begin(), summary.paths.end()), summary.paths.end());
  summary.files = static_cast<int>(summary.paths.size());
  summary.bytes = 0;
  for (const auto& p : summary.paths) {
    struct stat fst {};
    if (::lstat(out_path(p).c_str(), &fst) == 0) summary.bytes += static_cast<std::uint64_t>(fst.st_size);
  }
  summary.topology = t;
  return summary;
}

}  // namespace v0
}  // namespace gpuaff
