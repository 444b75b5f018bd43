// SPDX-License-Identifier: Apache-2.0
// guest_checks: runs as a static program inside a QEMU guest (tests/qemu/init.sh)
// and checks gpuaff against a real Linux kernel with several NUMA nodes.
//
// Every expected value below comes from the QEMU command line in
// tests/qemu/run_guest.sh (what QEMU was told to build), never from what a
// gpuaff reader returns. The shape is chosen by GPUAFF_QEMU_SHAPE, which the
// host passes on the kernel command line.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <latch>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpuaff/gpuaff.hpp"

namespace {
using gpuaff::CpuSet;

// ---- what QEMU was told to build --------------------------------------------

struct NodeExpect {
  int id;
  CpuSet cpus;  // empty: a memory-only node
};
struct PciExpect {
  std::string_view bdf;
  std::string_view what;
  int numa_node;
  CpuSet local_cpus;
};
struct BindExpect {
  std::string_view bdf;
  std::string_view policy;
  CpuSet cpus;
  std::string_view why;
};
struct GpuExpect {
  std::string_view bdf;  // GPUs in PCI bus order: index = position
  int numa_node;
};
/// `gpuaff bind --gpu N --policy P [--visible-devices V] [--no-balanced]`.
struct GpuBindExpect {
  int gpu;
  std::string_view policy;
  CpuSet cpus;
  std::string_view why;
  std::string_view visible = "";  // empty: every GPU visible
  bool balanced = true;
};
struct Shape {
  std::string_view name;
  int cpu_count;
  std::vector<NodeExpect> nodes;
  std::vector<CpuSet> packages;  // index = physical_package_id
  std::vector<CpuSet> cores;     // SMT sibling groups
  std::vector<CpuSet> l3;        // last-level cache groups
  std::vector<int> die_of_cpu;   // empty: dies not part of the shape
  std::vector<PciExpect> pci;
  std::vector<BindExpect> binds;
  std::vector<GpuExpect> gpus;
  std::vector<GpuBindExpect> gpu_binds;
};

CpuSet cpus(int first, int last) { return CpuSet::range(first, last); }

// -smp 8,sockets=2,cores=2,threads=2: QEMU numbers threads innermost, so CPUs
// 2k and 2k+1 are siblings and socket s holds CPUs 4s..4s+3.
// -numa node,nodeid=0,cpus=0-3 / nodeid=1,cpus=4-7 / nodeid=2 (no cpus).
// pxb bus_nr=20 numa_node=1: e1000 addr 3 -> 0000:15:03.0, ati-vga addr 4, 5
// -> 0000:15:04.0, 0000:15:05.0, all on node 1;
// pxb bus_nr=40 numa_node=0: virtio-rng addr 2 -> 0000:29:02.0, ati-vga addr 3
// -> 0000:29:03.0, on node 0. The PIIX IDE controller of QEMU's pc machine
// (00:01.1) sits on the root bus, behind no expander bridge: the kernel does
// not know its node.
Shape shape_2s2n() {
  Shape s;
  s.name = "2s2n-smt2-memnode";
  s.cpu_count = 8;
  s.nodes = {{0, cpus(0, 3)}, {1, cpus(4, 7)}, {2, CpuSet{}}};
  s.packages = {cpus(0, 3), cpus(4, 7)};
  s.cores = {CpuSet{0, 1}, CpuSet{2, 3}, CpuSet{4, 5}, CpuSet{6, 7}};
  s.l3 = {cpus(0, 3), cpus(4, 7)};  // one L3 per socket
  s.pci = {{"0000:15:03.0", "e1000 behind the node-1 bridge", 1, cpus(4, 7)},
           {"0000:29:02.0", "virtio-rng behind the node-0 bridge", 0, cpus(0, 3)},
           {"0000:00:01.1", "IDE controller on the root bus", -1, cpus(0, 7)}};
  s.binds = {
      {"0000:15:03.0", "node", cpus(4, 7), "node 1's CPUs"},
      {"0000:15:03.0", "socket", cpus(4, 7),
       "socket 1 holds node 1 only; memory-only node 2 adds no CPU"},
      {"0000:15:03.0", "exclusive", cpus(4, 7),
       "a --pci device that is not a GPU is bound alone: all node 1's cores"},
      {"0000:15:03.0", "core-complex", cpus(4, 7), "one L3 per socket: node 1's L3 is 4-7"},
      {"0000:29:02.0", "node", cpus(0, 3), "node 0's CPUs"},
      {"0000:29:02.0", "socket", cpus(0, 3), "socket 0 holds node 0 only"},
      {"0000:29:02.0", "exclusive", cpus(0, 3), "bound alone: all node 0's cores"},
  };
  // Bus order 15:04.0, 15:05.0, 29:03.0: GPUs 0 and 1 on node 1, GPU 2 on node 0.
  s.gpus = {{"0000:15:04.0", 1}, {"0000:15:05.0", 1}, {"0000:29:03.0", 0}};
  s.gpu_binds = {
      {0, "node", cpus(4, 7), "node 1's CPUs"},
      {2, "node", cpus(0, 3), "node 0's CPUs"},
      {0, "socket", cpus(4, 7), "socket 1 = node 1 (node 2 has no CPU)"},
      // Node 1's cores by lowest sibling: {4,5}, {6,7}; its GPUs 0, 1 take one each.
      {0, "exclusive", CpuSet{4, 5}, "first of node 1's two GPUs: first core"},
      {1, "exclusive", CpuSet{6, 7}, "second of node 1's two GPUs: second core"},
      {2, "exclusive", cpus(0, 3), "node 0's only GPU: both cores"},
      // One L3 for node 1: both of its GPUs share it.
      {1, "core-complex", cpus(4, 7), "node 1 has one L3 group, shared by its GPUs"},
      // NVIDIA's default mode, balanced: node 1 has 2 cores for 2 GPUs, node 0 2
      // for 1; every GPU gets min(1, 2) = 1 core, all its threads.
      {1, "unique-contiguous", CpuSet{6, 7}, "GPU 1 of node 1: its second core"},
      {2, "unique-contiguous", CpuSet{0, 1}, "balanced: 1 core like the node-1 GPUs"},
      {2, "unique-contiguous", cpus(0, 3), "unbalanced: node 0's 2 cores for its 1 GPU", "", false},
      // Visible "2,0": GPU 0 is the node-0 adapter, GPU 1 the first node-1 one,
      // now alone on node 1 among the visible GPUs.
      {0, "node", cpus(0, 3), "visible 2,0: GPU 0 is 29:03.0 on node 0", "2,0"},
      {1, "exclusive", cpus(4, 7), "visible 2,0: GPU 1 (15:04.0) is node 1's only visible GPU", "2,0"},
  };
  return s;
}

// -smp 8,sockets=1,dies=4,cores=1,threads=2: die d holds CPUs 2d, 2d+1 (one
// core, two threads); -numa node,nodeid=K,cpus=2K-2K+1; QEMU gives each die
// its own L3. pxb bus_nr=32 numa_node=2 + virtio-rng addr 4 -> 0000:21:04.0.
Shape shape_1s4n() {
  Shape s;
  s.name = "1s4n-nps4";
  s.cpu_count = 8;
  s.nodes = {{0, cpus(0, 1)}, {1, cpus(2, 3)}, {2, cpus(4, 5)}, {3, cpus(6, 7)}};
  s.packages = {cpus(0, 7)};
  s.cores = {CpuSet{0, 1}, CpuSet{2, 3}, CpuSet{4, 5}, CpuSet{6, 7}};
  s.l3 = {cpus(0, 1), cpus(2, 3), cpus(4, 5), cpus(6, 7)};
  s.die_of_cpu = {0, 0, 1, 1, 2, 2, 3, 3};
  s.pci = {{"0000:21:04.0", "virtio-rng behind the node-2 bridge", 2, cpus(4, 5)}};
  s.binds = {
      {"0000:21:04.0", "node", cpus(4, 5), "node 2's CPUs"},
      {"0000:21:04.0", "socket", cpus(0, 7), "the one socket holds all four nodes"},
      {"0000:21:04.0", "exclusive", cpus(4, 5), "the only target on node 2 gets its one core"},
      {"0000:21:04.0", "core-complex", cpus(4, 5), "node 2's L3 (its die) is 4-5"},
  };
  return s;
}

const Shape* g_shape = nullptr;
const Shape& shape() { return *g_shape; }

CpuSet all_cpus() { return cpus(0, shape().cpu_count - 1); }
CpuSet node_cpus(int node) {
  for (const auto& n : shape().nodes)
    if (n.id == node) return n.cpus;
  return {};
}
CpuSet node_ids(bool with_cpus_only) {
  CpuSet ids;
  for (const auto& n : shape().nodes)
    if (!with_cpus_only || !n.cpus.empty()) ids.set(n.id);
  return ids;
}

// ---- reading the live kernel, independently of gpuaff's readers -------------

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<CpuSet> read_list(const std::string& path) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  auto set = CpuSet::parse_list(*text);
  if (!set) return std::nullopt;
  return *set;
}

