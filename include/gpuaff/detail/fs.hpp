// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one file layer under the sysfs reader and the recorder: whole-file reads
// with open/read/close (sysfs files report a size of 4096 whatever they hold,
// so we read to EOF), writes, listings, and path resolution inside a root
// directory that follows symlinks the way the kernel would if the root were
// `/`, without ever leaving it (absolute targets are re-rooted, ".." stops at
// the root): RootDir opens, reads and lists in a root (the recorder's RootCopy,
// record/root_copy.hpp, copies out of one with these functions).
// No iostreams and no <filesystem>: this header is part of the umbrella.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(SYS_openat2) && __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define GPUAFF_HAVE_OPENAT2 1
#endif

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/detail/file_tree.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/parse.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// The largest file gpuaff reads or copies (a cpulist of 8192 CPUs in the
/// worst spelling is far below this; an hwloc XML file of a large machine is a
/// few MiB); bigger files give EFBIG.
inline constexpr std::size_t max_small_file = std::size_t{1} << 24;

/// How to treat a read that returns less than asked for. A sysfs attribute is
/// at most one page and comes whole from the first read, and a regular file
/// only reads short at its end, so for those a short read is the end (one read
/// per file instead of two). /proc seq_files may come in pieces: read to EOF.
enum class ShortRead { more, end };

/// Reads everything from the regular file open as `fd` into `out` (fd not
/// closed); `mode` (optional) gets its permission bits. Only regular files are
/// read (sysfs and procfs files are regular): a directory gives EISDIR, and a
/// FIFO, socket or device not_regular_file (detail/errno.hpp), so that a FIFO
/// planted in a root cannot block a read and /dev/zero cannot fill memory.
/// Returns 0 or errno (EFBIG above max_small_file).
///
/// What the file is (fstat) is asked only when a read does not look like a
/// regular file's: an error (EAGAIN is a FIFO or device opened O_NONBLOCK
/// with nothing to give, EISDIR a directory), nothing at all (an empty file,
/// or a FIFO without a writer), or a full buffer (a large file, or /dev/zero).
/// A sysfs attribute or a small file answers its first read with a few bytes
/// and is read in one call; most of a plan's files are, and a system call
/// costs more than the parsing of one. The one thing let through: a FIFO whose
/// writer has already written, or a terminal with input waiting, is read as a
/// file holding those bytes, bounded and without waiting, and parsed as any
/// file content is.
template <class = void>
inline int read_fd(int fd, std::string& out, ShortRead short_read = ShortRead::more, mode_t* mode = nullptr) {
  out.clear();
  bool checked = false;
  auto check = [&]() -> int {
    checked = true;
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (!S_ISREG(st.st_mode)) return not_regular_file;
    if (mode != nullptr) *mode = st.st_mode & 07777;
    return 0;
  };
  if (mode != nullptr)
    if (int err = check(); err != 0) return err;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (!checked)
        if (int what = check(); what != 0) return what;
      return err;
    }
    if (!checked && (n == 0 || static_cast<std::size_t>(n) == sizeof buf))
      if (int what = check(); what != 0) return what;
    if (n == 0) return 0;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_small_file) return EFBIG;
    if (short_read == ShortRead::end && static_cast<std::size_t>(n) < sizeof buf) return 0;
  }
}

/// Reads the whole regular file at `path` into `out` (opened with O_NONBLOCK:
/// opening a FIFO does not wait for a writer; read_fd then refuses it).
/// Returns 0 or the errno of the failing call (ENOENT for a missing file,
/// EFBIG above max_small_file, not_regular_file for a FIFO or device).
template <class = void>
inline int read_whole_file(const std::string& path, std::string& out, int extra_open_flags = 0,
                           ShortRead short_read = ShortRead::more) {
  out.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | extra_open_flags);
  if (fd < 0) return errno;
  int err = read_fd(fd, out, short_read);
  ::close(fd);
  return err;
}

