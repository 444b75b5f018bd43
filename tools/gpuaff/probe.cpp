// SPDX-License-Identifier: Apache-2.0
// gpuaff probe: measure what locality is worth on this machine. Memory
// bandwidth and latency from each CPU node to each memory node (threads
// pinned to the one, the buffer bound to the other), compared with the
// kernel's node distances; with --gpu, host-to-device and device-to-host
// bandwidth from a buffer on each memory node, measured in a child process
// that loads the GPU driver with dlopen (the gpuaff process itself never
// initialises a driver, and gpuaff has no build-time GPU dependency).
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <tuple>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/memory/host_buffer.hpp"
#include "output.hpp"

namespace gpuaff::cli {
namespace {

using Clock = std::chrono::steady_clock;

/// Where measured loops leave their result, so the compiler keeps them.
std::atomic<std::uint64_t> probe_sink{0};

struct ProbeNode {
  int id = -1;
  CpuSet cpus{};  ///< allowed CPUs of the node
  bool memory = false;
  std::vector<int> distances{};  ///< to every node of `nodes`, in order; empty when unread
};

std::string read_text(const std::string& path) {
  std::string t;
  if (detail::read_whole_file(path, t) != 0) return {};
  detail::strip_trailing(t);
  return t;
}

/// This machine's online nodes, their allowed CPUs and distances.
Result<std::vector<ProbeNode>> read_nodes() {
  const std::string base = "/sys/devices/system/node/";
  auto online = CpuSet::parse_list(read_text(base + "online"));
  if (!online || online->empty())
    return fail(Errc::io_error, "cannot read the NUMA nodes (", base, "online); probe measures this machine and needs sysfs");
  auto memory = CpuSet::parse_list(read_text(base + "has_memory"));
  GPUAFF_TRY(CpuSet allowed, thread_affinity());
  HostLimits limits = read_host_limits(NodeSet{});
  std::vector<ProbeNode> nodes;
  for (int id : *online) {
    ProbeNode n;
    n.id = id;
    if (auto c = CpuSet::parse_list(read_text(base + "node" + std::to_string(id) + "/cpulist"))) n.cpus = *c & allowed;
    n.memory = memory ? memory->test(id) : true;
    if (limits.mems_allowed && !limits.mems_allowed->test(id)) n.memory = false;
    std::string d = read_text(base + "node" + std::to_string(id) + "/distance");
    for (std::size_t at = 0; at < d.size();) {
      std::size_t end = d.find(' ', at);
      n.distances.push_back(std::atoi(d.substr(at, end - at).c_str()));
      at = end == std::string::npos ? d.size() : end + 1;
    }
    nodes.push_back(n);
  }
  for (auto& n : nodes)
    if (n.distances.size() != nodes.size()) n.distances.clear();
  return nodes;
}

/// Pins the calling thread to `cpus`. Errors: those of the kernel.
bool pin(const CpuSet& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Read bandwidth in GiB/s: `threads` threads on `cpus`, each summing its
/// slice of `buf` for about `seconds`.
double read_bandwidth(const HostBuffer& buf, const CpuSet& cpus, int threads, double seconds) {
  std::vector<int> ids(cpus.begin(), cpus.end());
  std::size_t words = buf.size() / sizeof(std::uint64_t);
  std::size_t slice = words / static_cast<std::size_t>(threads);
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(threads)), sums(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  std::atomic<bool> go{false};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      pin(CpuSet::single(ids[static_cast<std::size_t>(t) % ids.size()]));
      const auto* p = static_cast<const std::uint64_t*>(buf.data()) + static_cast<std::size_t>(t) * slice;
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, done = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (std::size_t i = 0; i + 3 < slice; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
        done += slice * sizeof(std::uint64_t);
      }
      bytes[static_cast<std::size_t>(t)] = done;
      sums[static_cast<std::size_t>(t)] = s0 + s1 + s2 + s3;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  double elapsed = seconds_since(start);
  std::uint64_t total = 0, keep = 0;
  for (int t = 0; t < threads; ++t) total += bytes[static_cast<std::size_t>(t)], keep ^= sums[static_cast<std::size_t>(t)];
  probe_sink.fetch_xor(keep, std::memory_order_relaxed);
  return static_cast<double>(total) / elapsed / (1024.0 * 1024.0 * 1024.0);
}

/// Latency in ns of one dependent load: a random cycle through the cache
/// lines of `buf`, chased from one thread on `cpus`.
double chase_latency(HostBuffer& buf, const CpuSet& cpus, double seconds) {
  double ns = 0;
  std::thread th([&] {
    pin(CpuSet::single(cpus.first()));
    constexpr std::size_t line = 64;
    std::size_t lines = buf.size() / line;
    std::vector<std::uint32_t> order(lines);
    for (std::size_t i = 0; i < lines; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::shuffle(order.begin() + 1, order.end(), std::mt19937(42));
    auto* base = static_cast<unsigned char*>(buf.data());
    for (std::size_t i = 0; i < lines; ++i) {
      void* next = base + order[(i + 1) % lines] * line;
      std::memcpy(base + order[i] * line, &next, sizeof next);
    }
    void* p = base;
    std::uint64_t steps = 0;
    auto start = Clock::now();
    do {
      for (int i = 0; i < 4096; ++i) p = *static_cast<void**>(p);
      steps += 4096;
    } while (seconds_since(start) < seconds);
    ns = seconds_since(start) * 1e9 / static_cast<double>(steps);
    probe_sink.fetch_xor(reinterpret_cast<std::uintptr_t>(p), std::memory_order_relaxed);
  });
  th.join();
  return ns;
}

struct ProbeCell {
  int cpu_node;
  int mem_node;
  double gib_s;
  double ns;
};

// ---- the GPU child --------------------------------------------------------

// The CUDA driver API (libcuda.so.1, installed with the NVIDIA driver) and
// HIP's runtime (libamdhip64.so): the few entry points the measurement uses,
// declared here from their public documentation; their enums as ints.
using cu_init_t = int (*)(unsigned);
using cu_device_get_count_t = int (*)(int*);
using cu_device_get_t = int (*)(int*, int);
using cu_primary_retain_t = int (*)(void**, int);
using cu_ctx_set_current_t = int (*)(void*);
using cu_mem_alloc_t = int (*)(unsigned long long*, std::size_t);
using cu_mem_free_t = int (*)(unsigned long long);
using cu_host_register_t = int (*)(void*, std::size_t, unsigned);
using cu_host_unregister_t = int (*)(void*);
using cu_htod_t = int (*)(unsigned long long, const void*, std::size_t);
using cu_dtoh_t = int (*)(void*, unsigned long long, std::size_t);
using cu_bus_id_t = int (*)(char*, int, int);
using hip_get_count_t = int (*)(int*);
using hip_set_device_t = int (*)(int);
using hip_malloc_t = int (*)(void**, std::size_t);
using hip_free_t = int (*)(void*);
using hip_host_register_t = int (*)(void*, std::size_t, unsigned);
using hip_host_unregister_t = int (*)(void*);
using hip_memcpy_t = int (*)(void*, const void*, std::size_t, int);
using hip_bus_id_t = int (*)(char*, int, int);

/// One GPU runtime, loaded: copies and registration as plain calls.
struct GpuRuntime {
  std::string library;
  std::string bdf;
  std::function<int(void*, std::size_t)> host_register;
  std::function<int(void*)> host_unregister;
  std::function<int(const void*, std::size_t)> h2d;  ///< into the device buffer
  std::function<int(void*, std::size_t)> d2h;
  std::function<void()> free;
};

template <class F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(::dlsym(lib, name));
}

/// "0000:17:00.0" from a runtime's bus id ("00000000:17:00.0").
std::string normal_bdf(const char* id) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return id;
  char out[32];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return out;
}

/// Loads a runtime and opens device `index` with a `bytes` device buffer.
/// Returns the reason on failure, with `no_runtime` telling a missing
/// runtime or device from a failing one.
std::optional<GpuRuntime> open_gpu(int index, std::size_t bytes, std::string& why, bool& no_runtime) {
  no_runtime = true;
  const char* forced = std::getenv("GPUAFF_GPU_RUNTIME");
  std::vector<std::string> libs = forced != nullptr && *forced != '\0'
                                      ? std::vector<std::string>{forced}
                                      : std::vector<std::string>{"libcuda.so.1", "libamdhip64.so", "libamdhip64.so.6"};
  for (const std::string& name : libs) {
    void* lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      why += (why.empty() ? "" : "; ") + std::string(::dlerror());
      continue;
    }
    GpuRuntime g;
    g.library = name;
    char id[64] = {0};
    if (auto init = sym<cu_init_t>(lib, "cuInit")) {
      auto count = sym<cu_device_get_count_t>(lib, "cuDeviceGetCount");
      auto get = sym<cu_device_get_t>(lib, "cuDeviceGet");
      auto retain = sym<cu_primary_retain_t>(lib, "cuDevicePrimaryCtxRetain");
      auto set = sym<cu_ctx_set_current_t>(lib, "cuCtxSetCurrent");
      auto alloc = sym<cu_mem_alloc_t>(lib, "cuMemAlloc_v2");
      auto mfree = sym<cu_mem_free_t>(lib, "cuMemFree_v2");
      auto reg = sym<cu_host_register_t>(lib, "cuMemHostRegister_v2");
      auto unreg = sym<cu_host_unregister_t>(lib, "cuMemHostUnregister");
      auto htod = sym<cu_htod_t>(lib, "cuMemcpyHtoD_v2");
      auto dtoh = sym<cu_dtoh_t>(lib, "cuMemcpyDtoH_v2");
      auto bus = sym<cu_bus_id_t>(lib, "cuDeviceGetPCIBusId");
      if (!count || !get || !retain || !set || !alloc || !mfree || !reg || !unreg || !htod || !dtoh || !bus) {
        why += "; " + name + " lacks an entry point gpuaff uses";
        continue;
      }
      int n = 0, dev = 0, rc = init(0);
      if (rc != 0 || count(&n) != 0 || n == 0) {
        why += "; " + name + ": no CUDA device (cuInit " + std::to_string(rc) + ", " + std::to_string(n) + " devices)";
        continue;
      }
      no_runtime = false;
      if (index >= n) {
        why = "no GPU " + std::to_string(index) + ": " + name + " sees " + std::to_string(n);
        return std::nullopt;
      }
      void* ctx = nullptr;
      unsigned long long dptr = 0;
      if (get(&dev, index) != 0 || retain(&ctx, dev) != 0 || set(ctx) != 0 || alloc(&dptr, bytes) != 0) {
        why = name + ": cannot open GPU " + std::to_string(index) + " or allocate " + std::to_string(bytes >> 20) + " MiB on it";
        return std::nullopt;
      }
      bus(id, sizeof id, dev);
      g.bdf = normal_bdf(id);
      g.host_register = [reg](void* p, std::size_t s) { return reg(p, s, 0); };
      g.host_unregister = unreg;
      g.h2d = [htod, dptr](const void* p, std::size_t s) { return htod(dptr, p, s); };
      g.d2h = [dtoh, dptr](void* p, std::size_t s) { return dtoh(p, dptr, s); };
      g.free = [mfree, dptr] { mfree(dptr); };
      return g;
    }
    auto count = sym<hip_get_count_t>(lib, "hipGetDeviceCount");
    auto set = sym<hip_set_device_t>(lib, "hipSetDevice");
    auto alloc = sym<hip_malloc_t>(lib, "hipMalloc");
    auto mfree = sym<hip_free_t>(lib, "hipFree");
    auto reg = sym<hip_host_register_t>(lib, "hipHostRegister");
    auto unreg = sym<hip_host_unregister_t>(lib, "hipHostUnregister");
    auto copy = sym<hip_memcpy_t>(lib, "hipMemcpy");
    auto bus = sym<hip_bus_id_t>(lib, "hipDeviceGetPCIBusId");
    if (!count || !set || !alloc || !mfree || !reg || !unreg || !copy || !bus) {
      why += "; " + name + " is neither the CUDA driver nor HIP's runtime";
      continue;
    }
    int n = 0;
    if (count(&n) != 0 || n == 0) {
      why += "; " + name + ": no HIP device";
      continue;
    }
    no_runtime = false;
    void* dptr = nullptr;
    if (index >= n || set(index) != 0 || alloc(&dptr, bytes) != 0) {
      why = index >= n ? "no GPU " + std::to_string(index) + ": " + name + " sees " + std::to_string(n)
                       : name + ": cannot open GPU " + std::to_string(index) + " or allocate " +
                             std::to_string(bytes >> 20) + " MiB on it";
      return std::nullopt;
    }
    bus(id, sizeof id, index);
    g.bdf = normal_bdf(id);
    g.host_register = [reg](void* p, std::size_t s) { return reg(p, s, 0); };
    g.host_unregister = unreg;
    g.h2d = [copy, dptr](const void* p, std::size_t s) { return copy(dptr, p, s, 1); };  // hipMemcpyHostToDevice
    g.d2h = [copy, dptr](void* p, std::size_t s) { return copy(p, dptr, s, 2); };        // hipMemcpyDeviceToHost
    g.free = [mfree, dptr] { mfree(dptr); };
    return g;
  }
  return std::nullopt;
}

/// GiB/s of repeated copies for about `seconds` (one warm-up copy first).
double copy_rate(const std::function<int()>& copy, std::size_t bytes, double seconds, bool& ok) {
  ok = copy() == 0;
  if (!ok) return 0;
  auto start = Clock::now();
  std::size_t n = 0;
  do {
    if (copy() != 0) return ok = false, 0.0;
    ++n;
  } while (seconds_since(start) < seconds);
  return static_cast<double>(bytes) * static_cast<double>(n) / seconds_since(start) / (1024.0 * 1024.0 * 1024.0);
}

constexpr int child_no_runtime = 3;
constexpr int child_failed = 4;
constexpr int child_no_such_gpu = 5;

/// The child: measures GPU `index` from a buffer on each memory node, one line
/// each on `fd` ("bdf B", "cell NODE H2D D2H", "error TEXT"). Never returns.
[[noreturn]] void gpu_child(int fd, int index, const std::vector<ProbeNode>& nodes, std::size_t bytes, double seconds) {
  auto say = [fd](const std::string& line) {
    std::string l = line + "\n";
    (void)!::write(fd, l.data(), l.size());
  };
  std::string why;
  bool no_runtime = false;
  auto gpu = open_gpu(index, bytes, why, no_runtime);
  if (!gpu) {
    say("error " + why);
    ::_exit(no_runtime ? child_no_runtime : why.rfind("no GPU ", 0) == 0 ? child_no_such_gpu : child_failed);
  }
  say("bdf " + gpu->bdf + " " + gpu->library);
  int done = 0, total = 0;
  for (const ProbeNode& n : nodes) total += n.memory ? 1 : 0;
  for (const ProbeNode& n : nodes) {
    if (!n.memory) continue;
    std::fprintf(stderr, "\rgpuaff probe: GPU %d from memory node %d (%d of %d)   ", index, n.id, ++done, total);
    std::fflush(stderr);
    if (!n.cpus.empty()) pin(n.cpus);  // the copying thread on the buffer's node where it has CPUs
    auto buf = allocate_host_buffer(bytes, HostBufferOptions{.nodes = NodeSet::single(n.id)});
    if (!buf) {
      say("skip " + std::to_string(n.id) + " " + std::string(buf.error().message()));
      continue;
    }
    if (gpu->host_register(buf->data(), buf->mapped()) != 0) {
      say("error cannot register (pin) a host buffer on node " + std::to_string(n.id) + " with " + gpu->library);
      ::_exit(child_failed);
    }
    bool ok1 = false, ok2 = false;
    double h2d = copy_rate([&] { return gpu->h2d(buf->data(), bytes); }, bytes, seconds, ok1);
    double d2h = copy_rate([&] { return gpu->d2h(buf->data(), bytes); }, bytes, seconds, ok2);
    gpu->host_unregister(buf->data());
    if (!ok1 || !ok2) {
      say("error a copy between GPU " + std::to_string(index) + " and node " + std::to_string(n.id) + " failed");
      ::_exit(child_failed);
    }
    char line[128];
    std::snprintf(line, sizeof line, "cell %d %.3f %.3f", n.id, h2d, d2h);
    say(line);
  }
  std::fprintf(stderr, "\r%60s\r", "");
  gpu->free();
  ::_exit(0);
}

struct GpuResult {
  int index = 0;
  std::string bdf, library, error;
  int exit = 0;
  int sysfs_node = -2;  ///< -2: unread
  std::vector<std::tuple<int, double, double>> cells{};  ///< node, H2D, D2H GiB/s
  std::vector<std::string> skipped{};
  int best = -1;  ///< the node with the best H2D + D2H
};

GpuResult measure_gpu(int index, const std::vector<ProbeNode>& nodes, std::size_t bytes, double seconds) {
  GpuResult r;
  r.index = index;
  int p[2];
  if (::pipe(p) != 0) return r.error = "cannot make a pipe", r.exit = child_failed, r;
  pid_t pid = ::fork();
  if (pid < 0) return r.error = "cannot fork", r.exit = child_failed, r;
  if (pid == 0) {
    ::signal(SIGPIPE, SIG_IGN);
    ::close(p[0]);
    gpu_child(p[1], index, nodes, bytes, seconds);
  }
  ::close(p[1]);
  std::string text;
  char chunk[4096];
  for (ssize_t n; (n = ::read(p[0], chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : child_failed;
  if (WIFSIGNALED(status)) r.error = "the measuring process was killed by signal " + std::to_string(WTERMSIG(status));
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    std::string line = text.substr(at, end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (line.rfind("bdf ", 0) == 0) {
      std::size_t sp = line.find(' ', 4);
      r.bdf = line.substr(4, sp - 4);
      r.library = sp == std::string::npos ? "" : line.substr(sp + 1);
    } else if (line.rfind("cell ", 0) == 0) {
      int node = 0;
      double h = 0, d = 0;
      if (std::sscanf(line.c_str(), "cell %d %lf %lf", &node, &h, &d) == 3) r.cells.emplace_back(node, h, d);
    } else if (line.rfind("skip ", 0) == 0) {
      r.skipped.push_back(line.substr(5));
    } else if (line.rfind("error ", 0) == 0) {
      r.error = line.substr(6);
    }
  }
  double best = -1;
  for (auto& [node, h, d] : r.cells)
    if (h + d > best) best = h + d, r.best = node;
  if (!r.bdf.empty()) {
    std::string t = read_text("/sys/bus/pci/devices/" + r.bdf + "/numa_node");
    if (!t.empty()) r.sysfs_node = std::atoi(t.c_str());
  }
  return r;
}

std::string probe_fixed(double v, int decimals) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string probe_pad(std::string s, std::size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

/// Every CPU node's read bandwidth and latency to every memory node, a
/// buffer of `bytes` faulted in from the CPU node on each memory node in turn.
/// `tty`: stderr is a terminal, so progress rewrites one line.
Result<std::vector<ProbeCell>> measure_memory(const std::vector<ProbeNode>& nodes, std::size_t bytes,
                                              const ProbeArgs& args, bool tty) {
  std::vector<ProbeCell> cells;
  int total = 0, done = 0;
  for (const ProbeNode& c : nodes)
    for (const ProbeNode& m : nodes) total += !c.cpus.empty() && m.memory ? 1 : 0;
  for (const ProbeNode& c : nodes) {
    if (c.cpus.empty()) continue;
    for (const ProbeNode& m : nodes) {
      if (!m.memory) continue;
      ++done;
      std::string progress = "gpuaff probe: CPU node " + std::to_string(c.id) + " -> memory node " + std::to_string(m.id) +
                             " (" + std::to_string(done) + " of " + std::to_string(total) + ")";
      if (tty) std::fprintf(stderr, "\r%s   ", progress.c_str()), std::fflush(stderr);
      else print_line(stderr, progress);
      // the buffer is faulted in from a thread on the CPU node, as a rank's would be
      Result<HostBuffer> buf = Unexpected(Error());
      std::thread([&] {
        pin(c.cpus);
        buf = allocate_host_buffer(bytes, HostBufferOptions{.nodes = NodeSet::single(m.id)});
      }).join();
      if (!buf) {
        if (tty) std::fputs("\n", stderr);
        return unexpected(buf.error());
      }
      int threads = std::max(1, std::min(args.threads > 0 ? args.threads : 8, c.cpus.count()));
      double bw = read_bandwidth(*buf, c.cpus, threads, args.seconds);
      double ns = chase_latency(*buf, c.cpus, args.seconds / 2);
      cells.push_back({c.id, m.id, bw, ns});
    }
  }
  if (tty) std::fprintf(stderr, "\r%70s\r", "");
  return cells;
}

const ProbeCell* find_cell(const std::vector<ProbeCell>& cells, int c, int m) {
  for (const ProbeCell& x : cells)
    if (x.cpu_node == c && x.mem_node == m) return &x;
  return nullptr;
}

/// What the kernel says that the measurement contradicts (a 10% margin): a
/// nearer node by the distances that is slower to reach, a GPU's numa_node
/// whose host buffers copy slower than another node's.
std::vector<std::string> find_contradictions(const std::vector<ProbeNode>& nodes, const std::vector<ProbeCell>& cells,
                                             const std::vector<GpuResult>& gpus) {
  std::vector<std::string> contradictions;
  for (const ProbeNode& c : nodes) {
    if (c.distances.empty()) continue;
    for (std::size_t a = 0; a < nodes.size(); ++a)
      for (std::size_t b = 0; b < nodes.size(); ++b) {
        const ProbeCell* ca = find_cell(cells, c.id, nodes[a].id);
        const ProbeCell* cb = find_cell(cells, c.id, nodes[b].id);
        if (ca == nullptr || cb == nullptr || c.distances[a] >= c.distances[b]) continue;
        if (ca->ns > cb->ns * 1.1)
          contradictions.push_back("from CPU node " + std::to_string(c.id) + ", node " + std::to_string(nodes[a].id) +
                                   " is nearer than node " + std::to_string(nodes[b].id) + " by the kernel's distances (" +
                                   std::to_string(c.distances[a]) + " < " + std::to_string(c.distances[b]) +
                                   ") but slower to reach (" + probe_fixed(ca->ns, 0) + " ns > " + probe_fixed(cb->ns, 0) + " ns)");
      }
  }
  for (const GpuResult& g : gpus) {
    if (g.best < 0 || g.cells.size() < 2) continue;
    double best = 0, at_sysfs = -1;
    for (auto& [node, h, d] : g.cells) {
      if (node == g.best) best = h + d;
      if (node == g.sysfs_node) at_sysfs = h + d;
    }
    if (g.sysfs_node < 0)
      contradictions.push_back("GPU " + std::to_string(g.index) + " (" + g.bdf + ") says numa_node " +
                               std::to_string(g.sysfs_node) + "; measured, its host buffers are best on node " +
                               std::to_string(g.best) + " (write it with --gpu-nodes FILE for bind --gpu-nodes FILE)");
    else if (at_sysfs >= 0 && best > at_sysfs * 1.1)
      contradictions.push_back("GPU " + std::to_string(g.index) + " (" + g.bdf + ") says numa_node " +
                               std::to_string(g.sysfs_node) + ", but copies from node " + std::to_string(g.best) +
                               " are faster (" + probe_fixed(best / 2, 1) + " vs " + probe_fixed(at_sysfs / 2, 1) + " GiB/s)");
  }

  return contradictions;
}

/// probe --format json.
std::string probe_json(const ProbeArgs& args, const std::vector<ProbeNode>& nodes, const std::vector<ProbeCell>& cells,
                       const std::vector<GpuResult>& gpus, const std::vector<std::string>& contradictions) {
  nlohmann::ordered_json j;
  j["size_mib"] = args.size_mib;
  j["seconds"] = args.seconds;
  nlohmann::ordered_json jn = nlohmann::ordered_json::array();
  for (const ProbeNode& n : nodes)
    jn.push_back({{"node", n.id}, {"cpus", n.cpus.to_list()}, {"memory", n.memory}, {"distances", n.distances}});
  j["nodes"] = jn;
  nlohmann::ordered_json jm = nlohmann::ordered_json::array();
  for (const ProbeCell& c : cells)
    jm.push_back({{"cpu_node", c.cpu_node}, {"memory_node", c.mem_node}, {"read_gib_s", c.gib_s}, {"latency_ns", c.ns}});
  j["memory"] = jm;
  nlohmann::ordered_json jg = nlohmann::ordered_json::array();
  for (const GpuResult& g : gpus) {
    nlohmann::ordered_json o{{"gpu", g.index}, {"bdf", g.bdf}, {"runtime", g.library},
                             {"numa_node", g.sysfs_node >= -1 ? nlohmann::ordered_json(g.sysfs_node) : nlohmann::ordered_json(nullptr)},
                             {"best_node", g.best >= 0 ? nlohmann::ordered_json(g.best) : nlohmann::ordered_json(nullptr)}};
    nlohmann::ordered_json cs = nlohmann::ordered_json::array();
    for (auto& [node, h, d] : g.cells) cs.push_back({{"host_node", node}, {"h2d_gib_s", h}, {"d2h_gib_s", d}});
    o["copies"] = cs;
    if (!g.skipped.empty()) o["skipped"] = g.skipped;
    if (!g.error.empty()) o["error"] = g.error;
    jg.push_back(o);
  }
  j["gpus"] = jg;
  j["contradictions"] = contradictions;
  return j.dump(2) + "\n";
}

/// probe's report: the tables, a picture, each GPU's verdict, the contradictions.
std::string probe_text(const ProbeArgs& args, const std::vector<ProbeNode>& nodes, const std::vector<ProbeCell>& cells,
                       const std::vector<GpuResult>& gpus, const std::vector<std::string>& contradictions) {
  std::string out = "Measured on this machine: " + std::to_string(args.size_mib) + " MiB buffers, " +
                    probe_fixed(args.seconds, 2) + " s per measurement.\n\n";
  std::vector<const ProbeNode*> mems, cpus;
  for (const ProbeNode& n : nodes) {
    if (n.memory) mems.push_back(&n);
    if (!n.cpus.empty()) cpus.push_back(&n);
  }
  auto table = [&](const std::string& title, auto value) {
    out += title + "\n" + probe_pad("CPU node", 10);
    for (const ProbeNode* m : mems) out += probe_pad("mem " + std::to_string(m->id), 10);
    out += "\n";
    for (const ProbeNode* c : cpus) {
      out += probe_pad(std::to_string(c->id), 10);
      for (const ProbeNode* m : mems) out += probe_pad(value(c->id, m->id), 10);
      out += "\n";
    }
    out += "\n";
  };
  table("Read bandwidth, GiB/s (threads on the CPU node, buffer on the memory node):", [&](int c, int m) {
    const ProbeCell* x = find_cell(cells, c, m);
    return x ? probe_fixed(x->gib_s, 1) : std::string("-");
  });
  table("Latency of one dependent load, ns:", [&](int c, int m) {
    const ProbeCell* x = find_cell(cells, c, m);
    return x ? probe_fixed(x->ns, 0) : std::string("-");
  });
  table("The kernel's node distances (nodeN/distance):", [&](int c, int m) {
    const ProbeNode* from = nullptr;
    for (const ProbeNode& n : nodes)
      if (n.id == c) from = &n;
    for (std::size_t i = 0; from != nullptr && i < nodes.size() && !from->distances.empty(); ++i)
      if (nodes[i].id == m) return std::to_string(from->distances[i]);
    return std::string("-");
  });
  // The picture: one bar per pair, scaled to the fastest.
  double top = 0;
  for (const ProbeCell& c : cells) top = std::max(top, c.gib_s);
  for (const GpuResult& g : gpus)
    for (auto& [node, h, d] : g.cells) top = std::max({top, h, d});
  auto bar = [&](double v) {
    int n = top > 0 ? static_cast<int>(std::lround(30.0 * v / top)) : 0;
    std::string s;
    for (int i = 0; i < n; ++i) s += "\u2588";
    return s + std::string(static_cast<std::size_t>(31 - n), ' ');
  };
  out += "Picture (bars scaled to the fastest):\n";
  for (const ProbeCell& c : cells)
    out += "  CPU " + probe_pad(std::to_string(c.cpu_node), 2) + " -> mem " + probe_pad(std::to_string(c.mem_node), 2) + "  " +
           bar(c.gib_s) + probe_fixed(c.gib_s, 1) + " GiB/s, " + probe_fixed(c.ns, 0) + " ns\n";
  for (const GpuResult& g : gpus)
    for (auto& [node, h, d] : g.cells) {
      out += "  mem " + probe_pad(std::to_string(node), 2) + " -> GPU " + probe_pad(std::to_string(g.index), 2) + "  " + bar(h) +
             probe_fixed(h, 1) + " GiB/s host-to-device\n";
      out += "  GPU " + probe_pad(std::to_string(g.index), 2) + " -> mem " + probe_pad(std::to_string(node), 2) + "  " + bar(d) +
             probe_fixed(d, 1) + " GiB/s device-to-host\n";
    }
  for (const GpuResult& g : gpus)
    if (!g.bdf.empty())
      out += "\nGPU " + std::to_string(g.index) + " (" + g.bdf + ", " + g.library + "): numa_node " +
             (g.sysfs_node >= -1 ? std::to_string(g.sysfs_node) : std::string("unread")) + ", best host node measured " +
             (g.best >= 0 ? std::to_string(g.best) : std::string("none")) + "\n";
  out += contradictions.empty() ? "\nNo contradiction between the measurement and the kernel's topology.\n"
                                : "\nContradictions:\n";
  for (const std::string& c : contradictions) out += "  - " + c + "\n";
  return out;
}

}  // namespace

int run_probe(const ProbeArgs& args) {
  auto nodes_r = read_nodes();
  if (!nodes_r) return report_error(nodes_r.error());
  const std::vector<ProbeNode>& nodes = *nodes_r;
  std::size_t bytes = args.size_mib << 20;
  bool tty = ::isatty(STDERR_FILENO) == 1;
  auto cells = measure_memory(nodes, bytes, args, tty);
  if (!cells) return report_error(cells.error());
  std::vector<GpuResult> gpus;
  for (int g : args.gpus) gpus.push_back(measure_gpu(g, nodes, bytes, args.seconds));
  if (tty && !args.gpus.empty()) std::fprintf(stderr, "\r%70s\r", "");
  std::vector<std::string> contradictions = find_contradictions(nodes, *cells, gpus);

  bool measured = std::any_of(gpus.begin(), gpus.end(), [](const GpuResult& g) { return g.best >= 0; });
  if (!args.gpu_nodes_out.empty() && !measured)
    print_line(stderr, "gpuaff: --gpu-nodes " + args.gpu_nodes_out + " was not written: no GPU was measured");
  if (!args.gpu_nodes_out.empty() && measured) {
    std::string text = "# gpuaff probe --gpu-nodes: the measured NUMA node of each GPU (PCI address, node); read by "
                       "gpuaff bind/exec --gpu-nodes FILE\n";
    for (const GpuResult& g : gpus)
      if (g.best >= 0) text += g.bdf + " " + std::to_string(g.best) + "\n";
    if (int e = detail::write_whole_file(args.gpu_nodes_out, text); e != 0)
      return report_error(make_sys_error(Errc::io_error, e, "cannot write --gpu-nodes ", args.gpu_nodes_out, " (",
                                         detail::errno_text(e), ")"));
  }

  int code = exit_ok;
  std::vector<std::string> gpu_errors;
  for (const GpuResult& g : gpus) {
    if (g.exit == 0 && g.error.empty()) continue;
    bool none = g.exit == child_no_runtime;
    gpu_errors.push_back("GPU " + std::to_string(g.index) + ": " +
                         (none ? "no GPU runtime or no GPU here (" + g.error +
                                     "); the memory measurements stand, the GPU ones were skipped"
                               : g.error));
    code = none ? exit_no_gpu : g.exit == child_no_such_gpu ? exit_not_found : exit_system;
  }

  std::string out = args.format == ProbeFormat::json ? probe_json(args, nodes, *cells, gpus, contradictions)
                                                     : probe_text(args, nodes, *cells, gpus, contradictions);
  for (const std::string& e : gpu_errors) print_line(stderr, "gpuaff: " + e);
  return write_result(out, code);
}

}  // namespace gpuaff::cli
