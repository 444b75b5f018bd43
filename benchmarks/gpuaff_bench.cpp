// SPDX-License-Identifier: Apache-2.0
// gpuaff_bench: every cost gpuaff adds at the start of a rank, each measured
// side by side with its comparison in the same run and printed as a ratio.
//
// Google Benchmark times one function after another; on a shared, noisy
// machine a burst of load then lands on one variant only and the ratio is
// wrong. This harness interleaves the variants instead (one sample of A, one
// of B, A, B, ...) and takes the median of each, so a burst hits both sides.
// benchmarks/README.md explains every row; benchmarks/run.sh is the one
// command that builds this, measures compile times and prints the table.

#include <gpuaff/gpuaff.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#ifdef GPUAFF_HAS_HWLOC
#include <hwloc.h>
#endif
#ifdef GPUAFF_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#endif

extern char** environ;  // NOLINT: POSIX

namespace {

using Clock = std::chrono::steady_clock;

// What a sample measures. The machine this runs on is shared: with more
// runnable processes than CPUs, wall time mostly measures the wait for a CPU.
// Everything measured here is one thread doing work in user space and in the
// kernel (sysfs reads, sched_setaffinity), so the thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID: user + system) is what it costs and is blind to
// that wait. A spawn's cost lies mostly in the child, so row 5 takes the CPU
// time of this process and of its reaped children (getrusage), and wall time
// beside it.
enum class Timer { thread_cpu, self_and_children, wall };
Timer timer = Timer::thread_cpu;

double now_ns() {
  if (timer == Timer::wall)
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
  if (timer == Timer::self_and_children) {
    double t = 0;
    for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
      rusage ru{};
      getrusage(who, &ru);
      for (const timeval& tv : {ru.ru_utime, ru.ru_stime})
        t += static_cast<double>(tv.tv_sec) * 1e9 + static_cast<double>(tv.tv_usec) * 1e3;
    }
    return t;
  }
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// ---- command line ---------------------------------------------------------------

struct Config {
  std::string fixtures = GPUAFF_FIXTURES_DIR;  // the fixture roots, unpacked by CMake
  std::string tool = GPUAFF_BENCH_TOOL;              // the gpuaff binary (row 8); empty: not built
  std::string hwloc_tool = GPUAFF_BENCH_HWLOC_TOOL;  // gpuaff-hwloc (row 8, information); empty: not built
  int rounds = 31;             // samples per variant (odd: the median is one sample)
  double sample_ms = 2.0;      // a sample repeats the operation until it takes about this long
  bool quick = false;          // smoke test: 3 rounds, short samples, no verdicts
  std::string compile;         // "n=N,vector=S,umbrella=S,one=S,..." measured by run.sh (row 6)
  std::string instructions;    // "NAME=COUNT,..." callgrind counts measured by run.sh
  std::string callgrind_mode;  // run each measured operation once under callgrind client requests
};

// ---- statistics -----------------------------------------------------------------

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Nanoseconds for `reps` calls of fn.
double time_ns(const std::function<void()>& fn, int reps) {
  double t0 = now_ns();
  for (int i = 0; i < reps; ++i) fn();
  return now_ns() - t0;
}

/// Repetitions so that one sample of fn lasts about `sample_ms`.
int calibrate(const std::function<void()>& fn, double sample_ms) {
  fn();  // warm up: page cache, dentry cache, lazy binding
  int reps = 1;
  while (reps < (1 << 20)) {
    double ns = time_ns(fn, reps);
    if (ns >= sample_ms * 1e6 * 0.5) return std::max(1, static_cast<int>(std::lround(reps * sample_ms * 1e6 / ns)));
    reps *= 4;
  }
  return reps;
}

struct Pair {
  double a_ns = 0;  // median ns per operation, variant A
  double b_ns = 0;  // variant B
  double paired = 0;  // median over rounds of (A sample / B sample): robust to drift across the run
};

/// Interleaves A and B (A B A B ..., starting side alternating each round) and
/// returns the median time per operation of each.
Pair compare(const Config& cfg, const std::function<void()>& a, const std::function<void()>& b) {
  int ra = calibrate(a, cfg.sample_ms);
  int rb = calibrate(b, cfg.sample_ms);
  std::vector<double> va, vb, ratio;
  for (int r = 0; r < cfg.rounds; ++r) {
    double ta, tb;
    if (r % 2 == 0) {
      ta = time_ns(a, ra) / ra;
      tb = time_ns(b, rb) / rb;
    } else {
      tb = time_ns(b, rb) / rb;
      ta = time_ns(a, ra) / ra;
    }
    va.push_back(ta);
    vb.push_back(tb);
    ratio.push_back(ta / tb);
  }
  return {median(va), median(vb), median(ratio)};
}

/// Interleaves any number of variants (each round starts one further along:
/// A B C, B C A, C A B, ...) and returns the median time per operation of each.
std::vector<double> compare_all(const Config& cfg, const std::vector<std::function<void()>>& fns) {
  std::vector<int> reps;
  for (const auto& f : fns) reps.push_back(calibrate(f, cfg.sample_ms));
  std::vector<std::vector<double>> samples(fns.size());
  for (int r = 0; r < cfg.rounds; ++r) {
    for (std::size_t k = 0; k < fns.size(); ++k) {
      std::size_t i = (k + static_cast<std::size_t>(r)) % fns.size();
      samples[i].push_back(time_ns(fns[i], reps[i]) / reps[i]);
    }
  }
  std::vector<double> out;
  for (auto& v : samples) out.push_back(median(v));
  return out;
}

/// Least-squares slope of log(y) against log(x).
double loglog_slope(const std::vector<double>& x, const std::vector<double>& y) {
  double n = static_cast<double>(x.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

// ---- output -----------------------------------------------------------------------

std::string fmt_time(double ns) {
  char buf[64];
  if (ns < 1e3) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  else if (ns < 1e9) std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  return buf;
}
std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Row {
  std::string id, what, measured, baseline, ratio, target, verdict;
};
std::vector<Row> rows;
std::vector<std::string> notes;
bool all_hold = true;

void add(const Config& cfg, Row r, bool holds, bool has_target = true) {
  if (!has_target) r.verdict = "-";
  else if (cfg.quick) r.verdict = "(quick)";
  else {
    r.verdict = holds ? "holds" : "DOES NOT HOLD";
    if (!holds) all_hold = false;
  }
  rows.push_back(std::move(r));
}

void print_table() {
  std::array<std::size_t, 7> w{};
  Row head{"#", "what", "gpuaff", "comparison", "ratio", "target", "verdict"};
  auto cols = [](const Row& r) { return std::array<const std::string*, 7>{&r.id, &r.what, &r.measured, &r.baseline, &r.ratio, &r.target, &r.verdict}; };
  for (const Row* r : {&head}) for (std::size_t i = 0; i < 7; ++i) w[i] = std::max(w[i], cols(*r)[i]->size());
  for (const auto& r : rows) for (std::size_t i = 0; i < 7; ++i) w[i] = std::max(w[i], cols(r)[i]->size());
  auto line = [&](const Row& r) {
    std::string s = "|";
    for (std::size_t i = 0; i < 7; ++i) {
      const std::string& c = *cols(r)[i];
      s += ' ' + c + std::string(w[i] - c.size(), ' ') + " |";
    }
    std::puts(s.c_str());
  };
  line(head);
  std::string sep = "|";
  for (std::size_t i = 0; i < 7; ++i) sep += std::string(w[i] + 2, '-') + '|';
  std::puts(sep.c_str());
  for (const auto& r : rows) line(r);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "gpuaff_bench: %s\n", what.c_str());
  std::exit(2);
}

// ---- the machines -------------------------------------------------------------------

struct Fixture {
  std::string name, root;
  int cpus = 0, cores = 0, packages = 0, llc = 0, nodes = 0, gpus = 0;
  int pci = 0;         // PCI devices the topology keeps (GPUs)
  int pci_listed = 0;  // PCI devices listed under sys/bus/pci/devices (each has a class to read)
};

// What is measured: the detail one rank reads (`gpuaff bind` and `exec` use
// SysfsDetail::binding); SysfsDetail::full (topo, record, JSON) is shown beside
// it as information.
constexpr gpuaff::SysfsDetail rank_detail = gpuaff::SysfsDetail::binding;

const char* detail_name(gpuaff::SysfsDetail d) { return d == gpuaff::SysfsDetail::full ? "full" : "binding"; }

gpuaff::SysfsOptions options_for(const std::string& root, gpuaff::SysfsDetail detail = rank_detail) {
  gpuaff::SysfsOptions o;
  o.root = root;
  o.visible.use_environment = false;  // a CUDA_VISIBLE_DEVICES in the shell must not change what is measured
  o.detail = detail;
  return o;
}

gpuaff::Topology load_or_die(const std::string& root, int* opened = nullptr,
                             std::vector<std::string>* read = nullptr, gpuaff::SysfsDetail detail = rank_detail) {
  gpuaff::SysfsSource src(options_for(root, detail));
  auto t = src.load();
  if (!t) die("cannot load " + root + ": " + std::string(t.error().message()));
  if (opened) *opened = src.files_opened();
  if (read) *read = src.files_read();
  return *t;
}

/// The 9 policies, default options: the rows of `gpuaff topo`'s policy table.
const std::vector<gpuaff::PolicySpec>& every_policy() {
  static const std::vector<gpuaff::PolicySpec> specs = [] {
    std::vector<gpuaff::PolicySpec> v;
    for (gpuaff::PolicyKind k : gpuaff::all_policy_kinds) v.push_back({.kind = k});
    return v;
  }();
  return specs;
}

/// Every GPU's binding for every policy, through bind_table (what `gpuaff topo`
/// and a launcher binding all of a machine's ranks call: the facts the bindings
/// share are derived once). Errors are results too: exclusive on a node with
/// fewer cores than GPUs is an answer, not a failure of the benchmark.
int bind_everything(const gpuaff::Topology& t) {
  int ok = 0;
  for (const auto& row : gpuaff::bind_table(t, every_policy()))
    for (const auto& r : row) ok += r ? r->count() : -1;
  return ok;
}

/// What one rank computes: bind() of its own GPU with one policy, nothing
/// shared. Done here for the last GPU with each of the 9 policies in turn
/// (callers divide by 9 for the mean binding).
int bind_one_each(const gpuaff::Topology& t) {
  int ok = 0;
  int gpu = static_cast<int>(t.gpus.size()) - 1;
  for (const auto& spec : every_policy()) {
    auto r = gpuaff::bind(t, gpu, spec);
    ok += r ? r->count() : -1;
  }
  return ok;
}

volatile int sink = 0;  // keeps results alive so nothing is optimised away

/// load + bind everything: what one rank pays for its binding.
void gpuaff_full(const std::string& root, gpuaff::SysfsDetail detail = rank_detail) {
  gpuaff::SysfsSource src(options_for(root, detail));
  auto t = src.load();
  if (!t) die("load failed: " + std::string(t.error().message()));
  sink = sink + bind_everything(*t);
}

#ifdef GPUAFF_HAS_HWLOC
/// hwloc's load of the same root, I/O devices kept, as hwloc users call it.
/// hwloc 2.x has no hwloc_topology_set_fsroot(): its Linux backend takes the
/// root from HWLOC_FSROOT (HWLOC_THISSYSTEM=0 says it is not this machine).
/// Backends that would probe the machine this runs on (x86 CPUID,
/// libpciaccess, GPU libraries) are excluded, as the recorded root is the
/// whole truth; only hwloc_topology_load is timed.
struct HwlocRun {
  std::string root;
  hwloc_topology_t keep_plugins{};  // one live topology keeps hwloc's plugins loaded between samples

  explicit HwlocRun(std::string r) : root(std::move(r)) {
    ::setenv("HWLOC_FSROOT", root.c_str(), 1);
    ::setenv("HWLOC_THISSYSTEM", "0", 1);
    hwloc_topology_init(&keep_plugins);
  }
  ~HwlocRun() { hwloc_topology_destroy(keep_plugins); }

  static hwloc_topology_t prepared() {
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    for (const char* c : {"x86", "pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
      (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
    return t;
  }
  /// Checks once that hwloc really read the root (and saw its GPUs).
  void check(int want_pus, int want_gpus) {
    hwloc_topology_t t = prepared();
    if (hwloc_topology_load(t) != 0) die("hwloc_topology_load failed on " + root);
    const char* b = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "Backend");
    std::string backend = b ? b : "none";
    int pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    int gpus = 0;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o)) != nullptr;)
      if ((o->attr->pcidev.class_id >> 8) == 0x03) ++gpus;
    hwloc_topology_destroy(t);
    if (backend != "Linux" || pus != want_pus || gpus < want_gpus)
      die("hwloc did not read " + root + " as expected (backend " + backend + ", " +
          std::to_string(pus) + " PUs, " + std::to_string(gpus) + " display-class PCI devices)");
  }
};
#endif

// ---- rows ---------------------------------------------------------------------------

struct FixtureResult {
  Fixture f;
  double full_ns = 0, hwloc_ns = 0, load_ns = 0, policy_ns = 0;
  int opened = 0;                  // rank_detail
  std::vector<std::string> read;   // rank_detail
  int opened_full = 0;             // SysfsDetail::full
  std::vector<std::string> read_full;
};

/// Entries of a directory whose names are PCI addresses (what the reader lists).
int count_pci_addresses(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int n = 0;
  while (dirent* e = ::readdir(d))
    if (gpuaff::PciAddress::parse(e->d_name)) ++n;
  ::closedir(d);
  return n;
}

Fixture describe(const std::string& name, const std::string& root) {
  Fixture f{name, root};
  auto t = load_or_die(root);
  f.cpus = t.online.count();
  f.cores = static_cast<int>(t.cores.size());
  f.packages = static_cast<int>(t.packages.size());
  f.llc = static_cast<int>(t.core_complexes.size());
  f.nodes = static_cast<int>(t.nodes.size());
  f.gpus = static_cast<int>(t.gpus.size());
  f.pci = static_cast<int>(t.pci_devices.size());
  f.pci_listed = count_pci_addresses(root + "/sys/bus/pci/devices");
  return f;
}

/// Which kind of read a root-relative path is, for the breakdown of row 2.
std::string kind_of(std::string_view p) {
  auto has = [&](std::string_view s) { return p.find(s) != std::string_view::npos; };
  if (has("/topology/core_cpus") || has("/topology/thread_siblings")) return "core siblings";
  if (has("/topology/")) return "package id+list";
  if (has("/cache/") && (p.ends_with("/level") || p.ends_with("/type"))) return "cache probe";
  if (has("/cache/")) return "LLC group";
  if (has("system/node/node")) return p.ends_with("/distance") ? "node distance" : "node cpulist";
  if (has("bus/pci/devices/") && p.ends_with("/class")) return "pci class (every device)";
  if (has("bus/pci/devices/")) return "pci " + std::string(p.substr(p.rfind('/') + 1));
  if (has("driver/nvidia")) return "gpu uuid";
  return "fixed";
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto val = [&](std::string_view key) -> const char* {
      if (a.substr(0, key.size()) == key && a.size() > key.size() && a[key.size()] == '=') return argv[i] + key.size() + 1;
      return nullptr;
    };
    if (a == "--quick") {
      cfg.quick = true;
      cfg.rounds = 3;
      cfg.sample_ms = 0.2;
    } else if (auto v = val("--rounds")) cfg.rounds = std::max(1, std::atoi(v));
    else if (auto v2 = val("--sample-ms")) cfg.sample_ms = std::atof(v2);
    else if (auto v3 = val("--fixtures")) cfg.fixtures = v3;
    else if (auto v5 = val("--compile")) cfg.compile = v5;
    else if (auto v6 = val("--instructions")) cfg.instructions = v6;
    else if (auto v7 = val("--callgrind")) cfg.callgrind_mode = v7;
    else if (auto v8 = val("--tool")) cfg.tool = v8;
    else if (auto v9 = val("--hwloc-tool")) cfg.hwloc_tool = v9;
    else if (a == "--help" || a == "-h") {
      std::puts("usage: gpuaff_bench [--quick] [--rounds=N] [--sample-ms=MS] [--fixtures=DIR]\n"
                "                    [--compile=n=N,vector=S,umbrella=S,one=S[,light=S,...]]   (benchmarks/run.sh)\n"
                "                    [--instructions=NAME=COUNT,...]\n"
                "                    [--tool=GPUAFF] [--hwloc-tool=GPUAFF_HWLOC]  (row 8: whole gpuaff processes)\n"
                "                    [--callgrind=FIXTURE]  (run under callgrind: one load+bind, one hwloc load,\n"
                "                                            one policy table, 9 single bindings, each dumped separately)\n"
                "Prints one table; benchmarks/README.md explains the rows. Run benchmarks/run.sh for all of it.");
      return 0;
    } else die("unknown argument '" + std::string(a) + "' (see --help)");
  }

