// SPDX-License-Identifier: Apache-2.0
#pragma once
// A tar file read into memory as a tree, so that `root=FILE.tar` (what
// `gpuaff record --out FILE.tar` writes) is read as a root without being
// unpacked: nothing is written anywhere. RootDir (detail/fs.hpp) reads files,
// lists folders and follows symbolic links in it with the same confinement as
// in a directory: absolute targets start at the archive's root and ".." stops
// there.
//
// The tar may be compressed with xz or gzip (fixtures/NAME.tar.xz as shipped):
// it is decoded in memory (detail/decompress.hpp), told by its magic number,
// not its name, and its decoded size is held to the same limit as a tar
// file's, so that a compression bomb is refused, not unpacked.
//
// Read: ustar (POSIX.1-1988) and GNU headers, with pax extended headers
// (path, linkpath: what record writes for long names) and GNU long names.
// Members are regular files, folders and symbolic links; a hard link to an
// earlier regular member reads as that member did when the link came (GNU
// tar's unpacking gives both names one inode); a FIFO or device is kept as
// "other" (reading it fails as a FIFO in a directory root does). Refused,
// naming the file and what to do: a file that is not a tar, a header whose
// checksum is wrong, a member that ends past the end of the file, an archive
// without its two zero end blocks (cut short), a member name with a ".."
// component, a hard link to anything but an earlier regular member, and
// what passes one of ArchiveLimits (an archive above max_archive_read bytes,
// too many members, a name too long or too deep, more content than a
// recording holds).
//
// Memory and time are linear in the file's size: the tree holds one entry
// per path component (its name, not its whole path), and file contents are
// views into the one copy of the file.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/detail/decompress.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/file_tree.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// The largest tar file read as a root, compressed or decoded: `gpuaff record`
/// writes at most 256 MiB.
inline constexpr std::uint64_t max_archive_read = std::uint64_t{256} << 20;

/// What a tar root may hold; each refusal names the limit and the file. The
/// defaults hold a recording of the largest machines many times over.
struct ArchiveLimits {
  /// Entries of the tree: members, and the folders their names imply.
  std::uint64_t max_members = 262144;
  /// Folders above a member (sysfs goes about 20 deep).
  std::size_t max_depth = 128;
  /// Bytes of a member's name or a link's target, as tar and the kernel (PATH_MAX).
  std::size_t max_name = 4096;
  /// Bytes of all files together, a hard link counting as the file again.
  std::uint64_t max_total_size = max_archive_read;
};

class ArchiveTree final : public FileTree {
 public:
  using Node = FileTreeNode;

  ArchiveTree() : bytes_(std::make_unique<std::string>()), entries_(1) {}

  /// Reads the tar file at `path`, plain or compressed with xz or gzip.
  /// Errors: Errc::io_error (cannot be opened or read, not a regular file, too
  /// large), Errc::out_of_range (decodes to more than max_archive_read bytes),
  /// Errc::parse_error (damaged compressed data, not a tar, a bad header, a truncated member or
  /// archive, a member name with "..", a hard link to anything but an earlier
  /// regular member), Errc::out_of_range (past one of `limits`), each naming the file.
  static Result<ArchiveTree> read(const std::string& path, const ArchiveLimits& limits = {}) {
    ArchiveTree tree;
    GPUAFF_TRY_VOID(read_file(path, *tree.bytes_));
    GPUAFF_TRY_VOID(tree.decompress(path));
    GPUAFF_TRY_VOID(tree.parse(path, limits));
    return tree;
  }

  /// The node at a normalised root-relative path ("" is the root), or nullptr.
  const Node* find(std::string_view rel) const override {
    std::size_t at = walk(rel);
    return at == npos ? nullptr : &entries_[at].node;
  }

  /// The names directly inside the folder `rel` (normalised), in order.
  std::vector<std::string> children(std::string_view rel) const override {
    std::vector<std::string> out;
    std::size_t at = walk(rel);
    if (at == npos) return out;
    out.reserve(entries_[at].children.size());
    for (const auto& [name, child] : entries_[at].children) out.emplace_back(name);
    return out;
  }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  /// One path component: its node and the entries below it, by name.
  struct Entry {
    Node node;
    std::map<std::string, std::size_t, std::less<>> children;
  };