/// Opens `rel` below the directory `root_fd` with the kernel keeping the whole
/// resolution inside it (openat2 RESOLVE_IN_ROOT, Linux 5.6+): symlinks are
/// followed, absolute targets start at the root, ".." stops there; the same
/// rules as RootResolver, in one system call. Returns an fd or -errno; -ENOSYS
/// when openat2 is unavailable (old kernel or headers, or a seccomp filter that
/// refuses it with ENOSYS or EPERM): the caller then falls back to RootResolver.
template <class = void>
inline int open_in_root(int root_fd, const std::string& rel, int flags) {
#ifdef GPUAFF_HAVE_OPENAT2
  open_how how{};
  how.flags = static_cast<decltype(how.flags)>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (int tries = 0; tries < 16; ++tries) {
    long fd = ::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    int e = errno;
    if (e == EAGAIN || e == EINTR) continue;  // a concurrent rename inside the root: retry
    if (e == ENOSYS || e == EPERM || e == E2BIG) return -ENOSYS;
    return -e;
  }
  return -EAGAIN;
#else
  (void)root_fd;
  (void)rel;
  (void)flags;
  return -ENOSYS;
#endif
}

/// Drops trailing NUL bytes and whitespace (some firmware-provided sysfs
/// files end in NULs; every kernel file ends in a newline).
template <class = void>
inline void strip_trailing(std::string& s) {
  std::size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  s.resize(e);
}

/// Writes all of `data` to `fd`. Returns 0 or errno; a write that makes no
/// progress (returns 0) is EIO rather than a loop.
template <class = void>
inline int write_all(int fd, std::string_view data) {
  for (std::size_t done = 0; done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

/// Writes `data` to `path` (created or truncated, mode 0644). A symlink at
/// `path` is never written through (ELOOP), so a link planted in an output
/// directory cannot redirect a write elsewhere. Returns 0 or errno.
template <class = void>
inline int write_whole_file(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return errno;
  int e = write_all(fd, data);
  if (::close(fd) != 0 && e == 0) e = errno;
  return e;
}

/// mkdir -p. Returns 0 or errno.
template <class = void>
inline int make_directories(const std::string& path) {
  if (path.empty()) return 0;
  std::string cur;
  std::size_t i = 0;
  if (path[0] == '/') {
    cur = "/";
    i = 1;
  }
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) {
      if (!cur.empty() && cur.back() != '/') cur += '/';
      cur.append(path, i, j - i);
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return errno;
      struct stat st {};
      if (::stat(cur.c_str(), &st) != 0) return errno;
      if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    }
    i = j + 1;
  }
  return 0;
}

/// Names in the directory open as `fd` (without "." and ".."); takes ownership
/// of fd. Returns 0 or errno (ENOTDIR when fd is not a directory).
/// getdents64 directly: readdir's fdopendir adds an fstat and two fcntl
/// calls to every listing, a third of the system calls of listing the NVIDIA
/// driver's GPUs for one plan.
template <class = void>
inline int list_directory_fd(int fd, std::vector<std::string>& names) {
  names.clear();
  // struct linux_dirent64 (getdents64(2)): inode, offset, record length, type, name.
  constexpr std::size_t name_at = 8 + 8 + 2 + 1;
  // One page: each stack page a one-shot process (`gpuaff bind`) touches
  // is a page fault, dearer than the getdents64 call or two more that a
  // folder of hundreds of devices then takes (benchmarks/README.md, row S).
  alignas(8) char buf[4096];
  int err = 0;
  while (true) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0) break;
    for (long at = 0; at < n;) {
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + at + 16, sizeof reclen);
      if (reclen <= name_at || at + reclen > n) {  // never from a kernel; stop rather than read past
        err = EIO;
        break;
      }
      std::string_view name(buf + at + name_at, ::strnlen(buf + at + name_at, reclen - name_at));
      if (name != "." && name != "..") names.emplace_back(name);
      at += reclen;
    }
    if (err != 0) break;
  }
  ::close(fd);
  if (err != 0) names.clear();
  return err;
}

