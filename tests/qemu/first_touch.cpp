// SPDX-License-Identifier: Apache-2.0
// A process for `gpuaff doctor` to look at inside the QEMU guests: it places
// MIB MiB of anonymous memory on NODE by first touch, then sleeps until killed.
//
//   first_touch NODE MIB READY_FILE
//
// Linux allocates an anonymous page when it is first written, on a node its
// memory policy allows: with MPOL_BIND to NODE every page written here lands on
// NODE (or the write fails with SIGBUS/OOM; it never silently lands elsewhere).
// The policy is then reset to the default, as a program would have it after a
// library allocated and initialised its buffers under a different policy: pages
// already allocated stay where they are (a policy change moves nothing). When
// every page is in place the program creates READY_FILE and waits.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <linux/mempolicy.h>

#include "guest_args.hpp"

int main(int argc, char** argv) {
  long node = 0;
  long mib = 0;
  if (argc != 4 || !guest::parse_int(argv[1], 63, node) || !guest::parse_int(argv[2], 4096, mib) || mib == 0) {
    std::fprintf(stderr, "usage: first_touch NODE(0-63) MIB(1-4096) READY_FILE\n");
    return 2;
  }
  unsigned long mask = 1UL << node;
  if (syscall(SYS_set_mempolicy, MPOL_BIND, &mask, sizeof mask * 8) != 0) {
    std::fprintf(stderr, "first_touch: set_mempolicy(MPOL_BIND, node %ld): %s\n", node, std::strerror(errno));
    return 1;
  }
  const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  auto* mem = static_cast<volatile char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "first_touch: mmap of %ld MiB: %s\n", mib, std::strerror(errno));
    return 1;
  }
  const long page = sysconf(_SC_PAGESIZE);
  for (std::size_t off = 0; off < bytes; off += static_cast<std::size_t>(page)) mem[off] = 1;
  if (syscall(SYS_set_mempolicy, MPOL_DEFAULT, nullptr, 0) != 0) {
    std::fprintf(stderr, "first_touch: set_mempolicy(MPOL_DEFAULT): %s\n", std::strerror(errno));
    return 1;
  }
  int fd = open(argv[3], O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "first_touch: cannot create %s: %s\n", argv[3], std::strerror(errno));
    return 1;
  }
  close(fd);
  for (;;) pause();  // until killed; the memory stays mapped and resident
}