  const std::vector<std::pair<std::string, std::string>> machines = {
      {"vm-2cpu", cfg.fixtures + "/vm-2cpu"},
      {"p4d.24xlarge", cfg.fixtures + "/p4d.24xlarge"},
      {"dgx-h100", cfg.fixtures + "/dgx-h100"},
      {"dgx-a100", cfg.fixtures + "/dgx-a100"},
      {"big-1152", cfg.fixtures + "/big-1152"},
  };

#ifdef GPUAFF_BENCH_CALLGRIND
  if (!cfg.callgrind_mode.empty()) {
    // Instruction counts, free of noise: each section is dumped as its own part.
    std::string root;
    for (const auto& [n, r] : machines)
      if (n == cfg.callgrind_mode) root = r;
    if (root.empty()) die("unknown fixture " + cfg.callgrind_mode);
    gpuaff_full(root);  // warm: first-touch costs are not what a rank pays twice, but page cache is shared
    CALLGRIND_ZERO_STATS;
    gpuaff_full(root);
    CALLGRIND_DUMP_STATS_AT("gpuaff-load-bind");
    auto t = load_or_die(root);
    CALLGRIND_ZERO_STATS;
    sink = sink + bind_everything(t);
    CALLGRIND_DUMP_STATS_AT("policies");
    CALLGRIND_ZERO_STATS;
    sink = sink + bind_one_each(t);
    CALLGRIND_DUMP_STATS_AT("one-binding-x9");
    CALLGRIND_ZERO_STATS;
    {
      gpuaff::SysfsSource src(options_for(root));
      auto lt = src.load();
      sink = sink + static_cast<int>(lt.has_value());
    }
    CALLGRIND_DUMP_STATS_AT("gpuaff-load");
#ifdef GPUAFF_HAS_HWLOC
    HwlocRun h(root);
    hwloc_topology_t warm = HwlocRun::prepared();
    hwloc_topology_load(warm);
    hwloc_topology_destroy(warm);
    hwloc_topology_t ht = HwlocRun::prepared();
    CALLGRIND_ZERO_STATS;
    hwloc_topology_load(ht);
    CALLGRIND_DUMP_STATS_AT("hwloc-load");
    hwloc_topology_destroy(ht);
#endif
    return 0;
  }
#endif