std::optional<long> read_long(const std::string& path) {
  auto text = read_text(path);
  if (!text || text->empty()) return std::nullopt;
  return std::strtol(text->c_str(), nullptr, 0);
}

std::string sys_cpu(int cpu, const std::string& rest) {
  return "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/" + rest;
}
std::string sys_node(int node, const std::string& rest) {
  return "/sys/devices/system/node/node" + std::to_string(node) + "/" + rest;
}
std::string sys_pci(std::string_view bdf, const std::string& rest) {
  return "/sys/bus/pci/devices/" + std::string(bdf) + "/" + rest;
}

// doctest prints CpuSet through this.
std::string show(const std::optional<CpuSet>& s) { return s ? s->to_list() : std::string("<unreadable>"); }

CpuSet current_affinity() {
  cpu_set_t raw;
  CPU_ZERO(&raw);
  if (sched_getaffinity(0, sizeof raw, &raw) != 0) return {};
  return CpuSet::from_cpu_set_t(raw);
}
bool set_affinity(const CpuSet& s) {
  auto raw = s.to_cpu_set_t();
  return raw && sched_setaffinity(0, sizeof *raw, &*raw) == 0;
}

// ---- where pages live: move_pages in query mode (nodes == NULL) -------------

/// An anonymous mapping of `pages` pages, unmapped on scope exit.
class Pages {
 public:
  explicit Pages(int pages) : size_(static_cast<std::size_t>(pages) * page_size()) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~Pages() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  static std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
  bool ok() const { return base_ != nullptr; }
  /// Writes every page, so the kernel allocates it under the current policy.
  void touch() {
    for (std::size_t off = 0; off < size_; off += page_size()) base_[off] = 1;
  }
  /// The node of each page (a negative errno for a page with no memory yet).
  std::vector<int> nodes() const {
    std::size_t n = size_ / page_size();
    std::vector<void*> addrs(n);
    for (std::size_t i = 0; i < n; ++i) addrs[i] = base_ + i * page_size();
    std::vector<int> status(n, -1);
    long rc = syscall(SYS_move_pages, 0, n, addrs.data(), nullptr, status.data(), 0);
    if (rc != 0) return {};
    return status;
  }

