// SPDX-License-Identifier: Apache-2.0
// A process that moves one of its own threads, for `gpuaff doctor --watch`
// inside the QEMU guests (tests/qemu/scenarios/watch_repin.guest.sh), as a
// runtime does when it re-pins its threads after the launcher bound them.
//
//   repinner GO_FILE TID_FILE
//
// A thread named "repinner" writes its thread id into TID_FILE (whole: a
// file beside it, then renamed), waits until GO_FILE exists, then sets its
// own CPU affinity to every CPU it was not allowed (the other node's, when
// `gpuaff exec` bound the process to one node) and writes GO_FILE.done with
// the mask it got. The process then sleeps until it is killed.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

std::string go, tid_file;

void write_whole(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

void* repin(void*) {
  pthread_setname_np(pthread_self(), "repinner");
  write_whole(tid_file, std::to_string(gettid()) + "\n");
  while (access(go.c_str(), F_OK) != 0) usleep(20000);
  cpu_set_t now, other;
  CPU_ZERO(&other);
  sched_getaffinity(0, sizeof now, &now);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cpus && c < CPU_SETSIZE; ++c)
    if (!CPU_ISSET(c, &now)) CPU_SET(c, &other);
  int rc = CPU_COUNT(&other) > 0 ? sched_setaffinity(0, sizeof other, &other) : -1;
  std::string got;
  sched_getaffinity(0, sizeof now, &now);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &now)) got += (got.empty() ? "" : ",") + std::to_string(c);
  write_whole(go + ".done", "rc=" + std::to_string(rc) + " cpus=" + got + "\n");
  for (;;) pause();
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: repinner GO_FILE TID_FILE\n");
    return 2;
  }
  go = argv[1];
  tid_file = argv[2];
  pthread_t t;
  if (pthread_create(&t, nullptr, repin, nullptr) != 0) return 1;
  for (;;) pause();
}