  std::vector<FixtureResult> results;
  for (const auto& [name, root] : machines) {
    FixtureResult fr;
    fr.f = describe(name, root);
    load_or_die(root, &fr.opened, &fr.read);
    load_or_die(root, &fr.opened_full, &fr.read_full, gpuaff::SysfsDetail::full);
    results.push_back(std::move(fr));
  }

  // ---- row 1: load + every binding, against hwloc's load of the same root -----------
  // The load reads what a rank reads (binding detail); the same with full detail
  // (what `gpuaff topo` reads) is timed in the same rounds, as information.
  for (auto& fr : results) {
    const std::string root = fr.f.root;
    auto rank = [&] { gpuaff_full(root); };
    auto everything = [&] { gpuaff_full(root, gpuaff::SysfsDetail::full); };
#ifdef GPUAFF_HAS_HWLOC
    HwlocRun h(root);
    h.check(fr.f.cpus, fr.f.gpus);
    // hwloc's own setup/teardown is untimed: time it as the load alone.
    auto hw_load_only = [&](int reps) {
      double total = 0;
      for (int i = 0; i < reps; ++i) {
        hwloc_topology_t t = HwlocRun::prepared();
        double t0 = now_ns();
        hwloc_topology_load(t);
        total += now_ns() - t0;
        hwloc_topology_destroy(t);
      }
      return total / reps;
    };
    int ra = calibrate(rank, cfg.sample_ms);
    int rc = calibrate(everything, cfg.sample_ms);
    hw_load_only(1);
    int rb = std::max(1, static_cast<int>(cfg.sample_ms * 1e6 / std::max(1.0, hw_load_only(1))));
    std::vector<double> va, vb, vc;
    for (int r = 0; r < cfg.rounds; ++r) {
      double ta, tb, tc;
      if (r % 2 == 0) {
        ta = time_ns(rank, ra) / ra;
        tc = time_ns(everything, rc) / rc;
        tb = hw_load_only(rb);
      } else {
        tb = hw_load_only(rb);
        tc = time_ns(everything, rc) / rc;
        ta = time_ns(rank, ra) / ra;
      }
      va.push_back(ta);
      vb.push_back(tb);
      vc.push_back(tc);
    }
    fr.full_ns = median(va);
    fr.hwloc_ns = median(vb);
    double full_detail_ns = median(vc);
    double speedup = fr.hwloc_ns / fr.full_ns;
    bool target = fr.f.name == "dgx-h100";
    add(cfg,
        {"1", "load " + fr.f.name + " (" + std::to_string(fr.f.cpus) + " CPUs, " + std::to_string(fr.f.gpus) +
                  " GPUs) + bind all GPUs x 9 policies vs hwloc_topology_load",
         fmt_time(fr.full_ns), fmt_time(fr.hwloc_ns), fmt("%.1fx faster", speedup),
         target ? ">= 10x faster" : "(info)", ""},
        speedup >= 10, target);
    add(cfg,
        {"1", "the same with full detail (every file `gpuaff topo` reads), " + fr.f.name,
         fmt_time(full_detail_ns), fmt_time(fr.hwloc_ns), fmt("%.1fx faster", fr.hwloc_ns / full_detail_ns), "(info)",
         ""},
        true, false);
#else
    fr.full_ns = median([&] {
      std::vector<double> v;
      int ra = calibrate(rank, cfg.sample_ms);
      for (int r = 0; r < cfg.rounds; ++r) v.push_back(time_ns(rank, ra) / ra);
      return v;
    }());
    add(cfg, {"1", "load " + fr.f.name + " + bind all (hwloc not built: no comparison)", fmt_time(fr.full_ns), "-", "-",
              ">= 10x faster", ""},
        false, false);
    (void)everything;
#endif
  }

