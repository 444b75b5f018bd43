/* SPDX-License-Identifier: Apache-2.0 */
/* What a live load pays for the allowed set (benchmarks/README.md, "Per call
   on a live root"): reading /proc/self/status, which the kernel formats whole
   for every read, against the two system calls that give its two answers
   (sched_getaffinity, get_mempolicy with MPOL_F_MEMS_ALLOWED), and a sysfs
   file for scale. Each is repeated N times in one process; microseconds per
   call, two rounds.
     cc -O2 benchmarks/allowed_cost.c -o allowed_cost && ./allowed_cost [N] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void read_file(const char* path) {
  char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, buf, sizeof buf) < 0) {
    perror(path);
    exit(1);
  }
  close(fd);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  if (n <= 0) {
    fprintf(stderr, "usage: allowed_cost [N > 0]\n");
    return 2;
  }
  unsigned long mems[8192 / 64];
  cpu_set_t cpus;
  for (int round = 0; round < 2; ++round) {
    double t0 = now();
    for (int i = 0; i < n; ++i) read_file("/proc/self/status");
    double t1 = now();
    for (int i = 0; i < n; ++i) sched_getaffinity(0, sizeof cpus, &cpus);
    double t2 = now();
    long refused = 0;
    for (int i = 0; i < n; ++i) refused += syscall(SYS_get_mempolicy, NULL, mems, 8193UL, NULL, 4UL /* MPOL_F_MEMS_ALLOWED */) != 0;
    double t3 = now();
    for (int i = 0; i < n; ++i) read_file("/sys/devices/system/cpu/online");
    double t4 = now();
    printf("proc/self/status %.2f us; sched_getaffinity %.2f us; get_mempolicy(MEMS_ALLOWED) %.2f us%s; "
           "sys/devices/system/cpu/online %.2f us\n",
           (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t3 - t2) / n * 1e6, refused ? " (REFUSED)" : "",
           (t4 - t3) / n * 1e6);
  }
  return 0;
}
