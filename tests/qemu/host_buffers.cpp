// SPDX-License-Identifier: Apache-2.0
// A rank's host buffers in the QEMU guests (scenario host_buffers,
// tests/qemu/scenarios/): started by `gpuaff exec`, it allocates one buffer
// with the library on its plan's host nodes (GPUAFF_PLAN's host=) and a
// second one deliberately on another node, then asks the kernel where every
// page of each is, without gpuaff's own bookkeeping: move_pages(2) called
// here, and the mapping's line of /proc/self/numa_maps read here. Then it
// sleeps until killed, for `gpuaff doctor` to look at.
//
//   host_buffers PLANNED_MIB OTHER_MIB OTHER_NODE READY_FILE
//
// Prints, per buffer:
//   @@GPUAFF-QEMU host_buffers BUF address=HEX nodes=LIST pages=N move_pages=NODE:COUNT,... numa_maps=N<node>=<pages> ...
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gpuaff/launch/plan_variable.hpp>
#include <gpuaff/memory/host_buffer.hpp>

#include "guest_args.hpp"

namespace {

/// The kernel's answer for every page of [p, p + bytes): pages per node ("1:8192").
std::string ask_move_pages(void* p, std::size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  std::size_t n = bytes / static_cast<std::size_t>(page);
  std::vector<void*> pages(n);
  std::vector<int> status(n, -1);
  for (std::size_t i = 0; i < n; ++i) pages[i] = static_cast<char*>(p) + i * static_cast<std::size_t>(page);
  if (syscall(SYS_move_pages, 0, n, pages.data(), nullptr, status.data(), 0) != 0)
    return std::string("error:") + std::strerror(errno);
  std::map<int, std::size_t> count;
  for (int s : status) ++count[s];
  std::string out;
  for (const auto& [node, c] : count) out += (out.empty() ? "" : ",") + std::to_string(node) + ":" + std::to_string(c);
  return out;
}

/// The N<node>=<pages> items of the /proc/self/numa_maps line that starts at `p`.
std::string numa_maps_line(void* p) {
  char want[32];
  std::snprintf(want, sizeof want, "%lx ", static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(p)));
  FILE* f = std::fopen("/proc/self/numa_maps", "r");
  if (f == nullptr) return "unreadable";
  char line[4096];
  std::string out = "absent";
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, want, std::strlen(want)) != 0) continue;
    out.clear();
    for (char* tok = std::strtok(line, " \n"); tok != nullptr; tok = std::strtok(nullptr, " \n"))
      if (tok[0] == 'N' && tok[1] >= '0' && tok[1] <= '9') out += (out.empty() ? "" : ",") + std::string(tok);
    break;
  }
  std::fclose(f);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  long planned_mib = 0, other_mib = 0, other = 0;
  if (argc != 5 || !guest::parse_int(argv[1], 4096, planned_mib) || !guest::parse_int(argv[2], 4096, other_mib) ||
      !guest::parse_int(argv[3], 63, other) || planned_mib == 0 || other_mib == 0) {
    std::fprintf(stderr, "usage: host_buffers PLANNED_MIB OTHER_MIB OTHER_NODE(0-63) READY_FILE\n");
    return 2;
  }
  const char* value = std::getenv("GPUAFF_PLAN");
  if (value == nullptr) {
    std::fprintf(stderr, "host_buffers: no GPUAFF_PLAN: start it with gpuaff exec\n");
    return 1;
  }
  auto plan = gpuaff::parse_plan_variable(value);
  if (!plan || plan->host_nodes.empty()) {
    std::fprintf(stderr, "host_buffers: GPUAFF_PLAN carries no host nodes: %s\n", value);
    return 1;
  }
  struct Want {
    const char* name;
    gpuaff::NodeSet nodes;
    std::size_t bytes;
  };
  const Want wants[] = {{"planned", plan->host_nodes, static_cast<std::size_t>(planned_mib) << 20},
                        {"other", gpuaff::NodeSet::single(static_cast<int>(other)), static_cast<std::size_t>(other_mib) << 20}};
  std::vector<gpuaff::HostBuffer> kept;
  for (const auto& w : wants) {
    auto b = gpuaff::allocate_host_buffer(w.bytes, {.nodes = w.nodes});
    if (!b) {
      std::printf("@@GPUAFF-QEMU host_buffers %s error=%s\n", w.name, std::string(b.error().message()).c_str());
      return 1;
    }
    std::printf("@@GPUAFF-QEMU host_buffers %s address=%lx nodes=%s pages=%zu move_pages=%s numa_maps=%s\n", w.name,
                static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(b->data())), w.nodes.to_list().c_str(),
                b->mapped() / static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), ask_move_pages(b->data(), b->mapped()).c_str(),
                numa_maps_line(b->data()).c_str());
    kept.push_back(std::move(*b));
  }
  std::fflush(stdout);
  int fd = open(argv[4], O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "host_buffers: cannot create %s: %s\n", argv[4], std::strerror(errno));
    return 1;
  }
  close(fd);
  for (;;) pause();  // until killed; the buffers stay mapped and resident
}
