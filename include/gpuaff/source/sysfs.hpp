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
// | cpu/online                                    | always                            | per-CPU fallback below; else error          |
// | cpu/present, then cpu/possible                | only when cpu/online is missing   | error naming cpu/online                     |
// | cpu/cpuN/online                               | only when cpu/online is missing   | CPU counts as online (cpu0 has none)        |
// | cpu/cpuN/topology/core_cpus_list              | first online CPU of each core     | thread_siblings_list, core_cpus,            |
// |                                               |                                   | thread_siblings (masks); none: error        |
// | cpu/cpuN/topology/physical_package_id         | first online CPU of each package  | error                                       |
// | cpu/cpuN/topology/package_cpus_list           | same                              | core_siblings_list, package_cpus,           |
// |                                               |                                   | core_siblings; none: package id per core    |
// | cpu/cpuF/cache/indexK/{level,type}            | F = first online CPU, K = 0,1,..  | no `level`: end of the caches (none at all: |
// |                                               |                                   | no core complexes); `type` missing: error   |
// | cpu/cpuN/cache/indexL/shared_cpu_list         | L = last-level Unified/Data cache | shared_cpu_map; none: cpuN is in no cache   |
// |                                               | of cpuF; first CPU of each group  | group (optional)                            |
// | node/online                                   | always                            | node/possible (nodes without a directory    |
// |                                               |                                   | are then skipped); no node directory at     |
// |                                               |                                   | all (CONFIG_NUMA off): one node 0 holding   |
// |                                               |                                   | every online CPU; directory but no list:    |
// |                                               |                                   | error                                       |
// | node/nodeN/cpulist                            | each node                         | cpumap; none: error. Empty: memory-only     |
// | node/nodeN/distance                           | each node                         | distances left empty (optional)             |
// | proc/self/status                              | always (live: Mems_allowed only)  | recording: allowed = online CPUs, mems      |
// |                                               |                                   | unknown (empty). Cpus_allowed_list, else    |
// |                                               |                                   | Cpus_allowed; Mems_allowed_list, else       |
// |                                               |                                   | Mems_allowed; lines missing: same defaults  |
// | pci (directory listing)                       | always                            | no PCI devices                              |
// | pci/DEV/class                                 | every device                      | device skipped (error if in extra_pci)      |
// | pci/DEV/vendor                                | display or accelerator (0x1200)   | error                                       |
// |                                               | class devices, extra_pci          |                                             |
// | pci/DEV/{device,numa_node}                    | GPUs and extra_pci devices        | device 0; numa_node -1                      |
// | pci/DEV/local_cpulist                         | GPUs and extra_pci devices        | local_cpus; none: has_local_cpus = false    |
// | proc/driver/nvidia/gpus/BDF/information       | NVIDIA GPUs                       | no UUID                                     |
// | NICs, their names, GPU numa_status            | SysfsDetail::full only            | source/nics.hpp has its own table           |
//
// SysfsDetail::binding (what one rank's binding needs) leaves out: node/nodeN/distance;
// pci/DEV/device of GPUs (extra_pci devices keep it); pci/DEV/local_cpulist (and
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
// online CPUs except `allowed`, which is kept as recorded (it may name offline
// CPUs); cores, packages, cache groups hold online CPUs only.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/source.hpp"
#include "gpuaff/source/nics.hpp"
#include "gpuaff/source/sysfs_reader.hpp"
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

struct SysfsOptions {
  std::string root = "/";                ///< directory laid out like `/`; "/" reads this machine
  VisibleDevices visible{};              ///< GPU visibility (see source/visible.hpp)
  std::vector<PciAddress> extra_pci{};   ///< non-GPU devices to read too (e.g. --pci of a NIC)
  SysfsDetail detail = SysfsDetail::full;
  /// A visibility list the caller applies itself after the load (select_visible_gpus);
  /// not applied here. With SysfsDetail::binding the UUID files are read when it, or
  /// `visible`, names UUIDs (with_environment() is applied to both).
  std::optional<VisibleDevices> visible_later{};
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
  Result<Topology> load();

  /// Files the last load() tried to open (missing ones included: probing costs
  /// the same). Directory listings are not counted.
  int files_opened() const { return opened_; }
  /// Root-relative paths of the files the last load() read, in order, each once.
  const std::vector<std::string>& files_read() const { return read_; }
  const SysfsOptions& options() const { return options_; }

 private:
  SysfsOptions options_;
  int opened_ = 0;
  std::vector<std::string> read_;
};

static_assert(TopologySource<SysfsSource>);

