// SPDX-License-Identifier: Apache-2.0
#pragma once
// SysfsReader: what one SysfsSource::load() reads with, on top of the file
// layer (detail/fs.hpp): each file read is counted and traced (files_opened(),
// files_read()), parsed as sysfs writes it, and every error names the full
// path, root included, and what to do. source/sysfs.hpp reads the sections of
// a topology with it.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

template <class = void>
inline std::string cpu_dir(int cpu) { return std::string("sys/devices/system/cpu/cpu") + std::to_string(cpu); }

enum class Form { list, mask };
enum class Empty { error, allowed };

/// A CPU set read from a file, and the root-relative path it came from (for
/// the errors about its content).
struct CpuFile {
  CpuSet cpus;
  std::string path;
};

/// Whether `root` is this machine's `/`. A directory that is not is opened
/// once, here (O_PATH), and asked what it is through its descriptor: with
/// `dir_fd`, the caller gets that descriptor to read through (-1 otherwise:
/// "/", a file, an error) and closes it; without, it is closed. A load per
/// call (gpuaff.plan(pci=...)) walks the root's path once, not twice.
/// Errors: the root is empty, or neither a directory nor a file (a tar root:
/// detail/archive_tree.hpp).
template <class = void>
inline Result<bool> is_live_root(const std::string& root, int* dir_fd = nullptr) {
  if (dir_fd != nullptr) *dir_fd = -1;
  if (root.empty())
    return fail(Errc::invalid_argument, "the topology root is empty; pass root=/ or a directory made by `gpuaff record`");
  if (root == "/") return true;  // this process's root: nothing to ask (a load per rank, per call)
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat st {};
  bool known = fd >= 0 ? ::fstat(fd, &st) == 0 : ::stat(root.c_str(), &st) == 0;
  if (!known || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) {
    // What is there instead: nothing (why), or a FIFO, socket or device.
    std::string what = known ? std::string("it is a FIFO, socket or device") : errno_text(errno);
    if (fd >= 0) ::close(fd);
    // fixtures/NAME where the source tree has fixtures/NAME.tar.xz (the build unpacks it)
    for (const char* suffix : {".tar.xz", ".tar.gz", ".tar"})
      if (std::string archive = root + suffix; ::stat(archive.c_str(), &st) == 0 && S_ISREG(st.st_mode))
        return fail(Errc::not_found, "topology root '", root, "' does not exist, and '", archive,
                    "' does: pass root=", archive, " (read as it is, never unpacked)");
    return fail(Errc::not_found, "topology root '", root, "' is neither a directory nor a file (", what,
                "); pass root=/, a directory made by `gpuaff record`, or the FILE.tar it writes (also as .tar.xz "
                "or .tar.gz)");
  }
  if (!S_ISDIR(st.st_mode)) return false;  // a file: O_DIRECTORY refused it (fd < 0), nothing to close
  // Only the directory "/" itself can resolve to "/": another one is not the
  // host's root, known without walking its path (realpath reads each link).
  // "/" is asked once per process (a chroot after the first load would go
  // unseen; a process that binds GPUs does not change its root).
  static const std::optional<std::pair<dev_t, ino_t>> top = []() -> std::optional<std::pair<dev_t, ino_t>> {
    struct stat t {};
    if (::stat("/", &t) != 0) return std::nullopt;
    return std::pair{t.st_dev, t.st_ino};
  }();
  if (!top || (top->first == st.st_dev && top->second == st.st_ino)) {
    if (fd >= 0) ::close(fd);
    return is_host_root(root);
  }
  if (dir_fd != nullptr) *dir_fd = fd;
  else if (fd >= 0) ::close(fd);
  return false;
}

/// One load: file access with counting and tracing, and error wording.
template <class = void>
class BasicSysfsReader {
 public:
  /// `root_fd`: the root's descriptor from is_live_root (this reader owns it), or -1.
  BasicSysfsReader(const std::string& root, bool live, int root_fd = -1) : dir_(root, live, root_fd) {
    display_ = root;
    while (display_.size() > 1 && display_.back() == '/') display_.pop_back();
    if (live || display_ == "/") display_.clear();
  }

  int opened = 0;
  std::vector<std::string> read;
  /// What earlier sections of the load found that later ones use.
  struct Found {
    /// Node ids read as another node (merged for listing the same CPUs), and that node's id.
    std::vector<std::pair<int, int>> node_aliases;
    /// The node that `id` is read as (node_aliases applied in order).
    int read_as(int id) const {
      for (const auto& [merged, into] : node_aliases)
        if (id == merged) id = into;
      return id;
    }
    bool node_tree = true;  ///< sys/devices/system/node exists
    /// The NVIDIA driver's list of the process's GPUs (proc/driver/nvidia/gpus); nullopt: no such directory.
    std::optional<std::vector<PciAddress>> driver_gpus;
    /// GPUs the driver lists whose device node this process may not open (probe_device_nodes).
    std::vector<PciAddress> denied_gpus;
  } found;

