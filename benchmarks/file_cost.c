/* SPDX-License-Identifier: Apache-2.0 */
/* What each system call of a plan on a recorded root costs here
   (benchmarks/README.md, "Rows P and S on a faster VM"): asking what the
   root is by its path (stat) or by a descriptor already open (fstat), opening
   and closing the root, a file of it opened, read and closed, and a folder
   listed (open, getdents64 until it returns 0, close). Each is repeated N
   times in one process; nanoseconds per call, two rounds.
     cc -O2 benchmarks/file_cost.c -o file_cost
     ./file_cost ROOT [N]     (ROOT: a recording, such as build/fixtures/dgx-h100) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ROOT [N]\n", argv[0]);
    return 2;
  }
  const char* root = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 20000;
  const char* file = "sys/devices/system/node/node0/cpulist";
  const char* folder = "proc/driver/nvidia/gpus";
  int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) die(root);
  char buf[16384];
  struct stat st;
  for (int round = 0; round < 2; ++round) {
    double t0 = now();
    for (int i = 0; i < n; ++i)
      if (stat(root, &st) != 0) die("stat");
    double t1 = now();
    for (int i = 0; i < n; ++i)
      if (fstat(dir, &st) != 0) die("fstat");
    double t2 = now();
    for (int i = 0; i < n; ++i) {
      int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) die(root);
      close(fd);
    }
    double t3 = now();
    for (int i = 0; i < n; ++i) {
      int fd = openat(dir, file, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || read(fd, buf, sizeof buf) < 0) die(file);
      close(fd);
    }
    double t4 = now();
    for (int i = 0; i < n; ++i) {
      int fd = openat(dir, folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) die(folder);
      long got;
      while ((got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
      }
      if (got < 0) die("getdents64");
      close(fd);
    }
    double t5 = now();
    printf("round %d: stat(root) %.0f ns, fstat(root fd) %.0f ns, open+close root %.0f ns, "
           "open+read+close %s %.0f ns, list %s %.0f ns\n",
           round + 1, (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n, file, (t4 - t3) / n, folder, (t5 - t4) / n);
  }
  return 0;
}