 private:
  std::size_t size_;
  char* base_ = nullptr;
};

/// Node ids that hold the pages, or {-1} when the query failed.
std::vector<int> distinct_nodes(const std::vector<int>& status) {
  if (status.empty()) return {-1};
  std::vector<int> out;
  for (int s : status) {
    bool seen = false;
    for (int o : out) seen = seen || o == s;
    if (!seen) out.push_back(s);
  }
  return out;
}

/// The calling thread's memory policy as "mode nodes", e.g. "bind 1" or "default -".
std::string memory_policy_text() {
  int mode = -1;
  unsigned long mask[4] = {0, 0, 0, 0};
  if (syscall(SYS_get_mempolicy, &mode, mask, sizeof mask * 8, nullptr, 0UL) != 0) return "unreadable";
  CpuSet nodes;
  for (int n = 0; n < 256; ++n)
    if ((mask[n / 64] >> (n % 64)) & 1UL) nodes.set(n);
  const char* names[] = {"default", "preferred", "bind", "interleave", "local"};
  int m = mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES);
  std::string out = m >= 0 && m < 5 ? names[m] : std::to_string(mode);
  return out + " " + (nodes.empty() ? std::string("-") : nodes.to_list());
}

std::vector<pid_t> thread_ids() {
  std::vector<pid_t> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    closedir(d);
  }
  return out;
}

/// The CPU mask of thread `tid` (any thread of this process); nullopt when
/// the thread has exited (a joined thread can linger in /proc/self/task).
std::optional<CpuSet> affinity_of(pid_t tid) {
  cpu_set_t raw;
  CPU_ZERO(&raw);
  if (sched_getaffinity(tid, sizeof raw, &raw) != 0) return std::nullopt;
  return CpuSet::from_cpu_set_t(raw);
}

/// The masks of the threads of this process that are alive, as cpulists.
std::vector<std::string> live_thread_masks() {
  std::vector<std::string> out;
  for (pid_t tid : thread_ids())
    if (auto m = affinity_of(tid)) out.push_back(m->to_list());
  return out;
}


/// Everything readable from `fd` until EOF; closes it.
std::string drain(int fd) {
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  return out;
}

/// Threads that block until release(): "threads that already exist" for bind_process.
class IdleThreads {
 public:
  explicit IdleThreads(int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        std::unique_lock lock(mutex_);
        ++started_;
        changed_.notify_all();
        changed_.wait(lock, [this] { return released_; });
      });
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return started_ == n; });
  }
  ~IdleThreads() { release(); }
  IdleThreads(const IdleThreads&) = delete;
  IdleThreads& operator=(const IdleThreads&) = delete;
  void release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int started_ = 0;
  bool released_ = false;
  std::vector<std::thread> threads_;
};

std::string show_error(const gpuaff::Error& e) { return std::string(e.message()); }

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs /bin/gpuaff ARGS... (the static tool packed into the initramfs),
/// on `allowed` when given (like `taskset -c`), else on the caller's CPUs.
ToolRun run_tool(const std::vector<std::string>& args, const CpuSet& allowed = {}) {
  ToolRun r;
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return r;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return r;
  }
  std::vector<std::string> argv{"/bin/gpuaff"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = gpuaff::spawn(argv, {.cpus = allowed, .stdout_fd = out[1], .stderr_fd = err[1]});
  close(out[1]);
  close(err[1]);
  if (!child) {
    close(out[0]);
    close(err[0]);
    r.err = show_error(child.error());
    return r;
  }
  r.out = drain(out[0]);  // the outputs are a few lines: no pipe fills up
  r.err = drain(err[0]);
  auto status = child->wait();
  r.exit_code = status ? status->exit_code : -1;
  return r;
}

/// The live topology as gpuaff's sysfs reader sees it, with the shape's PCI devices.
gpuaff::Result<gpuaff::Topology> load_live() {
  gpuaff::SysfsOptions options{.root = "/"};
  for (const auto& d : shape().pci) {
    auto address = gpuaff::PciAddress::parse(d.bdf);
    if (!address) return gpuaff::Unexpected(address.error());
    options.extra_pci.push_back(*address);
  }
  return gpuaff::SysfsSource(options).load();
}

long set_mempolicy_raw(int mode, const CpuSet& nodes) {
  unsigned long mask[4] = {0, 0, 0, 0};
  for (int n : nodes) mask[n / 64] |= 1UL << (n % 64);
  return syscall(SYS_set_mempolicy, mode, mode == MPOL_DEFAULT ? nullptr : mask,
                 mode == MPOL_DEFAULT ? 0UL : sizeof mask * 8);
}

}  // namespace

// ============================================================================
// The kernel shows the shape QEMU was told to build (checks of the guest itself,
// so a QEMU or kernel change that alters the shape is caught here first).
// ============================================================================

