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
#include <gpuaff/source/archive.hpp>
#include <gpuaff/source/json.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <array>
#include <cstdlib>
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

namespace {

/// Hand-made tar members (what GNU tar writes, or a hostile variant of it).
struct TarBuilder {
  std::string bytes;
  TarBuilder& member(std::string_view name, char type, std::string_view data = {}, std::string_view link = {}) {
    if (name.size() > 100 || link.size() > 100) {  // long: a pax header first, as GNU tar writes
      std::string pax = gpuaff::detail::pax_record("path", name);
      if (!link.empty()) pax += gpuaff::detail::pax_record("linkpath", link);
      add(gpuaff::detail::tar_header("PaxHeader", 'x', 0644, pax.size(), {}), pax);
    }
    add(gpuaff::detail::tar_header(name.substr(0, 100), type, 0644, type == '0' ? data.size() : 0, link.substr(0, 100)),
        type == '0' ? data : std::string_view{});
    return *this;
  }
  std::string end() const { return bytes + std::string(1024, '\0'); }

 private:
  void add(const std::array<char, gpuaff::detail::tar_block>& header, std::string_view data) {
    bytes.append(header.data(), header.size());
    bytes += data;
    bytes.append((gpuaff::detail::tar_block - data.size() % gpuaff::detail::tar_block) % gpuaff::detail::tar_block,
                 '\0');
  }
};

/// The error of reading `bytes` as a tar root (written to `file`), or "" when it reads.
std::string archive_error(gpuaff_test::TempTree& tree, const std::string& file, const std::string& bytes,
                          const gpuaff::detail::ArchiveLimits& limits = {}) {
  tree.write(file, bytes);
  auto t = gpuaff::detail::ArchiveTree::read(tree.path(file), limits);
  return t ? std::string() : std::string(t.error().message());
}

}  // namespace

TEST_CASE("a tar member's name is bounded in length and depth, and a deep name costs what its bytes cost") {
  gpuaff_test::TempTree tree;
  // 4096 bytes (PATH_MAX, what tar and the kernel take) and 128 folders deep at most.
  std::string deep;
  for (int i = 0; i < 129; ++i) deep += "d/";
  deep += "f";
  std::string err = archive_error(tree, "deep.tar", TarBuilder().member(deep, '0', "x").end());
  INFO(err);
  CHECK(err.find("deep.tar") != std::string::npos);
  CHECK(err.find("more than 128 folders deep") != std::string::npos);
  std::string ok_depth;
  for (int i = 0; i < 127; ++i) ok_depth += "d/";
  CHECK(archive_error(tree, "ok.tar", TarBuilder().member(ok_depth + "f", '0', "x").end()).empty());

  std::string long_name = std::string(3000, 'a') + "/" + std::string(1200, 'b');
  err = archive_error(tree, "long.tar", TarBuilder().member(long_name, '0', "x").end());
  CHECK(err.find("long.tar") != std::string::npos);
  CHECK(err.find("longer than 4096 bytes") != std::string::npos);
  err = archive_error(tree, "longlink.tar", TarBuilder().member("l", '2', {}, long_name).end());
  CHECK(err.find("longer than 4096 bytes") != std::string::npos);

  // The archive: one 200 KB name of 100,000 folders. Refused at once
  // (it once took 10 GB, each folder's whole path stored).
  std::string huge;
  for (int i = 0; i < 100000; ++i) huge += "a/";
  err = archive_error(tree, "huge.tar", TarBuilder().member(huge + "f", '0', "x").end());
  INFO(err);
  CHECK(err.find("longer than 4096 bytes") != std::string::npos);
}

TEST_CASE("a tar root's member count and total size are bounded, each refusal naming the limit and the file") {
  gpuaff_test::TempTree tree;
  TarBuilder many;
  for (int i = 0; i < 11; ++i) many.member("f" + std::to_string(i), '0', "x");
  std::string err = archive_error(tree, "many.tar", many.end(), {.max_members = 10});
  INFO(err);
  CHECK(err.find("many.tar") != std::string::npos);
  CHECK(err.find("more than 10 members") != std::string::npos);
  CHECK(archive_error(tree, "ten.tar", TarBuilder(many).end(), {.max_members = 11}).empty());

  // Hard links count again: their size is what unpacking would write.
  TarBuilder big;
  big.member("a", '0', std::string(600, 'x')).member("b", '1', {}, "a");
  err = archive_error(tree, "big.tar", big.end(), {.max_total_size = 1000});
  CHECK(err.find("big.tar") != std::string::npos);
  CHECK(err.find("more than 1000 bytes") != std::string::npos);
  CHECK(archive_error(tree, "fits.tar", big.end(), {.max_total_size = 1200}).empty());
}

