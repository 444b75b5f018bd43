#pragma once
// RootCopy: copies root-relative files out of a root (normally this machine)
// into a recording directory, on the file layer of detail/fs.hpp. Used by
// record_topology (record.hpp) and the hwloc companion (hwloc_files.hpp).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpuaff/detail/fs.hpp"

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
  /// What went wrong with one file: the errno and which side it was on.
  struct Failure {
    int error = 0;                ///< 0: copied
    std::string_view what{};      ///< "resolve", "read" (in the root), "create directory", "create symlink", "write"
    std::string path{};           ///< the host path that failed
    /// The error is in the recording (else in the root being read).
    bool writing() const { return what != "resolve" && what != "read"; }
  };

  RootCopy(RootDir& from, std::string out) : from_(from), out_(std::move(out)) {}

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

  /// Writes `data` to the root-relative `rel` in the recording.
  Failure write(std::string_view rel, std::string_view data) {
    std::string dir = path_under(out_, parent_of(rel));
    if (int e = make_directories(dir); e != 0) return {e, "create directory", dir};
    std::string at = path_under(out_, rel);
    if (int e = write_whole_file(at, data); e != 0) return {e, "write", at};
    return {};
  }

 private:
  Failure copy_file(std::string_view from_rel, std::string_view to_rel, std::uint64_t& bytes) {
    int e = from_.read(from_rel, data_);
    if (e != 0) return {e, "read", from_.resolver().host_path(from_rel)};
    bytes = data_.size();
    return write(to_rel, data_);
  }

  Failure make_link(const RootResolver::Link& link) {
    if (!made_.insert(link.path).second) return {};
    std::string parent = parent_of(link.path);
    std::vector<std::string> from;
    split_path(parent, from);
    std::string target = relative_link(from, normalise_in_root(parent, link.target));
    std::string dir = path_under(out_, parent);
    if (int e = make_directories(dir); e != 0) return {e, "create directory", dir};
    std::string at = path_under(out_, link.path);
    int e = make_symlink(target, at);
    if (e == 0) ++links_made_;
    if (e == 0 || e == EEXIST) return {};  // EEXIST: made by an earlier recording into the same directory
    return {e, "create symlink", at};
  }

  RootDir& from_;
  std::string out_;
  std::unordered_set<std::string> made_;  // links made, by root-relative path
  int links_made_ = 0;
  std::string data_;
};

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
