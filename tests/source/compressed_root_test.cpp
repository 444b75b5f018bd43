// SPDX-License-Identifier: Apache-2.0
// root=FILE.tar.xz and root=FILE.tar.gz: a tar root compressed as the fixtures
// ship (fixtures/NAME.tar.xz) is read as the tar inside it, decoded in memory
// (detail/decompress.hpp). The truth is the same machine read as a directory,
// which CMake unpacked from the same archive with its own decoder; gzip data
// comes from gzip(1). Damaged or cut data and a compression bomb are refused
// naming the file, never unpacked.
#include <gpuaff/detail/decompress.hpp>
#include <gpuaff/detail/fs.hpp>
#include <gpuaff/record/archive.hpp>
#include <gpuaff/source/json.hpp>
#include <gpuaff/source/sysfs.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::Errc;

namespace {

gpuaff::Result<gpuaff::Topology> load(const std::string& root) {
  return gpuaff::SysfsSource(gpuaff::SysfsOptions{.root = root, .detail = gpuaff::SysfsDetail::full}).load();
}

std::string without_origin(gpuaff::Topology t) {
  t.origin = std::string_view("x");
  return gpuaff::to_json(t);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A gzip member of DEFLATE data that decodes to one zero byte and then
/// `matches` copies of 258 zeros (fixed Huffman codes): a compression bomb of
/// about 1 MB per 160 MB. Its trailer is not checked: the limit stops it first.
std::string gzip_bomb(std::uint64_t matches) {
  std::string out("\x1F\x8B\x08\0\0\0\0\0\0\x03", 10);
  std::uint32_t buf = 0;
  int have = 0;
  auto put = [&](std::uint32_t bits, int n) {  // LSB first
    buf |= bits << have;
    have += n;
    while (have >= 8) {
      out.push_back(static_cast<char>(buf & 0xFF));
      buf >>= 8;
      have -= 8;
    }
  };
  auto huffman = [&](std::uint32_t code, int n) {  // Huffman codes go most significant bit first
    for (int i = n - 1; i >= 0; --i) put((code >> i) & 1, 1);
  };
  put(1, 1);            // the last block
  put(1, 2);            // fixed codes
  huffman(0x30, 8);     // literal 0
  for (std::uint64_t i = 0; i < matches; ++i) {
    huffman(0xC5, 8);   // length 258 (code 285)
    huffman(0, 5);      // distance 1
  }
  huffman(0, 7);        // end of block
  if (have > 0) put(0, 8 - have);
  out.append(8, '\0');  // trailer
  return out;
}

}  // namespace

TEST_CASE("shipped .tar.xz fixtures read as roots are the fixtures read from their directories") {
  // Unlike machines (64 partitions, 16 NICs, masks only, hybrid cores, one
  // core), not all 45: the decoder is the same for each, and the sanitizer
  // build runs it slowly (archive_root_test reads 1152 CPUs from a tar).
  for (const std::string name : {"mi300x-cpx", "b300-16nics", "masks-only", "hybrid", "vm-2cpu"}) {
    INFO(name);
    std::string archive = std::string(GPUAFF_SOURCE_DIR) + "/fixtures/" + name + ".tar.xz";
    auto from_dir = load(gpuaff_test::fixture(name));
    auto from_xz = load(archive);
    REQUIRE(from_dir.has_value() == from_xz.has_value());
    if (!from_dir) {
      CHECK(from_dir.error().code() == from_xz.error().code());
      continue;
    }
    CHECK(std::string(from_xz->origin.view()) == archive);
    CHECK(without_origin(*from_xz) == without_origin(*from_dir));
  }
}

TEST_CASE("a gzip-compressed tar root, as gzip writes it, is read as the tar") {
  gpuaff_test::TempTree out;
  for (const char* name : {"gb200-tray"}) {
    INFO(name);
    std::string tar = out.path(std::string(name) + ".tar");
    auto w = gpuaff::write_tar(gpuaff_test::fixture(name), tar, true);
    REQUIRE_MESSAGE(w, (w ? "" : w.error().what()));
    auto from_tar = load(tar);
    REQUIRE(from_tar);
    for (const char* level : {"-1", "-9"}) {
      std::string gz = tar + level + ".gz";
      REQUIRE(std::system(("gzip -c " + std::string(level) + " '" + tar + "' > '" + gz + "'").c_str()) == 0);
      auto from_gz = load(gz);
      REQUIRE_MESSAGE(from_gz, (from_gz ? "" : from_gz.error().what()));
      CHECK(without_origin(*from_gz) == without_origin(*from_tar));
    }
  }
}

TEST_CASE("damaged or cut compressed data is refused naming the file, the format and what is wrong") {
  gpuaff_test::TempTree tree;
  std::string xz = slurp(std::string(GPUAFF_SOURCE_DIR) + "/fixtures/vm-2cpu.tar.xz");
  REQUIRE(xz.size() > 200);
  auto refused = [&](const std::string& name, const std::string& bytes, std::string_view format,
                     std::string_view says) {
    tree.write(name, bytes);
    auto t = load(tree.path(name));
    REQUIRE_FALSE(t);
    INFO(std::string(t.error().message()));
    CHECK(t.error().code() == Errc::parse_error);
    CHECK(t.error().message().find(tree.path(name)) != std::string_view::npos);
    CHECK(t.error().message().find(format) != std::string_view::npos);
    CHECK(t.error().message().find(says) != std::string_view::npos);
  };
  refused("cut.tar.xz", xz.substr(0, xz.size() / 2), "xz", "cut short");
  std::string flipped = xz;
  flipped[xz.size() / 2] = static_cast<char>(flipped[xz.size() / 2] ^ 0x10);
  refused("flipped.tar.xz", flipped, "xz", "damaged");
  refused("magic-only.tar.xz", xz.substr(0, 6), "xz", "cut short");
  refused("trailing.tar.xz", xz + "garbage!", "xz", "not one");

  gpuaff_test::TempTree out;
  std::string tar = out.path("vm.tar");
  REQUIRE(gpuaff::write_tar(gpuaff_test::fixture("vm-2cpu"), tar, true));
  REQUIRE(std::system(("gzip -c '" + tar + "' > '" + tar + ".gz'").c_str()) == 0);
  std::string gz = slurp(tar + ".gz");
  REQUIRE(gz.size() > 100);
  refused("cut.tar.gz", gz.substr(0, gz.size() - 20), "gzip", "cut short");
  std::string wrong_crc = gz;
  wrong_crc[gz.size() - 6] = static_cast<char>(wrong_crc[gz.size() - 6] ^ 1);
  refused("crc.tar.gz", wrong_crc, "gzip", "CRC-32");
}

TEST_CASE("a compression bomb is refused at the tar size limit, naming the limit") {
  gpuaff_test::TempTree tree;
  // 260 MiB of zeros, past max_archive_read (256 MiB), in about 1.7 MB.
  std::uint64_t matches = (std::uint64_t{260} << 20) / 258;
  tree.write("bomb.tar.gz", gzip_bomb(matches));
  auto t = load(tree.path("bomb.tar.gz"));
  REQUIRE_FALSE(t);
  INFO(std::string(t.error().message()));
  CHECK(t.error().code() == Errc::out_of_range);
  CHECK(t.error().message().find(tree.path("bomb.tar.gz")) != std::string_view::npos);
  CHECK(t.error().message().find("256 MiB") != std::string_view::npos);

  // The same data under the limit decodes whole: what stopped it was the size.
  std::string small = gzip_bomb(1000), decoded;
  auto f = gpuaff::detail::decompress(gpuaff::detail::Compression::gzip, small, decoded, 1 + 258 * 1000);
  CHECK(f.too_large == false);
  CHECK(f.what == "a gzip member whose CRC-32 does not match its data (damaged)");  // the dummy trailer
  CHECK(decoded == std::string(1 + 258 * 1000, '\0'));
  decoded.clear();
  f = gpuaff::detail::decompress(gpuaff::detail::Compression::gzip, small, decoded, 258 * 1000);
  CHECK(f.too_large);
}

TEST_CASE("a root named without its archive's suffix, where the archive is, says which file to name") {
  std::string dir = std::string(GPUAFF_SOURCE_DIR) + "/fixtures/vm-2cpu";  // the source tree ships vm-2cpu.tar.xz
  auto t = load(dir);
  REQUIRE_FALSE(t);
  INFO(std::string(t.error().message()));
  CHECK(t.error().code() == Errc::not_found);
  CHECK(t.error().message().find("root=" + dir + ".tar.xz") != std::string_view::npos);
  gpuaff_test::TempTree tree;
  auto none = load(tree.path("nothing-here"));
  REQUIRE_FALSE(none);
  CHECK(none.error().message().find("neither a directory nor a file") != std::string_view::npos);
  CHECK(none.error().message().find("ENOENT") != std::string_view::npos);  // why: nothing is there
  // A FIFO in its place: said so, and nothing waits for a writer.
  REQUIRE(::mkfifo(tree.path("pipe").c_str(), 0600) == 0);
  auto pipe = load(tree.path("pipe"));
  REQUIRE_FALSE(pipe);
  CHECK(pipe.error().message().find("it is a FIFO, socket or device") != std::string_view::npos);
}
