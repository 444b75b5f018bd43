// SPDX-License-Identifier: Apache-2.0
#pragma once
// SysfsSource: a Topology from a root directory laid out like `/` (the live
// machine, or a recording made by `gpuaff record`). docs/contract.md section 1
// lists the paths. Every path below is relative to the root; symlinks are followed
// inside the root (real sys/bus/pci/devices/* entries are symlinks into
// sys/devices/pci*; absolute targets are re-rooted, ".." stops at the root).
//
// What is read, in order, and what happens when a file is absent
// (cpu = sys/devices/system/cpu, node = sys/devices/system/node, pci = sys/bus/pci/devices):
//
// | file                                          | when read                         | if missing                                  |
// |-----------------------------------------------|-----------------------------------|---------------------------------------------|
// | cpu/online                                    | always                            | the fallback below (noted; empty: the same) |
// | cpu/present, then cpu/possible                | only when cpu/online is missing   | the cpuN directories; none: error           |
// | cpu/cpuN/online                               | only when cpu/online is missing   | CPU counts as online (cpu0 has none; empty: |
// |                                               |                                   | online too, noted)                          |
// | cpu/cpuN/topology/core_cpus_list              | first online CPU of each core     | thread_siblings_list, core_cpus,            |
// | (part: cores)                                 |                                   | thread_siblings (masks); none, and no other |
// |                                               |                                   | CPU's list names it: a core of its own      |
// |                                               |                                   | (noted)                                     |
// | cpu/cpuN/topology/physical_package_id         | first online CPU of each package  | -1: package unknown (noted; see            |
// |                                               |                                   | read_packages)                              |
// | cpu/cpuN/topology/package_cpus_list           | same                              | core_siblings_list, package_cpus,           |
// |                                               |                                   | core_siblings; none: package id per core    |
// | cpu/cpuF/cache/indexK/{level,type}            | F = first online CPU, K = 0,1,..  | no `level` nor index directory: end of the  |
// | (part: caches)                                |                                   | caches (none at all: no core complexes); a  |
// |                                               |                                   | broken level or type: index skipped; if it  |
// |                                               |                                   | could be the last level, no core complex    |
// |                                               |                                   | (noted)                                     |
// | cpu/cpuN/cache/indexL/shared_cpu_list         | L = last-level Unified/Data cache | shared_cpu_map; none: cpuN is in no cache   |
// |                                               | of cpuF; first CPU of each group  | group; not naming cpuN: level ignored, no   |
// |                                               |                                   | core complex (noted)                        |
// | node/online                                   | always                            | node/possible (nodes without a directory    |
// |                                               |                                   | are then skipped), else (or empty) the      |
// |                                               |                                   | nodeN directories (noted); no node          |
// |                                               |                                   | directory at all (CONFIG_NUMA off): one     |
// |                                               |                                   | node 0 holding every online CPU, distance   |
// |                                               |                                   | 10 (noted). Nodes listing the same CPUs:    |
// |                                               |                                   | one node (noted)                            |
// | node/nodeN/cpulist                            | each node                         | cpumap; none: error. Empty: memory-only     |
// |                                               |                                   | (noted; a plan for a device on it while     |
// |                                               |                                   | online CPUs are in no node: an error)       |
// | node/nodeN/distance (part: distances)         | each node                         | distances left empty (optional). A row of   |
// |                                               |                                   | one entry per node/possible node or node    |
// |                                               |                                   | directory: picked by node id (noted)        |
// | proc/self/status                              | always (live: Mems_allowed only)  | recording: allowed = online CPUs, mems      |
// |                                               |                                   | unknown (empty). Cpus_allowed_list, else    |
// |                                               |                                   | Cpus_allowed; Mems_allowed_list, else       |
// |                                               |                                   | Mems_allowed; lines missing: same defaults  |
// | pci (directory listing)                       | always                            | no PCI devices                              |
// | pci/DEV/class                                 | every device                      | device skipped (error if in extra_pci);     |
// |                                               |                                   | noted if `vendor` names a GPU vendor        |
// | pci/DEV/vendor                                | display or accelerator (0x1200)   | not a GPU, skipped (noted); an extra_pci    |
// |                                               | class devices, extra_pci; not for | device reads as vendor 0 (noted)            |
// |                                               | GPUs the NVIDIA driver lists      |                                             |
// | pci/DEV/{device,numa_node}                    | GPUs and extra_pci devices        | device 0; numa_node -1                      |
// | pci/DEV/local_cpulist                         | GPUs and extra_pci devices        | local_cpus; none (or empty, noted):         |
// |                                               |                                   | has_local_cpus = false                      |
// | (node/nodeN of a device's numa_node)          | GPUs and extra_pci devices        | error naming it and the numa_node file      |
// | proc/driver/nvidia/gpus (directory listing)   | always                            | every NVIDIA GPU is the process's           |
// | proc/driver/nvidia/gpus/BDF/information       | NVIDIA GPUs                       | no UUID                                     |
// | the same, its `Device Minor:` line; then       | probe_device_nodes: every GPU the | the GPU stays the process's (noted)         |
// | dev/nvidiaM (O_PATH; opened only when it is   | driver lists                      |                                             |
// | the character device 195:M)                   |                                   |                                             |
// | NICs, their names, GPU numa_status            | SysfsDetail::full only            | source/nics.hpp has its own table           |
//
// Parts (SysfsOptions::needs, TopologyParts): cores, packages, caches,
// distances and NICs are read only when the answer needs them with
// SysfsDetail::binding; with SysfsDetail::full every part is read, and one the
// answer does not need that fails is left out with a note (docs/contract.md
// section 1, "What each answer reads").
//
// One device's answer (SysfsOptions::focus, LoadFocus): with binding detail a
// load for one device reads less than the table: the driver's list instead of
// every device's class where it exists, that device's numa_node (every visible
// GPU's for exclusive and core-complex), its node's cpulist, and the parts of
// that node only; see read_focused() and docs/contract.md section 1.
//
// When proc/driver/nvidia/gpus exists, an NVIDIA GPU it does not list is not the
// process's (a container given some of the host's GPUs): it stays in host_gpus,
// goes to hidden_gpus, and is never a visible GPU. With probe_device_nodes (a
// batch job with CUDA_VISIBLE_DEVICES set: load_request() decides), a GPU the
// driver lists whose device node dev/nvidiaM this process may not open (EPERM
// or EACCES: a scheduler's device cgroup, as Slurm's ConstrainDevices) is
// dropped from that list the same way (docs/contract.md section 2).
//
// SysfsDetail::binding (what one rank's binding needs) leaves out: node/nodeN/distance;
// pci/DEV/device of GPUs (extra_pci devices keep it; the process's NVIDIA GPUs keep
// it when there are several and CUDA_DEVICE_ORDER is known and not PCI_BUS_ID:
// device_order_warning() compares them); pci/DEV/local_cpulist (and
// local_cpus) of every device whose numa_node is >= 0 (the policies read a device's
// local CPUs only to place one whose numa_node is -1); and the NVIDIA information
// files unless a visibility list (SysfsOptions::visible or visible_later) names UUIDs.
//
// Not read: cpu/cpuN/topology/{core_id,die_id,cluster_cpus_list} (the sibling
// and package lists say all a binding needs), node/has_cpu (an empty cpulist
// says the same), PCI entries whose names are not PCI addresses.
//
// Cost: one sibling list per core, two files per package, 2 x (cache levels) + 1
// for the cache probe plus one list per cache group, two per node, and per PCI
// device one `class`, plus five more per GPU (`vendor` also for other display-
// class devices): it grows with cores, never with CPUs x GPUs. files_opened() and
// files_read() report it. SysfsDetail::binding reads one file per node and two
// per GPU (`vendor`, `numa_node`; three with `local_cpulist` where numa_node is -1,
// four with the UUID file where one is needed).
//
// Live (the root canonicalises to "/"): the allowed set is the calling thread's
// sched_getaffinity (CPU_ALLOC-sized, grown until the kernel accepts it) and
// proc/self/status supplies only Mems_allowed.
//
// Present but empty, malformed or out-of-range content is an error for every
// file above (exceptions: an empty node cpulist means a memory-only node; an
// unknown cache `type` is simply not Unified/Data). Errors name the full path
// (root included) and say what to do. Results: every CPU set is restricted to
// online CPUs, `allowed` too (the recorded set, when it names CPUs that are not
// online, is kept in `recorded_allowed`); cores, packages, cache groups hold
// online CPUs only. Refused as no kernel writes them (source/validate.hpp): two
// node cpulists sharing a CPU, two PCI entries naming one device. Whatever was
// assumed goes to Topology::notes, one line each naming the root-relative file.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/status_field.hpp"
#include "gpuaff/os/thread_mask.hpp"
#include "gpuaff/policy/priority.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/source.hpp"
#include "gpuaff/source/nics.hpp"
#include "gpuaff/source/sysfs_reader.hpp"
#include "gpuaff/source/validate.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// How much a load reads beyond what bindings use.
enum class SysfsDetail {
  full,     ///< everything in the table above (topo, record, JSON)
  binding,  ///< skip what no policy reads (what a rank needs; `gpuaff bind` and `exec`):
            ///< PCI `device` (0) and node `distance` (empty); `local_cpulist` of a
            ///< device whose numa_node is >= 0 (local_cpus empty, has_local_cpus false:
            ///< policies look at local_cpus only to place a device whose numa_node is
            ///< -1); the NVIDIA `information` files unless a visibility list names
            ///< UUIDs (uuid empty)
};

/// The one answer a load is for (SysfsOptions::focus): a device, and whether
/// the answer splits the device's node among the node's GPUs. A focused load
/// reads only what that answer depends on (docs/contract.md section 1, "What
/// each answer reads"); see read_focused().
struct LoadFocus {
  std::optional<int> gpu{};         ///< a GPU index, after the visibility list (visible_later)
  std::optional<PciAddress> pci{};  ///< or a PCI device by address (a GPU or any other device)
  /// The answer splits the node among its GPUs (exclusive, core-complex):
  /// every visible GPU's node is read.
  bool peers = false;
};