  /// The entry of a normalised path, or npos; the components are taken as
  /// stored, never through a link (RootResolver follows links).
  std::size_t walk(std::string_view rel) const {
    std::size_t at = 0;
    while (!rel.empty()) {
      std::size_t slash = rel.find('/');
      std::string_view c = rel.substr(0, slash);
      auto it = entries_[at].children.find(c);
      if (it == entries_[at].children.end()) return npos;
      at = it->second;
      rel = slash == std::string_view::npos ? std::string_view{} : rel.substr(slash + 1);
    }
    return at;
  }

  static constexpr std::size_t block = 512;

  static Result<void> read_file(const std::string& path, std::string& out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      return unexpected(make_sys_error(Errc::io_error, e, "root '", path, "' cannot be opened (", errno_text(e), ")"));
    }
    struct stat st {};
    int err = ::fstat(fd, &st) == 0 ? 0 : errno;
    if (err == 0 && !S_ISREG(st.st_mode)) err = not_regular_file;
    if (err == 0 && static_cast<std::uint64_t>(st.st_size) > max_archive_read) err = EFBIG;
    if (err == 0) out.reserve(static_cast<std::size_t>(st.st_size));
    char buf[65536];
    while (err == 0) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      if (out.size() > max_archive_read) err = EFBIG;
    }
    ::close(fd);
    if (err == EFBIG)
      return fail(Errc::io_error, "root '", path, "' is larger than a recording (256 MiB); name a file written by "
                  "gpuaff record (out=FILE.tar)");
    if (err != 0)
      return unexpected(make_sys_error(Errc::io_error, err, "root '", path, "' cannot be read (", errno_text(err), ")"));
    return {};
  }

  /// The file's bytes decoded in place when they are xz or gzip data.
  Result<void> decompress(const std::string& path) {
    Compression kind = compression_of(*bytes_);
    if (kind == Compression::none) return {};
    const char* name = kind == Compression::xz ? "xz" : "gzip";
    auto decoded = std::make_unique<std::string>();
    DecodeFailure f = detail::decompress(kind, *bytes_, *decoded, max_archive_read);
    if (f.too_large)
      return fail(Errc::out_of_range, "root '", path, "' (", name, ") decompresses to more than 256 MiB, more than a "
                  "recording holds; name a FILE.tar, .tar.xz or .tar.gz written from gpuaff record (out=FILE.tar)");
    if (f)
      return fail(Errc::parse_error, "root '", path, "' is ", name, " data gpuaff cannot read: ", f.what,
                  "; check it with '", name, " -t' and name an intact copy");
    bytes_ = std::move(decoded);
    return {};
  }

  /// A numeric header field: octal digits, leading spaces and a NUL or space
  /// end. -1 when malformed (base-256 included: no recording needs it).
  static long long octal(std::string_view field) {
    std::size_t i = 0;
    while (i < field.size() && field[i] == ' ') ++i;
    long long v = 0;
    std::size_t digits = 0;
    for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
      if (v > (std::int64_t{1} << 40)) return -1;
      v = v * 8 + (field[i] - '0');
    }
    for (; i < field.size(); ++i)
      if (field[i] != '\0' && field[i] != ' ') return -1;
    return digits == 0 ? -1 : v;
  }

  /// A NUL-terminated header string.
  static std::string text(std::string_view field) { return std::string(field.substr(0, field.find('\0'))); }

  /// `name` as a root-relative path: leading "/" and "./" dropped, "." parts
  /// and trailing "/" removed; false for a ".." component.
  static bool normalise(std::string_view name, std::string& out) {
    out.clear();
    std::size_t i = 0;
    while (i <= name.size()) {
      std::size_t j = name.find('/', i);
      if (j == std::string_view::npos) j = name.size();
      std::string_view c = name.substr(i, j - i);
      if (c == "..") return false;
      if (!c.empty() && c != ".") {
        if (!out.empty()) out += '/';
        out += c;
      }
      i = j + 1;
    }
    return true;
  }

  /// The values of a pax extended header's "path" and "linkpath" records.
  static bool pax(std::string_view data, std::string& path, std::string& linkpath) {
    while (!data.empty()) {
      std::size_t space = data.find(' ');
      if (space == std::string_view::npos) return false;
      long long len = 0;
      for (char c : data.substr(0, space)) {
        if (c < '0' || c > '9' || len > 1 << 20) return false;
        len = len * 10 + (c - '0');
      }
      if (len <= static_cast<long long>(space) + 1 || static_cast<std::size_t>(len) > data.size()) return false;
      std::string_view record = data.substr(space + 1, static_cast<std::size_t>(len) - space - 1);
      if (!record.empty() && record.back() == '\n') record.remove_suffix(1);
      std::size_t eq = record.find('=');
      if (eq != std::string_view::npos) {
        std::string_view key = record.substr(0, eq);
        if (key == "path") path = std::string(record.substr(eq + 1));
        if (key == "linkpath") linkpath = std::string(record.substr(eq + 1));
      }
      data.remove_prefix(static_cast<std::size_t>(len));
    }
    return true;
  }

  /// The entry of `rel` (normalised, not empty), made with the folders above
  /// it where missing; npos past the member limit.
  std::size_t add(std::string_view rel, std::uint64_t max_members) {
    std::size_t at = 0;
    while (true) {
      std::size_t slash = rel.find('/');
      std::string_view c = rel.substr(0, slash);
      auto it = entries_[at].children.find(c);
      if (it == entries_[at].children.end()) {
        if (entries_.size() > max_members) return npos;  // the root is not a member
        std::size_t next = entries_.size();
        entries_.emplace_back();
        entries_[at].children.emplace(std::string(c), next);
        at = next;
      } else {
        at = it->second;
      }
      if (slash == std::string_view::npos) return at;
      rel.remove_prefix(slash + 1);
    }
  }

  /// The first bytes of a name, for a message (a name may be 200 KB).
  static std::string shown(std::string_view name) {
    constexpr std::size_t most = 80;
    return name.size() <= most ? escape_control(name) : escape_control(name.substr(0, most)) + "...";
  }

  /// The header's checksum: its bytes summed with its own field read as spaces.
  static bool checksum_ok(std::string_view h) {
    long long stored = octal(h.substr(148, 8));
    long long sum = 0;
    for (std::size_t i = 0; i < block; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    return stored >= 0 && stored == sum;
  }

  /// A member's name and link target: from its header (with ustar's prefix),
  /// unless the members before it gave longer ones (GNU 'L' and 'K', pax
  /// path and linkpath), which serve that member only.
  struct Names {
    std::string long_name, long_link, pax_path, pax_link;

    std::pair<std::string, std::string> take(std::string_view h) {
      std::string name = text(h.substr(0, 100));
      if (h.substr(257, 6) == std::string_view("ustar\0", 6) && h[345] != '\0')
        name = text(h.substr(345, 155)) + "/" + name;
      if (!long_name.empty()) name = std::move(long_name);
      if (!pax_path.empty()) name = std::move(pax_path);
      std::string target = !pax_link.empty() ? std::move(pax_link) : !long_link.empty() ? std::move(long_link)
                                                                                          : text(h.substr(157, 100));
      long_name.clear();
      long_link.clear();
      pax_path.clear();
      pax_link.clear();
      return {std::move(name), std::move(target)};
    }
  };

  /// A hard link's node: that of an earlier regular member, named as stored,
  /// reached through folders only (as GNU tar unpacks it).
  Result<Node> linked_member(const std::string& path, const std::string& name, const std::string& target) {
    std::string to;
    std::size_t found = normalise(target, to) && !to.empty() ? walk(to) : npos;
    if (found == npos || entries_[found].node.kind != Node::Kind::file)
      return fail(Errc::parse_error, "root '", path, "' holds the hard link '", shown(name), "' to '", shown(target),
                  "', which is not an earlier regular member of it (GNU tar would not unpack it); record the machine "
                  "again with gpuaff record");
    for (std::size_t slash = to.find('/'); slash != std::string::npos; slash = to.find('/', slash + 1))
      if (find(std::string_view(to).substr(0, slash))->kind != Node::Kind::directory)
        return fail(Errc::parse_error, "root '", path, "' holds the hard link '", shown(name), "' to '",
                    shown(target), "', which is not an earlier regular member of it (its path goes through "
                    "a link or a file); record the machine again with gpuaff record");
    return entries_[found].node;
  }

  Result<void> parse(const std::string& path, const ArchiveLimits& limits) {
    const std::string_view bytes = *bytes_;
    auto bad = [&](std::size_t at, std::string_view what) {
      return fail(Errc::parse_error, "root '", path, "' is not a tar file gpuaff can read: ", what, " at byte ", at,
                  "; name a directory, or a FILE.tar (or .tar.xz, .tar.gz) written from gpuaff record (out=FILE.tar)");
    };
    auto too_much = [&](auto... what) {
      return fail(Errc::out_of_range, "root '", path, "' ", what...,
                  ", more than a recording holds; name a directory, or a FILE.tar written by gpuaff record "
                  "(out=FILE.tar)");
    };
    Names names;
    std::uint64_t total = 0;
    std::size_t at = 0;
    bool ended = false;
    while (at + block <= bytes.size()) {
      std::string_view h = bytes.substr(at, block);
      if (h.find_first_not_of('\0') == std::string_view::npos) {
        // Two zero blocks end an archive; a lone one is a file cut short (or damaged).
        if (at + 2 * block <= bytes.size() &&
            bytes.substr(at + block, block).find_first_not_of('\0') == std::string_view::npos) {
          ended = true;
          break;
        }
        return bad(at, at + 2 * block <= bytes.size() ? "a lone zero block (the file is cut short or damaged)"
                                                       : "one end block of two (the file is cut short)");
      }
      if (!checksum_ok(h)) return bad(at, "a header whose checksum is wrong (not a tar file?)");
      long long size = octal(h.substr(124, 12));
      if (size < 0) return bad(at, "a header with a malformed size");
      std::size_t data_at = at + block;
      if (static_cast<std::uint64_t>(size) > bytes.size() - data_at)
        return bad(at, "a member that ends past the end of the file (the file is cut short)");
      std::string_view data = bytes.substr(data_at, static_cast<std::size_t>(size));
      std::size_t header_at = at;
      at = data_at + (static_cast<std::size_t>(size) + block - 1) / block * block;
      char type = h[156];
      if (type == 'L' || type == 'K') {  // GNU: the next member's long name or link target
        (type == 'L' ? names.long_name : names.long_link) = text(data);
        continue;
      }
      if (type == 'x') {  // pax: the next member's attributes
        if (!pax(data, names.pax_path, names.pax_link)) return bad(data_at, "a malformed pax extended header");
        continue;
      }
      if (type == 'g') continue;  // pax global attributes: none matter here
      auto [name, target] = names.take(h);
      if (name.size() > limits.max_name)
        return too_much("holds a member whose name is longer than ", limits.max_name, " bytes ('", shown(name),
                        "', at byte ", header_at, ")");
      if ((type == '1' || type == '2') && target.size() > limits.max_name)
        return too_much("holds the link '", shown(name), "', whose target is longer than ", limits.max_name,
                        " bytes");
      std::string rel;
      if (!normalise(name, rel))
        return fail(Errc::parse_error, "root '", path, "' holds the member '", shown(name),
                    "', which climbs out of the root with '..'; record the machine again with gpuaff record");
      if (rel.empty()) continue;  // "./" itself
      if (static_cast<std::size_t>(std::count(rel.begin(), rel.end(), '/')) > limits.max_depth)
        return too_much("holds the member '", shown(rel), "', more than ", limits.max_depth, " folders deep");
      Node node;
      long long mode = octal(h.substr(100, 8));
      node.mode = mode < 0 ? 0644u : static_cast<unsigned>(mode) & 07777u;
      switch (type) {
        case '0': case '\0': case '7':
          node.kind = Node::Kind::file;
          node.data = data;
          total += data.size();
          break;
        case '1': {  // a hard link: an earlier regular member, by its name as stored
          GPUAFF_TRY(node, linked_member(path, name, target));
          total += node.data.size();
          break;
        }
        case '5':
          node.kind = Node::Kind::directory;
          break;
        case '2':
          node.kind = Node::Kind::symlink;
          node.data = targets_.emplace_back(std::move(target));
          break;
        default:  // a FIFO, device: present, never read
          node.kind = Node::Kind::other;
          break;
      }
      if (total > limits.max_total_size)
        return too_much("holds more than ", limits.max_total_size, " bytes of files (hard links counted again)");
      std::size_t entry = add(rel, limits.max_members);
      if (entry == npos)
        return too_much("holds more than ", limits.max_members,
                        " members (files, folders, links, and the folders their names imply)");
      entries_[entry].node = node;
    }
    if (!ended && bytes.empty()) return bad(0, "an empty file");
    if (!ended && at < bytes.size()) return bad(at, "a partial header (the file is cut short)");
    if (!ended) return bad(at, "no end blocks after the last member (the file is cut short)");
    return {};
  }

  std::unique_ptr<std::string> bytes_;  // the file; file nodes view it (a pointer: moves keep the views valid)
  std::deque<std::string> targets_;     // link targets; a deque never moves them
  std::vector<Entry> entries_;          // [0] is the root
};

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
