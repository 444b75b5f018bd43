// SPDX-License-Identifier: Apache-2.0
#pragma once
// RootCopy: copies root-relative files out of a root (normally this machine)
// into a recording directory, on the file layer of detail/fs.hpp. Used by
// record_topology (record.hpp) and the hwloc companion (hwloc_files.hpp).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpuaff/detail/fs.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Copies root-relative files from a root into a recording directory `out`.
/// A path copied with its links keeps every symlink met on the way as a
/// relative link inside the recording (sys/bus/pci/devices/X stays a link into
/// sys/devices/pci*, as the kernel has it and as every reader expects); each
/// link is made once however many files go through it.
class RootCopy {
 public:
  static constexpr std::string_view through_planted_link = "write through the symlink";

  /// What went wrong with one file: the errno and which side it was on.
  struct Failure {
    int error = 0;                ///< 0: copied
    std::string_view what{};      ///< "resolve", "read" (in the root), "open directory", "create directory",
                                  ///< "write through the symlink" (one planted in the recording), "create symlink", "write"
    std::string path{};           ///< the host path that failed
    /// The error is in the recording (else in the root being read).
    bool writing() const { return what != "resolve" && what != "read"; }
    /// A symlink found in the recording where a directory is written: refused.
    bool planted_link() const { return what == through_planted_link; }
    Error planted_link_error() const {
      return make_sys_error(Errc::io_error, error, "refusing to write through the symlink '", path,
                            "' in the output directory (it could lead outside it); remove it, or choose a new "
                            "directory");
    }
  };

  RootCopy(RootDir& from, std::string out) : from_(from), out_(std::move(out)) {}
  RootCopy(const RootCopy&) = delete;
  RootCopy& operator=(const RootCopy&) = delete;
  ~RootCopy() {
    if (out_fd_ >= 0) ::close(out_fd_);
  }

  int links_made() const { return links_made_; }

  /// Copies `rel` to the path it resolves to, recreating the links on the way.
  /// On success `copied` is the resolved root-relative path and `bytes` its size.
  Failure copy_with_links(std::string_view rel, std::string& copied, std::uint64_t& bytes) {
    std::vector<RootResolver::Link> links;
    RootResolver& resolver = from_.resolver();
    if (int e = resolver.resolve(rel, copied, &links); e != 0) return {e, "resolve", resolver.host_path(rel)};
    for (const auto& link : links)
      if (Failure f = make_link(link); f.error != 0) return f;
    return copy_file(copied, copied, bytes);
  }

  /// Copies `rel` under the same name, following links inside the root rather
  /// than recreating them (proc/self is a link to this process's pid: the
  /// recording keeps the name).
  Failure copy_as_named(std::string_view rel, std::uint64_t& bytes) { return copy_file(rel, rel, bytes); }

  /// Writes `data` to the root-relative `rel` in the recording (mode 0644).
  Failure write(std::string_view rel, std::string_view data) { return write_file(rel, data, 0644); }

 private:
  // Every write goes through directory fds opened from the output directory
  // without following links (open_directory_below): a symlink planted in the
  // output (--force into a used directory), at any component, is refused
  // rather than written through. Links this copy made itself are followed,
  // from what it knows they point at (see through_own_links).
  Failure write_file(std::string_view rel, std::string_view data, mode_t mode) {
    std::string real = through_own_links(rel);
    int dir = -1;
    if (Failure f = open_parent(real, dir); f.error != 0) return f;
    std::size_t slash = real.rfind('/');
    std::string name = slash == std::string::npos ? real : real.substr(slash + 1);
    int e = write_file_at(dir, name, data, mode);
    ::close(dir);
    if (e != 0) return {e, "write", path_under(out_, real)};
    return {};
  }

  Failure copy_file(std::string_view from_rel, std::string_view to_rel, std::uint64_t& bytes) {
    mode_t mode = 0644;
    int e = from_.read(from_rel, data_, ShortRead::more, &mode);
    if (e != 0) return {e, "read", from_.resolver().host_path(from_rel)};
    bytes = data_.size();
    // The source's permission bits, never more than 0644: a file readable only
    // by its owner in the root stays so in the recording.
    return write_file(to_rel, data_, mode & 0644);
  }

  Failure make_link(const RootResolver::Link& link) {
    if (made_.count(link.path) != 0) return {};
    std::string parent = parent_of(link.path);
    std::vector<std::string> from;
    split_path(parent, from);
    std::vector<std::string> to = normalise_in_root(parent, link.target);
    std::string target = relative_link(from, to);
    std::string real = through_own_links(link.path);
    int dir = -1;
    if (Failure f = open_parent(real, dir); f.error != 0) return f;
    std::size_t slash = real.rfind('/');
    int e = make_symlink_at(dir, slash == std::string::npos ? real : real.substr(slash + 1), target);
    ::close(dir);
    if (e != 0 && e != EEXIST) return {e, "create symlink", path_under(out_, real)};
    // EEXIST: made by an earlier recording into the same directory, the same link.
    if (e == 0) ++links_made_;
    made_.emplace(link.path, join_path(to));
    return {};
  }

  /// `rel` with each prefix that is a link this copy made replaced by the
  /// root-relative path it points at, as the kernel would resolve it in the
  /// recording (the links are relative and stay inside it).
  std::string through_own_links(std::string_view rel) const {
    std::string path(rel);
    for (int hops = 0; hops < 40; ++hops) {  // as the kernel's MAXSYMLINKS
      bool replaced = false;
      for (std::size_t end = path.find('/'); end != std::string::npos && !replaced; end = path.find('/', end + 1)) {
        if (auto it = made_.find(path.substr(0, end)); it != made_.end()) {
          path = it->second + path.substr(end);
          replaced = true;
        }
      }
      if (!replaced) break;
    }
    return path;
  }

  /// Opens the directory of the recording-relative `rel`, creating it.
  Failure open_parent(const std::string& rel, int& dir) {
    if (out_fd_ < 0) {
      if (int e = make_directories(out_); e != 0) return {e, "create directory", out_};
      out_fd_ = ::open(out_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (out_fd_ < 0) return {errno, "open directory", out_};
    }
    std::string link_at;
    if (int e = open_directory_below(out_fd_, parent_of(rel), dir, link_at); e != 0)
      return {e, e == ELOOP ? through_planted_link : "create directory",
              path_under(out_, e == ELOOP ? link_at : parent_of(rel))};
    return {};
  }

  RootDir& from_;
  std::string out_;
  std::unordered_map<std::string, std::string> made_;  // links made: root-relative path -> what it points at
  int out_fd_ = -1;
  int links_made_ = 0;
  std::string data_;
};

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
