// SPDX-License-Identifier: Apache-2.0
// doctor's mappings (doctor/mappings.hpp, judge_mappings in doctor/verdict.hpp):
// numa_maps lines as recorded text, what each says about host buffers, and
// text that is not numa_maps.
#include <gpuaff/doctor/mappings.hpp>
#include <gpuaff/doctor/verdict.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "support/check.hpp"

namespace {

// A trainer's numa_maps on a two-node machine, in the kernel's format
// (fs/proc/task_mmu.c show_numa_map; recorded from a Debian 12 guest, address
// and names kept, counts chosen for the cases below).
constexpr const char* recorded =
    "55d0c0a00000 default file=/usr/bin/python3.11 mapped=800 mapmax=3 N0=700 N1=100 kernelpagesize_kB=4\n"
    "55d0c1000000 default heap anon=5000 dirty=5000 N0=5000 kernelpagesize_kB=4\n"
    // 32768 pages of 4 KiB: a 128 MiB anonymous buffer, all on node 1.
    "7f1200000000 bind:1 anon=32768 dirty=32768 active=0 N1=32768 kernelpagesize_kB=4\n"
    // 16384 pages: a 64 MiB anonymous buffer, 12288 pages (75%) on node 0.
    "7f1300000000 default anon=16384 dirty=16384 N0=12288 N1=4096 kernelpagesize_kB=4\n"
    // 32 huge pages of 2 MiB: 64 MiB of hugetlb memory on node 0.
    "7f1400000000 default file=/anon_hugepage\\040(deleted) huge anon=32 dirty=32 N0=32 kernelpagesize_kB=2048\n"
    // A 256 MiB data file's page cache on node 0: not a host buffer.
    "7f1500000000 default file=/data/shard-0001.bin mapped=65536 mapmax=2 N0=65536 kernelpagesize_kB=4\n"
    // 8 MiB anonymous, on node 0: below the 16 MiB a buffer must have.
    "7f1600000000 default anon=2048 dirty=2048 N0=2048 kernelpagesize_kB=4\n"
    // A mapping without resident pages: address, policy and kind only.
    "7f1700000000 default file=/usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    "7ffd00000000 default stack anon=6000 dirty=6000 N0=6000 kernelpagesize_kB=4\n";

gpuaff::Verdict verdict_for(const char* text, gpuaff::NodeSet host, gpuaff::NodeSet memory) {
  auto maps = gpuaff::detail::parse_numa_maps_mappings(text, "numa_maps", 4096);
  REQUIRE(maps.has_value());
  gpuaff::Verdict v;
  v.expected.host_nodes = host;
  v.expected.memory_nodes = memory;
  gpuaff::judge_mappings(v, maps->mappings, gpuaff::DoctorOptions{});
  return v;
}

std::string error_of(std::string_view text) {
  auto r = gpuaff::detail::parse_numa_maps_mappings(text, "/proc/4242/numa_maps", 4096);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == gpuaff::Errc::parse_error);
  return std::string(r.error().message());
}

}  // namespace

