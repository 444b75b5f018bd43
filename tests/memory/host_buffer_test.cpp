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