TEST_CASE("the kernel shows the NUMA nodes QEMU was told to build") {
  CHECK(show(read_list("/sys/devices/system/node/online")) == node_ids(false).to_list());
  CHECK(show(read_list("/sys/devices/system/node/possible")) == node_ids(false).to_list());
  CHECK(show(read_list("/sys/devices/system/node/has_cpu")) == node_ids(true).to_list());
  for (const auto& n : shape().nodes) {
    CAPTURE(n.id);
    CHECK(show(read_list(sys_node(n.id, "cpulist"))) == n.cpus.to_list());
  }
}

TEST_CASE("every node, the memory-only one too, has the 512 MiB QEMU gave it") {
  for (const auto& n : shape().nodes) {
    CAPTURE(n.id);
    auto meminfo = read_text(sys_node(n.id, "meminfo"));
    REQUIRE(meminfo);
    auto pos = meminfo->find("MemTotal:");
    REQUIRE(pos != std::string::npos);
    long kib = std::strtol(meminfo->c_str() + pos + 9, nullptr, 10);
    // Firmware holes and the kernel's own reservations take some of it.
    CHECK(kib > 384 * 1024);
    CHECK(kib <= 512 * 1024);
  }
}

TEST_CASE("CPUs, packages, SMT siblings and dies are those of -smp") {
  CHECK(show(read_list("/sys/devices/system/cpu/online")) == all_cpus().to_list());
  for (int cpu = 0; cpu < shape().cpu_count; ++cpu) {
    CAPTURE(cpu);
    auto pkg = read_long(sys_cpu(cpu, "topology/physical_package_id"));
    REQUIRE(pkg);
    REQUIRE(*pkg >= 0);
    REQUIRE(static_cast<std::size_t>(*pkg) < shape().packages.size());
    CHECK(shape().packages[static_cast<std::size_t>(*pkg)].contains(cpu));
    CpuSet core;
    for (const auto& c : shape().cores)
      if (c.contains(cpu)) core = c;
    CHECK(show(read_list(sys_cpu(cpu, "topology/core_cpus_list"))) == core.to_list());
    CHECK(show(read_list(sys_cpu(cpu, "topology/thread_siblings_list"))) == core.to_list());
    if (!shape().die_of_cpu.empty()) {
      CHECK(read_long(sys_cpu(cpu, "topology/die_id")) == shape().die_of_cpu[static_cast<std::size_t>(cpu)]);
    }
  }
}

TEST_CASE("the last-level cache groups are those QEMU builds for the shape") {
  for (int cpu = 0; cpu < shape().cpu_count; ++cpu) {
    CAPTURE(cpu);
    std::optional<CpuSet> l3;
    for (int k = 0; k < 8; ++k) {
      std::string idx = "cache/index" + std::to_string(k) + "/";
      if (read_long(sys_cpu(cpu, idx + "level")) == 3) l3 = read_list(sys_cpu(cpu, idx + "shared_cpu_list"));
    }
    CpuSet want;
    for (const auto& g : shape().l3)
      if (g.contains(cpu)) want = g;
    CHECK(show(l3) == want.to_list());
  }
}

TEST_CASE("PCI devices report the node of their expander bridge") {
  for (const auto& d : shape().pci) {
    CAPTURE(d.bdf);
    CAPTURE(d.what);
    CHECK(read_long(sys_pci(d.bdf, "numa_node")) == d.numa_node);
    CHECK(show(read_list(sys_pci(d.bdf, "local_cpulist"))) == d.local_cpus.to_list());
  }
}

TEST_CASE("move_pages sees MPOL_BIND place pages on each node, the memory-only one too") {
  // Checks the measuring method itself: the placement checks below trust it.
  for (const auto& n : shape().nodes) {
    CAPTURE(n.id);
    REQUIRE(set_mempolicy_raw(MPOL_BIND, CpuSet::single(n.id)) == 0);
    Pages buf(16);
    REQUIRE(buf.ok());
    buf.touch();
    auto where = distinct_nodes(buf.nodes());
    REQUIRE(set_mempolicy_raw(MPOL_DEFAULT, {}) == 0);
    CHECK(where == std::vector<int>{n.id});
  }
}

TEST_CASE("with the default policy, first touch lands on the node of the running CPU") {
  // Why CPU binding alone already helps (docs/design.md): MPOL_LOCAL allocates
  // on the node of the CPU that first writes the page.
  const CpuSet before = current_affinity();
  REQUIRE(before == all_cpus());
  for (const auto& n : shape().nodes) {
    if (n.cpus.empty()) continue;
    CAPTURE(n.id);
    REQUIRE(set_affinity(node_cpus(n.id)));
    Pages buf(16);
    REQUIRE(buf.ok());
    buf.touch();
    CHECK(distinct_nodes(buf.nodes()) == std::vector<int>{n.id});
  }
  REQUIRE(set_affinity(before));
}


// ============================================================================
// gpuaff's sysfs reader and policies on the live kernel.
// ============================================================================