  /// What open_device() found at a device node.
  struct DeviceOpen {
    int path_error = 0;    ///< errno of the O_PATH open (ENOENT or ENOTDIR: nothing there); 0: something is there
    mode_t type = 0;       ///< what is there (S_IFCHR, S_IFREG, ...)
    dev_t rdev = 0;        ///< its device number, for a device
    bool matches = false;  ///< a character device of the major and minor asked for
    bool nodev = false;    ///< it matched, on a filesystem mounted nodev (where every open fails with EACCES)
    bool tried = false;    ///< it matched, and was opened for real
    int open_error = 0;    ///< errno of that open; 0: it opened (and was closed at once)
  };

  bool live() const { return dir_.live(); }
  /// Why a tar root could not be read (check before reading), or nullptr.
  const Error* archive_error() const { return dir_.archive_error(); }
  std::string shown(std::string_view rel) const {
    std::string s = display_;
    s += '/';
    s += rel;
    return s;
  }
  std::string_view hint() const {
    return live() ? "this kernel does not expose it as expected; record a working machine with `gpuaff record` and "
                    "pass root=DIR"
                  : "root=DIR must point at a recording made by `gpuaff record`";
  }

  template <class... Parts>
  Unexpected<Error> bad(Errc code, std::string_view rel, const Parts&... parts) const {
    return fail(code, shown(rel), ": ", parts..., "; ", hint());
  }
  Unexpected<Error> bad(std::string_view rel, const Error& e) const {
    return fail(e.code(), shown(rel), ": ", e.message(), "; ", hint());
  }

  /// Reads a file: true with `out` (trailing NULs and whitespace stripped), false if missing.
  Result<bool> get(std::string_view rel, std::string& out) {
    ++opened;
    // A sysfs attribute comes whole from the first read; /proc files may not
    // (a seq_file of many records stops short at a record), but for
    // proc/self/status, which the kernel writes out whole (single_open), and
    // a recording's copy of it, a short read is the end.
    bool proc = rel.size() >= 5 && rel.substr(0, 5) == "proc/" && rel != "proc/self/status";
    int err = dir_.read(rel, out, proc ? ShortRead::more : ShortRead::end);
    if (err == ENOENT || err == ENOTDIR) return false;
    if (err != 0)
      return unexpected(make_sys_error(Errc::io_error, err, shown(rel), ": cannot be read (", errno_text(err), "); ", hint()));
    strip_trailing(out);
    read.emplace_back(rel);
    return true;
  }

  /// The first of `rels` that exists: its position, or -1 (content in `out`).
  Result<int> first_of(std::initializer_list<std::string> rels, std::string& out) {
    int i = 0;
    for (const auto& r : rels) {
      GPUAFF_TRY(bool have, get(r, out));
      if (have) return i;
      ++i;
    }
    return -1;
  }

  /// The CPUs of the first of `dir + names` that exists, or nullopt when none
  /// does. The first half of `names` are cpulists ("0-3,8"), the second half
  /// their hex-mask twins in the same order (older kernels have only masks).
  Result<std::optional<CpuFile>> list_or_mask(std::string_view dir, std::initializer_list<const char*> names,
                                               Empty empty, std::string& scratch) {
    std::size_t i = 0;
    for (const char* name : names) {
      std::string rel(dir);
      rel += name;
      GPUAFF_TRY(bool have, get(rel, scratch));
      if (have) {
        GPUAFF_TRY(CpuSet set, cpus(rel, scratch, i < names.size() / 2 ? Form::list : Form::mask, empty));
        return std::optional<CpuFile>(CpuFile{set, std::move(rel)});
      }
      ++i;
    }
    return std::optional<CpuFile>();
  }

  /// The group (core, package or cache group) that `f` gives for `cpu`, kept
  /// to `online` CPUs: it must hold `cpu` itself and no CPU of the groups
  /// `covered` so far (`what`: "sibling list", "package list", ...).
  Result<CpuSet> own_group(const CpuFile& f, int cpu, const CpuSet& online, const CpuSet& covered,
                           std::string_view what) const {
    CpuSet group = f.cpus & online;
    if (!group.test(cpu)) return bad(Errc::parse_error, f.path, "does not list cpu", cpu, " itself");
    if (group.intersects(covered))
      return bad(Errc::parse_error, f.path, "disagrees with the ", what, " of cpu", (group & covered).first());
    return group;
  }

  Result<CpuSet> cpus(std::string_view rel, std::string_view text, Form form, Empty empty) const {
    if (trim(text).empty()) {
      if (empty == Empty::allowed) return CpuSet{};
      return bad(Errc::parse_error, rel, "is empty");
    }
    auto r = form == Form::list ? CpuSet::parse_list(text) : CpuSet::parse_mask(text);
    if (!r) return bad(rel, r.error());
    return *r;
  }

