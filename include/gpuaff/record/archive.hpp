// SPDX-License-Identifier: Apache-2.0
#pragma once
// Writes a directory tree (a recorded root) into one uncompressed POSIX tar
// file, so that a bug report is one file: `gpuaff record --out node17.tar`.
// Replay it as it is with `gpuaff topo --root node17.tar` (read in memory by
// detail/archive_tree.hpp), or unpack it with `mkdir r && tar -xf node17.tar -C r`.
//
// The format is ustar (POSIX.1-1988) with pax extended headers (POSIX.1-2001)
// for paths or symlink targets longer than ustar's 100 bytes; sysfs paths of
// PCI devices behind bridges easily pass that. Only regular files,
// directories and symlinks are written; a symlink is stored as a link (never
// followed), since a recording's sys/bus/pci/devices/* must stay relative
// links into sys/devices/. The archive is deterministic: entries sorted by
// name, every mtime 0, owner 0:0 without names, so the same tree always gives
// the same bytes.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {

struct TarSummary {
  int files = 0;        ///< regular files written
  int directories = 0;  ///< directories written (the top directory itself is not an entry)
  int symlinks = 0;     ///< symlinks written as links
  std::uint64_t bytes = 0;  ///< size of the tar file
};

namespace detail {

inline constexpr std::size_t tar_block = 512;

/// `value` in octal, zero-padded to fill `width - 1` digits and a NUL, as ustar numeric fields are.
inline bool tar_octal(char* field, std::size_t width, std::uint64_t value) {
  for (std::size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  field[width - 1] = '\0';
  return value == 0;
}

/// One pax record, "LEN key=value\n", where LEN counts the whole record including its own digits.
inline std::string pax_record(std::string_view key, std::string_view value) {
  std::size_t body = key.size() + value.size() + 3;  // space, '=', newline
  std::size_t len = body + 1;
  while (std::to_string(len).size() + body != len) len = std::to_string(len).size() + body;
  return std::to_string(len) + ' ' + std::string(key) + '=' + std::string(value) + '\n';
}

/// A ustar header block. `name` and `link` must fit (callers put long ones in a pax header first).
inline std::array<char, tar_block> tar_header(std::string_view name, char type, unsigned mode, std::uint64_t size,
                                              std::string_view link) {
  std::array<char, tar_block> h{};
  std::copy_n(name.data(), std::min<std::size_t>(name.size(), 100), h.data());
  tar_octal(h.data() + 100, 8, mode & 07777);
  tar_octal(h.data() + 108, 8, 0);  // uid
  tar_octal(h.data() + 116, 8, 0);  // gid
  tar_octal(h.data() + 124, 12, size);
  tar_octal(h.data() + 136, 12, 0);  // mtime
  h[156] = type;
  std::copy_n(link.data(), std::min<std::size_t>(link.size(), 100), h.data() + 157);
  std::copy_n("ustar\0" "00", 8, h.data() + 257);  // magic "ustar" NUL, version "00"
  // The checksum is the byte sum of the header with its own field read as 8 spaces.
  std::fill_n(h.data() + 148, 8, ' ');
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  tar_octal(h.data() + 148, 7, sum);
  h[155] = ' ';
  return h;
}

struct TarEntry {
  std::string name;  ///< relative path, '/'-separated; directories end in '/'
  char type;         ///< '0' file, '5' directory, '2' symlink
  unsigned mode;
  std::filesystem::path source;  ///< the file to copy (regular files)
  std::uint64_t size = 0;
  std::string link;  ///< symlink target
};

/// The entries under `dir`, sorted by name, without following any symlink.
inline Result<std::vector<TarEntry>> tar_entries(const std::filesystem::path& dir) {
  std::vector<TarEntry> out;
  std::vector<std::filesystem::path> pending{dir};
  std::error_code ec;
  while (!pending.empty()) {
    std::filesystem::path current = pending.back();
    pending.pop_back();
    std::filesystem::directory_iterator it(current, ec), end;
    if (ec) return fail(Errc::io_error, "cannot list '", current.string(), "': ", ec.message());
    for (; it != end; it.increment(ec)) {
      const std::filesystem::path& p = it->path();
      auto st = std::filesystem::symlink_status(p, ec);
      if (ec) return fail(Errc::io_error, "cannot stat '", p.string(), "': ", ec.message());
      TarEntry e;
      e.name = p.lexically_relative(dir).generic_string();
      e.source = p;
      e.mode = static_cast<unsigned>(st.permissions()) & 07777u;
      if (std::filesystem::is_symlink(st)) {
        e.type = '2';
        e.link = std::filesystem::read_symlink(p, ec).string();
        if (ec) return fail(Errc::io_error, "cannot read the symlink '", p.string(), "': ", ec.message());
      } else if (std::filesystem::is_directory(st)) {
        e.type = '5';
        e.name += '/';
        pending.push_back(p);
      } else if (std::filesystem::is_regular_file(st)) {
        e.type = '0';
        e.size = std::filesystem::file_size(p, ec);
        if (ec) return fail(Errc::io_error, "cannot stat '", p.string(), "': ", ec.message());
      } else {
        return fail(Errc::invalid_argument, "'", p.string(),
                    "' is neither a file, a directory nor a symlink; a recording holds only those");
      }
      out.push_back(std::move(e));
    }
    if (ec) return fail(Errc::io_error, "cannot list '", current.string(), "': ", ec.message());
  }
  std::sort(out.begin(), out.end(), [](const TarEntry& a, const TarEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace detail

/// The largest archive write_tar writes: a recording is a few MiB; a tree far
/// beyond that is not a machine's description (a root pointed at the wrong
/// place, or files that grow while they are read).
inline constexpr std::uint64_t max_archive_bytes = std::uint64_t{256} << 20;

namespace detail {

/// The archive being written: a file write_tar created itself beside its final
/// name (never an existing one: a FIFO or a hard link planted there is not
/// opened), written through a small buffer, removed unless committed.
class TarFile {
 public:
  /// Errors: Errc::io_error naming the directory when the file cannot be created.
  static Result<TarFile> create(const std::filesystem::path& final_path) {
    TarFile t;
    t.path_ = final_path.string() + ".partial-XXXXXX";
    t.fd_ = ::mkostemp(t.path_.data(), O_CLOEXEC);
    if (t.fd_ < 0)
      return fail(Errc::io_error, "cannot create a file beside '", final_path.string(), "': ", errno_text(errno),
                  "; check that its directory exists and is writable");
    ::fchmod(t.fd_, 0644);
    return t;
  }
  TarFile(TarFile&& o) noexcept : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), buffer_(std::move(o.buffer_)) {}
  TarFile& operator=(TarFile&&) = delete;
  ~TarFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());
    }
  }

  /// Appends bytes. Returns 0 or errno.
  int put(const char* data, std::size_t n) {
    buffer_.append(data, n);
    return buffer_.size() >= (std::size_t{1} << 20) ? flush() : 0;
  }
  /// Writes what is buffered, closes the file and renames it to `final_path`.
  /// Returns 0 or errno (the file is removed then).
  int commit(const std::filesystem::path& final_path) {
    int e = flush();
    if (::close(std::exchange(fd_, -1)) != 0 && e == 0) e = errno;
    if (e == 0 && ::rename(path_.c_str(), final_path.c_str()) != 0) e = errno;
    if (e != 0) ::unlink(path_.c_str());
    return e;
  }
  const std::string& path() const { return path_; }

 private:
  TarFile() = default;
  int flush() {
    int e = write_all(fd_, buffer_);
    buffer_.clear();
    return e;
  }
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace detail

/// Writes the tree under `dir` into the tar file `tar_path` (see the top of
/// this file), streamed into a file it creates beside `tar_path` (mkostemp:
/// nothing already there is opened) and renamed into place once complete. An
/// existing `tar_path` is an error unless `overwrite`.
/// Errors: Errc::invalid_argument (`dir` is not a directory, `tar_path` exists
/// or is a directory, the tree holds a device, FIFO or socket),
/// Errc::out_of_range (the archive would pass max_archive_bytes),
/// Errc::io_error (a file cannot be listed, read or written). On error no
/// partial tar file is left behind.
inline Result<TarSummary> write_tar(const std::filesystem::path& dir, const std::filesystem::path& tar_path,
                                    bool overwrite = false) {
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(dir, ec)))
    return fail(Errc::invalid_argument, "'", dir.string(), "' is not a directory");
  auto existing = std::filesystem::symlink_status(tar_path, ec);
  if (std::filesystem::is_directory(existing))
    return fail(Errc::invalid_argument, "output '", tar_path.string(), "' is a directory; name a .tar file");
  if (std::filesystem::exists(existing) && !overwrite)
    return fail(Errc::invalid_argument, "output '", tar_path.string(),
                "' exists; choose a new name, or pass force=true to overwrite it");
  auto entries = detail::tar_entries(dir);
  if (!entries) return unexpected(entries.error());
  GPUAFF_TRY(detail::TarFile out, detail::TarFile::create(tar_path));

  TarSummary summary;
  int write_error = 0;
  bool too_big = false;
  auto put = [&](const char* data, std::size_t n) {
    summary.bytes += n;
    if (summary.bytes > max_archive_bytes) too_big = true;
    if (write_error == 0 && !too_big) write_error = out.put(data, n);
  };
  auto pad = [&](std::uint64_t n) {
    static constexpr std::array<char, detail::tar_block> zeros{};
    std::size_t rest = static_cast<std::size_t>(n % detail::tar_block);
    if (rest != 0) put(zeros.data(), detail::tar_block - rest);
  };
  for (const auto& e : *entries) {
    if (too_big || write_error != 0) break;
    // Names and link targets beyond ustar's 100 bytes go into a pax header before the entry.
    std::string pax;
    if (e.name.size() > 100) pax += detail::pax_record("path", e.name);
    if (e.link.size() > 100) pax += detail::pax_record("linkpath", e.link);
    if (!pax.empty()) {
      put(detail::tar_header("PaxHeader", 'x', 0644, pax.size(), {}).data(), detail::tar_block);
      put(pax.data(), pax.size());
      pad(pax.size());
    }
    put(detail::tar_header(e.name, e.type, e.mode, e.size, e.link).data(), detail::tar_block);
    if (e.type == '0') {
      std::string data;
      if (int err = detail::read_whole_file(e.source.string(), data, O_NOFOLLOW | O_NONBLOCK); err != 0)
        return fail(Errc::io_error, "cannot read '", e.source.string(), "': ", detail::errno_text(err));
      if (data.size() != e.size)
        return fail(Errc::io_error, "'", e.source.string(), "' changed size while it was archived");
      put(data.data(), data.size());
      pad(data.size());
      ++summary.files;
    } else if (e.type == '5') {
      ++summary.directories;
    } else {
      ++summary.symlinks;
    }
  }
  if (too_big)
    return fail(Errc::out_of_range, "the recording of '", dir.string(), "' is larger than ",
                static_cast<long long>(max_archive_bytes >> 20),
                " MiB, which no machine's description is; check the root it was made from");
  // Two zero blocks end the archive; tar programs write in records of 20 blocks.
  constexpr std::uint64_t record = 20 * detail::tar_block;
  std::array<char, detail::tar_block> zeros{};
  put(zeros.data(), zeros.size());
  put(zeros.data(), zeros.size());
  while (summary.bytes % record != 0) put(zeros.data(), zeros.size());
  if (write_error == 0) write_error = out.commit(tar_path);
  if (write_error != 0)
    return fail(Errc::io_error, "cannot write '", tar_path.string(), "': ", detail::errno_text(write_error),
                "; check that its directory is writable and has space");
  return summary;
}

}  // namespace gpuaff
