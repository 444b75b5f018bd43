// SPDX-License-Identifier: Apache-2.0
// Row W (benchmarks/README.md): what one interval of `gpuaff doctor --watch`
// costs on a node of 8 ranks x 200 threads. The ranks are real processes:
// this program executed again with `--child N`, each carrying a GPUAFF_PLAN
// in its environment (as `gpuaff exec` leaves it) and holding N threads that
// sleep. One interval is watch_once(): the /proc scan for planned processes,
// every rank checked against its plan (environ, each thread's status,
// numa_maps), the machine's NICs read, and the diff against the previous
// check. Beside it, its floor: opening, reading and closing exactly the
// /proc files of those processes, parsing nothing. CPU time of this process
// (user + system: the kernel's work for /proc is charged to the reader).
//   watch_bench [--ranks R] [--threads T] [--rounds K] [--quick]
#include <gpuaff/doctor/watch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double wall_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void* sleeper(void*) {
  for (;;) pause();
  return nullptr;
}

/// A rank: `threads` threads in all (this one included), sleeping until killed.
int child(int threads) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (int i = 1; i < threads; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, sleeper, nullptr) != 0) return 1;
  }
  for (;;) pause();
}

int task_count(pid_t pid) {
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/// Reads a file whole, parsing nothing; returns its size.
std::size_t slurp(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[16384];
  std::size_t total = 0;
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) total += static_cast<std::size_t>(n);
  close(fd);
  return total;
}

/// The floor: the files one interval must read at the least, read raw: every
/// process's environ (to find the planned ones), then each rank's environ,
/// numa_maps and every thread's status.
std::size_t floor_read(const std::vector<pid_t>& ranks) {
  std::size_t total = 0;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') total += slurp(std::string("/proc/") + e->d_name + "/environ");
  closedir(d);
  for (pid_t p : ranks) {
    std::string base = "/proc/" + std::to_string(p);
    total += slurp(base + "/environ") + slurp(base + "/numa_maps");
    DIR* t = opendir((base + "/task").c_str());
    while (dirent* e = readdir(t))
      if (e->d_name[0] != '.') total += slurp(base + "/task/" + e->d_name + "/status");
    closedir(t);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child(std::atoi(argv[2]));
  int ranks = 8, threads = 200, rounds = 21;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      ranks = 2;
      threads = 20;
      rounds = 3;
    } else if (i + 1 < argc && a == "--ranks") {
      ranks = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--threads") {
      threads = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--rounds") {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--ranks R] [--threads T] [--rounds K] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (ranks < 1 || threads < 1 || rounds < 1) {
    std::fprintf(stderr, "watch_bench: --ranks, --threads and --rounds must be positive\n");
    return 2;
  }
  // Every rank's plan: this process's allowed CPUs, so every thread is inside.
  cpu_set_t mine;
  sched_getaffinity(0, sizeof mine, &mine);
  std::string allowed = gpuaff::CpuSet::from_cpu_set_t(mine).to_list();
  std::vector<pid_t> pids;
  std::string self = "/proc/self/exe";
  for (int r = 0; r < ranks; ++r) {
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "0000:%02x:00.0", 0x10 + r);
    std::string plan = "GPUAFF_PLAN=v1 gpu=" + std::to_string(r) + " pci=" + bdf + " from=LOCAL_RANK=" +
                       std::to_string(r) + " policy=node node=0 cpus=" + allowed + " mems=0 membind=none";
    std::string rank = "LOCAL_RANK=" + std::to_string(r);
    std::string count = std::to_string(threads);
    pid_t p = fork();
    if (p == 0) {
      std::vector<char*> env;
      for (char** e = environ; *e != nullptr; ++e)
        if (std::strncmp(*e, "GPUAFF_PLAN=", 12) != 0) env.push_back(*e);
      env.push_back(plan.data());
      env.push_back(rank.data());
      env.push_back(nullptr);
      char child_flag[] = "--child";
      char* args[] = {argv[0], child_flag, count.data(), nullptr};
      execve(self.c_str(), args, env.data());
      _exit(127);
    }
    pids.push_back(p);
  }
  for (pid_t p : pids)
    for (int k = 0; k < 2000 && task_count(p) < threads; ++k) usleep(5000);
  int failures = 0;
  for (pid_t p : pids)
    if (task_count(p) != threads) {
      std::fprintf(stderr, "watch_bench: rank %d has %d threads, not %d\n", p, task_count(p), threads);
      failures = 1;
    }
  gpuaff::LaunchOptions machine;
  gpuaff::DoctorOptions d;
  gpuaff::NodeReport before;
  std::vector<double> watch_cpu, watch_wall, floor_cpu;
  std::size_t checked = 0, events = 0;
  auto first = gpuaff::watch_once(before, machine, d);  // the first check: every rank started
  auto ours = [&](const gpuaff::WatchEvent& e) { return std::find(pids.begin(), pids.end(), e.pid) != pids.end(); };
  events = static_cast<std::size_t>(std::count_if(first.begin(), first.end(), ours));
  for (int k = 0; k < rounds; ++k) {  // interleaved: watch, then floor
    double c = cpu_ms(), w = wall_ms();
    auto ev = gpuaff::watch_once(before, machine, d);
    watch_cpu.push_back(cpu_ms() - c);
    watch_wall.push_back(wall_ms() - w);
    if (std::any_of(ev.begin(), ev.end(), ours)) failures = 1;  // nothing of ours moved: no event
    c = cpu_ms();
    volatile std::size_t sink = floor_read(pids);
    (void)sink;
    floor_cpu.push_back(cpu_ms() - c);
  }
  for (const auto& v : before.verdicts)
    for (pid_t p : pids)
      if (v.pid == p) checked += v.threads.size();
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  double w = median(watch_cpu), f = median(floor_cpu);
  std::printf("| W | one watch interval, %d ranks x %d threads (%zu threads checked; first check: %zu events) | "
              "%.2f ms CPU (%.2f ms wall) | floor: raw /proc reads %.2f ms CPU | %.2fx the floor | "
              "%.3f%% of one core at a 10 s interval | %s |\n",
              ranks, threads, checked, events, w, median(watch_wall), f, w / f, w / 10000.0 * 100.0,
              w < 100.0 ? "holds (< 100 ms)" : "DOES NOT HOLD (>= 100 ms)");
  if (checked != static_cast<std::size_t>(ranks) * static_cast<std::size_t>(threads)) {
    std::fprintf(stderr, "watch_bench: %zu threads checked, not %d x %d\n", checked, ranks, threads);
    failures = 1;
  }
  return failures;
}