  Result<long long> integer(std::string_view rel, std::string_view text, long long lo, long long hi) const {
    std::string_view s = trim(text);
    if (s.empty()) return bad(Errc::parse_error, rel, "is empty");
    bool neg = s[0] == '-';
    std::string_view digits = s.substr(neg ? 1 : 0);
    long long v = 0;
    // saturated: an overlong number is reported as out of range
    if (digits.empty() || leading_number(digits, 10, 1'000'000'000'000LL, v) != digits.size())
      return bad(Errc::parse_error, rel, "expected a number, found '", s.substr(0, 24), "'");
    if (neg) v = -v;
    if (v < lo || v > hi)
      return bad(Errc::out_of_range, rel, "value ", s.substr(0, 24), " is outside ", lo, "..", hi);
    return v;
  }

  Result<long long> hex(std::string_view rel, std::string_view text, long long max) const {
    std::string_view s = trim(text);
    if (s.empty()) return bad(Errc::parse_error, rel, "is empty");
    std::string_view digits = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? s.substr(2) : s;
    long long v = 0;
    if (leading_number(digits, 16, 1LL << 40, v) != digits.size())  // saturated: reported as out of range
      return bad(Errc::parse_error, rel, "expected a hex number such as 0x10de, found '", s.substr(0, 24), "'");
    if (v > max) return bad(Errc::out_of_range, rel, "value ", s.substr(0, 24), " is above ", max);
    return v;
  }

  /// Whether this process may open the character device `rel` (a device
  /// cgroup's answer, as NVML asks it): `rel` is opened inside the root with
  /// O_PATH | O_NOFOLLOW (which opens no device), and only when that is a
  /// character device numbered `want_major`:`want_minor` is it opened for real
  /// (O_RDONLY | O_NONBLOCK), through that descriptor (/proc/self/fd/N), so
  /// that nothing but the node checked is ever opened; then closed at once.
  /// A node on a filesystem mounted nodev is not opened: no device opens there.
  /// Each open counts in `opened`. Never an error: DeviceOpen says what happened.
  DeviceOpen open_device(std::string_view rel, unsigned want_major, unsigned want_minor) {
    DeviceOpen d;
    ++opened;
    int fd = -1;
    d.path_error = dir_.open(rel, O_PATH | O_NOFOLLOW, fd);
    if (d.path_error != 0) return d;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      d.path_error = errno;
      ::close(fd);
      return d;
    }
    d.type = st.st_mode & S_IFMT;
    d.rdev = st.st_rdev;
    d.matches = S_ISCHR(st.st_mode) && major(st.st_rdev) == want_major && minor(st.st_rdev) == want_minor;
    struct statvfs vfs {};
    d.nodev = d.matches && ::fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_NODEV) != 0;
    if (d.matches && !d.nodev) {
      ++opened;
      d.tried = true;
      std::string self = std::string("/proc/self/fd/") + std::to_string(fd);
      int real = ::open(self.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      if (real >= 0) ::close(real);
      else d.open_error = errno;
    }
    ::close(fd);
    return d;
  }

  /// The root-relative path resolved inside the root exists and is a directory.
  bool is_directory(std::string_view rel) { return dir_.is_directory(rel); }

  /// The root-relative path `rel` leads to, every link followed inside the
  /// root; "" when a link loops.
  std::string resolve(std::string_view rel) {
    std::string out;
    return dir_.resolver().resolve(rel, out) == 0 ? out : std::string();
  }

  /// Lists a directory inside the root; a missing one is empty (and sets `*missing`).
  Result<std::vector<std::string>> list(std::string_view rel, bool* missing = nullptr) {
    std::vector<std::string> names;
    int e = dir_.list(rel, names);
    if (missing != nullptr) *missing = e == ENOENT || e == ENOTDIR;
    if (e == ENOENT || e == ENOTDIR) names.clear();
    else if (e != 0)
      return unexpected(make_sys_error(Errc::io_error, e, shown(rel), ": cannot be listed (", errno_text(e), "); ", hint()));
    return names;
  }

 private:
  RootDir dir_;
  std::string display_;
};
using SysfsReader = BasicSysfsReader<>;  // a template only to be compiled where used (config.hpp)

/// Reads the root `root` ("/" or a recording) once, with one reader:
/// `read(r, out)` fills a default-constructed T, whose `files_read` then gets
/// the files the reader read (also when `read` fails; the error is returned).
/// Errors: those of is_live_root and of an archive root, then `read`'s.
template <class T, class Read>
Result<T> read_from_root(const std::string& root, Read&& read) {
  int root_fd = -1;  // the root's descriptor, handed to the reader
  GPUAFF_TRY(bool live, is_live_root(root, &root_fd));
  SysfsReader r(root, live, root_fd);
  if (const Error* e = r.archive_error()) return unexpected(*e);
  T out;
  Result<void> done = read(r, out);
  out.files_read = std::move(r.read);
  if (!done) return Unexpected<Error>(done.error());
  return out;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