TEST_CASE("a hard link to an earlier regular member reads as that member, as GNU tar unpacks it") {
  gpuaff_test::TempTree tree;
  std::string tar = TarBuilder()
                        .member("sys/devices/system/cpu/online", '0', "0-3\n")
                        .member("sys/devices/system/cpu/present", '1', {}, "sys/devices/system/cpu/online")
                        .member("./sys/p2", '1', {}, "./sys/devices/system/cpu/online")
                        .end();
  tree.write("hard.tar", tar);
  gpuaff::detail::RootDir dir(tree.path("hard.tar"), false);
  REQUIRE(dir.archive_error() == nullptr);
  std::string text;
  CHECK(dir.read("sys/devices/system/cpu/present", text) == 0);
  CHECK(text == "0-3\n");
  CHECK(dir.read("sys/p2", text) == 0);
  CHECK(text == "0-3\n");
  // A later member of the target's name does not change what the link holds (it is the same inode in GNU tar's copy).
  tree.write("later.tar", TarBuilder()
                              .member("a", '0', "old\n")
                              .member("b", '1', {}, "a")
                              .member("a", '0', "new\n")
                              .end());
  gpuaff::detail::RootDir later(tree.path("later.tar"), false);
  REQUIRE(later.archive_error() == nullptr);
  CHECK(later.read("b", text) == 0);
  CHECK(text == "old\n");
}

TEST_CASE("a hard link out of the root, to a later member, to a folder, link or nothing is refused") {
  gpuaff_test::TempTree tree;
  auto refused = [&](const char* file, TarBuilder b, std::string_view says) {
    std::string err = archive_error(tree, file, b.end());
    INFO(err);
    CHECK(err.find(file) != std::string::npos);
    CHECK(err.find(says) != std::string::npos);
  };
  refused("out.tar", TarBuilder().member("a", '0', "x").member("b", '1', {}, "../a"), "hard link 'b' to '../a'");
  refused("abs.tar", TarBuilder().member("b", '1', {}, "/etc/passwd"), "hard link 'b' to '/etc/passwd'");
  refused("later.tar", TarBuilder().member("b", '1', {}, "a").member("a", '0', "x"), "hard link 'b' to 'a'");
  refused("dir.tar", TarBuilder().member("d", '5').member("b", '1', {}, "d"), "hard link 'b' to 'd'");
  refused("sym.tar", TarBuilder().member("a", '0', "x").member("s", '2', {}, "a").member("b", '1', {}, "s"),
          "hard link 'b' to 's'");
  refused("through.tar",
          TarBuilder().member("d/a", '0', "x").member("s", '2', {}, "d").member("b", '1', {}, "s/a"),
          "hard link 'b' to 's/a'");
  refused("self.tar", TarBuilder().member("b", '1', {}, "b"), "hard link 'b' to 'b'");
}

TEST_CASE("a tar cut at a member boundary, or missing its end, is refused as cut short") {
  gpuaff_test::TempTree tree;
  std::string whole = write_tar_of(gpuaff_test::fixture("vm-2cpu"), tree.path("whole.tar"));
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The end: every zero block after the last member.
  std::size_t end = bytes.find_last_not_of('\0');
  REQUIRE(end != std::string::npos);
  end = (end / 512 + 1) * 512;
  REQUIRE(bytes.size() >= end + 1024);
  auto cut_error = [&](const char* file, std::string_view data) {
    std::string err = archive_error(tree, file, std::string(data));
    INFO(err);
    CHECK(err.find(file) != std::string::npos);
    CHECK(err.find("cut short") != std::string::npos);
  };
  cut_error("no-end.tar", std::string_view(bytes).substr(0, end));          // after the last member
  cut_error("one-zero.tar", std::string_view(bytes).substr(0, end + 512));  // one of the two zero blocks
  // Cut at an earlier member boundary: the headers of the first half, whole.
  std::size_t at = 0;
  std::size_t boundary = 0;
  while (at < end / 2) {
    boundary = at;
    long long size = std::strtoll(bytes.substr(at + 124, 12).c_str(), nullptr, 8);
    at += 512 + (static_cast<std::size_t>(size) + 511) / 512 * 512;
  }
  REQUIRE(boundary > 0);
  cut_error("boundary.tar", std::string_view(bytes).substr(0, boundary));
  CHECK(archive_error(tree, "two-zeros.tar", bytes.substr(0, end + 1024)).empty());
  // A root of it: the load says so too, naming the file.
  tree.write("cut-root.tar", bytes.substr(0, boundary));
  auto t = load(tree.path("cut-root.tar"));
  REQUIRE_FALSE(t);
  CHECK(t.error().message().find("cut short") != std::string_view::npos);
}

TEST_CASE("a program without the archive reader refuses a file root, naming the header, and reads nothing") {
  // <gpuaff/source/archive.hpp> installs the tar reader for the whole program
  // (this test includes it); a program built on the umbrella alone has none.
  // Without it, a tar root is an error that says what is missing and what to
  // do instead, never an empty machine.
  gpuaff_test::TempTree out;
  std::string tar = write_tar_of(gpuaff_test::fixture("p4d.24xlarge"), out.path("p4d.tar"));
  REQUIRE(static_cast<bool>(gpuaff::detail::file_root_reader));
  auto installed = gpuaff::detail::file_root_reader;
  gpuaff::detail::file_root_reader = nullptr;
  auto without = load(tar);
  gpuaff::detail::file_root_reader = installed;
  REQUIRE_FALSE(without);
  CHECK(without.error().code() == gpuaff::Errc::unsupported);
  std::string message(without.error().message());
  CHECK(message.find(tar) != std::string::npos);
  CHECK(message.find("<gpuaff/source/archive.hpp>") != std::string::npos);
  CHECK(message.find("tar -xf") != std::string::npos);
  auto with = load(tar);  // the reader back: the same file reads
  CHECK(with.has_value());
}
