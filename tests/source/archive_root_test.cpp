// SPDX-License-Identifier: Apache-2.0
// root=FILE.tar: the tar file `gpuaff record --out FILE.tar` writes, read as a
// root without unpacking (detail/archive_tree.hpp, RootDir's archive mode).
// The truth is the same recording read as a directory: every fixture gives
// the same topology (as JSON) and the same binding of every GPU under every
// policy. Links keep the directory's confinement; what is not a tar, or is
// cut short, or climbs out with "..", is refused naming the file.
#include <gpuaff/detail/fs.hpp>
#include <gpuaff/policy/dispatch.hpp>
#include <gpuaff/record/archive.hpp>
#include <gpuaff/source/json.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <fstream>
#include <string>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::Errc;

namespace {

gpuaff::Result<gpuaff::Topology> load(const std::string& root) {
  return gpuaff::SysfsSource(gpuaff::SysfsOptions{.root = root, .detail = gpuaff::SysfsDetail::full}).load();
}

/// The topology as JSON without its origin (the path differs by design).
std::string without_origin(gpuaff::Topology t) {
  t.origin = std::string_view("x");
  return gpuaff::to_json(t);
}

std::string write_tar_of(const std::string& dir, const std::string& tar) {
  auto w = gpuaff::write_tar(dir, tar, true);
  REQUIRE_MESSAGE(w, (w ? "" : w.error().what()));
  return tar;
}

}  // namespace

TEST_CASE("every fixture read from its tar file is the fixture read from its directory") {
  gpuaff_test::TempTree out;
  for (const char* name : {"dgx-h100", "p4d.24xlarge", "dgx-a100", "gb200-tray-numa", "mi300x",
                           "container-half-node", "cloud-vm-numa-unknown", "hybrid", "big-1152"}) {
    INFO(name);
    std::string dir = gpuaff_test::fixture(name);
    std::string tar = write_tar_of(dir, out.path(std::string(name) + ".tar"));
    auto from_dir = load(dir);
    auto from_tar = load(tar);
    REQUIRE(from_dir);
    REQUIRE_MESSAGE(from_tar, (from_tar ? "" : from_tar.error().what()));
    CHECK(std::string(from_tar->origin.view()) == tar);
    CHECK(without_origin(*from_tar) == without_origin(*from_dir));
    for (int gpu = 0; gpu < static_cast<int>(from_dir->gpus.size()); ++gpu)
      for (auto kind : gpuaff::all_policy_kinds) {
        auto a = gpuaff::bind(*from_dir, gpu, gpuaff::PolicySpec{.kind = kind});
        auto b = gpuaff::bind(*from_tar, gpu, gpuaff::PolicySpec{.kind = kind});
        REQUIRE(a.has_value() == b.has_value());
        if (a) CHECK(a->to_list() == b->to_list());
      }
  }
}

TEST_CASE("links in a tar root stay inside it, as in a directory root") {
  gpuaff_test::TempTree tree;
  tree.write("root/sys/a/file", "inside\n");
  tree.link("root/sys/absolute", "/sys/a/file");          // absolute: starts at the archive's root
  tree.link("root/sys/climb", "../../../../../sys/a/file");  // ".." stops at the root
  tree.link("root/sys/outside", "/etc/hostname");          // not in the archive: missing, never the host's
  tree.link("root/sys/loop1", "loop2");
  tree.link("root/sys/loop2", "loop1");
  tree.link("root/sys/dir", "a");
  std::string tar = write_tar_of(tree.path("root"), tree.path("root.tar"));
  gpuaff::detail::RootDir dir(tar, false);
  REQUIRE(dir.archive());
  REQUIRE(dir.archive_error() == nullptr);
  std::string text;
  CHECK(dir.read("sys/absolute", text) == 0);
  CHECK(text == "inside\n");
  CHECK(dir.read("sys/climb", text) == 0);
  CHECK(text == "inside\n");
  CHECK(dir.read("sys/outside", text) == ENOENT);
  CHECK(dir.read("sys/loop1", text) == ELOOP);
  CHECK(dir.read("sys/dir/file", text) == 0);
  CHECK(dir.read("sys/a", text) == EISDIR);
  CHECK(dir.is_directory("sys/dir"));
  CHECK_FALSE(dir.is_directory("sys/a/file"));
  CHECK(dir.exists("sys/outside"));  // the dangling link itself is there
  CHECK_FALSE(dir.exists("sys/nothing"));
  std::vector<std::string> names;
  CHECK(dir.list("sys/dir", names) == 0);
  CHECK(names == std::vector<std::string>{"file"});
  CHECK(dir.list("sys/a/file", names) == ENOTDIR);
}

TEST_CASE("what is not a readable tar is refused, naming the file") {
  gpuaff_test::TempTree tree;
  auto refused = [&](const std::string& file, std::string_view says) {
    auto t = load(file);
    REQUIRE_FALSE(t);
    INFO(t.error().what());
    CHECK(t.error().message().find(file) != std::string_view::npos);
    CHECK(t.error().message().find(says) != std::string_view::npos);
    return t.error().code();
  };
  tree.write("text.tar", std::string(2000, 'x'));
  CHECK(refused(tree.path("text.tar"), "checksum is wrong") == Errc::parse_error);
  tree.write("short.tar", "abc");
  CHECK(refused(tree.path("short.tar"), "cut short") == Errc::parse_error);
  tree.write("empty.tar", "");
  CHECK(refused(tree.path("empty.tar"), "an empty file") == Errc::parse_error);

  // A real recording cut in the middle of a member.
  std::string whole = write_tar_of(gpuaff_test::fixture("vm-2cpu"), tree.path("whole.tar"));
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 4096);
  std::size_t cut = bytes.size() / 2 / 512 * 512 + 100;
  tree.write("cut.tar", bytes.substr(0, cut));
  CHECK(refused(tree.path("cut.tar"), "cut short") == Errc::parse_error);

  // A member that climbs out: a header written by hand (ustar, checksum right).
  std::string header(512, '\0');
  auto put = [&](std::size_t at, std::string_view v) { header.replace(at, v.size(), v); };
  put(0, "../escape");
  put(100, "0000644");
  put(124, "00000000000");
  put(156, "0");
  put(257, std::string_view("ustar\0" "00", 8));
  put(148, "        ");
  unsigned sum = 0;
  for (char c : header) sum += static_cast<unsigned char>(c);
  char field[8];
  std::snprintf(field, sizeof field, "%06o", sum);
  put(148, std::string_view(field, 6));
  tree.write("climb.tar", header + std::string(1024, '\0'));
  CHECK(refused(tree.path("climb.tar"), "climbs out of the root") == Errc::parse_error);
}
