// SPDX-License-Identifier: Apache-2.0
// Host buffers on chosen nodes: the pages land where they were bound (asked
// of the kernel, page by page), and every refusal is said before a page is
// faulted (a node not allowed, a full cgroup or node, no huge pages).
#include <gpuaff/memory/host_buffer.hpp>

#include <sys/mman.h>

#include <string>

#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::FaultIn;
using gpuaff::HostBufferOptions;
using gpuaff::HostLimits;
using gpuaff::HugePages;
using gpuaff::NodeSet;

namespace {
/// The lowest node this process may allocate on, as /proc/self/status says.
int allowed_node() {
  auto l = gpuaff::read_host_limits(NodeSet{});
  REQUIRE(l.mems_allowed.has_value());
  REQUIRE(!l.mems_allowed->empty());
  return l.mems_allowed->first();
}
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("every page of a host buffer is on its node, by the kernel's answer") {
  int node = allowed_node();
  for (FaultIn fault : {FaultIn::touch, FaultIn::populate}) {
    CAPTURE(gpuaff::to_string(fault));
    auto b = gpuaff::allocate_host_buffer(3 * 1024 * 1024 + 5, HostBufferOptions{.nodes = NodeSet::single(node), .fault = fault});
    if (!b && b.error().code() == Errc::unsupported) {  // MADV_POPULATE_WRITE needs Linux 5.14
      MESSAGE("skipped: ", b.error().message());
      continue;
    }
    REQUIRE_MESSAGE(b, (b ? std::string() : std::string(b.error().message())));
    // 3 MiB + 5 bytes in 4 KiB pages: 768 pages and one more for the 5 bytes.
    long page = ::sysconf(_SC_PAGESIZE);
    CHECK(b->page_size() == static_cast<std::size_t>(page));
    CHECK(b->placement().pages == (3 * 1024 * 1024 + 5 + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page));
    // Asked again of the kernel, independently of the allocation's own check.
    auto again = gpuaff::page_placement(b->data(), b->mapped(), b->page_size());
    REQUIRE(again);
    CHECK(again->by_node.size() == 1);
    CHECK(again->by_node[node] == again->pages);
    CHECK(again->not_present == 0);
  }
}

TEST_CASE("an untouched mapping is reported as not present, not as placed") {
  // The query must tell faulted from unfaulted pages, or the check above proves nothing.
  long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, 4 * static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  static_cast<volatile char*>(p)[0] = 1;  // one page of four
  auto r = gpuaff::page_placement(p, 4 * static_cast<std::size_t>(page), static_cast<std::size_t>(page));
  ::munmap(p, 4 * static_cast<std::size_t>(page));
  REQUIRE(r);
  CHECK(r->pages == 4);
  CHECK(r->not_present == 3);
  CHECK(r->on(NodeSet::single(allowed_node())) == 1);
}

TEST_CASE("a node outside Mems_allowed_list is refused before anything is mapped, naming it") {
  // Node 63: no machine this runs on allows it to this process (the live limits say which do).
  auto limits = gpuaff::read_host_limits(NodeSet::single(63));
  REQUIRE(limits.mems_allowed.has_value());
  REQUIRE(!limits.mems_allowed->test(63));
  auto b = gpuaff::allocate_host_buffer(4096, HostBufferOptions{.nodes = NodeSet::single(63)}, limits);
  REQUIRE(!b);
  CHECK(b.error().code() == Errc::empty_result);
  CHECK(contains(std::string(b.error().message()), "NUMA node(s) 63 are not allowed"));
  CHECK(contains(std::string(b.error().message()), "Mems_allowed_list"));
}

TEST_CASE("the limits that refuse an allocation are named: cgroup, node memory, huge pages") {
  HostLimits l;
  l.mems_allowed = NodeSet::single(0);
  HostBufferOptions o{.nodes = NodeSet::single(0)};
  SUBCASE("memory cgroup") {
    l.cgroup_room = 1024 * 1024;
    l.cgroup_file = "/sys/fs/cgroup/job/memory.max";
    auto r = gpuaff::check_host_room(8 * 1024 * 1024, o, l);
    REQUIRE(!r);
    CHECK(r.error().code() == Errc::empty_result);
    CHECK(contains(std::string(r.error().message()), "/sys/fs/cgroup/job/memory.max leaves 1 MiB"));
    CHECK(gpuaff::check_host_room(512 * 1024, o, l));  // half the room fits
  }
  SUBCASE("free memory on the node") {
    l.free_bytes[0] = 2 * 1024 * 1024;
    auto r = gpuaff::check_host_room(3 * 1024 * 1024, o, l);
    REQUIRE(!r);
    CHECK(contains(std::string(r.error().message()), "does not fit on NUMA node(s) 0: 2 MiB free"));
  }
  SUBCASE("hugetlb pool") {
    o.huge = HugePages::hugetlb;
    l.huge_page_size = 2 * 1024 * 1024;
    l.free_huge[0] = 1;
    auto r = gpuaff::check_host_room(3 * 1024 * 1024, o, l);  // two 2 MiB pages needed, one free
    REQUIRE(!r);
    CHECK(r.error().code() == Errc::unsupported);
    CHECK(contains(std::string(r.error().message()), "have 1 free 2048 kB huge pages and 2 are needed"));
  }
  SUBCASE("transparent huge pages switched off") {
    o.huge = HugePages::transparent;
    l.thp_enabled = "always madvise [never]";
    auto r = gpuaff::check_host_room(4096, o, l);
    REQUIRE(!r);
    CHECK(contains(std::string(r.error().message()), "says 'always madvise [never]'"));
  }
  SUBCASE("no nodes, no bytes") {
    CHECK(gpuaff::check_host_room(4096, HostBufferOptions{}, l).error().code() == Errc::invalid_argument);
    CHECK(gpuaff::check_host_room(0, o, l).error().code() == Errc::invalid_argument);
  }
}

TEST_CASE("hugetlb with an empty pool is a clear error, and nothing stays mapped") {
  int node = allowed_node();
  HostBufferOptions o{.nodes = NodeSet::single(node), .huge = HugePages::hugetlb};
  auto limits = gpuaff::read_host_limits(o.nodes);
  auto free = limits.free_huge.find(node);
  if (limits.huge_page_size == 0 || free == limits.free_huge.end() || free->second > 0) {
    MESSAGE("skipped: this machine has huge pages reserved, or no pool to read");
    return;
  }
  auto b = gpuaff::allocate_host_buffer(4096, o, limits);
  REQUIRE(!b);
  CHECK(b.error().code() == Errc::unsupported);
  CHECK(contains(std::string(b.error().message()), "huge pages (hugetlb) are not available"));
}

TEST_CASE("a node's meminfo lines are read by key, in bytes") {
  // The layout of /sys/devices/system/node/node1/meminfo: "Node N Key:  value kB".
  std::string text = "Node 1 MemTotal:       65536 kB\nNode 1 MemFree:        2048 kB\n"
                     "Node 1 Active(file):     100 kB\nNode 1 Inactive(file):   28 kB\nNode 1 HugePages_Free:     3\n";
  CHECK(gpuaff::detail::meminfo_value(text, "MemFree") == 2048LL * 1024);
  CHECK(gpuaff::detail::meminfo_value(text, "Active(file)") == 100LL * 1024);  // not Inactive(file)'s
  CHECK(gpuaff::detail::meminfo_value(text, "Inactive(file)") == 28LL * 1024);
  CHECK(gpuaff::detail::meminfo_value(text, "HugePages_Free") == 3);  // a count, no unit
  CHECK(!gpuaff::detail::meminfo_value(text, "SReclaimable").has_value());
}
