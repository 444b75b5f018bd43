// SPDX-License-Identifier: Apache-2.0
#pragma once
// A root held in memory instead of a directory: what RootDir (fs.hpp) reads
// when the root it is given is a file (a recording as a tar archive). The
// interface only: the tar reader (archive_tree.hpp, with its decoders) is
// what few programs need and many TUs would pay to compile, so it lives in
// <gpuaff/source/archive.hpp>, which installs itself as the reader of file
// roots. gpuaff's tool, its Python module and load_machine (source/load.hpp)
// include it; a program that does not, given a file as its root, gets an
// error that says so.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// One path of a tree: a file (its content), a folder, a symbolic link (its
/// target) or something else (a FIFO or device, which no read opens).
struct FileTreeNode {
  enum class Kind { file, directory, symlink, other };
  Kind kind = Kind::directory;
  std::string_view data;  ///< a file's content, a symlink's target (owned by the tree)
  unsigned mode = 0755;
};

class FileTree {
 public:
  FileTree() = default;
  FileTree(const FileTree&) = default;
  FileTree& operator=(const FileTree&) = default;
  virtual ~FileTree() = default;

  /// The node at a normalised root-relative path ("" is the root), or nullptr;
  /// the components are taken as stored, never through a link (RootResolver
  /// follows links).
  virtual const FileTreeNode* find(std::string_view rel) const = 0;
  /// The names directly inside the folder `rel` (normalised), in order.
  virtual std::vector<std::string> children(std::string_view rel) const = 0;
};

/// A tree with nothing but its root folder: what a root whose file could not
/// be read reads as (every read says "missing" after the error).
class EmptyFileTree final : public FileTree {
 public:
  const FileTreeNode* find(std::string_view rel) const override { return rel.empty() ? &root_ : nullptr; }
  std::vector<std::string> children(std::string_view) const override { return {}; }

 private:
  FileTreeNode root_{};
};

/// Reads the file at `path` as a tree; the caller owns what it returns.
using FileTreeReader = Result<FileTree*> (*)(const std::string& path);

/// The reader of file roots, or nullptr while no TU of the program includes
/// <gpuaff/source/archive.hpp>.
inline FileTreeReader file_root_reader = nullptr;

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