TEST_CASE("numa_maps: each mapping's kind, unit and pages per node") {
  auto maps = gpuaff::detail::parse_numa_maps_mappings(recorded, "numa_maps", 4096);
  REQUIRE(maps.has_value());
  // Nine lines, eight with resident pages (libcuda's has none).
  CHECK(maps->lines == 9);
  REQUIRE(maps->mappings.size() == 8);
  const auto& m = maps->mappings;
  CHECK(m[0].kind() == "file");
  CHECK(m[1].kind() == "heap");
  CHECK(m[2].kind() == "anon");
  CHECK(m[2].policy == "bind:1");
  CHECK(m[2].address == 0x7f1200000000ULL);
  CHECK(m[2].address_text() == "7f1200000000");
  CHECK(m[2].bytes() == 128LL << 20);
  // hugetlb counts are huge pages: 32 x 2 MiB.
  CHECK(m[4].kind() == "hugetlb");
  CHECK(m[4].page_bytes == 2LL << 20);
  CHECK(m[4].bytes() == 64LL << 20);
  CHECK(m[5].kind() == "file");
  CHECK(m[7].kind() == "stack");
  // Node 0: 700 + 5000 + 12288 + 32 (huge pages, counted as pages) + 65536 + 2048 + 6000.
  CHECK(maps->pages.at(0) == 700 + 5000 + 12288 + 32 + 65536 + 2048 + 6000);
  CHECK(maps->pages.at(1) == 100 + 32768 + 4096);
  // Before Linux 4.0 there was no kernelpagesize_kB: the base page is the unit.
  auto old = gpuaff::detail::parse_numa_maps_mappings("7f00 default anon=3 N0=3\n", "numa_maps", 16384);
  REQUIRE(old.has_value());
  CHECK(old->mappings.at(0).bytes() == 3 * 16384);
  // Items a later kernel may add are skipped; an empty text is no mapping.
  auto later = gpuaff::detail::parse_numa_maps_mappings("7f00 default anon=3 newitem=9 N1=3 flag kernelpagesize_kB=4\n",
                                                       "numa_maps", 4096);
  REQUIRE(later.has_value());
  CHECK(later->mappings.at(0).pages == std::map<int, long long>{{1, 3}});
  CHECK(gpuaff::detail::parse_numa_maps_mappings("", "numa_maps", 4096)->mappings.empty());
}

TEST_CASE("doctor: host buffers off the plan's host nodes are named, the largest mappings listed") {
  // Plan: host nodes 1, memory node 1 (a GPU on node 1, mem_nodes=cpu).
  auto v = verdict_for(recorded, gpuaff::NodeSet::single(1), gpuaff::NodeSet::single(1));
  // Off: the 64 MiB anon buffer (75% on node 0), the 64 MiB hugetlb one
  // (100% on node 0) and the heap (5000 pages = 19.5 MiB, all on node 0):
  // anonymous, 16 MiB or more, more than half off node 1; named largest first.
  // Not off: the 128 MiB buffer (on node 1), the data file's 256 MiB of page
  // cache (a file, not a buffer), the 8 MiB mapping (too small), the stack.
  std::vector<std::string> off;
  for (const auto& m : v.mappings)
    if (m.off_host) off.push_back(m.address_text());
  CHECK(off == std::vector<std::string>{"7f1300000000", "7f1400000000", "55d0c1000000"});
  REQUIRE(v.problems.size() == 3);
  CHECK(v.problems[0].find("host buffer at 7f1300000000 (anon, 64.0 MiB resident) has 75.0% of its pages on node(s) 0, "
                           "not on the plan's host nodes 1") == 0);
  CHECK(v.problems[1].find("(hugetlb, 64.0 MiB resident) has 100.0%") != std::string::npos);
  // Listed: the five largest by resident bytes (256 MiB file, 128 MiB, 64 MiB
  // anon, 64 MiB hugetlb: kept in file order when equal, 23.4 MiB stack),
  // then the off heap (19.5 MiB) beyond the five.
  std::vector<std::string> listed;
  for (const auto& m : v.mappings) listed.push_back(m.address_text());
  CHECK(listed == std::vector<std::string>{"7f1500000000", "7f1200000000", "7f1300000000", "7f1400000000",
                                           "7ffd00000000", "55d0c1000000"});
  CHECK(v.mapping_count == 8);

  // Plan: host nodes 0. Off: only the 128 MiB buffer on node 1. The 64 MiB
  // one has 75% on node 0, so it is on the host nodes.
  auto v0 = verdict_for(recorded, gpuaff::NodeSet::single(0), gpuaff::NodeSet::single(0));
  REQUIRE(v0.problems.size() == 1);
  CHECK(v0.problems[0].find("host buffer at 7f1200000000 (anon, 128.0 MiB resident) has 100.0% of its pages on node(s) 1") == 0);

  // Host nodes 1, but memory bound to node 0 on purpose (mem_nodes=gpu on a
  // GH200 puts memory on the GPU's node): pages there are not off. Nothing is.
  auto gpu_memory = verdict_for(recorded, gpuaff::NodeSet::single(1), gpuaff::NodeSet::single(0));
  CHECK(gpu_memory.problems.empty());

  // A plan written before host nodes: nothing judged, a note says why.
  auto old = verdict_for(recorded, gpuaff::NodeSet{}, gpuaff::NodeSet::single(1));
  CHECK(old.problems.empty());
  REQUIRE(old.notes.size() == 1);
  CHECK(old.notes[0].find("host buffers not checked") == 0);
}