TEST_CASE("the sysfs reader sees the live kernel as QEMU built it") {
  auto topo = load_live();
  REQUIRE_MESSAGE(topo.has_value(), (topo ? std::string() : show_error(topo.error())));
  CHECK(topo->online.to_list() == all_cpus().to_list());
  CHECK(topo->allowed.to_list() == all_cpus().to_list());
  CHECK(topo->mems_allowed.to_list() == node_ids(false).to_list());
  REQUIRE(topo->nodes.size() == shape().nodes.size());
  for (std::size_t i = 0; i < shape().nodes.size(); ++i) {
    const auto& want = shape().nodes[i];
    const auto& got = topo->nodes[i];
    CAPTURE(want.id);
    CHECK(got.id == want.id);
    CHECK(got.cpus.to_list() == want.cpus.to_list());
    CHECK(got.memory_only() == want.cpus.empty());
    // No -numa dist on the command line: the kernel's defaults, 10 local, 20 remote.
    REQUIRE(got.distances.size() == shape().nodes.size());
    for (std::size_t j = 0; j < shape().nodes.size(); ++j) CHECK(got.distances[j] == (i == j ? 10 : 20));
  }
  REQUIRE(topo->packages.size() == shape().packages.size());
  for (std::size_t p = 0; p < shape().packages.size(); ++p) {
    CHECK(topo->packages[p].id == static_cast<int>(p));
    CHECK(topo->packages[p].cpus.to_list() == shape().packages[p].to_list());
  }
  REQUIRE(topo->cores.size() == shape().cores.size());
  for (std::size_t c = 0; c < shape().cores.size(); ++c)
    CHECK(topo->cores[c].threads.to_list() == shape().cores[c].to_list());
  REQUIRE(topo->core_complexes.size() == shape().l3.size());
  for (std::size_t g = 0; g < shape().l3.size(); ++g) {
    CHECK(topo->core_complexes[g].level == 3);
    CHECK(topo->core_complexes[g].cpus.to_list() == shape().l3[g].to_list());
  }
  for (const auto& d : shape().pci) {
    CAPTURE(d.bdf);
    const gpuaff::PciDevice* dev = topo->find_pci(*gpuaff::PciAddress::parse(d.bdf));
    REQUIRE(dev != nullptr);
    CHECK(dev->numa_node == d.numa_node);
    CHECK(dev->has_local_cpus);
    CHECK(dev->local_cpus.to_list() == d.local_cpus.to_list());
  }
  REQUIRE(topo->gpus.size() == shape().gpus.size());
  for (std::size_t g = 0; g < shape().gpus.size(); ++g) {
    CAPTURE(g);
    CHECK(topo->gpus[g].index == static_cast<int>(g));
    CHECK(std::string(topo->gpus[g].address().to_string().view()) == shape().gpus[g].bdf);
    CHECK(topo->gpus[g].numa_node() == shape().gpus[g].numa_node);
    CHECK(topo->gpus[g].pci.vendor == 0x1002);  // QEMU's ati-vga
  }
}

TEST_CASE("the policies bind each GPU as its node, its peers and the visible set dictate") {
  for (const auto& b : shape().gpu_binds) {
    CAPTURE(b.gpu);
    CAPTURE(b.policy);
    CAPTURE(b.visible);
    CAPTURE(b.why);
    gpuaff::SysfsOptions options{.root = "/"};
    if (!b.visible.empty()) options.visible.list = std::string(b.visible);
    auto topo = gpuaff::SysfsSource(options).load();
    REQUIRE_MESSAGE(topo.has_value(), (topo ? std::string() : show_error(topo.error())));
    auto kind = gpuaff::parse_policy(b.policy);
    REQUIRE(kind.has_value());
    gpuaff::PolicySpec spec{.kind = *kind};
    spec.nvidia.balanced = b.balanced;
    auto cpus = gpuaff::bind(*topo, b.gpu, spec);
    REQUIRE_MESSAGE(cpus.has_value(), (cpus ? std::string() : show_error(cpus.error())));
    CHECK(cpus->to_list() == b.cpus.to_list());
  }
}

TEST_CASE("the policies bind each PCI device as its node and package dictate") {
  auto topo = load_live();
  REQUIRE_MESSAGE(topo.has_value(), (topo ? std::string() : show_error(topo.error())));
  for (const auto& b : shape().binds) {
    CAPTURE(b.bdf);
    CAPTURE(b.policy);
    CAPTURE(b.why);
    int gpu = -1;
    auto target = gpuaff::with_pci_target(*topo, *gpuaff::PciAddress::parse(b.bdf), &gpu);
    REQUIRE_MESSAGE(target.has_value(), (target ? std::string() : show_error(target.error())));
    auto kind = gpuaff::parse_policy(b.policy);
    REQUIRE(kind.has_value());
    auto cpus = gpuaff::bind(*target, gpu, gpuaff::PolicySpec{.kind = *kind});
    REQUIRE_MESSAGE(cpus.has_value(), (cpus ? std::string() : show_error(cpus.error())));
    CHECK(cpus->to_list() == b.cpus.to_list());
  }
}

TEST_CASE("a device whose node the kernel does not know is an error unless node 0 is assumed") {
  auto topo = load_live();
  REQUIRE(topo.has_value());
  for (const auto& d : shape().pci) {
    if (d.numa_node != -1) continue;
    CAPTURE(d.bdf);
    int gpu = -1;
    auto target = gpuaff::with_pci_target(*topo, *gpuaff::PciAddress::parse(d.bdf), &gpu);
    REQUIRE(target.has_value());
    auto strict = gpuaff::bind(*target, gpu, gpuaff::PolicySpec{});
    REQUIRE_FALSE(strict.has_value());
    CHECK(strict.error().code() == gpuaff::Errc::unknown_locality);
    auto assumed = gpuaff::bind(*target, gpu, gpuaff::PolicySpec{}, {.unknown_node = gpuaff::UnknownNode::node0});
    REQUIRE(assumed.has_value());
    CHECK(assumed->to_list() == node_cpus(0).to_list());
  }
}

