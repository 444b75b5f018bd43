// SPDX-License-Identifier: Apache-2.0
// Replays every file of tests/fuzz/corpus through the fuzz entry point, so
// that inputs the fuzzer once found stay fixed, with any compiler.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz/fuzz_entry.hpp"
#include "support/check.hpp"

TEST_CASE("every corpus input runs through the fuzz entry point without breaking an invariant") {
  const std::string dir = std::string(GPUAFF_SOURCE_DIR) + "/tests/fuzz/corpus";
  std::vector<std::string> names;
  REQUIRE(gpuaff::detail::list_directory(dir, names) == 0);
  std::sort(names.begin(), names.end());
  CHECK(names.size() >= 10);
  for (const auto& n : names) {
    CAPTURE(n);
    std::string data;
    REQUIRE(gpuaff::detail::read_whole_file(dir + "/" + n, data) == 0);
    CHECK(gpuaff_fuzz::fuzz_one(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()) == 0);
  }
}

TEST_CASE("the fuzz tree loads with its defaults and with the seeded variations the corpus relies on") {
  CHECK(gpuaff_fuzz::run_tree(""));                                          // defaults
  CHECK(gpuaff_fuzz::run_tree(std::string("\xfe") + std::string(22, '\xff') + "0-3\xff" "0"));  // per-CPU online
  CHECK(gpuaff_fuzz::run_tree(std::string(11, '\xff') + "0\xff\xff" "10"));    // one node, one distance
  // One node online, rows of two distances: one per node directory, picked by node id
  // (docs/contract.md section 1).
  CHECK(gpuaff_fuzz::run_tree(std::string(11, '\xff') + "0"));
  // An empty cpu/online is read as missing: the CPUs of the cpuN directories.
  CHECK(gpuaff_fuzz::run_tree("\xfd"));
  CHECK(gpuaff_fuzz::run_tree(std::string("\xfcpresent") + std::string(22, '\xff') + "0-3"));  // online -> present
  CHECK(gpuaff_fuzz::run_tree(std::string("\xfc/sys/devices/system/cpu/present") + std::string(22, '\xff') + "0-3"));
  // Re-rooted: missing, not read (run_tree checks every file read lies in the root);
  // the online CPUs then come from the cpuN directories (docs/contract.md section 1).
  CHECK(gpuaff_fuzz::run_tree("\xfc../../../../../../outside/secret"));
  CHECK_FALSE(gpuaff_fuzz::run_tree(std::string(26, '\xff') + "7"));          // CUDA_VISIBLE_DEVICES=7
}

TEST_CASE("the recorder and JSON cases check a good input through to the end") {
  // The default tree records, and every check of the recording runs on it.
  CHECK(gpuaff_fuzz::run_record(""));
  // A link from the tree to the file outside the root: the recording holds
  // what the root holds at that path (re-rooted: nothing), never the outside file.
  (void)gpuaff_fuzz::run_record(std::string(21, '\xff') + "\xfc/outside/secret");
#ifdef GPUAFF_FUZZ_JSON
  std::string fixture;
  REQUIRE(gpuaff::detail::read_whole_file(std::string(GPUAFF_SOURCE_DIR) + "/fixtures/build-machine-2cpu.json",
                                          fixture) == 0);
  CHECK(gpuaff_fuzz::run_json(fixture));
  CHECK_FALSE(gpuaff_fuzz::run_json(fixture.substr(0, fixture.size() / 2)));
#endif
}

TEST_CASE("the archive case parses GNU tar's pax and gnu formats and refuses a cut one") {
  // Made by GNU tar from a small tree with a 120-character folder name (a pax
  // path record, or a GNU long-name member), relative, absolute and looping links.
  auto seed = [](const char* name) {
    std::string data;
    REQUIRE(gpuaff::detail::read_whole_file(std::string(GPUAFF_SOURCE_DIR) + "/tests/fuzz/corpus/" + name, data) == 0);
    return data.substr(1);  // the first byte picks the case
  };
  CHECK(gpuaff_fuzz::run_archive(seed("seed-archive-pax")));
  CHECK(gpuaff_fuzz::run_archive(seed("seed-archive-gnu")));
  CHECK_FALSE(gpuaff_fuzz::run_archive(seed("seed-archive-cut")));
  CHECK(gpuaff_fuzz::run_archive(seed("seed-archive-hardlink")));  // GNU tar's hard link to an earlier file
  CHECK_FALSE(gpuaff_fuzz::run_archive(seed("seed-archive-deep")));  // 131 folders deep
  CHECK_FALSE(gpuaff_fuzz::run_archive(""));
}
