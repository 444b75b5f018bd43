// SPDX-License-Identifier: Apache-2.0
#pragma once
// HwlocSource: a Topology from hwloc (2.x), for users who already trust hwloc's
// view of their machines or who keep hwloc XML files. Three inputs:
//   - the live machine,
//   - an hwloc XML file (`lstopo --of xml`, with I/O devices),
//   - a recorded root (a directory laid out like `/`, as `gpuaff record` writes;
//     hwloc's HWLOC_FSROOT).
// It fills the same Topology as SysfsSource. Where hwloc's view differs from
// gpuaff's own reader by design, docs/hwloc.md lists the differences.
//
// Not in the umbrella header: it needs hwloc (CMake target gpuaff::hwloc, which
// defines GPUAFF_HAS_HWLOC).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sys/stat.h>

#include <hwloc.h>
#include <hwloc/distances.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/detail/status_field.hpp"
#include "gpuaff/source/load.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/source.hpp"
#include "gpuaff/topology.hpp"

#if HWLOC_API_VERSION < 0x00020100
#error "gpuaff's hwloc source needs hwloc 2.1 or later"
#endif

namespace gpuaff {
inline namespace v0 {

/// Where HwlocSource reads the machine from.
enum class HwlocInput {
  live,  ///< this machine (hwloc's own discovery, honouring hwloc's environment variables)
  xml,   ///< an hwloc XML file named by HwlocOptions::path
  root,  ///< a recorded root directory named by HwlocOptions::path (HWLOC_FSROOT)
};

/// NVIDIA GPU memory exposed as NUMA nodes (GB200, Grace Hopper, POWER9):
/// hwloc hides them unless told otherwise; gpuaff needs them to bind memory.
enum class GpuMemoryNodes { keep, hide };

struct HwlocOptions {
  HwlocInput input = HwlocInput::live;
  std::string path{};  ///< the XML file or the root directory; unused for live
  VisibleDevices visible{};
  /// Non-GPU devices to report too (e.g. a --pci NIC). Unlike SysfsSource, a device
  /// hwloc does not list is left out rather than an error: check with Topology::find_pci.
  std::vector<PciAddress> extra_pci{};
  GpuMemoryNodes gpu_memory_nodes = GpuMemoryNodes::keep;
  /// Whose GPUs are numbered (numbered_vendor); the others stay PCI devices.
  GpuVendor vendor = GpuVendor::automatic;
};

namespace detail {

/// hwloc reads HWLOC_FSROOT (and a few other settings) from the environment
/// when a topology loads; hwloc 2.x has no API for a file-system root. Loads
/// that change the environment are serialised, and the previous values restored.
inline std::mutex& hwloc_env_mutex() {
  static std::mutex m;
  return m;
}

class HwlocScopedEnv {
 public:
  HwlocScopedEnv() = default;
  HwlocScopedEnv(const HwlocScopedEnv&) = delete;
  HwlocScopedEnv& operator=(const HwlocScopedEnv&) = delete;
  ~HwlocScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
    }
  }
  void set(const char* name, const std::string& value) {
    save(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    save(name);
    ::unsetenv(name);
  }

 private:
  void save(const char* name) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

class HwlocTopologyHandle {
 public:
  HwlocTopologyHandle() = default;
  HwlocTopologyHandle(const HwlocTopologyHandle&) = delete;
  HwlocTopologyHandle& operator=(const HwlocTopologyHandle&) = delete;
  ~HwlocTopologyHandle() {
    if (initialised_) hwloc_topology_destroy(t_);
  }
  bool init() {
    initialised_ = hwloc_topology_init(&t_) == 0;
    return initialised_;
  }
  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_{};
  bool initialised_ = false;
};

class HwlocBitmap {
 public:
  HwlocBitmap() : b_(hwloc_bitmap_alloc()) {}
  HwlocBitmap(const HwlocBitmap&) = delete;
  HwlocBitmap& operator=(const HwlocBitmap&) = delete;
  ~HwlocBitmap() { hwloc_bitmap_free(b_); }
  hwloc_bitmap_t get() const { return b_; }

 private:
  hwloc_bitmap_t b_;
};

/// An hwloc bitmap as a CpuSet (CPU or node ids). Infinite bitmaps are cut at `bound`.
/// Errors: Errc::out_of_range when an id does not fit a CpuSet.
inline Result<CpuSet> hwloc_to_set(hwloc_const_bitmap_t b, std::string_view what, std::string_view origin) {
  CpuSet s;
  if (b == nullptr) return s;
  int last = hwloc_bitmap_last(b);
  if (hwloc_bitmap_weight(b) < 0 || last >= CpuSet::capacity) {
    return fail(Errc::out_of_range, "hwloc topology '", origin, "': ", what, " names ids beyond ",
                CpuSet::capacity - 1, ", more than gpuaff can hold");
  }
  for (int id = hwloc_bitmap_first(b); id >= 0; id = hwloc_bitmap_next(b, id)) s.set(id);
  return s;
}

inline int hwloc_os_index(const hwloc_obj* o) {
  return o->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(o->os_index);
}

/// "GPU UUID:" from the NVIDIA driver's information file under `root`, or "".
inline std::string hwloc_nvidia_uuid(const std::string& root, const PciAddress& a) {
  RootDir dir(root, is_host_root(root));
  std::string text;
  if (dir.read(std::string("proc/driver/nvidia/gpus/") + std::string(a.to_string().view()) + "/information", text) != 0) return {};
  auto uuid = status_field(text, "GPU UUID");
  return uuid ? std::string(*uuid) : std::string();
}

/// The NVIDIA driver's GPU list under `root` (nullopt: the root has none).
/// Errors: Errc::io_error when the directory exists but cannot be listed.
inline Result<std::optional<std::vector<PciAddress>>> hwloc_driver_gpus(const std::string& root) {
  using Out = std::optional<std::vector<PciAddress>>;
  RootDir dir(root, is_host_root(root));
  if (!dir.is_directory(nvidia_driver_gpus)) return Out();
  std::vector<std::string> names;
  if (int e = dir.list(nvidia_driver_gpus, names); e != 0)
    return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot list '", path_under(root, nvidia_driver_gpus),
                                            "': ", detail::errno_text(e)));
  return Out(driver_gpu_addresses(names));
}

/// A "Key:\tvalue" line of a recorded proc/self/status, parsed as a cpulist.
/// Missing file or key: nullopt. Errors: Errc::parse_error naming the file.
inline Result<std::optional<CpuSet>> hwloc_status_list(const std::string& root, std::string_view key) {
  RootDir dir(root, is_host_root(root));
  std::string text;
  if (dir.read("proc/self/status", text) != 0) return std::optional<CpuSet>{};
  auto value = status_field(text, key);
  if (!value) return std::optional<CpuSet>{};
  auto parsed = CpuSet::parse_list(*value);
  if (!parsed) {
    return fail(Errc::parse_error, "'", path_under(root, "proc/self/status"), "': ", key, ": ",
                parsed.error().message(), "; fix or delete the line (re-record with 'gpuaff record')");
  }
  return std::optional<CpuSet>(*parsed);
  return std::optional<CpuSet>{};
}

}  // namespace detail

