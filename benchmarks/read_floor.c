/* SPDX-License-Identifier: Apache-2.0 */
/* Row S's I/O floor: opens, reads (one read of up to 4 KiB) and closes each
   file listed in LIST (one path per line, relative to ROOT), resolved inside
   ROOT as gpuaff resolves them (openat2 RESOLVE_IN_ROOT), parsing nothing:
   what any reader of those files pays at least.
     read_floor ROOT LIST            (benchmarks/run.sh builds it -static) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: read_floor ROOT LIST\n");
    return 2;
  }
  int root = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
  FILE* list = fopen(argv[2], "r");
  if (root < 0 || list == NULL) {
    perror("read_floor");
    return 2;
  }
  char line[4096], buf[4096];
  int opened = 0;
  while (fgets(line, sizeof line, list) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, root, line, &how, sizeof how);
    if (fd < 0) continue; /* a probe of a missing file costs its open, as in gpuaff */
    if (read((int)fd, buf, sizeof buf) < 0) perror(line);
    close((int)fd);
    ++opened;
  }
  return opened == 0;
}