namespace detail {

/// Whether --visible-devices or CUDA_VISIBLE_DEVICES (as `v` holds them) has an entry
/// that is not an index: selecting then needs the GPUs' UUIDs (or reports a bad entry,
/// which is worded the same either way only if the UUIDs were read).
inline bool names_uuids(const VisibleDevices& v) {
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

/// cpu/online; without it, cpu/present (or possible) and each CPU's own `online`.
inline Result<void> read_online_cpus(SysfsReader& r, Topology& t) {
  const std::string cpu(sysfs_cpu);
  const std::string rel = cpu + "online";
  std::string s;
  GPUAFF_TRY(bool have, r.get(rel, s));
  if (have) {
    if (trim(s).empty()) return r.bad(Errc::parse_error, rel, "is empty (it must list the online CPUs)");
    GPUAFF_TRY(t.online, r.cpus(rel, s, Form::list, Empty::error));
  } else {
    GPUAFF_TRY(int which, r.first_of({cpu + "present", cpu + "possible"}, s));
    if (which < 0) return r.bad(Errc::not_found, rel, "is missing");
    std::string prel = cpu + (which == 0 ? "present" : "possible");
    GPUAFF_TRY(CpuSet present, r.cpus(prel, s, Form::list, Empty::error));
    for (int c : present) {
      std::string orel = cpu_dir(c) + "/online";
      GPUAFF_TRY(bool h, r.get(orel, s));
      if (!h) {
        t.online.set(c);  // no per-CPU file: not hot-pluggable, so online
        continue;
      }
      GPUAFF_TRY(long long on, r.integer(orel, s, 0, 1));
      if (on == 1) t.online.set(c);
    }
  }
  if (t.online.empty()) return r.bad(Errc::parse_error, rel, "names no online CPU");
  return {};
}

/// One sibling list per core (read for its first online CPU). Returns each
/// CPU's core index, for packages without member lists.
inline Result<std::vector<int>> read_cores(SysfsReader& r, Topology& t) {
  std::vector<int> core_index(static_cast<std::size_t>(t.online.last() + 1), -1);
  CpuSet covered;
  std::string s;
  for (int c : t.online) {
    if (covered.test(c)) continue;
    std::string dir = cpu_dir(c) + "/topology/";
    GPUAFF_TRY(auto file, r.list_or_mask(dir, {"core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"},
                                         Empty::error, s));
    if (!file)
      return r.bad(Errc::not_found, dir + "core_cpus_list",
                   "is missing (and so are thread_siblings_list, core_cpus and thread_siblings)");
    GPUAFF_TRY(CpuSet sib, r.own_group(*file, c, t.online, covered, "sibling list"));
    for (int x : sib) core_index[static_cast<std::size_t>(x)] = static_cast<int>(t.cores.size());
    t.cores.push_back(Core{sib, -1});
    covered |= sib;
  }
  return core_index;
}

/// One id and one member list per package; without member lists (an old or
/// odd kernel), the package id of each core. Packages end up sorted by id.
inline Result<void> read_packages(SysfsReader& r, Topology& t, const std::vector<int>& core_index) {
  CpuSet covered;
  bool lists = true;
  std::string s;
  for (int c : t.online) {
    if (covered.test(c)) continue;
    std::string dir = cpu_dir(c) + "/topology/";
    std::string idrel = dir + "physical_package_id";
    GPUAFF_TRY(bool have, r.get(idrel, s));
    if (!have) return r.bad(Errc::not_found, idrel, "is missing");
    GPUAFF_TRY(long long id, r.integer(idrel, s, -1, 1'000'000));
    std::optional<CpuFile> file;
    if (lists) {
      GPUAFF_TRY(file, r.list_or_mask(dir, {"package_cpus_list", "core_siblings_list", "package_cpus", "core_siblings"},
                                      Empty::error, s));
      lists = file.has_value();
    }
    CpuSet members = t.cores[static_cast<std::size_t>(core_index[static_cast<std::size_t>(c)])].threads;
    if (file) {
      GPUAFF_TRY(members, r.own_group(*file, c, t.online, covered, "package list"));
    }
    covered |= members;
    auto same = std::find_if(t.packages.begin(), t.packages.end(), [&](const Package& p) { return p.id == id; });
    if (same == t.packages.end()) t.packages.push_back(Package{static_cast<int>(id), members});
    else same->cpus |= members;
  }
  std::sort(t.packages.begin(), t.packages.end(), [](const Package& a, const Package& b) { return a.id < b.id; });
  for (auto& core : t.cores)
    if (const Package* p = t.package_of_cpu(core.first())) core.package = p->id;
  return {};
}

/// The last-level Unified or Data cache of the first online CPU (its index
/// directory, -1 when it has no caches) and that cache's level.
inline Result<std::pair<int, long long>> find_last_level_cache(SysfsReader& r, const Topology& t) {
  std::string base = cpu_dir(t.online.first()) + "/cache/index";
  std::pair<int, long long> llc{-1, 0};
  std::string s;
  for (int k = 0; k < 32; ++k) {
    std::string lrel = base + std::to_string(k) + "/level";
    GPUAFF_TRY(bool have, r.get(lrel, s));
    if (!have) break;
    GPUAFF_TRY(long long level, r.integer(lrel, s, 1, 15));
    std::string trel = base + std::to_string(k) + "/type";
    GPUAFF_TRY(bool have_type, r.get(trel, s));
    if (!have_type) return r.bad(Errc::not_found, trel, "is missing");
    std::string_view type = trim(s);
    if (type.empty()) return r.bad(Errc::parse_error, trel, "is empty");
    if ((type == "Unified" || type == "Data") && level > llc.second) llc = {k, level};
  }
  return llc;
}

/// The groups of CPUs that share the last-level cache (core complexes).
inline Result<void> read_cache_groups(SysfsReader& r, Topology& t) {
  GPUAFF_TRY(auto llc, find_last_level_cache(r, t));
  if (llc.first < 0) return {};
  CpuSet covered;
  std::string s;
  for (int c : t.online) {
    if (covered.test(c)) continue;
    std::string dir = cpu_dir(c) + "/cache/index" + std::to_string(llc.first) + "/";
    GPUAFF_TRY(auto file, r.list_or_mask(dir, {"shared_cpu_list", "shared_cpu_map"}, Empty::error, s));
    if (!file) continue;  // this CPU lacks that cache: it is in no group
    GPUAFF_TRY(CpuSet group, r.own_group(*file, c, t.online, covered, "cache group"));
    covered |= group;
    t.core_complexes.push_back(CacheGroup{static_cast<int>(llc.second), group});
  }
  return {};
}

/// The distances of one node, as node/nodeN/distance lists them.
inline Result<std::vector<int>> parse_distances(const SysfsReader& r, const std::string& rel, std::string_view text) {
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

/// Each node's distance list must name every node; lists from node/possible
/// that cannot be aligned with the nodes that exist are dropped instead.
inline Result<void> check_distances(const SysfsReader& r, Topology& t, const std::vector<std::string>& files,
                                    const std::string& list_rel, bool from_possible) {
  for (std::size_t k = 0; k < t.nodes.size(); ++k) {
    auto& n = t.nodes[k];
    if (n.distances.empty() || n.distances.size() == t.nodes.size()) continue;
    if (from_possible) {
      n.distances.clear();
      continue;
    }
    return r.bad(Errc::parse_error, files[k], "has ", n.distances.size(), " distances but ", list_rel, " names ",
                 t.nodes.size(), " nodes");
  }
  return {};
}

/// NUMA nodes from node/online (else node/possible): each node's CPUs and,
/// with full detail, distances. No node directory at all: one node 0.
inline Result<void> read_nodes(SysfsReader& r, Topology& t, SysfsDetail detail) {
  const std::string node = "sys/devices/system/node/";
  std::string s;
  GPUAFF_TRY(int which, r.first_of({node + "online", node + "possible"}, s));
  if (which < 0) {
    if (r.is_directory("sys/devices/system/node"))
      return r.bad(Errc::not_found, node + "online", "is missing (and so is node/possible)");
    t.nodes.push_back(NumaNode{0, t.online, {}});  // CONFIG_NUMA=n: one node
    return {};
  }
  bool from_possible = which == 1;
  std::string lrel = node + (from_possible ? "possible" : "online");
  GPUAFF_TRY(CpuSet ids, r.cpus(lrel, s, Form::list, Empty::error));
  std::vector<std::string> distance_files;
  for (int id : ids) {
    std::string dir = node + "node" + std::to_string(id) + "/";
    GPUAFF_TRY(auto file, r.list_or_mask(dir, {"cpulist", "cpumap"}, Empty::allowed, s));
    if (!file) {
      if (from_possible) continue;  // possible but absent node
      return r.bad(Errc::not_found, dir + "cpulist", "is missing (and so is cpumap), but ", lrel, " lists node ", id);
    }
    NumaNode n{id, file->cpus & t.online, {}};
    std::string drel = dir + "distance";
    bool have = false;
    if (detail == SysfsDetail::full) {
      GPUAFF_TRY(have, r.get(drel, s));
    }
    if (have) {
      GPUAFF_TRY(n.distances, parse_distances(r, drel, s));
    }
    distance_files.push_back(drel);
    t.nodes.push_back(std::move(n));
  }
  if (t.nodes.empty()) return r.bad(Errc::parse_error, lrel, "names no node with a directory");
  return check_distances(r, t, distance_files, lrel, from_possible);
}

/// The allowed CPUs and memory nodes: live, the calling thread's affinity and
/// proc/self/status's Mems_allowed; recorded, both from proc/self/status.
inline Result<void> read_allowed(SysfsReader& r, Topology& t) {
  const std::string rel = "proc/self/status";
  std::string s;
  GPUAFF_TRY(bool have, r.get(rel, s));
  if (r.live()) {
    GPUAFF_TRY(t.allowed, thread_affinity());
  } else {
    t.allowed = t.online;  // no recorded allowed set: everything online
    if (have) {
      if (auto v = status_field(s, "Cpus_allowed_list")) {
        GPUAFF_TRY(t.allowed, r.cpus(rel + " (Cpus_allowed_list)", *v, Form::list, Empty::error));
      } else if (auto m = status_field(s, "Cpus_allowed")) {
        GPUAFF_TRY(t.allowed, r.cpus(rel + " (Cpus_allowed)", *m, Form::mask, Empty::error));
        if (t.allowed.empty()) return r.bad(Errc::parse_error, rel, "Cpus_allowed is an empty mask");
      }
    }
  }
  if (have) {
    if (auto v = status_field(s, "Mems_allowed_list")) {
      GPUAFF_TRY(t.mems_allowed, r.cpus(rel + " (Mems_allowed_list)", *v, Form::list, Empty::error));
    } else if (auto m = status_field(s, "Mems_allowed")) {
      GPUAFF_TRY(t.mems_allowed, r.cpus(rel + " (Mems_allowed)", *m, Form::mask, Empty::error));
    }
  }
  return {};
}

inline constexpr std::string_view sysfs_pci = "sys/bus/pci/devices";

/// The PCI devices under sys/bus/pci/devices, by address (entries whose names
/// are not PCI addresses skipped); every one of `extra` must be among them.
inline Result<std::vector<std::pair<PciAddress, std::string>>> list_pci_devices(SysfsReader& r,
                                                                                const std::vector<PciAddress>& extra) {
  GPUAFF_TRY(auto names, r.list(sysfs_pci));
  std::vector<std::pair<PciAddress, std::string>> devices;
  for (auto& n : names) {
    auto a = PciAddress::parse(n);
    if (a) devices.emplace_back(*a, std::move(n));
  }
  std::stable_sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& want : extra) {
    if (std::none_of(devices.begin(), devices.end(), [&](const auto& d) { return d.first == want; }))
      return fail(Errc::not_found, "PCI device ", want.to_string(), " is not in ", r.shown(sysfs_pci),
                  "; check the address with `lspci -D`");
  }
  return devices;
}

/// One PCI device's class, and for GPUs and `extra` devices vendor, device,
/// node and local CPUs (what a detail level leaves out is in the table at the
/// top). nullopt: a device no Topology keeps.
inline Result<std::optional<PciDevice>> read_pci_device(SysfsReader& r, const Topology& t, const PciAddress& addr,
                                                        const std::string& name, bool extra, SysfsDetail detail,
                                                        std::uint32_t* class_seen = nullptr) {
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
    return std::optional<PciDevice>();
  }
  bool full = extra;
  if (is_gpu_candidate_class(d.class_code) || extra) {
    GPUAFF_TRY(bool have, r.get(dir + "vendor", s));
    if (!have) return r.bad(Errc::not_found, dir + "vendor", "is missing");
    GPUAFF_TRY(long long v, r.hex(dir + "vendor", s, 0xffff));
    d.vendor = static_cast<std::uint16_t>(v);
    full = full || d.is_gpu();
  }
  if (!full) return std::optional<PciDevice>();
  bool have_dev = false;
  if (detail == SysfsDetail::full || extra) {
    GPUAFF_TRY(have_dev, r.get(dir + "device", s));
  }
  if (have_dev) {
    GPUAFF_TRY(long long v, r.hex(dir + "device", s, 0xffff));
    d.device = static_cast<std::uint16_t>(v);
  }
  GPUAFF_TRY(bool have_node, r.get(dir + "numa_node", s));
  if (have_node) {
    GPUAFF_TRY(long long v, r.integer(dir + "numa_node", s, -1, CpuSet::capacity - 1));
    d.numa_node = static_cast<int>(v);
  }
  // Binding detail: a known node places the device; local CPUs only help with -1.
  if (detail == SysfsDetail::full || d.numa_node < 0) {
    GPUAFF_TRY(auto local, r.list_or_mask(dir, {"local_cpulist", "local_cpus"}, Empty::allowed, s));
    if (local) {
      d.local_cpus = local->cpus & t.online;
      d.has_local_cpus = true;
    }
  }
  return std::optional<PciDevice>(d);
}

/// The PCI devices; `network` (optional) gets the network-class ones for read_nics.
inline Result<void> read_pci(SysfsReader& r, Topology& t, const SysfsOptions& options,
                             std::vector<std::pair<PciAddress, std::string>>* network = nullptr) {
  GPUAFF_TRY(auto devices, list_pci_devices(r, options.extra_pci));
  for (const auto& [addr, name] : devices) {
    bool extra = std::find(options.extra_pci.begin(), options.extra_pci.end(), addr) != options.extra_pci.end();
    std::uint32_t cls = 0;
    GPUAFF_TRY(auto d, read_pci_device(r, t, addr, name, extra, options.detail, &cls));
    if (d) t.pci_devices.push_back(*d);
    if (network != nullptr && is_network_class(cls)) network->emplace_back(addr, name);
  }
  return {};
}

/// The GPUs among the PCI devices, with NVIDIA UUIDs where needed, selected
/// and indexed by the visibility lists.
inline Result<void> read_gpus(SysfsReader& r, Topology& t, const SysfsOptions& options) {
  VisibleDevices visible = options.visible.with_environment();
  bool want_uuids = options.detail == SysfsDetail::full || names_uuids(visible) ||
                    (options.visible_later && names_uuids(options.visible_later->with_environment()));
  std::vector<Gpu> all;
  std::string s;
  for (const auto& d : t.pci_devices) {
    if (!d.is_gpu()) continue;
    Gpu g;
    g.pci = d;
    if (d.vendor == pci_vendor::nvidia && want_uuids) {
      std::string rel = "proc/driver/nvidia/gpus/" + std::string(d.address.to_string().view()) + "/information";
      GPUAFF_TRY(bool have, r.get(rel, s));
      if (have) {
        if (auto u = status_field(s, "GPU UUID")) {
          if (u->size() > 4 && u->substr(0, 4) == "GPU-" && u->size() <= decltype(g.uuid)::capacity) g.uuid = *u;
        }
      }
    }
    all.push_back(std::move(g));
  }
  GPUAFF_TRY(t.gpus, select_visible_gpus(std::move(all), visible));
  return {};
}

/// Whether `root` is this machine's `/`. Errors: the root is empty or not a directory.
inline Result<bool> is_live_root(const std::string& root) {
  if (root.empty())
    return fail(Errc::invalid_argument, "the topology root is empty; pass --root / or a directory made by `gpuaff record`");
  if (!is_directory(root))
    return fail(Errc::not_found, "topology root '", root,
                "' is not a directory; pass --root / or a directory made by `gpuaff record`");
  return is_host_root(root);
}

}  // namespace detail