/// Names in a directory (without "." and ".."). Returns 0 or errno.
template <class = void>
inline int list_directory(const std::string& path, std::vector<std::string>& names) {
  names.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  return list_directory_fd(fd, names);
}

/// The components of a relative path; empty ones and "." are dropped.
template <class = void>
inline void split_path(std::string_view p, std::vector<std::string>& out) {
  std::size_t i = 0;
  while (i <= p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    if (!c.empty() && c != ".") out.emplace_back(c);
    i = j + 1;
  }
}

template <class = void>
inline std::string join_path(const std::vector<std::string>& comps) {
  std::string s;
  for (const auto& c : comps) {
    if (!s.empty()) s += '/';
    s += c;
  }
  return s;
}

/// Opens the directory `rel` (a relative path) below the directory open as
/// `base_fd`, creating missing components (mode 0755) and following no symlink
/// on the way: a symlink at any component gives ELOOP with its path (below
/// base) in `link_at`, so that a link planted in an output directory cannot
/// lead a write out of it. Returns 0 with `fd` (the caller closes it) or errno.
template <class = void>
inline int open_directory_below(int base_fd, std::string_view rel, int& fd, std::string& link_at) {
  fd = ::fcntl(base_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return errno;
  std::vector<std::string> comps;
  split_path(rel, comps);
  std::string walked;
  for (const auto& c : comps) {
    walked += walked.empty() ? c : "/" + c;
    if (c == "..") {
      ::close(fd);
      return EINVAL;  // callers pass normalised paths: ".." could only be an attempt to climb out
    }
    if (::mkdirat(fd, c.c_str(), 0755) != 0 && errno != EEXIST) {
      int e = errno;
      ::close(fd);
      return e;
    }
    int next = ::openat(fd, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    if (next < 0) {
      struct stat st {};
      if (::fstatat(fd, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        e = ELOOP;
        link_at = walked;
      }
      ::close(fd);
      return e;
    }
    ::close(fd);
    fd = next;
  }
  return 0;
}

/// Writes `data` to the file `name` in the directory open as `dir_fd` with
/// `mode` (less the umask): into a new file beside it, then renamed over `name`, so
/// that what was at `name` (a symlink, or a hard link to a file elsewhere) is
/// replaced, never written through. Returns 0 or errno.
template <class = void>
inline int write_file_at(int dir_fd, const std::string& name, std::string_view data, mode_t mode) {
  std::string tmp = "." + name + std::string(".partial-") + std::to_string(::getpid());
  int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return errno;
  int e = write_all(fd, data);
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) e = errno;
  if (e != 0) ::unlinkat(dir_fd, tmp.c_str(), 0);
  return e;
}

/// The target of the symbolic link `name` in the directory open as `dir_fd`
/// (AT_FDCWD: `name` from the working directory), whole: the buffer grows
/// until the target fits, since sysfs reports a link's st_size as 0.
/// Returns 0 or errno (ENAMETOOLONG past 64 KiB).
template <class = void>
inline int read_link_at(int dir_fd, const std::string& name, std::string& target) {
  for (std::size_t size = 256; size <= (std::size_t{1} << 16); size *= 2) {
    target.assign(size, '\0');
    ssize_t n = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
    if (n < 0) return errno;
    if (static_cast<std::size_t>(n) < size) {
      target.resize(static_cast<std::size_t>(n));
      return 0;
    }
  }
  return ENAMETOOLONG;
}

/// Makes `name` in the directory open as `dir_fd` a symlink to `target`.
/// Returns 0, EEXIST when it already is exactly that link, or errno.
template <class = void>
inline int make_symlink_at(int dir_fd, const std::string& name, const std::string& target) {
  if (::symlinkat(target.c_str(), dir_fd, name.c_str()) == 0) return 0;
  int e = errno;
  if (e != EEXIST) return e;
  std::string existing;
  if (read_link_at(dir_fd, name, existing) != 0 || existing != target) return e;
  return EEXIST;
}

/// Resolves root-relative paths inside `root` as if `root` were `/`.
template <class = void>
class BasicRootResolver {
 public:
  /// A symlink met on the way: its root-relative path and its target as stored.
  struct Link {
    std::string path;
    std::string target;
  };

  /// `root`: a directory; "/" or "" means the real root.
  explicit BasicRootResolver(std::string root) : root_(std::move(root)) {
    while (!root_.empty() && root_.back() == '/') root_.pop_back();
  }

  /// Resolves in `tree` (a root held in memory: a tar file) instead of the directory.
  void use_archive(const FileTree* tree) {
    archive_ = tree;
    cache_.clear();
  }

  /// The host path of a root-relative path ("" -> the root itself).
  std::string host_path(std::string_view rel) const {
    std::string s = root_;
    s += '/';
    s += rel;
    return s;
  }

  /// Resolves `rel` following every symlink (the last component too).
  /// Missing components are kept as written, so that opening the result
  /// fails with ENOENT. Returns 0 or ELOOP; `links` (optional) gets each
  /// symlink followed, in order.
  int resolve(std::string_view rel, std::string& out, std::vector<Link>* links = nullptr) {
    std::vector<std::string> done;
    std::vector<std::string> pending;
    split_path(rel, pending);
    std::reverse(pending.begin(), pending.end());
    int err = walk(done, pending, links);
    out = join_path(done);
    return err;
  }

  /// Resolves a directory, caching the answer for every prefix so that the
  /// files of one directory cost one lstat in all. Returns 0 or ELOOP.
  int resolve_dir(std::string_view rel, std::string& out) {
    std::string key(rel);
    while (!key.empty() && key.back() == '/') key.pop_back();
    if (key.empty()) {
      out.clear();
      return 0;
    }
    if (auto hit = cache_.find(key); hit != cache_.end()) {
      out = hit->second;
      return 0;
    }
    std::size_t slash = key.rfind('/');
    std::string parent;
    int err = resolve_dir(slash == std::string::npos ? std::string_view{} : std::string_view(key).substr(0, slash), parent);
    if (err != 0) return err;
    std::vector<std::string> done;
    split_path(parent, done);
    std::vector<std::string> pending{slash == std::string::npos ? key : key.substr(slash + 1)};
    err = walk(done, pending, nullptr);
    if (err != 0) return err;
    out = join_path(done);
    cache_.emplace(std::move(key), out);
    return 0;
  }

 private:
  static constexpr int max_links = 40;  // as the kernel's MAXSYMLINKS


  // `pending` is a stack: its back is the next component to resolve.
  int walk(std::vector<std::string>& done, std::vector<std::string>& pending, std::vector<Link>* links) {
    int hops = 0;
    std::string host;
    std::vector<std::string> parts;
    while (!pending.empty()) {
      std::string c = std::move(pending.back());
      pending.pop_back();
      if (c.empty() || c == ".") continue;
      if (c == "..") {
        if (!done.empty()) done.pop_back();
        continue;
      }
      std::string rel = join_path(done);
      host = root_;
      host += '/';
      if (!rel.empty()) {
        host += rel;
        host += '/';
      }
      host += c;
      // What is there: from the archive, or lstat and readlink in the directory.
      const FileTreeNode* node = nullptr;
      struct stat st {};
      bool missing = false;
      if (archive_ != nullptr) {
        node = archive_->find(std::string_view(host).substr(root_.size() + 1));
        missing = node == nullptr;
      } else {
        missing = ::lstat(host.c_str(), &st) != 0;
      }
      if (missing) {
        // Missing: keep the rest as written, so that an open fails with ENOENT.
        done.push_back(std::move(c));
        for (std::size_t i = pending.size(); i > 0; --i)
          if (!pending[i - 1].empty() && pending[i - 1] != ".") done.push_back(std::move(pending[i - 1]));
        pending.clear();
        continue;
      }
      bool link = node != nullptr ? node->kind == FileTreeNode::Kind::symlink : S_ISLNK(st.st_mode);
      if (!link) {
        done.push_back(std::move(c));
        continue;
      }
      if (++hops > max_links) return ELOOP;
      std::string target;
      if (node != nullptr) {
        target = node->data;
      } else if (int err = read_link_at(AT_FDCWD, host, target); err != 0) {
        return err;
      }
      if (links != nullptr) links->push_back({rel.empty() ? c : rel + "/" + c, target});
      if (!target.empty() && target[0] == '/') done.clear();  // re-root absolute targets
      parts.clear();
      split_path(target, parts);
      for (std::size_t i = parts.size(); i > 0; --i) pending.push_back(std::move(parts[i - 1]));
    }
    return 0;
  }

  std::string root_;
  const FileTree* archive_ = nullptr;
  /// Resolved directories by root-relative path: a map, as a root may list
  /// thousands of CPUs whose folders are looked up (a sorted vector's
  /// insertions made the lookups of cpu/online "0-7000" quadratic: a minute).
  std::map<std::string, std::string> cache_;
};
using RootResolver = BasicRootResolver<>;  // a template only to be compiled where used (config.hpp)

/// Lexically normalised root-relative path of `base_dir/target` (absolute
/// targets start at the root; ".." stops at the root), as components.
template <class = void>
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
template <class = void>
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

/// The directory part of a root-relative path ("" for a name at the root).
template <class = void>
inline std::string parent_of(std::string_view rel) {
  std::size_t slash = rel.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(rel.substr(0, slash));
}

/// `dir/rel` as a host path.
template <class = void>
inline std::string path_under(std::string_view dir, std::string_view rel) {
  std::string p(dir);
  if (p.empty() || p.back() != '/') p += '/';
  p += rel;
  return p;
}

/// Whether `path` is a directory (symlinks followed).
template <class = void>
inline bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Whether the directory `root` is this machine's `/` (a spelling such as
/// "/." or a link to "/" included).
template <class = void>
inline bool is_host_root(const std::string& root) {
  if (root == "/") return true;
  char* real = ::realpath(root.c_str(), nullptr);
  if (real == nullptr) return false;
  bool host = std::string_view(real) == "/";
  std::free(real);  // NOLINT(cppcoreguidelines-no-malloc): realpath allocates with malloc
  return host;
}

/// Tests set this to exercise the user-space resolver (RootResolver) that
/// kernels without openat2 use; nothing else should touch it. A plain bool:
/// tests set it on one thread while no load runs.
inline bool sysfs_force_user_space_resolution = false;

/// A directory read as if it were `/`: every root-relative path is opened,
/// read or listed inside it (openat2 RESOLVE_IN_ROOT, or RootResolver where
/// the kernel lacks it). The live root ("/" itself) is opened directly, so
/// that magic links such as /proc/self work.
template <class = void>
class BasicRootDir {
 public:
  /// `root`: a directory, or a tar file (what `gpuaff record --out FILE.tar`
  /// writes; read into memory, see archive_error()); `live`: it is this machine's `/`;
  /// `root_fd`: `root` already open (O_PATH | O_DIRECTORY), owned from now on, or -1.
  BasicRootDir(const std::string& root, bool live, int root_fd = -1)
      : live_(live), resolver_(live ? std::string() : root), root_fd_(root_fd) {
    // A folder (the usual root) is opened at once; only what is not one is
    // looked at again (one system call less for every load of a folder).
    if (live && root_fd_ >= 0) {
      ::close(root_fd_);
      root_fd_ = -1;
    }
    if (!live && root_fd_ < 0) root_fd_ = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st {};
    if (!live && root_fd_ < 0 && errno == ENOTDIR && ::stat(root.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      Result<FileTree*> tree = file_root_reader != nullptr
                                   ? file_root_reader(root)
                                   : fail(Errc::unsupported, root,
                                          " is a file, not a folder: this program reads recorded archives only with "
                                          "<gpuaff/source/archive.hpp> included; unpack it (tar -xf) and pass the folder");
      if (tree) {
        archive_ = *tree;
      } else {
        archive_error_ = tree.error();
        archive_ = new EmptyFileTree();  // every read says "missing" after the error
      }
      resolver_.use_archive(archive_);
      return;
    }
    in_root_ = root_fd_ >= 0 && !sysfs_force_user_space_resolution;
  }
  BasicRootDir(const BasicRootDir&) = delete;
  BasicRootDir& operator=(const BasicRootDir&) = delete;
  ~BasicRootDir() {
    if (root_fd_ >= 0) ::close(root_fd_);
    delete archive_;
  }

  bool live() const { return live_; }
  /// The resolver of this root, for walks that need the links on the way.
  RootResolver& resolver() { return resolver_; }
  /// The root is a tar file read into memory.
  bool archive() const { return archive_ != nullptr; }
  /// Why the tar file could not be read, or nullptr: check it before reading.
  const Error* archive_error() const { return archive_error_ ? &*archive_error_ : nullptr; }

  /// Opens a root-relative path (with O_NONBLOCK: a FIFO in the root never
  /// blocks the open). Returns 0 or errno.
  int open(std::string_view rel, int flags, int& fd) {
    fd = -1;
    if (archive_) return ENOTSUP;  // a tar root has no descriptors: read(), list(), is_directory(), exists()
    if ((flags & O_PATH) == 0) flags |= O_NONBLOCK | O_NOCTTY;  // openat2 refuses O_PATH with other flags
    if (live_) {
      host_ = "/";
      host_ += rel;
      fd = ::open(host_.c_str(), flags | O_CLOEXEC);
      return fd >= 0 ? 0 : errno;
    }
    if (in_root_) {
      std::string r(rel);
      int got = open_in_root(root_fd_, r, flags);
      if (got >= 0) {
        fd = got;
        return 0;
      }
      if (got != -ENOSYS) return -got;
      in_root_ = false;  // resolve in user space from now on
    }
    return open_resolved(rel, flags, fd);
  }

  /// Reads a whole root-relative regular file; `mode` (optional) gets its
  /// permission bits. Returns 0 or errno (ENOENT or ENOTDIR when it is missing,
  /// EFBIG above max_small_file, EISDIR or not_regular_file: see read_fd).
  int read(std::string_view rel, std::string& out, ShortRead short_read = ShortRead::more, mode_t* mode = nullptr) {
    out.clear();
    if (archive_) {
      int err = 0;
      const FileTreeNode* node = archive_node(rel, true, &err);
      if (node == nullptr) return err != 0 ? err : ENOENT;
      if (node->kind == FileTreeNode::Kind::directory) return EISDIR;
      if (node->kind != FileTreeNode::Kind::file) return not_regular_file;
      if (node->data.size() > max_small_file) return EFBIG;
      if (mode != nullptr) *mode = static_cast<mode_t>(node->mode);
      out = node->data;
      return 0;
    }
    int fd = -1;
    int err = open(rel, O_RDONLY, fd);
    if (err != 0) return err;
    err = read_fd(fd, out, short_read, mode);
    ::close(fd);
    return err;
  }

  /// Names in a root-relative directory. Returns 0 or errno.
  int list(std::string_view rel, std::vector<std::string>& names) {
    names.clear();
    if (archive_) {
      std::string path;
      if (int err = resolver_.resolve(rel, path); err != 0) return err;
      const FileTreeNode* node = archive_->find(path);
      if (node == nullptr) return ENOENT;
      if (node->kind != FileTreeNode::Kind::directory) return ENOTDIR;
      names = archive_->children(path);
      return 0;
    }
    int fd = -1;
    int err = open(rel, O_RDONLY | O_DIRECTORY, fd);
    return err != 0 ? err : list_directory_fd(fd, names);
  }

  /// The path names a directory (symlinks followed inside the root).
  bool is_directory(std::string_view rel) {
    if (archive_) {
      const FileTreeNode* node = archive_node(rel, true);
      return node != nullptr && node->kind == FileTreeNode::Kind::directory;
    }
    return opens(rel, O_RDONLY | O_DIRECTORY);
  }
  /// Something is at the path (a dangling symlink counts: it is not followed).
  bool exists(std::string_view rel) {
    if (archive_) return archive_node(rel, false) != nullptr;
    return opens(rel, O_PATH | O_NOFOLLOW);
  }

 private:
  /// The tar root's node at `rel`: its folders resolved, the last component
  /// followed when it is a link and `follow` is true; nullptr when missing, or
  /// when the links loop (`err`, optional, gets ELOOP).
  const FileTreeNode* archive_node(std::string_view rel, bool follow, int* err = nullptr) {
    std::string path;
    int e = 0;
    if (follow) {
      e = resolver_.resolve(rel, path);
    } else {
      std::size_t slash = rel.rfind('/');
      e = resolver_.resolve_dir(slash == std::string_view::npos ? std::string_view{} : rel.substr(0, slash), path);
    }
    if (e != 0) {
      if (err != nullptr) *err = e;
      return nullptr;
    }
    if (!follow) {
      std::size_t slash = rel.rfind('/');
      if (!path.empty()) path += '/';
      path += slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    }
    return archive_->find(path);
  }

  bool opens(std::string_view rel, int flags) {
    int fd = -1;
    if (open(rel, flags, fd) != 0) return false;
    ::close(fd);
    return true;
  }

  // RootResolver's way: the directory part resolved (and cached), the last
  // component opened without following it; only if it is a symlink is the
  // whole path resolved. Each open walks the resolved path from the root's
  // descriptor without following any link (open_beneath), so a component
  // swapped for a link after it was resolved fails the open instead of
  // leading out of the root.
  int open_resolved(std::string_view rel, int flags, int& fd) {
    std::string path;
    if ((flags & O_DIRECTORY) != 0) {
      int err = resolver_.resolve(rel, path);
      if (err != 0) return err;
      return open_beneath(path, flags, fd);
    }
    std::size_t slash = rel.rfind('/');
    int err = resolver_.resolve_dir(slash == std::string_view::npos ? std::string_view{} : rel.substr(0, slash), path);
    if (err != 0) return err;
    if (!path.empty()) path += '/';
    path += slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    err = open_beneath(path, flags, fd);
    if (err != ELOOP || (flags & O_NOFOLLOW) != 0) return err;
    err = resolver_.resolve(rel, path);  // the file itself is a symlink: resolve it inside the root
    if (err != 0) return err;
    return open_beneath(path, flags, fd);
  }

  // Opens a root-relative path that holds no symlink and no "..", one
  // component at a time from the root's descriptor with O_NOFOLLOW: the open
  // can only reach what lies under the root now. Returns 0 or errno (ELOOP or
  // ENOTDIR where a link now stands).
  int open_beneath(const std::string& path, int flags, int& fd) {
    fd = -1;
    if (root_fd_ < 0) {  // the root could not be opened: the path as the resolver left it
      fd = ::open(resolver_.host_path(path).c_str(), flags | O_CLOEXEC | O_NOFOLLOW);
      return fd >= 0 ? 0 : errno;
    }
    std::vector<std::string> parts;
    split_path(path, parts);
    int dir = root_fd_;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      int next = ::openat(dir, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int e = errno;
      if (dir != root_fd_) ::close(dir);
      if (next < 0) return e;
      dir = next;
    }
    if (parts.empty()) fd = ::openat(dir, ".", flags | O_CLOEXEC);
    else fd = ::openat(dir, parts.back().c_str(), flags | O_CLOEXEC | O_NOFOLLOW);
    int e = errno;
    if (dir != root_fd_) ::close(dir);
    return fd >= 0 ? 0 : e;
  }

  bool live_;
  RootResolver resolver_;
  FileTree* archive_ = nullptr;  // owned: a file root read into memory
  std::optional<Error> archive_error_;
  std::string host_;
  int root_fd_ = -1;
  bool in_root_ = false;  // openat2 RESOLVE_IN_ROOT works here
};
using RootDir = BasicRootDir<>;  // a template only to be compiled where used (config.hpp)

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