TEST_CASE("numa_maps that the kernel did not write: one error naming the file and the line") {
  // Cut in the middle of the last line (no newline at the end).
  CHECK(error_of("7f00 default N0=3\n7f10 default anon=2 N").find("/proc/4242/numa_maps line 2: the text ends inside") == 0);
  // A line with an address and nothing else.
  CHECK(error_of("7f00 default N0=3\n7f10\n").find("line 2: the line is cut short") != std::string::npos);
  CHECK(error_of("zz00 default N0=3\n").find("line 1: it does not start with a mapping's address") != std::string::npos);
  CHECK(error_of("7f0000000000000000 default N0=3\n").find("address") != std::string::npos);  // 18 hex digits
  // Node ids that are not ones.
  for (const char* item : {"N=3", "Nx=3", "N-1=3", "N1", "N1=", "N1=x", "N0x1=3", "N1=3x", "N1=-3"})
    CHECK(error_of(std::string("7f00 default ") + item + "\n").find("not a node's page count") != std::string::npos);
  CHECK(error_of("7f00 default N99999999999999999999=3\n").find("a node id beyond") != std::string::npos);
  // Huge numbers: more pages than 2^40, a page size past 16 GiB, a product past 2^60.
  CHECK(error_of("7f00 default N0=99999999999999999999999\n").find("more pages than any machine has") != std::string::npos);
  CHECK(error_of("7f00 default N0=1 kernelpagesize_kB=99999999999\n").find("kernelpagesize_kB is not a page size") !=
        std::string::npos);
  CHECK(error_of("7f00 default N0=1 kernelpagesize_kB=0\n").find("kernelpagesize_kB") != std::string::npos);
  CHECK(error_of("7f00 default N0=1099511627776 N1=1099511627776 kernelpagesize_kB=16777216\n")
            .find("more than 2^60 bytes") != std::string::npos);
  CHECK(error_of("7f00 default N0=3 N0=4\n").find("a node named twice") != std::string::npos);
  // Control characters in the item are quoted, never printed raw.
  CHECK(error_of("7f00 default N\x1b[2J=1\n").find('\x1b') == std::string::npos);
}

TEST_CASE("process_numa_maps: read below a proc directory, errors naming the file") {
  char dir_template[] = "/tmp/gpuaff-maps-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  std::string proc = dir_template;
  REQUIRE(::mkdir((proc + "/42").c_str(), 0700) == 0);
  auto write = [](const std::string& path, std::string_view text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
  };
  // A process without numa_maps (a kernel without NUMA): nothing, no error.
  write(proc + "/42/stat", "42 (x) S\n");
  auto none = gpuaff::process_numa_maps(42, proc);
  REQUIRE(none.has_value());
  CHECK(none->mappings.empty());
  write(proc + "/42/numa_maps", "7f00 default anon=3 N1=3 kernelpagesize_kB=4\n");
  auto some = gpuaff::process_numa_maps(42, proc);
  REQUIRE(some.has_value());
  CHECK(some->pages == std::map<int, long long>{{1, 3}});
  write(proc + "/42/numa_maps", "7f00 default N1=banana\n");
  auto bad = gpuaff::process_numa_maps(42, proc);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message().find(proc + "/42/numa_maps line 1") == 0);
  // A FIFO in its place is refused, not waited on.
  ::unlink((proc + "/42/numa_maps").c_str());
  REQUIRE(::mkfifo((proc + "/42/numa_maps").c_str(), 0600) == 0);
  auto fifo = gpuaff::process_numa_maps(42, proc);
  REQUIRE_FALSE(fifo.has_value());
  CHECK(fifo.error().message().find("cannot read " + proc + "/42/numa_maps") == 0);
  auto missing = gpuaff::process_numa_maps(43, proc);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code() == gpuaff::Errc::not_found);
  std::string cmd = "rm -rf '" + proc + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}