namespace detail {

/// The most entries hwloc_escape_in walks under one root: far above a
/// recording (a few thousand), low enough that a huge tree is refused quickly.
inline constexpr int max_hwloc_root_entries = 1 << 20;

/// hwloc's HWLOC_FSROOT only prefixes the paths it opens: a symlink in the
/// root is followed by the kernel, so an absolute target (or one whose ".."
/// climbs above the root) reads the host, and a FIFO blocks the read. Walks
/// `rel` (sys/ or proc/, what the Linux backend reads) without following links
/// and returns the first such entry as "what is wrong", or "". Each link's
/// target is resolved as the kernel will (realpath) and must stay within the
/// root; a dangling one reads nothing and passes.
inline std::string hwloc_escape_in(const std::string& real_root, const std::string& rel, int& budget) {
  std::string host = real_root + "/" + rel;
  struct stat st {};
  if (::lstat(host.c_str(), &st) != 0) return {};
  if (--budget < 0) return std::string("it has more than ") + std::to_string(max_hwloc_root_entries) + " entries under sys/ and proc/";
  if (S_ISLNK(st.st_mode)) {
    char* real = ::realpath(host.c_str(), nullptr);
    if (real == nullptr) return {};
    std::string_view r(real);
    bool inside = r == real_root || (r.size() > real_root.size() && r.substr(0, real_root.size()) == real_root &&
                                     r[real_root.size()] == '/');
    std::string target(r);
    std::free(real);  // NOLINT(cppcoreguidelines-no-malloc): realpath allocates with malloc
    if (!inside) return "the symlink " + rel + " leads out of it (to " + target + "), and hwloc would follow it";
    return {};
  }
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    if (list_directory(host, names) != 0) return {};
    std::sort(names.begin(), names.end());
    for (const auto& n : names)
      if (std::string why = hwloc_escape_in(real_root, rel + "/" + n, budget); !why.empty()) return why;
    return {};
  }
  if (!S_ISREG(st.st_mode)) return rel + " is not a regular file (a FIFO, socket or device), and hwloc would block on it";
  return {};
}

}  // namespace detail