TEST_CASE("from sysfs to pages: a buffer touched after binding for a device lives on its node") {
  // The whole path a trainer takes: read the topology, bind for the device
  // with the node policy and its memory nodes, allocate, touch.
  auto topo = load_live();
  REQUIRE(topo.has_value());
  for (const auto& d : shape().pci) {
    if (d.numa_node < 0) continue;
    CAPTURE(d.bdf);
    int gpu = -1;
    auto target = gpuaff::with_pci_target(*topo, *gpuaff::PciAddress::parse(d.bdf), &gpu);
    REQUIRE(target.has_value());
    auto cpus = gpuaff::bind(*target, gpu, gpuaff::PolicySpec{});
    auto mems = gpuaff::memory_nodes(*target, gpu);
    REQUIRE(cpus.has_value());
    REQUIRE(mems.has_value());
    CHECK(mems->to_list() == std::to_string(d.numa_node));
    auto guard = gpuaff::ScopedAffinity::create(*cpus, {.policy = gpuaff::MemPolicy::bind, .nodes = *mems});
    REQUIRE_MESSAGE(guard.has_value(), (guard ? std::string() : show_error(guard.error())));
    Pages buf(32);
    REQUIRE(buf.ok());
    buf.touch();
    CHECK(distinct_nodes(buf.nodes()) == std::vector<int>{d.numa_node});
  }
}

// ============================================================================
// gpuaff's apply layer on the real kernel.
// ============================================================================

TEST_CASE("ScopedAffinity binds the thread and its memory to each node, then restores both") {
  const CpuSet before = current_affinity();
  REQUIRE(before == all_cpus());
  REQUIRE(memory_policy_text() == "default -");
  for (const auto& n : shape().nodes) {
    if (n.cpus.empty()) continue;
    CAPTURE(n.id);
    {
      auto guard = gpuaff::ScopedAffinity::create(
          n.cpus, {.policy = gpuaff::MemPolicy::bind, .nodes = gpuaff::NodeSet::single(n.id)});
      REQUIRE_MESSAGE(guard.has_value(), (guard ? std::string() : show_error(guard.error())));
      CHECK(current_affinity().to_list() == n.cpus.to_list());
      CHECK(memory_policy_text() == "bind " + std::to_string(n.id));
      Pages buf(16);
      REQUIRE(buf.ok());
      buf.touch();
      CHECK(distinct_nodes(buf.nodes()) == std::vector<int>{n.id});
    }
    CHECK(current_affinity().to_list() == before.to_list());
    CHECK(memory_policy_text() == "default -");
  }
}

TEST_CASE("nested guards restore the outer binding, then the original one") {
  const auto& outer = shape().nodes.front();
  const auto& inner = shape().nodes[1];
  {
    auto a = gpuaff::ScopedAffinity::create(outer.cpus, {.policy = gpuaff::MemPolicy::bind,
                                                         .nodes = gpuaff::NodeSet::single(outer.id)});
    REQUIRE(a.has_value());
    {
      auto b = gpuaff::ScopedAffinity::create(inner.cpus, {.policy = gpuaff::MemPolicy::bind,
                                                           .nodes = gpuaff::NodeSet::single(inner.id)});
      REQUIRE(b.has_value());
      CHECK(current_affinity().to_list() == inner.cpus.to_list());
      CHECK(memory_policy_text() == "bind " + std::to_string(inner.id));
    }
    CHECK(current_affinity().to_list() == outer.cpus.to_list());
    CHECK(memory_policy_text() == "bind " + std::to_string(outer.id));
  }
  CHECK(current_affinity().to_list() == all_cpus().to_list());
  CHECK(memory_policy_text() == "default -");
}

TEST_CASE("memory bound or preferred away from the CPUs lands there, on a memory-only node too") {
  // The CPUs stay on the first node, so first touch alone would put every page
  // there: pages found elsewhere prove the policy took effect.
  const auto& home = shape().nodes.front();
  for (gpuaff::MemPolicy policy : {gpuaff::MemPolicy::bind, gpuaff::MemPolicy::preferred}) {
    for (const auto& target : shape().nodes) {
      if (target.id == home.id) continue;
      CAPTURE(gpuaff::to_string(policy));
      CAPTURE(target.id);
      auto guard = gpuaff::ScopedAffinity::create(
          home.cpus, {.policy = policy, .nodes = gpuaff::NodeSet::single(target.id)});
      REQUIRE_MESSAGE(guard.has_value(), (guard ? std::string() : show_error(guard.error())));
      Pages buf(16);
      REQUIRE(buf.ok());
      buf.touch();
      CHECK(distinct_nodes(buf.nodes()) == std::vector<int>{target.id});
    }
  }
}

TEST_CASE("interleave spreads a buffer's pages evenly over every node") {
  const CpuSet all_nodes = node_ids(false);
  const int per_node = 8;
  auto guard = gpuaff::ScopedAffinity::create(all_cpus(),
                                              {.policy = gpuaff::MemPolicy::interleave, .nodes = all_nodes});
  REQUIRE_MESSAGE(guard.has_value(), (guard ? std::string() : show_error(guard.error())));
  Pages buf(per_node * all_nodes.count());
  REQUIRE(buf.ok());
  buf.touch();
  auto where = buf.nodes();
  REQUIRE(!where.empty());
  for (int node : all_nodes) {
    CAPTURE(node);
    int count = 0;
    for (int w : where) count += w == node ? 1 : 0;
    CHECK(count == per_node);
  }
}