struct SysfsOptions {
  std::string root = "/";                ///< directory laid out like `/`; "/" reads this machine
  VisibleDevices visible{};              ///< GPU visibility (see source/visible.hpp)
  std::vector<PciAddress> extra_pci{};   ///< non-GPU devices to read too (e.g. --pci of a NIC)
  SysfsDetail detail = SysfsDetail::full;
  /// A visibility list the caller applies itself after the load (select_visible_gpus);
  /// not applied here. With SysfsDetail::binding the UUID files are read when it, or
  /// `visible`, names UUIDs (with_environment() is applied to both).
  std::optional<VisibleDevices> visible_later{};
  /// The parts of the topology the caller's answer needs (policy_needs() and
  /// the like). With SysfsDetail::binding only these are read; with
  /// SysfsDetail::full everything is read, and a part the answer does not
  /// need that cannot be read is left empty with a note instead of failing
  /// the load.
  TopologyParts needs = TopologyParts::policies();
  /// With the cores, read how fast the platform says each core is
  /// (Core::priority, Topology::priority_source; read_core_priorities).
  bool priorities = false;
  /// Ask each NVIDIA GPU the driver lists whether this process may open its
  /// device node (dev/nvidiaM, M its `Device Minor:`), as CUDA and NVML do,
  /// and treat one it may not (EPERM, EACCES) as hidden. Opening the node of a
  /// GPU without persistence mode initialises it, and only a scheduler's
  /// device cgroup hides GPUs this way: load_request() sets it in a batch job
  /// (SLURM_JOB_ID, PBS_JOBID or LSB_JOBID) with CUDA_VISIBLE_DEVICES set.
  bool probe_device_nodes = false;
  /// Whose GPUs are numbered (numbered_vendor, docs/contract.md section 6):
  /// the other vendors' GPUs are not GPUs of this topology (they stay in
  /// pci_devices).
  GpuVendor vendor = GpuVendor::automatic;
  /// Binding detail only: the load is for one device's answer (LoadFocus), and
  /// reads what that answer depends on where it can (read_focused()): the
  /// resulting Topology holds the device's node and, for other GPUs, what the
  /// answer needs of them (their nodes with `peers`), nothing more. Where the
  /// answer needs more (a device whose numa_node is -1, a memory-only node, a
  /// machine without the NVIDIA driver's list) or a file it depends on cannot
  /// be read, the load reads the whole machine as without focus, so answers,
  /// errors and their wording are the same.
  std::optional<LoadFocus> focus{};
};

/// Reads a Topology from sysfs under a root (see the table at the top of this file).
class SysfsSource {
 public:
  explicit SysfsSource(SysfsOptions options) : options_(std::move(options)) {}

  /// Reads everything afresh.
  /// Errors: Errc::not_found (root or required file missing, extra_pci device absent),
  /// Errc::parse_error (empty or malformed file), Errc::out_of_range (a number or CPU id
  /// beyond what the field or gpuaff allows), Errc::io_error (a file cannot be read),
  /// Errc::system_error (sched_getaffinity failed), and the GPU selection errors of
  /// select_visible_gpus(). File errors name the file, root included.
  /// A template of one unused parameter, as every reading step below: a translation
  /// unit compiles the reader only if it calls load() (see config.hpp).
  template <class = void>
  Result<Topology> load();
  /// load() into `t`, which must be default-constructed: where the caller
  /// keeps the machine, nothing is copied.
  template <class = void>
  Result<void> load(Topology& t);

  /// Files the last load() tried to open (missing ones included: probing costs
  /// the same). Directory listings are not counted.
  int files_opened() const { return opened_; }
  /// Root-relative paths of the files the last load() read, in order, each once.
  const std::vector<std::string>& files_read() const { return read_; }
  /// The GPUs the driver listed that the last load() dropped because this
  /// process may not open their device nodes (probe_device_nodes).
  const std::vector<PciAddress>& denied_gpus() const { return denied_; }
  const SysfsOptions& options() const { return options_; }

 private:
  /// load() of the whole machine (no focus, or a focused read that could
  /// not answer). Out of line: its parts are stack a focused read does not
  /// touch.
  template <class Reader>
  [[gnu::noinline]] Result<void> load_whole(Reader& r, Topology& t);

  SysfsOptions options_;
  int opened_ = 0;
  std::vector<std::string> read_;
  std::vector<PciAddress> denied_;
};

static_assert(TopologySource<SysfsSource>);

