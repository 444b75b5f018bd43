#pragma once
// Small POSIX file helpers for the sysfs source and the recorder: whole-file
// reads with open/read/close (sysfs files report a size of 4096 whatever they
// hold, so we read to EOF), and path resolution inside a root directory that
// follows symlinks the way the kernel would if the root were `/`, without ever
// leaving the root (absolute targets are re-rooted, ".." stops at the root).
// No iostreams and no <filesystem>: this header is part of the umbrella.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(SYS_openat2) && __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define GPUAFF_HAVE_OPENAT2 1
#endif

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// The largest file gpuaff reads (a cpulist of 8192 CPUs in the worst
/// spelling is far below this); bigger files give EFBIG.
inline constexpr std::size_t max_small_file = std::size_t{1} << 22;

/// How to treat a read that returns less than asked for. A sysfs attribute is
/// at most one page and comes whole from the first read, and a regular file
/// only reads short at its end, so for those a short read is the end (one read
/// per file instead of two). /proc seq_files may come in pieces: read to EOF.
enum class ShortRead { more, end };

/// Reads everything from `fd` into `out` (fd not closed). Returns 0 or errno
/// (EFBIG above max_small_file).
inline int read_fd(int fd, std::string& out, ShortRead short_read = ShortRead::more) {
  out.clear();
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_small_file) return EFBIG;
    if (short_read == ShortRead::end && static_cast<std::size_t>(n) < sizeof buf) return 0;
  }
}

/// Reads the whole file at `path` into `out`. Returns 0 or the errno of the
/// failing call (ENOENT for a missing file, EFBIG above max_small_file).
inline int read_whole_file(const std::string& path, std::string& out, int extra_open_flags = 0,
                           ShortRead short_read = ShortRead::more) {
  out.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | extra_open_flags);
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
inline int open_in_root(int root_fd, const std::string& rel, int flags) {
#ifdef GPUAFF_HAVE_OPENAT2
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
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
inline void strip_trailing(std::string& s) {
  std::size_t e = s.size();
  while (e > 0) {
    char c = s[e - 1];
    if (c == '\0' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') --e;
    else break;
  }
  s.resize(e);
}

/// Writes `data` to `path` (created or truncated, mode 0644). Returns 0 or errno.
inline int write_whole_file(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return e;
    }
    done += static_cast<std::size_t>(n);
  }
  return ::close(fd) == 0 ? 0 : errno;
}

/// mkdir -p. Returns 0 or errno.
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
/// of fd. Returns 0 or errno.
inline int list_directory_fd(int fd, std::vector<std::string>& names) {
  names.clear();
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int e = errno;
    ::close(fd);
    return e;
  }
  while (dirent* e = ::readdir(d)) {
    std::string_view n(e->d_name);
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  ::closedir(d);
  return 0;
}

/// Names in a directory (without "." and ".."). Returns 0 or errno.
inline int list_directory(const std::string& path, std::vector<std::string>& names) {
  names.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  return list_directory_fd(fd, names);
}

/// The components of a relative path; empty ones and "." are dropped.
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

inline std::string join_path(const std::vector<std::string>& comps) {
  std::string s;
  for (const auto& c : comps) {
    if (!s.empty()) s += '/';
    s += c;
  }
  return s;
}

/// A string-to-string map with open addressing in one vector: RootResolver's
/// directory cache. (<unordered_map> cost every TU of the umbrella header
/// about 0.1 s to compile, for this one member.)
class StringMap {
 public:
  /// The value of `key`, or nullptr.
  const std::string* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (!slots_[i].used) return nullptr;
      if (slots_[i].key == key) return &slots_[i].value;
    }
  }
  /// Adds `key` -> `value`; an existing key keeps its value.
  void insert(std::string key, std::string value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();  // at most half full: probes stay short
    if (place(std::move(key), std::move(value))) ++size_;
  }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::string key;
    std::string value;
    bool used = false;
  };
  std::size_t home(std::string_view key) const { return std::hash<std::string_view>{}(key) & (slots_.size() - 1); }
  bool place(std::string key, std::string value) {
    std::size_t i = home(key);
    for (; slots_[i].used; i = (i + 1) & (slots_.size() - 1))
      if (slots_[i].key == key) return false;
    slots_[i] = Slot{std::move(key), std::move(value), true};
    return true;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.clear();
    slots_.resize(old.empty() ? 16 : old.size() * 2);  // a power of two: home() masks
    for (Slot& s : old)
      if (s.used) place(std::move(s.key), std::move(s.value));
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

/// Resolves root-relative paths inside `root` as if `root` were `/`.
class RootResolver {
 public:
  /// A symlink met on the way: its root-relative path and its target as stored.
  struct Link {
    std::string path;
    std::string target;
  };

  /// `root`: a directory; "/" or "" means the real root.
  explicit RootResolver(std::string root) : root_(std::move(root)) {
    while (!root_.empty() && root_.back() == '/') root_.pop_back();
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
    reverse(pending);
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
    if (const std::string* hit = cache_.find(key)) {
      out = *hit;
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
    cache_.insert(std::move(key), out);
    return 0;
  }

 private:
  static constexpr int max_links = 40;  // as the kernel's MAXSYMLINKS

  static void reverse(std::vector<std::string>& v) {
    for (std::size_t i = 0, j = v.size(); i + 1 < j; ++i, --j) v[i].swap(v[j - 1]);
  }

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
      struct stat st {};
      if (::lstat(host.c_str(), &st) != 0) {
        // Missing: keep the rest as written, so that an open fails with ENOENT.
        done.push_back(std::move(c));
        for (std::size_t i = pending.size(); i > 0; --i)
          if (!pending[i - 1].empty() && pending[i - 1] != ".") done.push_back(std::move(pending[i - 1]));
        pending.clear();
        continue;
      }
      if (!S_ISLNK(st.st_mode)) {
        done.push_back(std::move(c));
        continue;
      }
      if (++hops > max_links) return ELOOP;
      std::string target(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1, '\0');
      ssize_t n = ::readlink(host.c_str(), target.data(), target.size());
      if (n < 0) return errno;
      target.resize(static_cast<std::size_t>(n));
      if (links != nullptr) links->push_back({rel.empty() ? c : rel + "/" + c, target});
      if (!target.empty() && target[0] == '/') done.clear();  // re-root absolute targets
      parts.clear();
      split_path(target, parts);
      for (std::size_t i = parts.size(); i > 0; --i) pending.push_back(std::move(parts[i - 1]));
    }
    return 0;
  }

  std::string root_;
  StringMap cache_;
};

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