  // ---- row 1f: the load against the physical floor of its own reads ---------------------
  // The floor: open, one read and close of exactly the files the load read,
  // relative to a descriptor of the root (so the kernel walks only the
  // root-relative path), with nothing parsed. For both details.
  for (auto& fr : results) {
    int rootfd = ::open(fr.f.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) die("cannot open " + fr.f.root);
    for (gpuaff::SysfsDetail detail : {rank_detail, gpuaff::SysfsDetail::full}) {
      const std::vector<std::string> files = detail == rank_detail ? fr.read : fr.read_full;
      auto floor_reads = [&] {
        char buf[4096];
        long total = 0;
        for (const auto& rel : files) {
          int fd = ::openat(rootfd, rel.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) continue;
          total += ::read(fd, buf, sizeof buf);
          ::close(fd);
        }
        sink = sink + static_cast<int>(total);
      };
      const std::string root = fr.f.root;
      auto load = [&] {
        gpuaff::SysfsSource src(options_for(root, detail));
        auto lt = src.load();
        sink = sink + static_cast<int>(lt.has_value());
      };
      Pair p = compare(cfg, load, floor_reads);
      add(cfg,
          {"1f", std::string("SysfsSource::load (") + detail_name(detail) + ") of " + fr.f.name +
                     " vs floor: openat+read+close of the same " + std::to_string(files.size()) + " files",
           fmt_time(p.a_ns), fmt_time(p.b_ns), fmt("%.2fx", p.a_ns / p.b_ns), "(info)", ""},
          true, false);
    }
    ::close(rootfd);
  }

