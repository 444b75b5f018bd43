/* SPDX-License-Identifier: Apache-2.0 */
/* Whole processes timed side by side on a noisy machine: each round runs
   every command once (fork, exec, wait; output to /dev/null), starting with
   a different one each round, so that a slow minute slows all of them alike.
   Prints the median wall time of each command, in milliseconds, in the order
   given. hyperfine runs one command's runs in a block, which a shared VM's
   drift can skew by 20% between blocks; this is the check of a ratio.
     cc -O2 benchmarks/interleave.c -o interleave
     ./interleave ROUNDS /abs/cmd1 args -- /abs/cmd2 args [-- ...]   (at most 8) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc < 3 || atoi(argv[1]) < 1) {
    fprintf(stderr, "usage: %s ROUNDS CMD [ARGS] [-- CMD [ARGS]]...\n", argv[0]);
    return 2;
  }
  int rounds = atoi(argv[1]);
  char** cmds[8];
  int k = 0;
  cmds[k++] = argv + 2;
  for (int i = 2; i < argc; ++i)
    if (strcmp(argv[i], "--") == 0) {
      if (k == 8) {
        fprintf(stderr, "%s: at most 8 commands\n", argv[0]);
        return 2;
      }
      argv[i] = NULL;
      cmds[k++] = argv + i + 1;
    }
  double* t = calloc((size_t)(k * rounds), sizeof *t);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (t == NULL || devnull < 0) {
    perror("setup");
    return 1;
  }
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < k; ++i) {
      int c = (i + r) % k;
      double t0 = now_ms();
      pid_t pid = fork();
      if (pid == 0) {
        dup2(devnull, 1);
        dup2(devnull, 2);
        execv(cmds[c][0], cmds[c]);
        _exit(127);
      }
      int status = 0;
      if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        perror("fork");
        return 1;
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) == 127) {
        fprintf(stderr, "%s: %s did not run (status %d)\n", argv[0], cmds[c][0], status);
        return 1;
      }
      t[c * rounds + r] = now_ms() - t0;
    }
  for (int c = 0; c < k; ++c) {
    qsort(t + c * rounds, (size_t)rounds, sizeof *t, by_value);
    printf("%.3f%s", t[c * rounds + rounds / 2], c + 1 < k ? " " : "\n");
  }
  return 0;
}
