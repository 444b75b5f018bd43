// SPDX-License-Identifier: Apache-2.0
#pragma once
// Recorded roots as archives: with this header anywhere in a program, every
// reader given a file as its root (`--root FILE.tar`, `root="x.tar.xz"`)
// reads it as a tar archive, plain or compressed (detail/archive_tree.hpp),
// with a directory's confinement. Without it, such a root is an error that
// names this header. It is kept out of <gpuaff/gpuaff.hpp> because a trainer
// reads its own machine, and every TU that includes the umbrella would
// otherwise compile the tar reader (benchmarks row 6).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <string>
#include <utility>

#include "gpuaff/detail/archive_tree.hpp"
#include "gpuaff/detail/file_tree.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

inline Result<FileTree*> read_archive_root(const std::string& path) {
  auto tree = ArchiveTree::read(path);
  if (!tree) return unexpected(tree.error());
  return new ArchiveTree(std::move(*tree));
}

/// Installs the tar reader when the program starts (an inline variable: one
/// for the whole program, however many TUs include this header).
inline const bool archive_root_reader_installed = (file_root_reader = &read_archive_root, true);

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