  // ---- row 2: files opened against the floor --------------------------------------------
  // The issue's floor: one read per physical core, package, LLC group, NUMA node
  // and GPU, plus a constant for the reads every machine needs once:
  // cpu/online, node/online, proc/self/status, and the cache-index probe of the
  // first CPU (level+type of each index and the probe that finds the end: 9 on
  // x86). It leaves out a read that no reader can avoid: a GPU is a PCI device
  // whose class and vendor are in given sets (docs/contract.md section 2), no sysfs
  // file lists the classes of all devices (/proc/bus/pci/devices has no class),
  // so every device listed under sys/bus/pci/devices costs one `class` read.
  // The complete floor adds that one read per listed device. Both against the
  // count of a rank's load (binding detail); full detail is information.
  constexpr int floor_constant = 12;
  std::vector<double> xs_cores, ys_files;
  for (const auto& fr : results) {
    const Fixture& f = fr.f;
    int floor = f.cores + f.packages + f.llc + f.nodes + f.gpus + floor_constant;
    int complete = floor + f.pci_listed;
    auto breakdown_of = [&](const std::vector<std::string>& read, int opened) {
      std::map<std::string, int> by;
      for (const auto& p : read) ++by[kind_of(p)];
      int misses = opened - static_cast<int>(read.size());
      std::string breakdown;
      for (const auto& [k, n] : by) breakdown += (breakdown.empty() ? "" : ", ") + k + " " + std::to_string(n);
      if (misses) breakdown += ", absent-file probes " + std::to_string(misses);
      return breakdown;
    };
    notes.push_back("row 2 " + f.name + ": binding detail " + std::to_string(fr.opened) +
                    " opened = " + breakdown_of(fr.read, fr.opened) + "; full detail " + std::to_string(fr.opened_full) +
                    " opened = " + breakdown_of(fr.read_full, fr.opened_full) + "; floor " + std::to_string(floor) +
                    " = " + std::to_string(f.cores) + " cores + " + std::to_string(f.packages) + " packages + " +
                    std::to_string(f.llc) + " LLC + " + std::to_string(f.nodes) + " nodes + " + std::to_string(f.gpus) +
                    " GPUs + " + std::to_string(floor_constant) + "; complete floor " + std::to_string(complete) +
                    " = floor + " + std::to_string(f.pci_listed) + " PCI devices listed (" + std::to_string(f.pci) +
                    " kept)");
    double ratio = static_cast<double>(fr.opened) / floor;
    add(cfg,
        {"2", "files opened by one load (binding) of " + f.name + " vs floor (cores+pkgs+LLC+nodes+GPUs+" +
                  std::to_string(floor_constant) + ")",
         std::to_string(fr.opened), std::to_string(floor), fmt("%.2fx", ratio), "<= 1.2x", ""},
        ratio <= 1.2);
    double complete_ratio = static_cast<double>(fr.opened) / complete;
    add(cfg,
        {"2", "files opened by one load (binding) of " + f.name + " vs complete floor (floor + " +
                  std::to_string(f.pci_listed) + " PCI class reads)",
         std::to_string(fr.opened), std::to_string(complete), fmt("%.2fx", complete_ratio), "<= 1.2x", ""},
        complete_ratio <= 1.2);
    add(cfg,
        {"2", "files opened by one load (full detail, as topo) of " + f.name + " vs complete floor",
         std::to_string(fr.opened_full), std::to_string(complete),
         fmt("%.2fx", static_cast<double>(fr.opened_full) / complete), "(info)", ""},
        true, false);
    // Row 2p: each policy's load reads the parts its answer needs (policy_needs,
    // docs/contract.md section 1, "What each answer reads"). Its floor: what every
    // answer needs (one cpulist per node, a numa_node per GPU, the PCI class
    // reads, cpu/online, node/online, proc/self/status) plus, as it needs them,
    // one read per core, two per package (its members, and its id: -1 means
    // unknown, and unknown packages are one), one per LLC group and the 9-file
    // cache probe.
    for (gpuaff::PolicyKind kind : {gpuaff::PolicyKind::node, gpuaff::PolicyKind::socket, gpuaff::PolicyKind::exclusive,
                                    gpuaff::PolicyKind::core_complex, gpuaff::PolicyKind::unique_contiguous}) {
      gpuaff::TopologyParts needs = gpuaff::policy_needs(gpuaff::PolicySpec{.kind = kind});
      gpuaff::SysfsOptions o = options_for(f.root);
      o.needs = needs;
      gpuaff::SysfsSource src(o);
      if (!src.load()) die("cannot load " + f.root + " for policy " + std::string(gpuaff::to_string(kind)));
      int policy_floor = f.nodes + f.gpus + f.pci_listed + 3 + (needs.cores ? f.cores : 0) +
                         (needs.packages ? 2 * f.packages : 0) + (needs.caches ? f.llc + 9 : 0);
      double r = static_cast<double>(src.files_opened()) / policy_floor;
      bool node_on_h100 = kind == gpuaff::PolicyKind::node && f.name == "dgx-h100";
      add(cfg,
          {"2p", "files opened by a load for --policy " + std::string(gpuaff::to_string(kind)) + " of " + f.name +
                     " vs its floor (what every answer reads + its parts)",
           std::to_string(src.files_opened()), std::to_string(policy_floor), fmt("%.2fx", r),
           node_on_h100 ? "<= 1.05x, <= 70 files" : "<= 1.05x", ""},
          r <= 1.05 && (!node_on_h100 || src.files_opened() <= 70));
    }
    xs_cores.push_back(f.cores);
    ys_files.push_back(fr.opened);
  }
  {
    double slope = loglog_slope(xs_cores, ys_files);
    // Cores x GPUs would show as files growing with the product; per-core files stay one per core.
    bool per_core_one = true;
    for (const auto& fr : results) {
      int sib = 0;
      for (const auto& p : fr.read) sib += kind_of(p) == "core siblings";
      per_core_one = per_core_one && sib == fr.f.cores;
    }
    add(cfg,
        {"2", "files opened vs cores, log-log slope over the 5 machines (1.0 = linear); per-core reads == cores",
         fmt("slope %.2f", slope), per_core_one ? "1 read/core" : "MORE than 1 read/core", "-", "<= 1.05, 1 read/core",
         ""},
        slope <= 1.05 && per_core_one);
  }