namespace detail {

/// Whether --visible-devices or CUDA_VISIBLE_DEVICES (as `v` holds them) has an entry
/// that is not an index: selecting then needs the GPUs' UUIDs (or reports a bad entry,
/// which is worded the same either way only if the UUIDs were read).
template <class = void>
bool names_uuids(const VisibleDevices& v) {
  for (const auto* list : {&v.list, &v.cuda_visible_devices}) {
    if (!list->has_value()) continue;
    for (char c : **list)
      if (!(c >= '0' && c <= '9') && c != ',' && c != ' ' && c != '\t') return true;
  }
  return false;
}

// The sections of a load, in the order of the table at the top of this file.
// Each reads with the load's one SysfsReader and fills its part of `t`.

inline constexpr std::string_view sysfs_cpu = "sys/devices/system/cpu/";

/// The CPU numbers of the cpuN directories under sys/devices/system/cpu.
template <class = void>
Result<CpuSet> cpu_directories(SysfsReader& r) {
  const std::string dir(sysfs_cpu.substr(0, sysfs_cpu.size() - 1));
  GPUAFF_TRY(auto names, r.list(dir));
  CpuSet ids;
  for (const auto& n : names) {
    std::string_view digits = std::string_view(n).substr(n.size() > 3 && n.compare(0, 3, "cpu") == 0 ? 3 : n.size());
    long long id = 0;
    if (digits.empty() || (digits.size() > 1 && digits[0] == '0') ||
        leading_number(digits, 10, 1'000'000, id) != digits.size())
      continue;  // cpufreq, cpuidle, vulnerabilities, ...
    if (id >= CpuSet::capacity)
      return r.bad(Errc::out_of_range, dir + "/" + n, "CPU ", id, " is beyond the ", CpuSet::capacity,
                   " CPUs gpuaff supports");
    ids.set(static_cast<int>(id));
  }
  return ids;
}

/// read_online_cpus where cpu/online is missing or empty (`empty`): the CPUs
/// present, possible, or with a cpuN directory, each one's cpuN/online asked.
/// Out of line: its sets are stack the usual read does not touch.
template <class = void>
[[gnu::noinline]] Result<void> online_from_cpu_files(SysfsReader& r, Topology& t, const std::string& cpu,
                                                     const std::string& rel, bool empty, std::string& s) {
  GPUAFF_TRY(int which, r.first_of({cpu + "present", cpu + "possible"}, s));
  CpuSet candidates;
  std::string from;
  if (which >= 0) {
    from = cpu + (which == 0 ? "present" : "possible");
    GPUAFF_TRY(candidates, r.cpus(from, s, Form::list, Empty::error));
  } else {
    GPUAFF_TRY(candidates, cpu_directories(r));
    if (candidates.empty())
      return r.bad(Errc::not_found, rel, "is ", empty ? "empty" : "missing",
                   ", and cpu/present, cpu/possible and every cpuN directory are missing");
    from = "the cpuN directories of " + cpu.substr(0, cpu.size() - 1);
  }
  CpuSet off;
  CpuSet blank;  // cpuN/online present but empty: counted as online
  for (int c : candidates) {
    std::string orel = cpu_dir(c) + "/online";
    GPUAFF_TRY(bool h, r.get(orel, s));
    if (!h || trim(s).empty()) {
      t.online.set(c);  // no per-CPU file: not hot-pluggable, so online
      if (h) blank.set(c);
      continue;
    }
    GPUAFF_TRY(long long on, r.integer(orel, s, 0, 1));
    if (on == 1) t.online.set(c);
    else off.set(c);
  }
  std::string note = rel + (empty ? " is empty" : " is missing") + ": online CPUs taken from " + from + " (" +
                     candidates.to_list() + ")";
  if (!off.empty()) note += " minus CPUs " + off.to_list() + ", whose cpuN/online reads 0";
  if (!blank.empty()) note += "; cpuN/online is empty for CPUs " + blank.to_list() + ", counted as online";
  t.notes.push_back(std::move(note));
  return {};
}

/// cpu/online; without it (older kernels, some sandboxes and dumps),
/// cpu/present, else cpu/possible, else the cpuN directories, minus the CPUs
/// whose own `online` reads 0. The fallback is noted.
template <class = void>
Result<void> read_online_cpus(SysfsReader& r, Topology& t) {
  const std::string cpu(sysfs_cpu);
  const std::string rel = cpu + "online";
  std::string s;
  GPUAFF_TRY(bool have, r.get(rel, s));
  // An empty list names no CPU, and a running kernel has one: read as missing.
  bool empty = have && trim(s).empty();
  if (have && !empty) {
    GPUAFF_TRY(t.online, r.cpus(rel, s, Form::list, Empty::error));
  } else {
    GPUAFF_TRY_VOID(online_from_cpu_files(r, t, cpu, rel, empty, s));
  }
  if (t.online.empty()) return r.bad(Errc::parse_error, rel, "names no online CPU");
  return {};
}

/// One sibling list per core (read for its first online CPU). Returns each
/// CPU's core index, for packages without member lists.
template <class = void>
Result<std::vector<int>> read_cores(SysfsReader& r, Topology& t, const CpuSet* only = nullptr) {
  CpuSet covered;
  CpuSet unlisted;  // CPUs with no sibling list of their own
  std::string s;
  const CpuSet which = only != nullptr ? t.online & *only : t.online;  // a focused load: one node's CPUs
  // At most one core per CPU: growing the vector one core at a time moved
  // each core again and again (and copied the heap words of a set past CPU 1023).
  t.cores.reserve(t.cores.size() + static_cast<std::size_t>(which.count()));
  for (int c : which) {
    if (covered.test(c)) continue;
    std::string dir = cpu_dir(c) + "/topology/";
    GPUAFF_TRY(auto file, r.list_or_mask(dir, {"core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"},
                                         Empty::error, s));
    if (!file) {
      unlisted.set(c);  // a sibling's list may still name it
      continue;
    }
    GPUAFF_TRY(CpuSet sib, r.own_group(*file, c, t.online, covered, "sibling list"));
    t.cores.push_back(Core{sib, -1});
    covered |= sib;
  }
  // No list names them (a kernel or dump without topology/ files): each is a
  // core of its own, which is what a machine without SMT looks like.
  CpuSet alone = unlisted - covered;
  for (int c : alone) t.cores.push_back(Core{CpuSet::single(c), -1});
  if (!unlisted.empty())  // read out of order: back to sorted by lowest thread
    std::sort(t.cores.begin(), t.cores.end(), [](const Core& a, const Core& b) { return a.first() < b.first(); });
  if (!alone.empty()) {
    t.notes.push_back(std::string(sysfs_cpu) + "cpuN/topology/core_cpus_list (and thread_siblings_list, core_cpus, "
                      "thread_siblings) is missing for CPUs " + alone.to_list() +
                      ": each taken as a core of its own (no SMT siblings known)");
  }
  std::vector<int> core_index(static_cast<std::size_t>(t.online.last() + 1), -1);
  for (std::size_t i = 0; i < t.cores.size(); ++i)
    for (int x : t.cores[i].threads) core_index[static_cast<std::size_t>(x)] = static_cast<int>(i);
  return core_index;
}

/// How fast the platform says each core is (Core::priority), from the first
/// of these per-CPU files whose values differ between cores, read for each
/// core's first thread: `cpufreq/base_frequency` (Intel SST-BF: the
/// high-priority cores run at a higher base frequency), `acpi_cppc/highest_perf`
/// (preferred cores: Intel Turbo Boost Max 3.0, AMD), `cpu_capacity` (arm64:
/// big and little cores). Where each file present gives one class (values
/// within priority_tolerance), the first present is kept: every core alike.
/// A missing file is -1 for that core; an unreadable or garbled one too,
/// with a note (never an error: the binding goes ahead without that hint).
/// Nothing present: a note, and no priority_source.
template <class = void>
Result<void> read_core_priorities(SysfsReader& r, Topology& t) {
  constexpr std::array<std::string_view, 3> sources{"cpufreq/base_frequency", "acpi_cppc/highest_perf", "cpu_capacity"};
  std::string s;
  std::optional<std::pair<std::string_view, std::vector<long long>>> alike;
  for (std::string_view src : sources) {
    std::vector<long long> values;
    bool any = false;
    for (const Core& c : t.cores) {
      std::string rel = cpu_dir(c.first()) + std::string("/") + std::string(src);
      // Unreadable (a FIFO, a folder, a link out of the root, an I/O error)
      // is unknown, as garbled is: a speed hint never fails a binding.
      auto got = r.get(rel, s);
      if (!got) t.notes.push_back(std::string(got.error().message()) + ": that core's priority is unknown");
      bool have = got && *got;
      long long v = -1;
      if (have) {
        auto n = r.integer(rel, s, 0, 1LL << 40);
        if (n) v = *n;
        else t.notes.push_back(std::string(n.error().message()) + ": that core's priority is unknown");
      }
      values.push_back(v);
      any = any || v >= 0;
    }
    if (!any) continue;
    std::vector<int> cls = priority_classes(values);
    if (*std::max_element(cls.begin(), cls.end()) == 0) {
      if (!alike) alike.emplace(src, std::move(values));
      continue;
    }
    alike.emplace(src, std::move(values));
    break;
  }
  if (!alike) {
    t.notes.push_back(std::string(sysfs_cpu) + "cpuN: no cpufreq/base_frequency, acpi_cppc/highest_perf or "
                      "cpu_capacity: every core counts as one priority class");
    return {};
  }
  t.priority_source = alike->first;
  for (std::size_t i = 0; i < t.cores.size(); ++i) t.cores[i].priority = alike->second[i];
  return {};
}

/// One id and one member list per package; without member lists (an old or
/// odd kernel), the package id of each core. Packages end up sorted by id.
/// A missing physical_package_id (architectures that do not provide it) counts
/// as -1, "unknown", like the -1 some firmware gives: every CPU of unknown
/// package goes into one package with id -1. Grouping them by NUMA node
/// instead would guess: a socket may hold several nodes (SNC, NPS4), and a
/// `socket` binding narrower than the real socket would leave out CPUs that
/// are as close. One package for all of them is wide but never wrong; `node`
/// still binds to the GPU's node. Both cases are noted.
template <class = void>
Result<void> read_packages(SysfsReader& r, Topology& t, const std::vector<int>& core_index) {
  CpuSet covered;
  CpuSet id_missing;
  CpuSet id_unknown;
  bool lists = true;
  std::string s;
  for (int c : t.online) {
    if (covered.test(c)) continue;
    std::string dir = cpu_dir(c) + "/topology/";
    std::string idrel = dir + "physical_package_id";
    GPUAFF_TRY(bool have, r.get(idrel, s));
    long long id = -1;
    if (have) {
      GPUAFF_TRY(id, r.integer(idrel, s, -1, 1'000'000));
    }
    std::optional<CpuFile> file;
    if (lists) {
      GPUAFF_TRY(file, r.list_or_mask(dir, {"package_cpus_list", "core_siblings_list", "package_cpus", "core_siblings"},
                                      Empty::error, s));
      lists = file.has_value();
    }
    // Without member lists, a package is the cores (or, when cores were not
    // read, the CPUs) that each give its id.
    CpuSet members;
    if (core_index.empty()) members.set(c);
    else members = t.cores[static_cast<std::size_t>(core_index[static_cast<std::size_t>(c)])].threads;
    if (file) {
      GPUAFF_TRY(members, r.own_group(*file, c, t.online, covered, "package list"));
    }
    covered |= members;
    if (!have) id_missing |= members;
    else if (id < 0) id_unknown |= members;
    auto same = std::find_if(t.packages.begin(), t.packages.end(), [&](const Package& p) { return p.id == id; });
    if (same == t.packages.end()) t.packages.push_back(Package{static_cast<int>(id), members});
    else same->cpus |= members;
  }
  std::sort(t.packages.begin(), t.packages.end(), [](const Package& a, const Package& b) { return a.id < b.id; });
  for (auto& core : t.cores)
    if (const Package* p = t.package_of_cpu(core.first())) core.package = p->id;
  const std::string what = std::string(sysfs_cpu) + "cpuN/topology/physical_package_id";
  const char* assumed = ": package unknown; these CPUs form one package (id -1), so `socket` binds to all of them";
  if (!id_missing.empty()) t.notes.push_back(what + " is missing for CPUs " + id_missing.to_list() + assumed);
  if (!id_unknown.empty()) t.notes.push_back(what + " is -1 for CPUs " + id_unknown.to_list() + assumed);
  return {};
}

/// The last-level Unified or Data cache of the first online CPU (its index
/// directory, -1 when it has no caches, or when which one is last is not
/// known) and that cache's level. An index whose `level` or `type` is
/// missing, empty or malformed is skipped; if it could be the last level
/// (its level unknown, or not below the chosen one), the last level is not
/// known and no core complex is read. Either way noted.
template <class = void>
Result<std::pair<int, long long>> find_last_level_cache(SysfsReader& r, Topology& t) {
  std::string base = cpu_dir(t.online.first()) + "/cache/index";
  std::pair<int, long long> llc{-1, 0};
  long long broken_level = -1;  // highest level among broken indexes; 16: unknown
  std::string broken;
  auto add_broken = [&broken](const std::string& file, std::string_view why) {
    broken += std::string(broken.empty() ? "" : ", ") + file + std::string(" (") + std::string(why) + ")";
  };
  std::string s;
  for (int k = 0; k < 32; ++k) {
    std::string dir = base + std::to_string(k) + "/";
    GPUAFF_TRY(bool have, r.get(dir + "level", s));
    if (!have) {
      // The indexes are numbered from 0 without gaps: a missing `level` ends
      // them, unless the directory is there (a broken index).
      if (!r.is_directory(dir.substr(0, dir.size() - 1))) break;
      broken_level = 16;
      add_broken(dir + "level", "missing");
      continue;
    }
    auto level = r.integer(dir + "level", s, 1, 15);
    GPUAFF_TRY(bool have_type, r.get(dir + "type", s));
    std::string_view type = trim(s);
    bool data = type == "Unified" || type == "Data";
    bool known = data || type == "Instruction";  // all the kernel writes (cacheinfo.c)
    if (!level && known && !data) {
      // An instruction cache is never the last level, whatever its level says.
      add_broken(dir + "level", "malformed; a " + escape_control(type.substr(0, 16)) + " cache");
      continue;
    }
    if (!level || !known) {
      broken_level = std::max(broken_level, level ? *level : 16);
      add_broken(dir + (level ? "type" : "level"),
                 !level ? "malformed" : !have_type ? "missing" : type.empty() ? "empty" : "malformed");
      continue;
    }
    if (data && *level > llc.second) llc = {k, *level};
  }
  if (broken.empty()) return llc;
  if (broken_level >= llc.second) {
    t.notes.push_back("cache indexes unreadable: " + broken +
                      "; the last-level cache is not known, so no core complex is read (core-complex binds the "
                      "node's CPUs as one group)");
    return std::pair<int, long long>{-1, 0};
  }
  t.notes.push_back("cache indexes unreadable: " + broken + "; ignored (none of them can be the last level)");
  return llc;
}

/// The groups of CPUs that share the last-level cache (core complexes). A
/// group that does not name the CPU it was read for says nothing true about
/// that level: the level is ignored (no core complex, noted).
template <class = void>
Result<void> read_cache_groups(SysfsReader& r, Topology& t, const CpuSet* only = nullptr) {
  GPUAFF_TRY(auto llc, find_last_level_cache(r, t));
  if (llc.first < 0) return {};
  CpuSet covered;
  std::string s;
  const CpuSet which = only != nullptr ? t.online & *only : t.online;  // a focused load: one node's groups
  for (int c : which) {
    if (covered.test(c)) continue;
    std::string dir = cpu_dir(c) + std::string("/cache/index") + std::to_string(llc.first) + "/";
    GPUAFF_TRY(auto file, r.list_or_mask(dir, {"shared_cpu_list", "shared_cpu_map"}, Empty::allowed, s));
    if (!file) continue;  // this CPU lacks that cache: it is in no group
    CpuSet group = file->cpus & t.online;
    if (!group.test(c)) {
      t.core_complexes.clear();
      t.notes.push_back(file->path + std::string(" does not name cpu") + std::to_string(c) + " itself (" +
                        (group.empty() ? std::string("empty") : group.to_list()) + "): the L" +
                        std::to_string(llc.second) + " cache is ignored, so no core complex is read (core-complex "
                        "binds the node's CPUs as one group)");
      return {};
    }
    GPUAFF_TRY(group, r.own_group(*file, c, t.online, covered, "cache group"));
    covered |= group;
    t.core_complexes.push_back(CacheGroup{static_cast<int>(llc.second), group});
  }
  return {};
}

/// The distances of one node, as node/nodeN/distance lists them.
template <class = void>
Result<std::vector<int>> parse_distances(const SysfsReader& r, const std::string& rel, std::string_view text) {
  std::string_view d = trim(text);
  if (d.empty()) return r.bad(Errc::parse_error, rel, "is empty");
  std::vector<int> out;
  std::size_t i = 0;
  while (i < d.size()) {
    std::size_t j = i;
    while (j < d.size() && d[j] != ' ' && d[j] != '\t' && d[j] != '\n') ++j;
    GPUAFF_TRY(long long v, r.integer(rel, d.substr(i, j - i), 0, 255));
    out.push_back(static_cast<int>(v));
    i = j;
    while (i < d.size() && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n')) ++i;
  }
  return out;
}

inline constexpr std::string_view sysfs_node = "sys/devices/system/node/";
/// A node's folder, root-relative: sys/devices/system/node/nodeN.
inline std::string node_folder(int id) { return std::string(sysfs_node) + "node" + std::to_string(id); }

/// The node ids of the nodeN directories under sys/devices/system/node.
template <class = void>
Result<std::vector<int>> node_directories(SysfsReader& r) {
  GPUAFF_TRY(auto names, r.list(sysfs_node.substr(0, sysfs_node.size() - 1)));
  std::vector<int> ids;
  for (const auto& n : names) {
    std::string_view digits = std::string_view(n).substr(n.size() > 4 && n.compare(0, 4, "node") == 0 ? 4 : n.size());
    long long id = 0;
    if (digits.empty() || (digits.size() > 1 && digits[0] == '0') ||
        leading_number(digits, 10, CpuSet::capacity, id) != digits.size() || id >= CpuSet::capacity)
      continue;
    ids.push_back(static_cast<int>(id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// Each node's distances, one per node of Topology::nodes. A row may have one
/// entry per node in node/possible or per node directory instead, which is
/// more than the nodes read when a node is offline (node 0 offline: node/online
/// is "1" and node1/distance is "20 10"): the entries are then picked by node
/// id, and that is noted. A row that fits none of these is an error.
template <class = void>
Result<void> align_distances(SysfsReader& r, Topology& t, const std::vector<std::string>& files,
                             const std::string& list_rel) {
  std::vector<std::pair<std::string, std::vector<int>>> layouts;  // what a row's entries may stand for
  bool layouts_read = false;
  std::string s;
  for (std::size_t k = 0; k < t.nodes.size(); ++k) {
    auto& n = t.nodes[k];
    if (n.distances.empty() || n.distances.size() == t.nodes.size()) continue;
    if (!layouts_read) {
      layouts_read = true;
      std::string prel = std::string(sysfs_node) + "possible";
      GPUAFF_TRY(bool have, r.get(prel, s));
      if (have) {
        GPUAFF_TRY(CpuSet possible, r.cpus(prel, s, Form::list, Empty::error));
        layouts.emplace_back(prel, std::vector<int>(possible.begin(), possible.end()));
      }
      GPUAFF_TRY(auto dirs, node_directories(r));
      layouts.emplace_back("the node directories", std::move(dirs));
    }
    const std::pair<std::string, std::vector<int>>* fit = nullptr;
    for (const auto& l : layouts) {
      if (l.second.size() != n.distances.size()) continue;
      bool all = std::all_of(t.nodes.begin(), t.nodes.end(), [&](const NumaNode& m) {
        return std::find(l.second.begin(), l.second.end(), m.id) != l.second.end();
      });
      if (all) {
        fit = &l;
        break;
      }
    }
    if (fit == nullptr)
      return r.bad(Errc::parse_error, files[k], "has ", n.distances.size(), " distances but ", list_rel, " names ",
                   t.nodes.size(), " nodes (and neither node/possible nor the node directories name ",
                   n.distances.size(), ")");
    std::vector<int> picked;
    for (const auto& m : t.nodes) {
      auto at = std::find(fit->second.begin(), fit->second.end(), m.id) - fit->second.begin();
      picked.push_back(n.distances[static_cast<std::size_t>(at)]);
    }
    t.notes.push_back(files[k] + " has one distance per node of " + fit->first + std::string(" (") + std::to_string(fit->second.size()) +
                      "), not per node of " + list_rel + ": the distances to nodes " +
                      [&] {
                        CpuSet ids;
                        for (const auto& m : t.nodes) ids.set(m.id);
                        return ids.to_list();
                      }() +
                      " picked by node id");
    n.distances = std::move(picked);
  }
  return {};
}

/// Nodes that list exactly the same CPUs: a firmware table that gave one
/// node's CPUs to several proximity domains (hwloc merges them too). The
/// kernel never maps a CPU to two nodes, so they are read as one node, the
/// lowest id; a device that names another of them is placed on that one
/// (read_pci_device, through SysfsReader::node_aliases). Noted. A partial
/// overlap has no such reading and stays an error (source/validate.hpp).
template <class = void>
void merge_identical_nodes(SysfsReader& r, Topology& t, std::vector<std::string>& cpu_files) {
  for (std::size_t j = 1; j < t.nodes.size();) {
    auto same = std::find_if(t.nodes.begin(), t.nodes.begin() + static_cast<std::ptrdiff_t>(j),
                             [&](const NumaNode& n) { return !n.cpus.empty() && n.cpus == t.nodes[j].cpus; });
    if (same == t.nodes.begin() + static_cast<std::ptrdiff_t>(j)) {
      ++j;
      continue;
    }
    std::size_t i = static_cast<std::size_t>(same - t.nodes.begin());
    t.notes.push_back(cpu_files[j] + " lists the same CPUs as " + cpu_files[i] + " (" + t.nodes[j].cpus.to_list() +
                      std::string("): nodes ") + std::to_string(t.nodes[i].id) + std::string(" and ") + std::to_string(t.nodes[j].id) +
                      std::string(" read as one node ") + std::to_string(t.nodes[i].id) + ", where devices on node " +
                      std::to_string(t.nodes[j].id) + " are placed");
    r.found.node_aliases.emplace_back(t.nodes[j].id, t.nodes[i].id);
    t.nodes.erase(t.nodes.begin() + static_cast<std::ptrdiff_t>(j));
    cpu_files.erase(cpu_files.begin() + static_cast<std::ptrdiff_t>(j));
  }
}

/// NUMA nodes from node/online (else node/possible, else the nodeN
/// directories, noted): each node's CPUs. No node directory at all: one node
/// 0. Nodes listing identical CPUs are merged (noted), a partial overlap is
/// an error (source/validate.hpp); online CPUs in no node are noted. Returns
/// where the node ids came from (for read_distances).
template <class = void>
Result<std::string> read_nodes(SysfsReader& r, Topology& t) {
  const std::string node(sysfs_node);
  std::string s;
  GPUAFF_TRY(int which, r.first_of({node + "online", node + "possible"}, s));
  bool empty_list = which >= 0 && trim(s).empty();
  if (empty_list) {
    // An empty list names no node, and every machine has one: read as missing.
    t.notes.push_back(node + (which == 0 ? "online" : "possible") + " is empty: the nodes taken from the nodeN directories");
    which = -1;
  }
  CpuSet ids;
  std::string lrel;
  bool from_list = which >= 0;
  if (from_list) {
    lrel = node + (which == 0 ? "online" : "possible");
    GPUAFF_TRY(ids, r.cpus(lrel, s, Form::list, Empty::error));
  } else {
    GPUAFF_TRY(auto dirs, node_directories(r));
    if (dirs.empty()) {
      if (r.is_directory("sys/devices/system/node"))
        return r.bad(Errc::not_found, node + "online", "is missing, and so are node/possible and every nodeN directory");
      // CONFIG_NUMA=n (ia64, s390 and small kernels): one node holding every CPU and all memory.
      r.found.node_tree = false;
      t.nodes.push_back(NumaNode{0, t.online, {10}});
      t.notes.push_back("sys/devices/system/node is missing (a kernel without NUMA): one node 0 holding every online "
                        "CPU and all memory, distance 10");
      return std::string();
    }
    for (int id : dirs) ids.set(id);
    lrel = "the nodeN directories of " + node.substr(0, node.size() - 1);
    if (!empty_list) t.notes.push_back(node + "online and node/possible are missing (an older kernel): the nodes taken "
                                       "from the nodeN directories (" + ids.to_list() + ")");
  }
  bool from_possible = which == 1 || !from_list;
  std::vector<std::string> cpu_files;
  for (int id : ids) {
    std::string dir = node_folder(id) + "/";
    GPUAFF_TRY(auto file, r.list_or_mask(dir, {"cpulist", "cpumap"}, Empty::allowed, s));
    if (!file) {
      // A possible node that never came up has no directory; one that has a
      // directory but no CPU list lost it, and its devices cannot be placed.
      if (from_possible && !r.is_directory(dir.substr(0, dir.size() - 1))) continue;
      return r.bad(Errc::not_found, dir + "cpulist", "is missing (and so is cpumap), but ", lrel, " lists node ", id);
    }
    cpu_files.push_back(file->path);
    t.nodes.push_back(NumaNode{id, file->cpus & t.online, {}});
  }
  if (t.nodes.empty()) return r.bad(Errc::parse_error, lrel, "names no node with a directory");
  merge_identical_nodes(r, t, cpu_files);
  if (auto o = find_node_overlap(t.nodes))
    return r.bad(Errc::parse_error, cpu_files[o->second], "and ", r.shown(cpu_files[o->first]), ": ",
                 node_overlap_text(t.nodes, *o), "; record the tree again with `gpuaff record`");
  if (CpuSet lost = cpus_in_no_node(t); !lost.empty()) {
    // Name the nodes that list no CPU: one of them likely lost its list.
    std::string where = node + "nodeN/cpulist";
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      if (t.nodes[i].cpus.empty()) where += (where.back() == ')' ? ", " : " (empty: ") + cpu_files[i];
    if (where.find(" (empty: ") != std::string::npos) where += ')';
    t.notes.push_back(no_node_note(lost, where));
  }
  return lrel;
}

/// Each node's distances (node/nodeN/distance), aligned to Topology::nodes;
/// `list_rel` is where read_nodes found the node ids. A node without the
/// file leaves every node's distances empty (unknown).
template <class = void>
Result<void> read_distances(SysfsReader& r, Topology& t, const std::string& list_rel) {
  if (list_rel.empty()) return {};  // no node tree: read_nodes set the one distance
  std::vector<std::string> files;
  std::string s;
  for (auto& n : t.nodes) {
    std::string drel = node_folder(n.id) + "/distance";
    GPUAFF_TRY(bool have, r.get(drel, s));
    if (have) {
      GPUAFF_TRY(n.distances, parse_distances(r, drel, s));
    }
    files.push_back(std::move(drel));
  }
  return align_distances(r, t, files, list_rel);
}

/// The memory nodes the calling thread may allocate on (its cpuset's
/// mems_allowed, which proc/self/status prints as Mems_allowed_list), from
/// get_mempolicy(MPOL_F_MEMS_ALLOWED): one system call, where a read of the
/// status file makes the kernel format all of it (some 25 times longer; a
/// plan per rank pays it on every call). nullopt where the call is refused:
/// a seccomp profile without it (docker's default, without CAP_SYS_NICE), a
/// kernel without NUMA (ENOSYS).
template <class = void>
std::optional<NodeSet> kernel_mems_allowed() {
  NodeMask m{};
  if (sys().get_mems_allowed(m.data(), nodemask_maxnode) != 0) return std::nullopt;
  return from_nodemask(m);
}

/// The allowed CPUs and memory nodes: live, the calling thread's affinity and
/// its allowed memory nodes from the kernel (proc/self/status's
/// Mems_allowed_list only where the kernel refuses to say:
/// kernel_mems_allowed()); recorded, both from proc/self/status.
template <class = void>
Result<void> read_allowed(SysfsReader& r, Topology& t) {
  const std::string rel = "proc/self/status";
  std::string s;
  bool have = false;
  std::optional<NodeSet> live_mems;
  if (r.live()) {
    GPUAFF_TRY(t.allowed, thread_affinity());
    live_mems = kernel_mems_allowed();
    if (!live_mems) {
      GPUAFF_TRY(have, r.get(rel, s));
    }
  } else {
    GPUAFF_TRY(have, r.get(rel, s));
    t.allowed = t.online;  // no recorded allowed set: everything online
    if (have) {
      if (auto v = status_field(s, "Cpus_allowed_list")) {
        GPUAFF_TRY(t.allowed, r.cpus(rel + " (Cpus_allowed_list)", *v, Form::list, Empty::error));
      } else if (auto m = status_field(s, "Cpus_allowed")) {
        GPUAFF_TRY(t.allowed, r.cpus(rel + " (Cpus_allowed)", *m, Form::mask, Empty::error));
        if (t.allowed.empty()) return r.bad(Errc::parse_error, rel, "Cpus_allowed is an empty mask");
      } else {
        t.notes.push_back(rel + " has no Cpus_allowed_list: the allowed CPUs taken to be every online CPU");
      }
    } else {
      t.notes.push_back(rel + " is missing: the allowed CPUs taken to be every online CPU, the allowed memory nodes "
                        "unknown");
    }
  }
  // A recorded set may name every possible CPU (0-127 on a 16-CPU machine) or
  // offline ones: bindings are drawn from the online CPUs it names.
  CpuSet usable = t.allowed & t.online;
  if (usable != t.allowed) {
    if (usable.empty())
      return r.bad(Errc::parse_error, rel, "the allowed CPUs (", t.allowed.to_list(), ") are none of the online CPUs (",
                   t.online.to_list(), ")");
    t.notes.push_back(rel + ": the allowed CPUs " + t.allowed.to_list() + " name CPUs " + (t.allowed - usable).to_list() +
                      " that are not online; bindings use " + usable.to_list());
    t.recorded_allowed = t.allowed;
    t.allowed = usable;
  }
  if (live_mems) {
    t.mems_allowed = *live_mems;
  } else if (have) {
    if (auto v = status_field(s, "Mems_allowed_list")) {
      GPUAFF_TRY(t.mems_allowed, r.cpus(rel + " (Mems_allowed_list)", *v, Form::list, Empty::error));
    } else if (auto m = status_field(s, "Mems_allowed")) {
      GPUAFF_TRY(t.mems_allowed, r.cpus(rel + " (Mems_allowed)", *m, Form::mask, Empty::error));
    }
  }
  return {};
}

inline constexpr std::string_view sysfs_pci = "sys/bus/pci/devices";

/// The PCI devices under sys/bus/pci/devices, by address; every one of
/// `extra` must be among them. The kernel names each entry DDDD:BB:DD.F in
/// lower case; other names that still parse as an address ("18:00.0", an
/// 8-digit domain, upper case, a leading space) are read as that address and
/// noted, and two entries naming the same device are an error naming both
/// (a copy beside the real entry would make a second GPU and shift every later
/// index). Entries that are no PCI address at all are skipped.
template <class = void>
Result<std::vector<std::pair<PciAddress, std::string>>> list_pci_devices(SysfsReader& r, Topology& t,
                                                                         const std::vector<PciAddress>& extra) {
  GPUAFF_TRY(auto names, r.list(sysfs_pci));
  std::vector<std::pair<PciAddress, std::string>> devices;
  for (auto& n : names) {
    auto a = PciAddress::parse(n);
    if (a) devices.emplace_back(*a, std::move(n));
  }
  std::stable_sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<PciAddress> addresses;
  for (const auto& d : devices) addresses.push_back(d.first);
  const std::string dir = std::string(sysfs_pci) + "/";
  if (auto dup = find_duplicate_address(addresses)) {
    const auto& a = devices[dup->first];
    const auto& b = devices[dup->second];
    return r.bad(Errc::parse_error, dir + escape_control(b.second), "and ", r.shown(dir + escape_control(a.second)),
                 " both name PCI device ",
                 a.first.to_string(), "; the kernel names it ", a.first.to_string(), " only: remove the other entry");
  }
  for (const auto& [addr, name] : devices)
    if (name != addr.to_string().view())
      t.notes.push_back(dir + "'" + escape_control(name) + "' is not the kernel's name for a PCI device: read as " +
                        std::string(addr.to_string().view()));
  for (const auto& want : extra) {
    if (std::none_of(devices.begin(), devices.end(), [&](const auto& d) { return d.first == want; }))
      return fail(Errc::not_found, "PCI device ", want.to_string(), " is not in ", r.shown(sysfs_pci),
                  "; check the address with `lspci -D`");
  }
  return devices;
}

/// Where a GPU or `extra` device is: its numa_node (a node merged for listing
/// the same CPUs as another reads as that one) and, where the node does not
/// place it or with full detail, its local CPUs. A device whose numa_node
/// names a node the tree does not have is an error naming the node and the
/// numa_node file (a cut recording), never placed by its local CPUs. A
/// memory-only node is noted.
template <class = void>
Result<void> place_pci_device(SysfsReader& r, Topology& t, PciDevice& d, const std::string& dir, bool extra,
                              SysfsDetail detail) {
  std::string s;
  GPUAFF_TRY(bool have_node, r.get(dir + "numa_node", s));
  if (have_node) {
    GPUAFF_TRY(long long v, r.integer(dir + "numa_node", s, -1, CpuSet::capacity - 1));
    d.numa_node = r.found.read_as(static_cast<int>(v));
  }
  // A tree without a node directory reads as one node 0 holding every CPU (a
  // kernel without NUMA, or a dump that left the directory out). A GPU or a
  // named device on a node above 0 says the machine has more nodes than that:
  // the recording lost its node tree, and node 0 (every CPU) is no device's
  // node then, so nothing can be bound right from it.
  if (d.numa_node > 0 && (d.is_gpu() || extra) && !r.found.node_tree)
    return r.bad(Errc::parse_error, dir + "numa_node", "names NUMA node ", d.numa_node,
                 ", but the tree has no sys/devices/system/node: the kernel that wrote it has NUMA, so the recording "
                 "lost its node tree and the device's CPUs are unknown; record the root again");
  // A node the device names that the tree lacks: the recording was cut (or
  // damaged) before it, and the device's own node is what its binding depends
  // on. No guess from its local CPUs, which would bind it as the nodes the
  // tree kept (docs/contract.md section 1).
  if (d.numa_node >= 0 && (d.is_gpu() || extra) && t.find_node(d.numa_node) == nullptr) {
    return r.bad(Errc::parse_error, node_folder(d.numa_node), "is missing, but ", r.shown(dir + "numa_node"), " names node ",
                 d.numa_node, ": the recording is cut short or damaged; record the machine again with `gpuaff record`");
  }
  if (const NumaNode* n = d.numa_node >= 0 ? t.find_node(d.numa_node) : nullptr;
      n != nullptr && n->memory_only() && (d.is_gpu() || extra))
    t.notes.push_back(dir + std::string("numa_node names node ") + std::to_string(d.numa_node) + std::string(", whose ") +
                      node_folder(d.numa_node) + "/cpulist lists no CPU (a memory-only node): the device "
                      "is placed as one on a memory-only node");
  // Binding detail: a known node places the device; local CPUs only help with -1.
  if (detail == SysfsDetail::full || d.numa_node < 0) {
    GPUAFF_TRY(auto local, r.list_or_mask(dir, {"local_cpulist", "local_cpus"}, Empty::allowed, s));
    if (local && local->cpus.empty()) {
      // The kernel gives a device without a node every CPU: an empty list says nothing.
      t.notes.push_back(local->path + " is empty: the device's local CPUs are unknown");
    } else if (local) {
      d.local_cpus = local->cpus & t.online;
      d.has_local_cpus = true;
    }
  }
  return {};
}

/// One PCI device's class, and for GPUs and `extra` devices vendor, device,
/// node and local CPUs (what a detail level leaves out is in the table at the
/// top). nullopt: a device no Topology keeps. A device whose `class` or
/// `vendor` is missing is not a GPU and is left out, noted when its other file
/// says it could have been one; an `extra` device, which was asked for, is
/// kept with class or vendor 0 (its binding needs only its node and CPUs).
/// Then place_pci_device(), unless `place` is false (a focused load places
/// only the devices its answer needs: read_focused()).
template <class = void>
Result<std::optional<PciDevice>> read_pci_device(SysfsReader& r, Topology& t, const PciAddress& addr,
                                                 const std::string& name, bool extra, SysfsDetail detail,
                                                 std::uint32_t* class_seen = nullptr, bool place = true) {
  std::string dir = std::string(sysfs_pci) + "/" + name + "/";
  std::string s;
  PciDevice d;
  d.address = addr;
  GPUAFF_TRY(bool have_class, r.get(dir + "class", s));
  if (have_class) {
    GPUAFF_TRY(long long cls, r.hex(dir + "class", s, 0xffffff));
    d.class_code = static_cast<std::uint32_t>(cls);
    if (class_seen != nullptr) *class_seen = d.class_code;
  } else if (!extra) {
    // Worth a note only if the vendor says this could be a GPU. The device is
    // left out whatever its vendor file holds, so no content of it is an error.
    auto have_vendor = r.get(dir + "vendor", s);
    long long v = 0;
    std::string_view digits = trim(s);
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits.remove_prefix(2);
    if (have_vendor && *have_vendor && !digits.empty() && leading_number(digits, 16, 0x10000, v) == digits.size() &&
        v <= 0xffff && is_gpu_vendor(static_cast<std::uint16_t>(v)))
      t.notes.push_back(dir + std::string("class is missing: device ") + std::string(addr.to_string().view()) +
                        " is not counted as a GPU");
    return std::optional<PciDevice>();
  }
  bool full = extra;
  // The NVIDIA driver lists its GPUs by address: their vendor is known.
  const auto& driver = r.found.driver_gpus;
  bool nvidia_listed = driver && std::find(driver->begin(), driver->end(), addr) != driver->end();
  if (nvidia_listed && is_gpu_candidate_class(d.class_code)) {
    d.vendor = pci_vendor::nvidia;
    full = full || d.is_gpu();
  } else if (is_gpu_candidate_class(d.class_code) || extra) {
    GPUAFF_TRY(bool have, r.get(dir + "vendor", s));
    if (!have && extra) {
      // A --pci target is placed by its node and local CPUs; its vendor says nothing about that.
      t.notes.push_back(dir + std::string("vendor is missing: device ") + std::string(addr.to_string().view()) + " read with vendor 0");
    } else if (!have) {
      t.notes.push_back(dir + std::string("vendor is missing: device ") + std::string(addr.to_string().view()) +
                        " (a display or accelerator class) is not counted as a GPU");
      return std::optional<PciDevice>();
    }
    if (have) {
      GPUAFF_TRY(long long v, r.hex(dir + "vendor", s, 0xffff));
      d.vendor = static_cast<std::uint16_t>(v);
    }
    full = full || d.is_gpu();
  }
  if (!full) return std::optional<PciDevice>();
  bool have_dev = false;
  if (detail == SysfsDetail::full || extra) {
    GPUAFF_TRY(have_dev, r.get(dir + "device", s));
  }
  if (have_dev) {
    // No binding depends on the device id (the extra devices are placed by
    // node, the GPUs' ids feed a warning): an unreadable one is noted, not fatal.
    auto v = r.hex(dir + "device", s, 0xffff);
    if (v) d.device = static_cast<std::uint16_t>(*v);
    else t.notes.push_back(dir + "device is malformed ('" + escape_control(trim(s).substr(0, 24)) + "'): device id 0");
  }
  if (place) GPUAFF_TRY_VOID(place_pci_device(r, t, d, dir, extra, detail));
  return std::optional<PciDevice>(d);
}

/// The PCI devices; `network` (optional) gets the network-class ones for read_nics.
template <class = void>
Result<void> read_pci(SysfsReader& r, Topology& t, const SysfsOptions& options,
                      std::vector<std::pair<PciAddress, std::string>>* network = nullptr) {
  GPUAFF_TRY(auto devices, list_pci_devices(r, t, options.extra_pci));
  for (const auto& [addr, name] : devices) {
    bool extra = std::find(options.extra_pci.begin(), options.extra_pci.end(), addr) != options.extra_pci.end();
    std::uint32_t cls = 0;
    GPUAFF_TRY(auto d, read_pci_device(r, t, addr, name, extra, options.detail, &cls));
    if (d) t.pci_devices.push_back(*d);
    if (network != nullptr && is_network_class(cls)) network->emplace_back(addr, name);
  }
  return {};
}

/// The NVIDIA GPUs the driver lists for this process (one directory per GPU,
/// named by its PCI address), or nullopt when the root has no such directory.
/// Inside a container it lists only the container's GPUs (docs/contract.md
/// sections 1 and 2). Entries that are not PCI addresses are skipped.
template <class = void>
Result<std::optional<std::vector<PciAddress>>> read_driver_gpus(SysfsReader& r, Topology& t) {
  using Out = std::optional<std::vector<PciAddress>>;
  bool missing = false;
  GPUAFF_TRY(auto names, r.list(nvidia_driver_gpus, &missing));
  if (missing) return Out();
  auto addresses = driver_gpu_addresses(names);
  if (addresses.empty() && !names.empty()) {
    // Drivers before about 2012 named the entries 0, 1, ... : the list says
    // nothing about which GPUs are the process's, so it is not used.
    t.notes.push_back(std::string(nvidia_driver_gpus) + " names no GPU by PCI address (an older driver's 0, 1, ...): "
                      "every NVIDIA GPU is taken as the process's");
    return Out();
  }
  return Out(std::move(addresses));
}

/// The character device major number of the NVIDIA GPUs' nodes (/dev/nvidiaM).
inline constexpr unsigned nvidia_device_major = 195;

/// Whether this process may open the device node of the GPU the driver lists
/// as `name` (docs/contract.md section 2): false only when dev/nvidiaM (M from
/// the `Device Minor:` line of its information file) is the character device
/// 195:M and opening it fails with EPERM or EACCES. Whatever else happens keeps
/// the GPU, with a note saying why nothing could be told.
template <class = void>
bool may_open_gpu_node(SysfsReader& r, Topology& t, const std::string& name) {
  std::string info = std::string(nvidia_driver_gpus) + "/" + name + "/information";
  std::string kept = ": cannot tell whether this process may open GPU " + name + "'s device node; kept as its GPU";
  std::string s;
  auto have = r.get(info, s);
  if (!have) {
    t.notes.push_back(std::string(have.error().message()) + kept);
    return true;
  }
  if (!*have) {
    t.notes.push_back(info + " is missing" + kept);
    return true;
  }
  auto field = status_field(s, "Device Minor");
  if (!field) {
    t.notes.push_back(info + " has no 'Device Minor:' line" + kept);
    return true;
  }
  long long dev_minor = 0;
  if (field->empty() || leading_number(*field, 10, 1LL << 20, dev_minor) != field->size() || dev_minor >= (1LL << 20)) {
    t.notes.push_back(info + ": 'Device Minor:' is '" + escape_control(field->substr(0, 24)) + "', not a minor number" +
                      kept);
    return true;
  }
  std::string node = std::string("dev/nvidia") + std::to_string(dev_minor);
  auto d = r.open_device(node, nvidia_device_major, static_cast<unsigned>(dev_minor));
  std::string expected = std::string("the character device ") + std::to_string(nvidia_device_major) + std::string(":") + std::to_string(dev_minor);
  if (d.path_error == ENOENT || d.path_error == ENOTDIR) {
    t.notes.push_back(node + " (" + expected + ") is missing" + kept);
    return true;
  }
  if (d.path_error != 0) {
    t.notes.push_back(node + " cannot be looked at (" + errno_text(d.path_error) + ")" + kept);
    return true;
  }
  if (!d.matches) {
    std::string what = d.type == S_IFCHR   ? std::string("the character device ") + std::to_string(major(d.rdev)) + ":" +
                                                 std::to_string(minor(d.rdev))
                       : d.type == S_IFBLK ? std::string("a block device")
                       : d.type == S_IFREG ? std::string("a regular file")
                       : d.type == S_IFLNK ? std::string("a symbolic link")
                       : d.type == S_IFDIR ? std::string("a directory")
                                           : std::string("not a device");
    t.notes.push_back(node + " is " + what + ", not " + expected + ", and was not opened" + kept);
    return true;
  }
  if (d.nodev) {
    t.notes.push_back(node + " is on a filesystem mounted nodev, where no device opens, and was not opened" + kept);
    return true;
  }
  if (d.open_error == EPERM || d.open_error == EACCES) {
    t.notes.push_back(node + " cannot be opened (" + errno_text(d.open_error) + "): GPU " + name +
                      " is not this process's (a device cgroup, such as Slurm's ConstrainDevices, hides it)");
    return false;
  }
  if (d.open_error != 0)
    t.notes.push_back(node + ": opening it failed with " + errno_text(d.open_error) + ", not EPERM" + kept);
  return true;
}

/// The driver's list less the GPUs whose device node this process may not
/// open (may_open_gpu_node), which go to `denied`.
template <class = void>
std::vector<PciAddress> probe_driver_gpus(SysfsReader& r, Topology& t, const std::vector<PciAddress>& driver,
                                          std::vector<PciAddress>& denied) {
  std::vector<PciAddress> kept;
  std::vector<PciAddress> in_order = driver;  // the notes in bus order, whatever the listing's
  std::sort(in_order.begin(), in_order.end());
  for (const auto& a : in_order) {
    if (may_open_gpu_node(r, t, std::string(a.to_string().view()))) kept.push_back(a);
    else denied.push_back(a);
  }
  return kept;
}

/// Binding detail leaves out PCI `device`; the CUDA_DEVICE_ORDER check needs it
/// for the NVIDIA GPUs when the order is known and is not PCI_BUS_ID and the
/// process has several of them (see device_order_warning()).
template <class = void>
Result<void> read_nvidia_device_ids(SysfsReader& r, Topology& t, std::vector<Gpu>& gpus,
                                    const std::optional<std::string>& order) {
  if (!order || detail::trim(*order) == "PCI_BUS_ID") return {};
  if (std::count_if(gpus.begin(), gpus.end(), [](const Gpu& g) { return g.pci.vendor == pci_vendor::nvidia; }) < 2)
    return {};
  std::string s;
  for (auto& g : gpus) {
    if (g.pci.vendor != pci_vendor::nvidia || g.pci.device != 0) continue;
    std::string rel = std::string(sysfs_pci) + std::string("/") + std::string(g.pci.address.to_string().view()) + "/device";
    GPUAFF_TRY(bool have, r.get(rel, s));
    if (!have) continue;
    auto v = r.hex(rel, s, 0xffff);
    if (!v) continue;  // the ids only feed device_order_warning(): without one there is nothing to compare
    g.pci.device = static_cast<std::uint16_t>(*v);
    for (auto& d : t.pci_devices)
      if (d.address == g.pci.address) d.device = g.pci.device;
  }
  return {};
}

/// An AMD GPU's compute partitions: `current_compute_partition` in its PCI
/// folder (SPX, DPX, TPX, QPX, CPX; amdgpu writes it on MI300-class GPUs),
/// 1 where the file is missing (an unpartitionable GPU, an older kernel; a
/// note when the GPU's available_compute_partition says it can be partitioned).
/// Errors: Errc::parse_error naming the file for another word: the GPU
/// numbering depends on it.
template <class = void>
Result<int> read_compute_partitions(SysfsReader& r, Topology& t, const PciAddress& a) {
  std::string dir = std::string("sys/bus/pci/devices/") + std::string(a.to_string().view());
  std::string rel = dir + "/current_compute_partition";
  std::string s;
  GPUAFF_TRY(bool have, r.get(rel, s));
  if (!have) {
    // A GPU that can be partitioned lists its modes: its current one missing is
    // a broken recording or driver, not an unpartitioned GPU; say what was assumed.
    GPUAFF_TRY(bool partitionable, r.get(dir + "/available_compute_partition", s));
    if (partitionable)
      t.notes.push_back(r.shown(rel) + " is missing though available_compute_partition lists modes: counted as one "
                        "GPU (SPX)");
    return 1;
  }
  std::string_view word = trim(s);
  if (int n = compute_partition_count(word); n > 0) return n;
  return r.bad(Errc::parse_error, rel, "holds '", word.substr(0, 20), "', not a compute partition mode (SPX, DPX, TPX, "
               "QPX, CPX); the GPU numbering depends on it: check the amdgpu driver");
}

/// The GPUs among the PCI devices, with NVIDIA UUIDs where needed: every one in
/// host_gpus, those the driver's list leaves out in hidden_gpus, and the rest
/// selected and indexed by the visibility lists.
template <class = void>
Result<void> read_gpus(SysfsReader& r, Topology& t, const SysfsOptions& options) {
  VisibleDevices visible = options.visible.with_environment();
  std::optional<VisibleDevices> later;
  if (options.visible_later) later = options.visible_later->with_environment();
  bool want_uuids = options.detail == SysfsDetail::full || names_uuids(visible) || (later && names_uuids(*later));
  const auto& driver = r.found.driver_gpus;
  std::vector<Gpu> all;
  std::string s;
  for (const auto& d : t.pci_devices) {
    if (!d.is_gpu()) continue;
    Gpu g;
    g.pci = d;
    if (d.vendor == pci_vendor::nvidia && want_uuids) {
      std::string rel = std::string("proc/driver/nvidia/gpus/") + std::string(d.address.to_string().view()) + "/information";
      GPUAFF_TRY(bool have, r.get(rel, s));
      if (have) {
        if (auto u = status_field(s, "GPU UUID")) {
          if (u->size() > 4 && u->substr(0, 4) == "GPU-" && u->size() <= decltype(g.uuid)::capacity) g.uuid = *u;
        }
      }
    }
    if (d.vendor == pci_vendor::amd) {
      GPUAFF_TRY(g.pci.compute_partitions, read_compute_partitions(r, t, d.address));
    }
    for (auto& other : t.pci_devices)
      if (other.address == d.address) other.compute_partitions = g.pci.compute_partitions;
    all.push_back(std::move(g));
  }
  // One runtime's numbering: an Intel display device beside NVIDIA GPUs is not CUDA's.
  std::uint16_t vendor = numbered_vendor(all, options.vendor);
  all = runtime_gpus(std::move(all), vendor);
  all = expand_partitions(std::move(all));  // HIP's numbering: a partitioned GPU's partitions in a row
  std::vector<Gpu> mine = process_gpus(all, driver, t.hidden_gpus);
  std::optional<std::string> order = visible.cuda_device_order;
  if (!order && later) order = later->cuda_device_order;
  if (options.detail == SysfsDetail::binding) GPUAFF_TRY_VOID(read_nvidia_device_ids(r, t, mine, order));
  for (std::size_t i = 0; i < all.size(); ++i) all[i].index = static_cast<int>(i);  // pci_devices are in bus order
  t.host_gpus = std::move(all);
  GPUAFF_TRY(t.gpus, select_visible_gpus(std::move(mine), visible));
  return {};
}

/// The node a device names, as a focused load places it: its numa_node, -1
/// when that file is missing (as a whole load reads it); nullopt when the
/// device is not there or the file is malformed.
template <class = void>
std::optional<int> focused_numa_node(SysfsReader& r, const PciAddress& a) {
  std::string dir = std::string(sysfs_pci) + "/" + std::string(a.to_string().view());
  std::string s;
  auto have = r.get(dir + "/numa_node", s);
  if (!have) return std::nullopt;
  if (!*have) return r.is_directory(dir) ? std::optional<int>(-1) : std::nullopt;
  auto v = r.integer(dir + "/numa_node", s, -1, CpuSet::capacity - 1);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

/// A focused load's device of numa_node -1: its local CPUs, as
/// place_pci_device() reads them (resolve_gpu_node may place it by them).
/// false: the file is malformed.
template <class = void>
bool focused_local_cpus(SysfsReader& r, Topology& t, const PciAddress& a) {
  std::string dir = std::string(sysfs_pci) + "/" + std::string(a.to_string().view()) + "/";
  std::string s;
  auto local = r.list_or_mask(dir, {"local_cpulist", "local_cpus"}, Empty::allowed, s);
  if (!local) return false;
  if (!*local) return true;
  if ((*local)->cpus.empty()) {
    t.notes.push_back((*local)->path + " is empty: the device's local CPUs are unknown");
    return true;
  }
  for (auto* gpus : {&t.gpus, &t.host_gpus})
    for (Gpu& g : *gpus)
      if (g.address() == a) {
        g.pci.local_cpus = (*local)->cpus & t.online;
        g.pci.has_local_cpus = true;
      }
  for (PciDevice& d : t.pci_devices)
    if (d.address == a) {
      d.local_cpus = (*local)->cpus & t.online;
      d.has_local_cpus = true;
    }
  return true;
}

/// The GPUs by every PCI device's class (and vendor, partitions), as a whole
/// load finds them, none placed yet. false: a file they rest on is malformed.
template <class = void>
bool gpus_by_class(SysfsReader& r, Topology& t, const SysfsOptions& o) {
  auto devices = list_pci_devices(r, t, {});
  if (!devices) return false;
  for (const auto& [addr, name] : *devices) {
    auto d = read_pci_device(r, t, addr, name, false, o.detail, nullptr, false);
    if (!d) return false;
    if (*d) t.pci_devices.push_back(**d);
  }
  return read_gpus(r, t, o).has_value();
}

/// A focused load of the only visible GPU of its node, under a policy that
/// splits the node: the warning that follows (one_gpu_warning) counts the
/// host's GPUs on that node. Their list comes from every PCI device's class
/// (read now where the driver's list stood for it), their numa_node each read
/// leniently: a file that cannot be read leaves that GPU out of the count,
/// which the warning rests on, not the answer. false: the scan failed.
template <class = void>
bool count_host_gpus(SysfsReader& r, Topology& t, const SysfsOptions& o, bool from_driver,
                     const PciAddress& target, int node) {
  if (from_driver) {
    Topology h;
    h.origin = t.origin;
    h.online = t.online;
    if (!gpus_by_class(r, h, o)) return false;
    t.host_gpus = std::move(h.host_gpus);
    t.hidden_gpus = std::move(h.hidden_gpus);
  }
  for (Gpu& g : t.host_gpus) {
    auto seen = std::find_if(t.gpus.begin(), t.gpus.end(), [&g](const Gpu& x) { return x.address() == g.address(); });
    if (g.address() == target) {
      g.pci.numa_node = node;
    } else if (seen != t.gpus.end() && seen->pci.numa_node >= 0) {
      g.pci.numa_node = seen->pci.numa_node;
    } else if (std::optional<int> n = focused_numa_node(r, g.address()); n && *n >= 0) {
      g.pci.numa_node = *n;
      g.pci.numa_node = r.found.read_as(g.pci.numa_node);
    }
  }
  return true;
}

/// Puts a focused load's device `a` on node `node`, wherever it is listed.
template <class = void>
void place_device(Topology& t, const PciAddress& a, int node) {
  for (auto* gpus : {&t.gpus, &t.host_gpus})
    for (Gpu& g : *gpus)
      if (g.address() == a) g.pci.numa_node = node;
  for (PciDevice& d : t.pci_devices)
    if (d.address == a) d.numa_node = node;
}

/// The process's GPUs for a focused load, in bus order, none placed yet: the
/// NVIDIA driver's list where it exists and its GPUs are the ones an index
/// counts (docs/contract.md section 6: it is then the list, and no PCI
/// device's `class` is read), true; else every PCI device's class, as a whole
/// load finds them, false. nullopt: a file they rest on is malformed.
template <class = void>
std::optional<bool> focused_gpus(SysfsReader& r, Topology& t, const SysfsOptions& o) {
  auto listed = read_driver_gpus(r, t);
  if (!listed) return std::nullopt;
  r.found.driver_gpus = *listed;
  bool from_driver =
      *listed && !(*listed)->empty() && (o.vendor == GpuVendor::automatic || o.vendor == GpuVendor::nvidia);
  if (!from_driver) {
    if (!gpus_by_class(r, t, o)) return std::nullopt;
    return false;
  }
  std::vector<PciAddress> driver = **listed;
  std::sort(driver.begin(), driver.end());
  // Each list is allocated once.
  t.gpus.reserve(t.gpus.size() + driver.size());
  t.pci_devices.reserve(t.pci_devices.size() + driver.size());
  for (const PciAddress& a : driver) {
    Gpu& g = t.gpus.emplace_back();
    g.pci.address = a;
    g.pci.vendor = pci_vendor::nvidia;
    g.pci.class_code = 0x030200;
    g.index = static_cast<int>(t.gpus.size()) - 1;
    t.pci_devices.push_back(g.pci);
  }
  t.host_gpus = t.gpus;
  return true;
}

/// Whether another node's list (`other`, of node `id`), read only to find
/// that it names the same CPUs as the focused device's node (`cpus`, read as
/// node `kept`), does. One that cannot be read, or names no online CPU, does
/// not, which may change the answer: said in a note naming it.
template <class = void>
bool same_node_cpus(Topology& t, const Result<std::optional<CpuFile>>& other, int id, const CpuSet& cpus,
                    int kept) {
  std::string why;
  if (!other) why = std::string(other.error().message());
  else if (!*other) why = node_folder(id) + "/cpulist is missing (and so is cpumap)";
  else if (((*other)->cpus & t.online).empty()) why = (*other)->path + " lists no online CPU";
  else return ((*other)->cpus & t.online) == cpus;
  t.notes.push_back(why + ": node " + std::to_string(id) + " is not taken to list the same CPUs as node " +
                    std::to_string(kept));
  return false;
}

/// Where a focused load's device lies: the CPUs of its node, and the node it
/// is placed on.
struct FocusedNode {
  CpuSet cpus;
  int kept = -1;  ///< the node read (a lower one listing the same CPUs stands for it); -1: every online CPU
};

/// The node of a focused load's device (numa_node `node`, -1: unknown). With
/// `all_nodes` every node as a whole load reads them (and the packages with
/// `packages`); else the device's node, and the lower-numbered ones only until
/// one lists the same CPUs (merge_identical_nodes: the device is then placed
/// there, said in a note). nullopt: a file the answer rests on is malformed,
/// or the node has no CPUs.
template <class = void>
std::optional<FocusedNode> focused_node(SysfsReader& r, Topology& t, int node, bool all_nodes, bool packages) {
  FocusedNode at;
  at.kept = node;
  if (all_nodes) {
    if (!read_nodes(r, t)) return std::nullopt;
    at.kept = r.found.read_as(at.kept);
    if (at.kept >= 0) {
      const NumaNode* n = t.find_node(at.kept);
      if (n == nullptr || n->cpus.empty()) return std::nullopt;
      at.cpus = n->cpus;
    } else {
      at.cpus = t.online;
    }
    if (packages && !read_packages(r, t, std::vector<int>())) return std::nullopt;
    return at;
  }
  std::string s;
  auto own = r.list_or_mask(node_folder(node) + "/", {"cpulist", "cpumap"}, Empty::allowed, s);
  if (!own || !*own) return std::nullopt;
  at.cpus = (*own)->cpus & t.online;
  if (at.cpus.empty()) return std::nullopt;
  // The lower nodes `ids`, in order, until one lists the same CPUs. false:
  // an id only guessed (`guessed`) has neither file, which is a node that
  // does not exist (sparse ids) or a node folder without its files (noted):
  // only the folder's listing tells them apart.
  auto merge_into_lower = [&](const std::vector<int>& ids, bool guessed) {
    for (int id : ids) {
      auto other = r.list_or_mask(node_folder(id) + "/", {"cpulist", "cpumap"}, Empty::allowed, s);
      if (guessed && other && !*other) return false;
      if (!same_node_cpus(t, other, id, at.cpus, at.kept)) continue;
      t.notes.push_back((*own)->path + " lists the same CPUs as " + (*other)->path + " (" + at.cpus.to_list() +
                        std::string("): nodes ") + std::to_string(id) + " and " + std::to_string(node) +
                        " read as one node " + std::to_string(id) + ", where devices on node " + std::to_string(node) +
                        " are placed");
      r.found.node_aliases.emplace_back(node, id);
      at.kept = id;
      break;
    }
    return true;
  };
  // Tried by id first (node 1 of a two-socket machine: one file, no listing);
  // the listing's ids where a guess fails.
  std::vector<int> ids;
  for (int id = 0; id < node; ++id) ids.push_back(id);
  std::size_t notes_before = t.notes.size();
  if (!merge_into_lower(ids, true)) {
    t.notes.resize(notes_before);
    auto dirs = node_directories(r);
    if (!dirs) return std::nullopt;
    ids.clear();
    for (int id : *dirs)
      if (id < node) ids.push_back(id);
    merge_into_lower(ids, false);
  }
  t.nodes.push_back(NumaNode{at.kept, at.cpus, {}});
  return at;
}

/// A focused load under a policy that splits a node among GPUs
/// (LoadFocus::peers): every other visible GPU's numa_node, each GPU placed,
/// and those on the device's node counted. Another node's CPUs are read only
/// to find whether it is the device's node. false: a file the answer rests on
/// is malformed, or the answer needs more than a focused load reads.
template <class = void>
bool focused_peers(SysfsReader& r, Topology& t, const SysfsOptions& o, const std::vector<Gpu>& selected,
                   const PciAddress& target, const FocusedNode& at, bool all_nodes, bool from_driver) {
  std::vector<PciAddress> on_node;  // the visible devices on the node (a partitioned one once)
  auto count = [&on_node](const PciAddress& a) {
    if (std::find(on_node.begin(), on_node.end(), a) == on_node.end()) on_node.push_back(a);
  };
  bool is_gpu = false;
  std::vector<PciAddress> done;  // a partitioned device's partitions share its files
  std::string s;
  for (const Gpu& v : selected) {
    if (v.address() == target) {
      is_gpu = true;
      count(target);
      continue;
    }
    if (std::find(done.begin(), done.end(), v.address()) != done.end()) continue;
    done.push_back(v.address());
    std::optional<int> n = focused_numa_node(r, v.address());
    if (!n) return false;
    n = r.found.read_as(*n);
    if (*n < 0) {
      // Placed from every node: read them, unless they are (then its local CPUs).
      if (!all_nodes) return false;
      place_device(t, v.address(), *n);
      if (!focused_local_cpus(r, t, v.address())) return false;
      continue;
    }
    if (all_nodes && t.find_node(*n) == nullptr) return false;
    if (t.find_node(*n) == nullptr) {
      // Its node must be there (a cut recording is an error, as in a whole
      // load). Its CPUs matter only if they are this node's (the nodes
      // read as one: the GPU is a peer); else they are not this answer's.
      auto other = r.list_or_mask(node_folder(*n) + "/", {"cpulist", "cpumap"}, Empty::allowed, s);
      if (same_node_cpus(t, other, *n, at.cpus, at.kept)) {
        r.found.node_aliases.emplace_back(*n, at.kept);
        n = at.kept;
      } else {
        if (!r.is_directory(node_folder(*n))) return false;
        t.nodes.push_back(NumaNode{*n, {}, {}});
      }
    }
    place_device(t, v.address(), *n);
    if (*n == at.kept) count(v.address());
  }
  if (is_gpu && at.kept >= 0 && on_node.size() < 2 && !count_host_gpus(r, t, o, from_driver, target, at.kept))
    return false;
  std::sort(t.nodes.begin(), t.nodes.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return true;
}

/// A load for one answer (SysfsOptions::focus), reading what it depends on:
/// - the online CPUs and the allowed sets (every answer);
/// - which devices are the process's GPUs, in order: the NVIDIA driver's list
///   proc/driver/nvidia/gpus where it exists (docs/contract.md section 6: it
///   is then the list, and no PCI device's `class` is read), else every PCI
///   device's `class` (and `vendor`, partitions) as a whole load reads them,
///   without placing the GPUs;
/// - the named device's numa_node (with `peers`, every visible GPU's);
/// - the cpulist of that node; of the lower-numbered nodes only to find one
///   that lists the same CPUs (merge_identical_nodes: the device is then
///   placed there; such a list that cannot be read is passed over); of a
///   peer's node only to find whether it is the same;
/// - every node, where the answer spans them: socket (with the packages), and
///   a device of numa_node -1, placed from every node and its own local CPUs
///   (resolve_gpu_node), whose parts are then read for every CPU;
/// - with TopologyParts::cores the node's core siblings; with
///   TopologyParts::caches the last-level cache probe of the first online CPU
///   and the node's cache groups;
/// - the GPUs' PCI `device` ids where the CUDA_DEVICE_ORDER warning needs
///   them (an index names the GPU: read_nvidia_device_ids).
/// Another GPU's numa_node, another node's cpulist or siblings are not read
/// where the answer does not depend on them, so they cannot break it.
///
/// The Topology holds only that: Topology::nodes the nodes read (a peer's
/// node whose CPUs were not read, empty), Topology::cores and core_complexes
/// those of the node, the GPUs with the numa_node of those read (-1 for the
/// others; from the driver's list, class 0x030200 is taken for each: the
/// driver lists GPUs only, and they are the host's GPUs as far as this load
/// knows), and the named device.
///
/// nullopt where the answer needs more than this reads, or a file it depends
/// on is malformed: UUIDs in a visibility list, device nodes to probe,
/// distances or NICs, devices named in extra_pci (the focus names its own),
/// a peer of numa_node -1 beside a device whose node is known, a node without
/// CPUs or directory, an index beyond the visible GPUs. (The only visible GPU
/// of its node under `peers` also reads the host's GPUs there: count_host_gpus.)
/// SysfsSource::load() then reads the whole machine, which gives the same
/// answer, or the error that names the file. The answer is read into `t`
/// (as default-constructed), which false leaves partly filled.
template <class = void>
bool read_focused(SysfsReader& r, const SysfsOptions& o, Topology& t) {
  const LoadFocus& f = *o.focus;
  const TopologyParts& needs = o.needs;
  if (o.detail != SysfsDetail::binding || needs.distances || needs.nics ||
      o.priorities || o.probe_device_nodes || !o.extra_pci.empty() || (!f.gpu && !f.pci))
    return false;
  VisibleDevices visible = (o.visible_later ? *o.visible_later : o.visible).with_environment();
  if (names_uuids(visible)) return false;
  t.origin = std::string_view(o.root);
  if (!read_online_cpus(r, t) || !read_allowed(r, t)) return false;
  std::optional<bool> from_driver = focused_gpus(r, t, o);
  if (!from_driver) return false;
  // The visible GPUs: where nothing selects, the driver's list itself
  // (focused_gpus put it in bus order, as select_visible_gpus would); else a
  // selected copy. Below, t.gpus changes only in place (place_device): the
  // list stays valid.
  Result<std::vector<Gpu>> chosen;
  if (visible.selects()) chosen = select_visible_gpus(t.gpus, visible);
  if (!chosen) return false;
  const std::vector<Gpu>* selected = visible.selects() ? &*chosen : &t.gpus;
  PciAddress target{};
  if (f.pci) {
    target = *f.pci;
  } else {
    if (*f.gpu < 0 || *f.gpu >= static_cast<int>(selected->size())) return false;
    target = (*selected)[static_cast<std::size_t>(*f.gpu)].address();
  }
  std::optional<int> node = focused_numa_node(r, target);
  if (!node) return false;
  // socket reads every node and the packages, as a whole load reads them; a
  // device of numa_node -1 is placed from every node (resolve_gpu_node), and
  // its parts are read for every CPU.
  bool all_nodes = needs.packages || *node < 0;
  std::optional<FocusedNode> at = focused_node(r, t, *node, all_nodes, needs.packages);
  if (!at) return false;
  if (t.find_pci(target) == nullptr) {  // not a GPU: any device, placed by its node
    PciDevice d;
    d.address = target;
    t.pci_devices.push_back(d);
    std::sort(t.pci_devices.begin(), t.pci_devices.end(),
              [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  }
  place_device(t, target, at->kept);
  if (at->kept < 0 && !focused_local_cpus(r, t, target)) return false;
  if (f.peers && !focused_peers(r, t, o, *selected, target, *at, all_nodes, *from_driver)) return false;
  if (needs.cores && !read_cores(r, t, &at->cpus)) return false;
  if (needs.caches && !read_cache_groups(r, t, &at->cpus)) return false;
  // The CUDA_DEVICE_ORDER warning compares the GPUs' device ids: read them
  // only when it can be given (an index names the GPU; read_gpus did so for
  // GPUs found by class).
  if (f.gpu && *from_driver) {
    std::optional<std::string> order = o.visible.with_environment().cuda_device_order;
    if (!order && o.visible_later) order = o.visible_later->with_environment().cuda_device_order;
    if (!read_nvidia_device_ids(r, t, t.gpus, order)) return false;
  }
  return true;
}

}  // namespace detail

template <class>
Result<Topology> SysfsSource::load() {
  return detail::built_in_place<Topology>([this](Topology& t) { return load(t); });
}

template <class>
Result<void> SysfsSource::load(Topology& t) {
  opened_ = 0;
  read_.clear();
  denied_.clear();
  int root_fd = -1;  // the root's descriptor, handed to the reader
  GPUAFF_TRY(bool live, detail::is_live_root(options_.root, &root_fd));
  detail::SysfsReader r(options_.root, live, root_fd);
  if (const Error* e = r.archive_error()) return unexpected(*e);
  // Publish the counters however load() ends.
  struct Publish {
    SysfsSource* self;
    detail::SysfsReader* reader;
    ~Publish() {
      self->opened_ = reader->opened;
      self->read_ = std::move(reader->read);
      self->denied_ = std::move(reader->found.denied_gpus);
    }
  } publish{this, &r};

  if (options_.focus) {
    if (detail::read_focused(r, options_, t)) return {};
    r.found = {};  // the whole machine, as without focus
    detail::reset_in_place(t);
  }
  return load_whole(r, t);
}

template <class Reader>
Result<void> SysfsSource::load_whole(Reader& r, Topology& t) {
  t.origin = std::string_view(options_.root);
  const TopologyParts& needs = options_.needs;
  bool full = options_.detail == SysfsDetail::full;
  // A part is read when the answer needs it, or with full detail; a part
  // read only for full detail that fails is dropped with a note.
  auto part = [&](bool needed, std::string_view what, auto&& read, auto&& clear) -> Result<void> {
    if (!needed && !full) return {};
    auto done = read();
    if (done || needed) return done;
    clear();
    std::string note(what);
    note += " left out (no answer asked for needs them): ";
    note += done.error().message();
    t.notes.push_back(std::move(note));
    return {};
  };
  GPUAFF_TRY_VOID(detail::read_online_cpus(r, t));
  std::vector<int> core_index;
  GPUAFF_TRY_VOID(part(
      needs.cores, "core siblings", [&]() -> Result<void> {
        GPUAFF_TRY(core_index, detail::read_cores(r, t));
        if (options_.priorities) return detail::read_core_priorities(r, t);
        return {};
      },
      [&] {
        t.cores.clear();
        core_index.clear();
      }));
  GPUAFF_TRY_VOID(part(
      needs.packages, "packages", [&] { return detail::read_packages(r, t, core_index); },
      [&] {
        t.packages.clear();
        for (auto& c : t.cores) c.package = -1;
      }));
  GPUAFF_TRY_VOID(part(
      needs.caches, "caches", [&] { return detail::read_cache_groups(r, t); }, [&] { t.core_complexes.clear(); }));
  GPUAFF_TRY(std::string node_list, detail::read_nodes(r, t));
  GPUAFF_TRY_VOID(part(
      needs.distances, "node distances", [&] { return detail::read_distances(r, t, node_list); },
      [&] {
        for (auto& n : t.nodes) n.distances.clear();
      }));
  GPUAFF_TRY_VOID(detail::read_allowed(r, t));
  bool nics = needs.nics || full;
  std::vector<std::pair<PciAddress, std::string>> network;
  GPUAFF_TRY(r.found.driver_gpus, detail::read_driver_gpus(r, t));
  // A root without a dev/ folder (a recording) has no nodes to ask: a
  // recording made in the task already left out what it could not open.
  if (options_.probe_device_nodes && r.found.driver_gpus && r.is_directory("dev"))
    r.found.driver_gpus = detail::probe_driver_gpus(r, t, *r.found.driver_gpus, r.found.denied_gpus);
  GPUAFF_TRY_VOID(detail::read_pci(r, t, options_, nics ? &network : nullptr));
  GPUAFF_TRY_VOID(detail::read_gpus(r, t, options_));
  // source/nics.hpp: what is near each GPU
  GPUAFF_TRY_VOID(part(
      needs.nics, "NICs and GPU memory nodes",
      [&]() -> Result<void> {
        auto nics_read = detail::read_nics(r, t, network);
        return nics_read ? detail::read_gpu_memory_nodes(r, t) : nics_read;
      },
      [&] {
        t.nics.clear();
        for (auto* gpus : {&t.gpus, &t.host_gpus})
          for (auto& g : *gpus) {
            g.nics.clear();
            g.memory_nodes.clear();
          }
      }));
  return {};
}

}  // namespace v0
}  // namespace gpuaff