inline Result<Topology> SysfsSource::load() {
  opened_ = 0;
  read_.clear();
  GPUAFF_TRY(bool live, detail::is_live_root(options_.root));
  detail::SysfsReader r(options_.root, live);
  // Publish the counters however load() ends.
  struct Publish {
    SysfsSource* self;
    detail::SysfsReader* reader;
    ~Publish() {
      self->opened_ = reader->opened;
      self->read_ = std::move(reader->read);
    }
  } publish{this, &r};

  Topology t;
  t.origin = std::string_view(options_.root);
  GPUAFF_TRY_VOID(detail::read_online_cpus(r, t));
  GPUAFF_TRY(auto core_index, detail::read_cores(r, t));
  GPUAFF_TRY_VOID(detail::read_packages(r, t, core_index));
  GPUAFF_TRY_VOID(detail::read_cache_groups(r, t));
  GPUAFF_TRY_VOID(detail::read_nodes(r, t, options_.detail));
  GPUAFF_TRY_VOID(detail::read_allowed(r, t));
  bool full = options_.detail == SysfsDetail::full;
  std::vector<std::pair<PciAddress, std::string>> network;
  GPUAFF_TRY_VOID(detail::read_pci(r, t, options_, full ? &network : nullptr));
  GPUAFF_TRY_VOID(detail::read_gpus(r, t, options_));
  if (full) {  // source/nics.hpp: what is near each GPU
    GPUAFF_TRY_VOID(detail::read_nics(r, t, network));
    GPUAFF_TRY_VOID(detail::read_gpu_memory_nodes(r, t));
  }
  return t;
}

}  // namespace v0
}  // namespace gpuaff