  // ---- row 3: time per CPU across sizes ----------------------------------------------------
  {
    std::vector<double> xs, ys;
    std::string per;
    for (const auto& fr : results) {
      xs.push_back(fr.f.cpus);
      ys.push_back(fr.full_ns);
      per += (per.empty() ? "" : ", ") + fr.f.name + " " + fmt_time(fr.full_ns / fr.f.cpus) + "/CPU";
    }
    double slope = loglog_slope(xs, ys);
    std::vector<double> xl(xs.begin() + 1, xs.end()), yl(ys.begin() + 1, ys.end());
    double slope_large = loglog_slope(xl, yl);
    notes.push_back("row 3: load+bind time per CPU: " + per);
    add(cfg,
        {"3", "load+bind time vs CPUs (2..1152), fitted log-log exponent (96..1152 only: " + fmt("%.2f)", slope_large),
         fmt("exponent %.2f", slope), "1.00 = linear", "-", "<= 1.15", ""},
        slope <= 1.15 && slope_large <= 1.15);
  }

  // ---- row 4: ScopedAffinity apply + restore vs the bare system calls --------------------------
  {
    cpu_set_t all;
    CPU_ZERO(&all);
    sched_getaffinity(0, sizeof all, &all);
    gpuaff::CpuSet allowed;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) allowed.set(c);
    // A real change of mask: the first allowed CPU alone (the thread stays
    // there between samples, so no migration is timed on either side).
    gpuaff::CpuSet target;
    target.set(allowed.first());
    cpu_set_t tgt;
    CPU_ZERO(&tgt);
    CPU_SET(allowed.first(), &tgt);
    auto guarded = [&] {
      auto g = gpuaff::ScopedAffinity::create(target);
      if (!g) die("ScopedAffinity::create failed: " + std::string(g.error().message()));
    };
    auto bare = [&] {
      cpu_set_t saved;
      sched_getaffinity(0, sizeof saved, &saved);
      sched_setaffinity(0, sizeof tgt, &tgt);
      sched_setaffinity(0, sizeof saved, &saved);
    };
    Pair p = compare(cfg, guarded, bare);
    double ratio = p.a_ns / p.b_ns;
    add(cfg,
        {"4", "ScopedAffinity create+restore vs sched_getaffinity + 2x sched_setaffinity", fmt_time(p.a_ns),
         fmt_time(p.b_ns), fmt("%.2fx", ratio) + fmt(" (paired %.2fx)", p.paired), "<= 1.3x", ""},
        ratio <= 1.3);
  }

  // ---- row 5: a spawn under a guard vs the same spawn without one ---------------------------
  {
    gpuaff::CpuSet allowed = *gpuaff::thread_affinity();
    auto bare = [] {
      pid_t pid;
      char arg0[] = "/bin/true";
      char* args[] = {arg0, nullptr};
      if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, args, environ) != 0) die("posix_spawn /bin/true failed");
      int st;
      waitpid(pid, &st, 0);
    };
    // The guard binds to the whole allowed set, so both children may run on
    // the same CPUs and only the guard's own cost differs.
    auto guarded = [&] {
      auto g = gpuaff::ScopedAffinity::create(allowed);
      if (!g) die("ScopedAffinity::create failed: " + std::string(g.error().message()));
      bare();
    };
    // The library's own entry point: the guard, argv handling, posix_spawnp, Child::wait.
    auto library = [&] {
      auto c = gpuaff::spawn({"/bin/true"}, gpuaff::SpawnOptions{.cpus = allowed});
      if (!c) die("gpuaff::spawn failed: " + std::string(c.error().message()));
      (void)c->wait();
    };
    Config c2 = cfg;
    c2.sample_ms = std::max(cfg.sample_ms, cfg.quick ? 1.0 : 20.0);  // a spawn is ~1 ms: several per sample
    timer = Timer::self_and_children;
    Pair p = compare(c2, guarded, bare);
    Pair l = compare(c2, library, bare);
    timer = Timer::wall;
    Pair w = compare(c2, guarded, bare);
    timer = Timer::thread_cpu;
    double added = p.a_ns / p.b_ns - 1;
    add(cfg,
        {"5", "posix_spawn(/bin/true) + waitpid under a ScopedAffinity vs without (CPU, parent + child)",
         fmt_time(p.a_ns), fmt_time(p.b_ns), fmt("%+.1f%%", added * 100) + fmt(" (paired %+.1f%%)", (p.paired - 1) * 100),
         "< +5%", ""},
        added < 0.05);
    double ladded = l.a_ns / l.b_ns - 1;
    add(cfg,
        {"5", "gpuaff::spawn + Child::wait (bound) vs posix_spawn + waitpid (CPU, parent + child)", fmt_time(l.a_ns),
         fmt_time(l.b_ns), fmt("%+.1f%%", ladded * 100) + fmt(" (paired %+.1f%%)", (l.paired - 1) * 100), "(info)", ""},
        true, false);
    double wadded = w.a_ns / w.b_ns - 1;
    add(cfg,
        {"5", "guarded vs bare spawn, wall time (includes waiting for a CPU on a loaded machine)", fmt_time(w.a_ns),
         fmt_time(w.b_ns), fmt("%+.1f%%", wadded * 100) + fmt(" (paired %+.1f%%)", (w.paired - 1) * 100), "(info)", ""},
        true, false);
  }

  // ---- row 6: compile time (measured by run.sh) --------------------------------------------
  // --compile=n=N,vector=S,umbrella=S,one=S,light=S[,umbrella_pch=S,light_pch=S][,base=COMMIT,base_umbrella=S,base_light=S]
  if (!cfg.compile.empty()) {
    std::map<std::string, std::string> c;
    std::string item;
    for (std::size_t at = 0; at <= cfg.compile.size();) {
      std::size_t end = cfg.compile.find(',', at);
      if (end == std::string::npos) end = cfg.compile.size();
      item = cfg.compile.substr(at, end - at);
      std::size_t eq = item.find('=');
      if (eq == std::string::npos) die("--compile: '" + item + "' is not NAME=VALUE");
      c[item.substr(0, eq)] = item.substr(eq + 1);
      at = end + 1;
    }
    auto seconds = [&](const std::string& k) {
      auto it = c.find(k);
      if (it == c.end()) return -1.0;
      char* end = nullptr;
      double s = std::strtod(it->second.c_str(), &end);
      if (end == it->second.c_str() || *end != '\0' || s < 0) die("--compile: " + k + "=" + it->second + " is not seconds");
      return s;
    };
    double v = seconds("vector");
    if (v < 0 || seconds("umbrella") < 0 || seconds("one") < 0 || c.count("n") == 0)
      die("--compile needs n, vector, umbrella and one (benchmarks/run.sh writes it)");
    std::string base = c.count("base") ? c["base"] : "";
    // `before`: the same TU against the base commit's headers, in the same loop.
    auto row = [&](const char* id, const std::string& what, const std::string& key, const std::string& base_key,
                   double target) {
      double s = seconds(key);
      if (s < 0) return;
      std::string compared = fmt("%.2f s", v);
      double b = base_key.empty() ? -1 : seconds(base_key);
      std::string ratio = fmt("%+.2f s", s - v);
      if (b >= 0) ratio += fmt(" (before: %+.2f s)", b - v);
      add(cfg, {id, what, fmt("%.2f s", s), compared, ratio, target > 0 ? fmt("< +%.1f s", target) : "(info)", ""},
          target <= 0 || s - v < target, target > 0);
    };
    std::string n = c["n"];
    row("6", "compile -O2 (CPU s): TU with <gpuaff/gpuaff.hpp> + bind(t, 0, NodePolicy{}) vs TU with <vector> (median of " + n +
                 (base.empty() ? ")" : "; before: the same TU at " + base + ")"),
        "umbrella", "base_umbrella", 1.2);
    row("6b", "compile -O2 (CPU s): the light path, one policy's header <gpuaff/policy/node.hpp> + the same call" +
                  std::string(base.empty() ? "" : "; before: <gpuaff/bindings.hpp> at " + base),
        "one", "base_light", 0.6);
    row("6c", "compile -O2 (CPU s): row 6's TU with <gpuaff/gpuaff.hpp> precompiled (target_precompile_headers)",
        "umbrella_pch", "", 0);
    row("6d", "compile -O2 (CPU s): row 6e's TU with <gpuaff/bindings.hpp> precompiled", "light_pch", "", 0);
    row("6e", "compile -O2 (CPU s): <gpuaff/bindings.hpp> (every policy, no reader) + the same call" +
                  std::string(base.empty() ? "" : "; before: the same TU at " + base),
        "light", "base_light", 0);
  } else {
    add(cfg, {"6", "compile time: measured by benchmarks/run.sh only", "-", "-", "-", "< +1.2 s; one policy < +0.6 s", ""}, true,
        false);
  }

  // ---- row 7: policy evaluation alone vs the load ------------------------------------------
  // The whole table (every GPU x 9 policies, bind_table) against the load; then,
  // as information, what one rank computes: one bind() of its GPU with one policy.
  for (auto& fr : results) {
    const std::string root = fr.f.root;
    gpuaff::Topology t = load_or_die(root);
    auto policies = [&] { sink = sink + bind_everything(t); };
    auto one_each = [&] { sink = sink + bind_one_each(t); };
    for (gpuaff::SysfsDetail detail : {rank_detail, gpuaff::SysfsDetail::full}) {
      auto load = [&] {
        gpuaff::SysfsSource src(options_for(root, detail));
        auto lt = src.load();
        sink = sink + static_cast<int>(lt.has_value());
      };
      Pair p = compare(cfg, policies, load);
      double share = p.a_ns / p.b_ns;
      bool rank = detail == rank_detail;
      if (rank) {
        fr.policy_ns = p.a_ns;
        fr.load_ns = p.b_ns;
      }
      add(cfg,
          {"7", "policies alone (bind_table: " + std::to_string(fr.f.gpus) + " GPUs x 9) vs SysfsSource::load (" +
                    detail_name(detail) + "), " + fr.f.name,
           fmt_time(p.a_ns), fmt_time(p.b_ns), fmt("%.1f%%", share * 100), rank ? "< 5%" : "(info)", ""},
          share < 0.05, rank);
      if (!rank) continue;
      Pair one = compare(cfg, one_each, load);
      double one_ns = one.a_ns / 9;
      add(cfg,
          {"7", "one binding (what one rank computes: bind() of GPU " + std::to_string(fr.f.gpus - 1) +
                    ", mean of the 9 policies) vs SysfsSource::load (binding), " + fr.f.name,
           fmt_time(one_ns), fmt_time(one.b_ns), fmt("%.2f%%", one_ns / one.b_ns * 100), "(info)", ""},
          true, false);
    }
  }

  // ---- row 8: whole gpuaff processes vs /bin/true -----------------------------------------
  // What a launcher pays per rank for the binary: exec, dynamic loading, the
  // sysfs read and the binding, exit; /bin/true is the floor of any process.
  // `--version` reads nothing, so it shows the loading alone; gpuaff-hwloc's
  // `--version` shows what loading libhwloc (and libudev) adds to every run.
  if (!cfg.tool.empty()) {
    const std::string h100 = cfg.fixtures + "/dgx-h100";
    auto process = [](std::vector<std::string> words) {
      return [words]() mutable {
        std::vector<char*> args;
        for (auto& w : words) args.push_back(w.data());
        args.push_back(nullptr);
        char* no_env[] = {nullptr};  // no *_VISIBLE_DEVICES or launcher variables from the shell
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        pid_t pid;
        if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), no_env) != 0) die("posix_spawn " + words[0] + " failed");
        posix_spawn_file_actions_destroy(&fa);
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die(words[0] + " failed (wait status " + std::to_string(st) + ")");
      };
    };
    std::vector<std::function<void()>> fns{process({cfg.tool, "bind", "--root", h100, "--gpu", "0"}),
                                           process({cfg.tool, "--version"}), process({"/bin/true"})};
    if (!cfg.hwloc_tool.empty()) fns.push_back(process({cfg.hwloc_tool, "--version"}));
    Config c2 = cfg;
    c2.sample_ms = std::max(cfg.sample_ms, cfg.quick ? 1.0 : 20.0);  // a process is ~1 ms: several per sample
    for (Timer t : {Timer::self_and_children, Timer::wall}) {
      timer = t;
      std::vector<double> m = compare_all(c2, fns);
      std::string clock = t == Timer::wall ? "wall time" : "CPU, parent + child";
      add(cfg,
          {"8", "process: gpuaff bind --root dgx-h100 --gpu 0 vs /bin/true (" + clock + ")", fmt_time(m[0]),
           fmt_time(m[2]), fmt("%.1fx", m[0] / m[2]), "(info)", ""},
          true, false);
      add(cfg,
          {"8", "process: gpuaff --version vs /bin/true (" + clock + ")", fmt_time(m[1]), fmt_time(m[2]),
           fmt("%.1fx", m[1] / m[2]), "(info)", ""},
          true, false);
      if (m.size() > 3)
        add(cfg,
            {"8", "process: gpuaff-hwloc --version vs /bin/true (" + clock + "; loads libhwloc, libudev)",
             fmt_time(m[3]), fmt_time(m[2]), fmt("%.1fx", m[3] / m[2]), "(info)", ""},
            true, false);
    }
    timer = Timer::thread_cpu;
  } else {
    add(cfg, {"8", "whole gpuaff processes: the tool is not built (-DGPUAFF_BUILD_TOOLS=OFF)", "-", "-", "-", "(info)", ""},
        true, false);
  }

  // ---- row 9: gpuaff doctor on a live process ----------------------------------------------
  // What a monitor pays per check of one rank: the whole `gpuaff doctor` process
  // planning on the 224-CPU dgx-h100 root (full read: NICs included) and reading
  // this benchmark's own /proc entries (environ, every thread's status, numa_maps).
  // Its verdict does not matter here (exit 0 healthy or 7 not), only its cost.
  if (!cfg.tool.empty()) {
    std::string pid = std::to_string(::getpid());
    std::vector<std::string> words{cfg.tool, "doctor", "--root", cfg.fixtures + "/dgx-h100", "--pid", pid, "--gpu", "0",
                                   "--format", "json"};
    auto doctor = [words]() mutable {
      std::vector<char*> args;
      for (auto& w : words) args.push_back(w.data());
      args.push_back(nullptr);
      char* no_env[] = {nullptr};
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
      pid_t child;
      if (posix_spawn(&child, args[0], &fa, nullptr, args.data(), no_env) != 0) die("posix_spawn gpuaff doctor failed");
      posix_spawn_file_actions_destroy(&fa);
      int st = 0;
      waitpid(child, &st, 0);
      if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 7))
        die("gpuaff doctor failed (wait status " + std::to_string(st) + ")");
    };
    auto floor = [] {
      char* args[] = {const_cast<char*>("/bin/true"), nullptr};
      char* no_env[] = {nullptr};
      pid_t child;
      if (posix_spawn(&child, "/bin/true", nullptr, nullptr, args, no_env) != 0) die("posix_spawn /bin/true failed");
      int st = 0;
      waitpid(child, &st, 0);
    };
    Config c2 = cfg;
    c2.sample_ms = std::max(cfg.sample_ms, cfg.quick ? 1.0 : 20.0);
    timer = Timer::wall;
    std::vector<double> m = compare_all(c2, {doctor, floor});
    timer = Timer::thread_cpu;
    add(cfg,
        {"9", "process: gpuaff doctor --root dgx-h100 --pid <this benchmark> --gpu 0 vs /bin/true (wall time)",
         fmt_time(m[0]), fmt_time(m[1]), fmt("%.1fx", m[0] / m[1]), "< 100 ms", ""},
        m[0] < 100e6);
  }

  // ---- callgrind instruction counts (measured by run.sh --callgrind) ------------------------
  if (!cfg.instructions.empty()) notes.push_back("callgrind instructions: " + cfg.instructions);

  // ---- conditions and the table -------------------------------------------------------------
  struct utsname u {};
  uname(&u);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("gpuaff_bench: %ld online CPUs, load average %.2f %.2f %.2f at the end, kernel %s, %s%s\n",
              sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2], u.release,
#ifdef GPUAFF_HAS_HWLOC
              ("hwloc " + std::to_string(HWLOC_API_VERSION >> 16) + "." + std::to_string((HWLOC_API_VERSION >> 8) & 0xff) +
               " API")
                  .c_str(),
#else
              "no hwloc",
#endif
              cfg.quick ? ", QUICK MODE (3 rounds, numbers meaningless)" : "");
  std::printf("medians of %d interleaved rounds per variant (A B A B ...); times are per operation, in the\n"
              "calling thread's CPU time (user + system); rows 5 and 8: CPU time of this process and its children\n\n",
              cfg.rounds);
  print_table();
  std::puts("");
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  if (!cfg.quick) std::printf("\n%s\n", all_hold ? "every target holds" : "some targets do not hold (see benchmarks/README.md)");
  return 0;
}
