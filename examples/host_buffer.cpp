// SPDX-License-Identifier: Apache-2.0
// A host buffer on chosen NUMA nodes and where its pages landed, as the
// kernel says (gpuaff/memory/host_buffer.hpp): what a rank does before it
// registers a staging buffer with its GPU runtime.
//
//   host_buffer MIB NODES [touch|populate] [none|transparent|hugetlb]
//
// NODES is a list such as "0" or "0-1" (bind --format json's host_nodes).
// Prints the placement and how long mapping, binding and faulting took.
#include <gpuaff/memory/host_buffer.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: host_buffer MIB NODES [touch|populate] [none|transparent|hugetlb]\n");
    return 2;
  }
  auto nodes = gpuaff::CpuSet::parse_list(argv[2]);
  if (!nodes) {
    std::fprintf(stderr, "host_buffer: %s\n", std::string(nodes.error().message()).c_str());
    return 2;
  }
  gpuaff::HostBufferOptions o{.nodes = *nodes};
  std::string fault = argc > 3 ? argv[3] : "touch", huge = argc > 4 ? argv[4] : "none";
  o.fault = fault == "populate" ? gpuaff::FaultIn::populate : gpuaff::FaultIn::touch;
  o.huge = huge == "transparent" ? gpuaff::HugePages::transparent
           : huge == "hugetlb"   ? gpuaff::HugePages::hugetlb
                                 : gpuaff::HugePages::none;
  std::size_t bytes = std::strtoull(argv[1], nullptr, 10) << 20;
  auto start = std::chrono::steady_clock::now();
  auto b = gpuaff::allocate_host_buffer(bytes, o);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!b) {
    std::fprintf(stderr, "host_buffer: %s\n", std::string(b.error().message()).c_str());
    return 1;
  }
  std::printf("%zu MiB on node(s) %s, fault=%s, huge=%s: %.1f ms to map, bind and fault in\n", bytes >> 20,
              nodes->to_list().c_str(), std::string(gpuaff::to_string(o.fault)).c_str(),
              std::string(gpuaff::to_string(o.huge)).c_str(), ms);
  std::printf("pages: %s\n", b->placement().summary().c_str());
  return 0;
}