TEST_CASE("bind_process binds the threads that already run, and binding back restores them") {
  const CpuSet before = current_affinity();
  const auto& target = shape().nodes[1];
  IdleThreads idle(3);
  REQUIRE(live_thread_masks().size() == 4);
  auto bound = gpuaff::bind_process(target.cpus);
  REQUIRE_MESSAGE(bound.has_value(), (bound ? std::string() : show_error(bound.error())));
  CHECK(bound->threads_bound == 4);
  CHECK(live_thread_masks() == std::vector<std::string>(4, target.cpus.to_list()));
  // A thread started afterwards inherits the binding from its creator.
  CpuSet seen_by_new_thread;
  std::thread([&] { seen_by_new_thread = current_affinity(); }).join();
  CHECK(seen_by_new_thread.to_list() == target.cpus.to_list());

  auto back = gpuaff::bind_process(before);
  REQUIRE(back.has_value());
  auto masks = live_thread_masks();
  CHECK(masks.size() >= 4);  // the thread that just ended may still be listed
  CHECK(masks == std::vector<std::string>(masks.size(), before.to_list()));
}

TEST_CASE("children spawned in parallel under guards on every node start on their node") {
  // One thread per CPU node, all released at once: each binds itself under a
  // guard and starts a child, while the others do the same with other masks.
  // Affinity and memory policy are per thread, so each child must report its
  // own node, and each thread must be back on all CPUs afterwards.
  std::vector<NodeExpect> nodes;
  for (const auto& n : shape().nodes)
    if (!n.cpus.empty()) nodes.push_back(n);
  struct Outcome {
    std::string error;
    std::string command_report;  // from the exec'd child (spawn)
    int callable_exit = -1;      // from the forked child (spawn_callable): 0 = right node
    CpuSet thread_after;
  };
  std::vector<Outcome> out(nodes.size());
  std::latch go(static_cast<std::ptrdiff_t>(nodes.size()));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      const NodeExpect& n = nodes[i];
      const gpuaff::MemoryOptions memory{.policy = gpuaff::MemPolicy::bind, .nodes = gpuaff::NodeSet::single(n.id)};
      go.arrive_and_wait();
      int fds[2];
      if (pipe2(fds, O_CLOEXEC) != 0) {
        out[i].error = "pipe2 failed";
        return;
      }
      {
        auto guard = gpuaff::ScopedAffinity::create(n.cpus, memory);
        if (!guard) {
          out[i].error = show_error(guard.error());
          close(fds[0]);
          close(fds[1]);
          return;
        }
        // No cpus in the options: the child takes the guarded thread's mask and policy.
        auto child = gpuaff::spawn({"/bin/guest_checks", "--child-report"}, {.stdout_fd = fds[1]});
        close(fds[1]);
        if (!child) {
          out[i].error = show_error(child.error());
          close(fds[0]);
          return;
        }
        out[i].command_report = drain(fds[0]);
        (void)child->wait();
      }
      // spawn_callable binds the forking thread itself, from the options.
      const CpuSet want = n.cpus;
      const std::string want_policy = "bind " + std::to_string(n.id);
      auto forked = gpuaff::spawn_callable(
          [want, want_policy] { return current_affinity() == want && memory_policy_text() == want_policy ? 0 : 1; },
          {.cpus = n.cpus, .memory = memory});
      if (!forked) {
        out[i].error = show_error(forked.error());
        return;
      }
      auto status = forked->wait();
      out[i].callable_exit = status ? status->exit_code : -2;
      out[i].thread_after = current_affinity();
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    CAPTURE(nodes[i].id);
    CHECK(out[i].error == "");
    CHECK(out[i].command_report ==
          "cpus=" + nodes[i].cpus.to_list() + " mempolicy=bind " + std::to_string(nodes[i].id) + "\n");
    CHECK(out[i].callable_exit == 0);
    CHECK(out[i].thread_after.to_list() == all_cpus().to_list());
  }
}

// ============================================================================
// The static gpuaff tool in the guest.
// ============================================================================

TEST_CASE("gpuaff bind --root / --pci prints each device's binding") {
  for (const auto& b : shape().binds) {
    CAPTURE(b.bdf);
    CAPTURE(b.policy);
    CAPTURE(b.why);
    ToolRun r = run_tool({"bind", "--root", "/", "--pci", std::string(b.bdf), "--policy", std::string(b.policy)});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == b.cpus.to_list() + "\n");
    CHECK(r.err == "");
  }
}

TEST_CASE("gpuaff bind --gpu prints each GPU's binding") {
  for (const auto& b : shape().gpu_binds) {
    CAPTURE(b.gpu);
    CAPTURE(b.policy);
    CAPTURE(b.visible);
    CAPTURE(b.why);
    std::vector<std::string> args{"bind", "--gpu", std::to_string(b.gpu), "--policy", std::string(b.policy)};
    if (!b.visible.empty()) args.insert(args.end(), {"--visible-devices", std::string(b.visible)});
    if (!b.balanced) args.push_back("--no-balanced");
    ToolRun r = run_tool(args);
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == b.cpus.to_list() + "\n");
  }
}