/// Why hwloc's Linux backend would not read the root `root`, or "" when it
/// would: hwloc 2.x reads only the hex-mask files (cpuN/topology/thread_siblings
/// or core_cpus), and when they are missing it silently falls back to a
/// topology of the machine it runs on.
inline std::string hwloc_root_problem(const std::string& root) {
  struct stat st {};
  if (::stat(root.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    return "'" + root + "' is a file: hwloc reads a directory only; unpack it (mkdir r && tar -xf FILE.tar -C r) or "
           "read it with gpuaff's own reader (source=sysfs)";
  if (!detail::is_directory(root)) return "'" + root + "' is not a directory";
  detail::RootDir dir(root, detail::is_host_root(root));
  const std::string cpu = "sys/devices/system/cpu";
  if (!dir.is_directory(cpu))
    return "'" + root + "' has no sys/devices/system/cpu directory (not a recorded root)";
  // hwloc probes cpu0 (on Linux cpu0 exists even when other ids are sparse)
  bool masks = false;
  for (const char* f : {"package_cpus", "core_cpus", "core_siblings", "thread_siblings"})
    masks = masks || dir.exists(cpu + "/cpu0/topology/" + f);
  if (masks) {
    if (dir.live()) return {};  // this machine's own files: nothing to escape to
    char* real = ::realpath(root.c_str(), nullptr);
    if (real == nullptr) return "'" + root + "' cannot be resolved";
    std::string real_root(real);
    std::free(real);  // NOLINT(cppcoreguidelines-no-malloc): realpath allocates with malloc
    int budget = detail::max_hwloc_root_entries;
    for (const char* top : {"sys", "proc"})
      if (std::string why = detail::hwloc_escape_in(real_root, top, budget); !why.empty())
        return "'" + root + "' cannot be given to hwloc safely: " + why +
               "; use source=sysfs (which keeps every path inside the root), or remove it";
    return {};
  }
  return "'" + root +
         "' has no sys/devices/system/cpu/cpu0/topology/{thread_siblings,core_cpus,core_siblings,package_cpus}: "
         "hwloc reads these hex masks, not the *_list files; record the root with 'gpuaff record', "
         "which copies them";
}

/// Loads a Topology through hwloc. Satisfies TopologySource.
///
/// What each Topology field comes from:
///   online: hwloc's topology cpuset (online PUs; disallowed ones are kept);
///   allowed/mems_allowed: hwloc's allowed cpuset/nodeset (cgroup cpusets); live,
///     also bounded by this thread's affinity; for a root, also by the recorded
///     proc/self/status (Cpus_allowed_list / Mems_allowed_list) that `gpuaff record`
///     writes, since hwloc reads only the cgroup files;
///   packages, cores: Package and Core objects (a PU outside any Core is a core);
///   nodes: NUMANode objects; each online CPU belongs to the smallest node whose
///     cpuset holds it (hwloc gives CPU-less nodes the CPUs near them), so
///     memory-only nodes have no CPUs; distances: hwloc's "NUMALatency" matrix;
///   core_complexes: per CPU, its highest-level unified or data cache;
///   pci_devices: PCIDev objects of GPU class plus extra_pci; numa_node and
///     local_cpus come from the nearest non-I/O ancestor (its CPUs; its node when
///     exactly one node with CPUs lies within them, else -1). hwloc 2.x keeps only
///     16 bits of class (no prog-if): class_code is class << 8;
///   host_gpus: the GPU-class devices; gpus: those less the NVIDIA GPUs missing
///     from the driver's list proc/driver/nvidia/gpus/ (live or root), after
///     select_visible_gpus(); UUIDs from hwloc's
///     NVML/RSMI OS devices when present, else (live or root) the NVIDIA driver's
///     proc/driver/nvidia/gpus/<bdf>/information.
class HwlocSource {
 public:
  explicit HwlocSource(HwlocOptions options) : options_(std::move(options)) {}

  /// Errors: Errc::io_error (XML file or root missing or unreadable; names it),
  /// Errc::parse_error (hwloc rejects the XML, or a recorded status line is
  /// malformed), Errc::unsupported (a root hwloc cannot read, e.g. one without the
  /// hex-mask files; the message says which), Errc::system_error (hwloc failed),
  /// Errc::out_of_range (CPU ids beyond CpuSet::capacity), and the errors of
  /// select_visible_gpus().
  Result<Topology> load() {
    std::string origin = describe();
    detail::HwlocTopologyHandle topo;
    if (!topo.init()) return fail(Errc::system_error, "hwloc_topology_init failed (out of memory?)");
    hwloc_topology_t t = topo.get();

    // Keep disallowed CPUs and nodes: gpuaff models online and allowed apart.
    unsigned long flags = HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED;
    if (hwloc_topology_set_flags(t, flags) != 0)
      return fail(Errc::system_error, "hwloc_topology_set_flags failed for ", origin);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    hwloc_topology_set_type_filter(t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);

    std::unique_lock<std::mutex> env_lock(detail::hwloc_env_mutex(), std::defer_lock);
    std::optional<detail::HwlocScopedEnv> env;
    GPUAFF_TRY_VOID(select_input(t, env_lock, env));
    int load_status = hwloc_topology_load(t);
    int load_errno = errno;
    env.reset();  // restore the environment as soon as hwloc has read it
    if (env_lock.owns_lock()) env_lock.unlock();
    if (load_status != 0) {
      int e = load_errno;
      return Unexpected<Error>(make_sys_error(
          options_.input == HwlocInput::xml ? Errc::parse_error : Errc::system_error, e, "hwloc could not load ",
          origin, ": ", detail::errno_text(e),
          options_.input == HwlocInput::xml ? "; is it an XML file written by 'lstopo --of xml'?" : ""));
    }
    if (options_.input == HwlocInput::root) {
      // A root hwloc's Linux backend gave up on falls back to a topology of this
      // machine; refuse it rather than return the wrong machine.
      const char* backend = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "Backend");
      if (backend == nullptr || std::string_view(backend) != "Linux") {
        return fail(Errc::unsupported, "hwloc's Linux backend did not read root '", options_.path,
                    "' (it lacks files hwloc needs); record it with 'gpuaff record'");
      }
    }
    return convert(t, origin);
  }

  const HwlocOptions& options() const { return options_; }

 private:
  std::string describe() const {
    switch (options_.input) {
      case HwlocInput::xml: return "hwloc XML '" + options_.path + "'";
      case HwlocInput::root: return "hwloc root '" + options_.path + "'";
      case HwlocInput::live: break;
    }
    return "hwloc (this machine)";
  }

  /// Points hwloc at the input: the XML file, or the root through HWLOC_FSROOT
  /// with only the Linux backend, or this machine without the slow probes.
  /// Environment variables hwloc reads are set in `env` under `env_lock`.
  Result<void> select_input(hwloc_topology_t t, std::unique_lock<std::mutex>& env_lock,
                            std::optional<detail::HwlocScopedEnv>& env) const {
    switch (options_.input) {
      case HwlocInput::xml: {
        std::string probe;
        if (int e = detail::read_whole_file(options_.path, probe); e != 0) {
          return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot read hwloc XML file '", options_.path,
                                                  "': ", detail::errno_text(e),
                                                  "; pass a file written by 'lstopo --of xml'"));
        }
        if (hwloc_topology_set_xml(t, options_.path.c_str()) != 0) {
          return fail(Errc::parse_error, "hwloc cannot use '", options_.path,
                      "' as an XML topology; pass a file written by 'lstopo --of xml'");
        }
        break;
      }
      case HwlocInput::root: {
        if (std::string why = hwloc_root_problem(options_.path); !why.empty()) {
          Errc code = detail::is_directory(options_.path) ? Errc::unsupported : Errc::io_error;
          return fail(code, "hwloc cannot load this root: ", why);
        }
        // Only the Linux backend may look: the others would describe the machine
        // this runs on (CPUID, libpciaccess, GPU libraries), not the recording.
        for (const char* c : {"x86", "pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
          (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
        env_lock.lock();
        env.emplace();
        env->set("HWLOC_FSROOT", options_.path);
        env->set("HWLOC_THISSYSTEM", "0");
        env->unset("HWLOC_XMLFILE");
        env->unset("HWLOC_SYNTHETIC");
        if (options_.gpu_memory_nodes == GpuMemoryNodes::keep) env->set("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1");
        break;
      }
      case HwlocInput::live: {
        // GPU libraries and X are slow to probe and add nothing a Topology holds;
        // the Linux backend reads PCI from sysfs itself, so the libpciaccess
        // component ("pci", which also leaks on every load) is not needed.
        for (const char* c : {"opencl", "gl", "pci"})
          (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
        if (options_.gpu_memory_nodes == GpuMemoryNodes::keep) {
          const char* cur = std::getenv("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES");
          if (cur == nullptr) {
            env_lock.lock();
            env.emplace();
            env->set("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1");
          }
        }
        break;
      }
    }
    return {};
  }

  Result<Topology> convert(hwloc_topology_t t, const std::string& origin) const {
    Topology topo;
    topo.origin = origin;
    GPUAFF_TRY(topo.online, detail::hwloc_to_set(hwloc_topology_get_topology_cpuset(t), "the online CPUs", origin));
    GPUAFF_TRY_VOID(convert_allowed(t, origin, topo));
    GPUAFF_TRY_VOID(convert_packages(t, origin, topo));
    convert_nodes(t, topo);
    GPUAFF_TRY_VOID(convert_cores(t, origin, topo));
    GPUAFF_TRY_VOID(convert_caches(t, origin, topo));
    GPUAFF_TRY_VOID(convert_pci(t, origin, topo));
    return topo;
  }

  /// The allowed CPUs and memory nodes: hwloc's, narrowed live by this thread's binding and, from a root,
  /// by the recorded proc/self/status.
  Result<void> convert_allowed(hwloc_topology_t t, const std::string& origin, Topology& topo) const {
    {
      detail::HwlocBitmap allowed;
      hwloc_bitmap_and(allowed.get(), hwloc_topology_get_allowed_cpuset(t), hwloc_topology_get_complete_cpuset(t));
      GPUAFF_TRY(topo.allowed, detail::hwloc_to_set(allowed.get(), "the allowed CPUs", origin));
      detail::HwlocBitmap mems;
      hwloc_bitmap_and(mems.get(), hwloc_topology_get_allowed_nodeset(t), hwloc_topology_get_complete_nodeset(t));
      GPUAFF_TRY(topo.mems_allowed, detail::hwloc_to_set(mems.get(), "the allowed NUMA nodes", origin));
    }
    if (options_.input == HwlocInput::live) {
      detail::HwlocBitmap bound;
      if (hwloc_get_cpubind(t, bound.get(), HWLOC_CPUBIND_THREAD) == 0) {
        GPUAFF_TRY(CpuSet mine, detail::hwloc_to_set(bound.get(), "this thread's affinity", origin));
        if (!mine.empty()) topo.allowed &= mine;
      }
    } else if (options_.input == HwlocInput::root) {
      GPUAFF_TRY(auto cpus, detail::hwloc_status_list(options_.path, "Cpus_allowed_list"));
      if (cpus) topo.allowed &= *cpus;
      GPUAFF_TRY(auto mems, detail::hwloc_status_list(options_.path, "Mems_allowed_list"));
      if (mems) topo.mems_allowed &= *mems;
    }
    return {};
  }

  /// Packages by id (one package -1 holding every online CPU when hwloc shows none).
  Result<void> convert_packages(hwloc_topology_t t, const std::string& origin, Topology& topo) const {
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, o)) != nullptr;) {
      Package p;
      p.id = detail::hwloc_os_index(o);
      GPUAFF_TRY(p.cpus, detail::hwloc_to_set(o->cpuset, "a package's CPUs", origin));
      topo.packages.push_back(p);
    }
    if (topo.packages.empty() && !topo.online.empty()) topo.packages.push_back(Package{-1, topo.online});
    std::sort(topo.packages.begin(), topo.packages.end(), [](const Package& a, const Package& b) {
      return a.id != b.id ? a.id < b.id : a.cpus.first() < b.cpus.first();
    });
    return {};
  }

  /// NUMA nodes: every online CPU goes to the smallest node holding it.
  void convert_nodes(hwloc_topology_t t, Topology& topo) const {
    std::vector<hwloc_obj_t> node_objs;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o)) != nullptr;)
      node_objs.push_back(o);
    std::sort(node_objs.begin(), node_objs.end(),
              [](hwloc_obj_t a, hwloc_obj_t b) { return a->os_index < b->os_index; });
    std::vector<CpuSet> node_cpus(node_objs.size());
    for (int cpu : topo.online) {
      int best = -1;
      int best_weight = 0;
      for (std::size_t i = 0; i < node_objs.size(); ++i) {
        hwloc_obj_t n = node_objs[i];
        if (n->cpuset == nullptr || !hwloc_bitmap_isset(n->cpuset, static_cast<unsigned>(cpu))) continue;
        int w = hwloc_bitmap_weight(n->cpuset);
        bool better = best < 0 || w < best_weight ||
                      (w == best_weight && node_objs[static_cast<std::size_t>(best)]->subtype != nullptr &&
                       n->subtype == nullptr);
        if (better) {
          best = static_cast<int>(i);
          best_weight = w;
        }
      }
      if (best >= 0) node_cpus[static_cast<std::size_t>(best)].set(cpu);
    }
    for (std::size_t i = 0; i < node_objs.size(); ++i)
      topo.nodes.push_back(NumaNode{detail::hwloc_os_index(node_objs[i]), node_cpus[i], {}});
    fill_distances(t, topo);
  }

  /// Cores by first CPU (a PU outside any core is a core of its own).
  Result<void> convert_cores(hwloc_topology_t t, const std::string& origin, Topology& topo) const {
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_CORE, o)) != nullptr;) {
      Core c;
      GPUAFF_TRY(c.threads, detail::hwloc_to_set(o->cpuset, "a core's CPUs", origin));
      c.threads &= topo.online;
      if (c.threads.empty()) continue;
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
      c.package = pkg ? detail::hwloc_os_index(pkg) : -1;
      topo.cores.push_back(c);
    }
    for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu)) != nullptr;) {
      if (hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu) != nullptr) continue;
      int id = detail::hwloc_os_index(pu);
      if (!topo.online.test(id)) continue;
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
      topo.cores.push_back(Core{CpuSet::single(id), pkg ? detail::hwloc_os_index(pkg) : -1});
    }
    std::sort(topo.cores.begin(), topo.cores.end(), [](const Core& a, const Core& b) { return a.first() < b.first(); });
    return {};
  }

  /// The last-level Unified or Data cache above each PU, one group per cache.
  Result<void> convert_caches(hwloc_topology_t t, const std::string& origin, Topology& topo) const {
    std::vector<hwloc_obj_t> llcs;
    for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu)) != nullptr;) {
      hwloc_obj_t best = nullptr;
      for (hwloc_obj_t a = pu->parent; a != nullptr; a = a->parent) {
        if (!hwloc_obj_type_is_cache(a->type)) continue;
        if (a->attr->cache.type != HWLOC_OBJ_CACHE_UNIFIED && a->attr->cache.type != HWLOC_OBJ_CACHE_DATA) continue;
        if (best == nullptr || a->attr->cache.depth > best->attr->cache.depth) best = a;
      }
      if (best != nullptr && std::find(llcs.begin(), llcs.end(), best) == llcs.end()) llcs.push_back(best);
    }
    for (hwloc_obj_t c : llcs) {
      CacheGroup g;
      g.level = static_cast<int>(c->attr->cache.depth);
      GPUAFF_TRY(g.cpus, detail::hwloc_to_set(c->cpuset, "a cache's CPUs", origin));
      g.cpus &= topo.online;
      if (!g.cpus.empty()) topo.core_complexes.push_back(g);
    }
    std::sort(topo.core_complexes.begin(), topo.core_complexes.end(),
              [](const CacheGroup& a, const CacheGroup& b) { return a.cpus.first() < b.cpus.first(); });
    return {};
  }

  /// GPUs and `extra_pci` devices, their local CPUs from the nearest non-I/O ancestor.
  Result<void> convert_pci(hwloc_topology_t t, const std::string& origin, Topology& topo) const {
    std::vector<Gpu> all_gpus;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o)) != nullptr;) {
      const auto& a = o->attr->pcidev;
      PciDevice d;
      d.address = PciAddress{a.domain, a.bus, a.dev, a.func};
      d.vendor = a.vendor_id;
      d.device = a.device_id;
      d.class_code = static_cast<std::uint32_t>(a.class_id) << 8;
      bool wanted = d.is_gpu() ||
                    std::find(options_.extra_pci.begin(), options_.extra_pci.end(), d.address) != options_.extra_pci.end();
      if (!wanted) continue;
      hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
      if (anc != nullptr && anc->cpuset != nullptr) {
        GPUAFF_TRY(d.local_cpus, detail::hwloc_to_set(anc->cpuset, "a PCI device's local CPUs", origin));
        d.local_cpus &= topo.online;
        d.has_local_cpus = true;
        d.numa_node = node_within(topo, d.local_cpus);
      }
      if (d.is_gpu()) {
        Gpu g;
        g.pci = d;
        g.uuid = uuid_of(o, d);
        all_gpus.push_back(g);
      }
      topo.pci_devices.push_back(d);
    }
    std::sort(topo.pci_devices.begin(), topo.pci_devices.end(),
              [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
    std::stable_sort(all_gpus.begin(), all_gpus.end(),
                     [](const Gpu& a, const Gpu& b) { return a.pci.address < b.pci.address; });
    std::uint16_t vendor = numbered_vendor(all_gpus, options_.vendor);
    all_gpus = runtime_gpus(std::move(all_gpus), vendor);  // one runtime's numbering
    topo.host_gpus = all_gpus;
    // The driver's GPU list of a root or of this machine (an XML file has none).
    std::optional<std::vector<PciAddress>> driver;
    if (options_.input != HwlocInput::xml) {
      GPUAFF_TRY(driver, detail::hwloc_driver_gpus(options_.input == HwlocInput::root ? options_.path : "/"));
    }
    std::vector<Gpu> mine = process_gpus(all_gpus, driver, topo.hidden_gpus);
    GPUAFF_TRY(topo.gpus, select_visible_gpus(std::move(mine), options_.visible.with_environment()));
    for (std::size_t i = 0; i < topo.gpus.size(); ++i) topo.gpus[i].index = static_cast<int>(i);
    return {};
  }


  /// The node whose CPUs lie within `cpus`, when exactly one node with CPUs does; else -1.
  static int node_within(const Topology& topo, const CpuSet& cpus) {
    int found = -1;
    for (const auto& n : topo.nodes) {
      if (n.cpus.empty() || !n.cpus.is_subset_of(cpus)) continue;
      if (found >= 0) return -1;
      found = n.id;
    }
    return found;
  }

  static void fill_distances(hwloc_topology_t t, Topology& topo) {
    unsigned nr = 1;
    hwloc_distances_s* dist = nullptr;
    if (hwloc_distances_get_by_name(t, "NUMALatency", &nr, &dist, 0) != 0 || nr == 0 || dist == nullptr) {
      nr = 1;
      dist = nullptr;
      if (hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, &dist, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
          nr == 0 || dist == nullptr) {
        // hwloc keeps no matrix for a single node; the kernel's is [10] (SLIT's local distance)
        if (topo.nodes.size() == 1) topo.nodes[0].distances = {10};
        return;
      }
    }
    std::vector<int> pos(topo.nodes.size(), -1);  // topo node index -> matrix index
    for (std::size_t i = 0; i < topo.nodes.size(); ++i)
      for (unsigned k = 0; k < dist->nbobjs; ++k)
        if (detail::hwloc_os_index(dist->objs[k]) == topo.nodes[i].id) pos[i] = static_cast<int>(k);
    bool complete = std::all_of(pos.begin(), pos.end(), [](int p) { return p >= 0; });
    if (complete) {
      for (std::size_t i = 0; i < topo.nodes.size(); ++i) {
        for (std::size_t j = 0; j < topo.nodes.size(); ++j) {
          auto v = dist->values[static_cast<std::size_t>(pos[i]) * dist->nbobjs + static_cast<std::size_t>(pos[j])];
          topo.nodes[i].distances.push_back(static_cast<int>(v));
        }
      }
    }
    hwloc_distances_release(t, dist);
  }

  FixedString<96> uuid_of(hwloc_obj_t pci, const PciDevice& d) const {
    FixedString<96> out;
    for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling) {
      for (const char* key : {"NVIDIAUUID", "AMDUUID"}) {
        if (const char* v = hwloc_obj_get_info_by_name(c, key)) {
          std::string_view s = v;
          if (std::string_view(key) == "NVIDIAUUID" && s.substr(0, 4) != "GPU-") out.append("GPU-");
          out.append(s);
          return out;
        }
      }
    }
    if (d.vendor == pci_vendor::nvidia && options_.input != HwlocInput::xml) {
      out.append(detail::hwloc_nvidia_uuid(options_.input == HwlocInput::root ? options_.path : "/", d.address));
    }
    return out;
  }

  HwlocOptions options_;
};

static_assert(TopologySource<HwlocSource>);

/// Reads the machine `source` names through hwloc (an XML file, a root, or
/// this machine) with every GPU visible, plus `extra_pci`: the hwloc reader of
/// the front door (Readers::hwloc, source/load.hpp).
inline Result<Topology> read_hwloc_topology(const MachineSource& source, const std::vector<PciAddress>& extra_pci) {
  VisibleDevices every_gpu{.list = std::nullopt, .use_environment = false};
  HwlocOptions h{.visible = every_gpu, .extra_pci = extra_pci, .vendor = source.vendor};
  if (!source.hwloc_xml.empty()) {
    h.input = HwlocInput::xml;
    h.path = source.hwloc_xml;
  } else if (!source.root.empty() && source.root != "/") {
    h.input = HwlocInput::root;
    h.path = source.root;
  }
  return HwlocSource(h).load();
}

}  // namespace v0
}  // namespace gpuaff