TEST_CASE("gpuaff started on fewer CPUs (taskset, cgroups) binds inside them") {
  if (shape().gpus.size() < 2) return;
  // Allowed 4-6: node 1's allowed cores are {4,5} and {6}; its two GPUs take one each.
  const CpuSet allowed{4, 5, 6};
  ToolRun node = run_tool({"bind", "--gpu", "0"}, allowed);
  ToolRun first = run_tool({"bind", "--gpu", "0", "--policy", "exclusive"}, allowed);
  ToolRun second = run_tool({"bind", "--gpu", "1", "--policy", "exclusive"}, allowed);
  // GPU 2's node 0 has no allowed CPU: an error, never an empty or foreign mask.
  ToolRun none = run_tool({"bind", "--gpu", "2"}, allowed);
  CHECK(node.out == "4-6\n");
  CHECK(first.out == "4-5\n");
  CHECK(second.out == "6\n");
  CHECK(none.exit_code == 5);  // CONTRACT: cannot bind (empty result)
  CHECK(none.out == "");
  CHECK(none.err.rfind("gpuaff: ", 0) == 0);
}

TEST_CASE("gpuaff honours HIP_VISIBLE_DEVICES for the AMD adapters") {
  if (shape().gpus.size() < 3) return;
  // Visible "2,0": GPU 0 is the third adapter in bus order, GPU 1 the first.
  REQUIRE(setenv("HIP_VISIBLE_DEVICES", "2,0", 1) == 0);
  ToolRun first = run_tool({"bind", "--gpu", "0"});
  ToolRun second = run_tool({"bind", "--gpu", "1"});
  ToolRun hidden = run_tool({"bind", "--gpu", "2"});
  REQUIRE(unsetenv("HIP_VISIBLE_DEVICES") == 0);
  CHECK(first.out == node_cpus(shape().gpus[2].numa_node).to_list() + "\n");
  CHECK(second.out == node_cpus(shape().gpus[0].numa_node).to_list() + "\n");
  CHECK(hidden.exit_code == 4);  // only two GPUs are visible
  CHECK(hidden.out == "");
}

TEST_CASE("gpuaff exec --local-rank starts each rank on its GPU's node") {
  for (std::size_t g = 0; g < shape().gpus.size(); ++g) {
    CAPTURE(g);
    const int node = shape().gpus[g].numa_node;
    REQUIRE(setenv("LOCAL_RANK", std::to_string(g).c_str(), 1) == 0);
    ToolRun r = run_tool({"exec", "--local-rank", "--membind", "local", "--", "/bin/guest_checks", "--child-report"});
    REQUIRE(unsetenv("LOCAL_RANK") == 0);
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "cpus=" + node_cpus(node).to_list() + " mempolicy=bind " + std::to_string(node) + "\n");
  }
}

TEST_CASE("gpuaff bind on a device of unknown node fails with one line, or assumes node 0 when told") {
  for (const auto& d : shape().pci) {
    if (d.numa_node != -1) continue;
    CAPTURE(d.bdf);
    ToolRun strict = run_tool({"bind", "--pci", std::string(d.bdf)});
    CHECK(strict.exit_code == 4);  // CONTRACT: no such device or unknown node
    CHECK(strict.out == "");
    CHECK(strict.err.rfind("gpuaff: ", 0) == 0);
    CHECK(strict.err.find('\n') == strict.err.size() - 1);
    ToolRun assumed = run_tool({"bind", "--pci", std::string(d.bdf), "--unknown-node", "node0"});
    CHECK(assumed.exit_code == 0);
    CHECK(assumed.out == node_cpus(0).to_list() + "\n");
  }
}

TEST_CASE("gpuaff exec starts the command on the device's node with its memory policy") {
  for (const auto& d : shape().pci) {
    if (d.numa_node < 0) continue;
    CAPTURE(d.bdf);
    const std::string node = std::to_string(d.numa_node);
    for (std::string_view membind : {"local", "preferred"}) {
      CAPTURE(membind);
      ToolRun r = run_tool({"exec", "--pci", std::string(d.bdf), "--membind", std::string(membind), "--",
                            "/bin/guest_checks", "--child-report"});
      CAPTURE(r.err);
      CHECK(r.exit_code == 0);
      // --membind local: only the device's node (MPOL_BIND); preferred: that node first.
      std::string mode = membind == "local" ? "bind" : "preferred";
      CHECK(r.out == "cpus=" + d.local_cpus.to_list() + " mempolicy=" + mode + " " + node + "\n");
    }
  }
}

// ============================================================================

int child_report() {
  std::printf("cpus=%s mempolicy=%s\n", current_affinity().to_list().c_str(), memory_policy_text().c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--child-report") return child_report();
  const char* name = std::getenv("GPUAFF_QEMU_SHAPE");
  static const Shape shapes[] = {shape_2s2n(), shape_1s4n()};
  for (const auto& s : shapes)
    if (name != nullptr && s.name == name) g_shape = &s;
  if (g_shape == nullptr) {
    std::fprintf(stderr,
                 "guest_checks: GPUAFF_QEMU_SHAPE='%s' is not a known shape; this program runs inside "
                 "the QEMU guests of tests/qemu/run_guest.sh\n",
                 name != nullptr ? name : "");
    return 2;
  }
  std::printf("guest_checks: checking shape %s\n", name);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
