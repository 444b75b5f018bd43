#pragma once
// SysfsSource: a Topology from a root directory laid out like `/` (the live
// machine, or a recording made by `gpuaff record`). CONTRACT.md section 1 lists
// the paths. Every path below is relative to the root; symlinks are followed
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

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/source/source.hpp"
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
  VisibleDevices visible{};              ///< GPU visibility (see gpus.hpp)
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

/// Tests set this to exercise the user-space resolver (RootResolver) that
/// kernels without openat2 use; nothing else should touch it. A plain bool
/// (no <atomic>): tests set it on one thread while no load runs.
inline bool sysfs_force_user_space_resolution = false;


/// The value of "Key:" in a proc status text, or nullopt.
inline std::optional<std::string_view> status_field(std::string_view text, std::string_view key) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t e = text.find('\n', i);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(i, e - i);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':')
      return trim(line.substr(key.size() + 1));
    i = e + 1;
  }
  return std::nullopt;
}

enum class Form { list, mask };
enum class Empty { error, allowed };

/// One load: file access with counting and tracing, and error wording.
class SysfsReader {
 public:
  SysfsReader(const std::string& root, bool live) : live_(live), resolver_(live ? std::string() : root) {
    display_ = root;
    while (display_.size() > 1 && display_.back() == '/') display_.pop_back();
    if (live || display_ == "/") display_.clear();
    if (!live) root_fd_ = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    in_root_ = root_fd_ >= 0 && !sysfs_force_user_space_resolution;
  }
  SysfsReader(const SysfsReader&) = delete;
  SysfsReader& operator=(const SysfsReader&) = delete;
  ~SysfsReader() {
    if (root_fd_ >= 0) ::close(root_fd_);
  }

  int opened = 0;
  std::vector<std::string> read;

  bool live() const { return live_; }
  std::string shown(std::string_view rel) const {
    std::string s = display_;
    s += '/';
    s += rel;
    return s;
  }
  std::string_view hint() const {
    return live_ ? "this kernel does not expose it as expected; record a working machine with `gpuaff record` and "
                   "pass --root"
                 : "--root must point at a recording made by `gpuaff record`";
  }

  template <class... Parts>
  Unexpected<Error> bad(Errc code, std::string_view rel, const Parts&... parts) const {
    return fail(code, shown(rel), ": ", parts..., "; ", hint());
  }
  Unexpected<Error> bad(std::string_view rel, const Error& e) const {
    return fail(e.code(), shown(rel), ": ", e.message(), "; ", hint());
  }

  /// Opens a root-relative path: directly when live, else confined to the root
  /// (openat2, or RootResolver where the kernel lacks it). Returns 0 or errno.
  int open_rel(std::string_view rel, int flags, int& fd) {
    fd = -1;
    if (live_) {
      host_ = "/";
      host_ += rel;
      fd = ::open(host_.c_str(), flags | O_CLOEXEC);
      return fd >= 0 ? 0 : errno;
    }
    if (in_root_) {
      std::string r(rel);
      int got = open_in_root(root_fd_, r, flags);
      if (got >= 0) {
        fd = got;
        return 0;
      }
      if (got != -ENOSYS) return -got;
      in_root_ = false;  // resolve in user space from now on
    }
    std::string path;
    if ((flags & O_DIRECTORY) != 0) {
      int err = resolver_.resolve(rel, path);
      if (err != 0) return err;
      fd = ::open(resolver_.host_path(path).c_str(), flags | O_CLOEXEC);
      return fd >= 0 ? 0 : errno;
    }
    std::size_t slash = rel.rfind('/');
    int err = resolver_.resolve_dir(slash == std::string_view::npos ? std::string_view{} : rel.substr(0, slash), path);
    if (err != 0) return err;
    if (!path.empty()) path += '/';
    path += slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    fd = ::open(resolver_.host_path(path).c_str(), flags | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) return 0;
    if (errno != ELOOP) return errno;
    err = resolver_.resolve(rel, path);  // the file itself is a symlink: resolve it inside the root
    if (err != 0) return err;
    fd = ::open(resolver_.host_path(path).c_str(), flags | O_CLOEXEC);
    return fd >= 0 ? 0 : errno;
  }

  /// Reads a file: true with `out` (trailing NULs and whitespace stripped), false if missing.
  Result<bool> get(std::string_view rel, std::string& out) {
    ++opened;
    out.clear();
    int fd = -1;
    int err = open_rel(rel, O_RDONLY, fd);
    if (err == 0) {
      bool proc = rel.size() >= 5 && rel.substr(0, 5) == "proc/";
      err = read_fd(fd, out, proc ? ShortRead::more : ShortRead::end);
      ::close(fd);
    }
    if (err == ENOENT || err == ENOTDIR) return false;
    if (err != 0)
      return unexpected(make_sys_error(Errc::io_error, err, shown(rel), ": cannot be read (errno ", err, "); ", hint()));
    strip_trailing(out);
    read.emplace_back(rel);
    return true;
  }

  /// The first of `rels` that exists: its position, or -1 (content in `out`).
  Result<int> first_of(std::initializer_list<std::string> rels, std::string& out) {
    int i = 0;
    for (const auto& r : rels) {
      GPUAFF_TRY(bool have, get(r, out));
      if (have) return i;
      ++i;
    }
    return -1;
  }

  Result<CpuSet> cpus(std::string_view rel, std::string_view text, Form form, Empty empty) const {
    if (trim(text).empty()) {
      if (empty == Empty::allowed) return CpuSet{};
      return bad(Errc::parse_error, rel, "is empty");
    }
    auto r = form == Form::list ? CpuSet::parse_list(text) : CpuSet::parse_mask(text);
    if (!r) return bad(rel, r.error());
    return *r;
  }

  Result<long long> integer(std::string_view rel, std::string_view text, long long lo, long long hi) const {
    std::string_view s = trim(text);
    if (s.empty()) return bad(Errc::parse_error, rel, "is empty");
    bool neg = s[0] == '-';
    std::size_t i = neg ? 1 : 0;
    if (i == s.size()) return bad(Errc::parse_error, rel, "expected a number, found '", s.substr(0, 24), "'");
    long long v = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9')
        return bad(Errc::parse_error, rel, "expected a number, found '", s.substr(0, 24), "'");
      v = v * 10 + (s[i] - '0');
      if (v > 1'000'000'000'000LL) v = 1'000'000'000'000LL;  // saturate: reported as out of range
    }
    if (neg) v = -v;
    if (v < lo || v > hi)
      return bad(Errc::out_of_range, rel, "value ", s.substr(0, 24), " is outside ", lo, "..", hi);
    return v;
  }

  Result<long long> hex(std::string_view rel, std::string_view text, long long max) const {
    std::string_view s = trim(text);
    if (s.empty()) return bad(Errc::parse_error, rel, "is empty");
    std::string_view digits = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? s.substr(2) : s;
    long long v = 0;
    for (char c : digits) {
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return bad(Errc::parse_error, rel, "expected a hex number such as 0x10de, found '", s.substr(0, 24), "'");
      v = v * 16 + d;
      if (v > (1LL << 40)) v = 1LL << 40;  // saturate: reported as out of range
    }
    if (v > max) return bad(Errc::out_of_range, rel, "value ", s.substr(0, 24), " is above ", max);
    return v;
  }

  /// The root-relative path resolved inside the root exists and is a directory.
  bool is_directory(std::string_view rel) {
    int fd = -1;
    if (open_rel(rel, O_RDONLY | O_DIRECTORY, fd) != 0) return false;
    ::close(fd);
    return true;
  }

  /// Lists a directory inside the root; a missing one is empty.
  Result<std::vector<std::string>> list(std::string_view rel) {
    std::vector<std::string> names;
    int fd = -1;
    int e = open_rel(rel, O_RDONLY | O_DIRECTORY, fd);
    if (e == 0) e = list_directory_fd(fd, names);
    if (e == ENOENT || e == ENOTDIR) names.clear();
    else if (e != 0)
      return unexpected(make_sys_error(Errc::io_error, e, shown(rel), ": cannot be listed (errno ", e, "); ", hint()));
    return names;
  }

 private:
  bool live_;
  RootResolver resolver_;
  std::string display_;
  std::string host_;
  int root_fd_ = -1;
  bool in_root_ = false;  // openat2 RESOLVE_IN_ROOT works here
};

inline std::string cpu_dir(int cpu) { return "sys/devices/system/cpu/cpu" + std::to_string(cpu); }

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

}  // namespace detail

inline Result<Topology> SysfsSource::load() {
  using detail::Empty;
  using detail::Form;
  opened_ = 0;
  read_.clear();
  const std::string& root = options_.root;
  if (root.empty())
    return fail(Errc::invalid_argument, "the topology root is empty; pass --root / or a directory made by `gpuaff record`");
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(Errc::not_found, "topology root '", root,
                "' is not a directory; pass --root / or a directory made by `gpuaff record`");
  bool live = root == "/";
  if (!live) {
    char* real = ::realpath(root.c_str(), nullptr);
    if (real != nullptr) {
      live = std::string_view(real) == "/";
      std::free(real);  // NOLINT(cppcoreguidelines-no-malloc): realpath allocates with malloc
    }
  }
  detail::SysfsReader r(root, live);
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
  t.origin = std::string_view(root);
  std::string s;
  const std::string cpu = "sys/devices/system/cpu/";

  // ---- online CPUs ------------------------------------------------------------
  {
    std::string rel = cpu + "online";
    GPUAFF_TRY(bool have, r.get(rel, s));
    if (have) {
      if (detail::trim(s).empty()) return r.bad(Errc::parse_error, rel, "is empty (it must list the online CPUs)");
      GPUAFF_TRY(t.online, r.cpus(rel, s, Form::list, Empty::error));
    } else {
      GPUAFF_TRY(int which, r.first_of({cpu + "present", cpu + "possible"}, s));
      if (which < 0) return r.bad(Errc::not_found, rel, "is missing");
      std::string prel = cpu + (which == 0 ? "present" : "possible");
      GPUAFF_TRY(CpuSet present, r.cpus(prel, s, Form::list, Empty::error));
      for (int c : present) {
        std::string orel = detail::cpu_dir(c) + "/online";
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
  }

  // ---- cores: one sibling list per core ----------------------------------------
  std::vector<int> core_index(static_cast<std::size_t>(t.online.last() + 1), -1);
  {
    CpuSet covered;
    for (int c : t.online) {
      if (covered.test(c)) continue;
      std::string dir = detail::cpu_dir(c) + "/topology/";
      GPUAFF_TRY(int which, r.first_of({dir + "core_cpus_list", dir + "thread_siblings_list", dir + "core_cpus",
                                        dir + "thread_siblings"},
                                       s));
      if (which < 0)
        return r.bad(Errc::not_found, dir + "core_cpus_list",
                     "is missing (and so are thread_siblings_list, core_cpus and thread_siblings)");
      static constexpr const char* names[] = {"core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"};
      std::string rel = dir + names[which];
      GPUAFF_TRY(CpuSet sib, r.cpus(rel, s, which < 2 ? Form::list : Form::mask, Empty::error));
      sib &= t.online;
      if (!sib.test(c)) return r.bad(Errc::parse_error, rel, "does not list cpu", c, " itself");
      if (sib.intersects(covered))
        return r.bad(Errc::parse_error, rel, "disagrees with the sibling list of cpu", (sib & covered).first());
      for (int x : sib) core_index[static_cast<std::size_t>(x)] = static_cast<int>(t.cores.size());
      t.cores.push_back(Core{sib, -1});
      covered |= sib;
    }
  }

  // ---- packages: one id and one member list per package ---------------------------
  {
    CpuSet covered;
    bool lists = true;
    for (int c : t.online) {
      if (covered.test(c)) continue;
      std::string dir = detail::cpu_dir(c) + "/topology/";
      std::string idrel = dir + "physical_package_id";
      GPUAFF_TRY(bool have, r.get(idrel, s));
      if (!have) return r.bad(Errc::not_found, idrel, "is missing");
      GPUAFF_TRY(long long id, r.integer(idrel, s, -1, 1'000'000));
      CpuSet members;
      if (lists) {
        GPUAFF_TRY(int which, r.first_of({dir + "package_cpus_list", dir + "core_siblings_list", dir + "package_cpus",
                                          dir + "core_siblings"},
                                         s));
        if (which < 0) {
          lists = false;  // an old or odd kernel: fall back to one package id per core
        } else {
          static constexpr const char* names[] = {"package_cpus_list", "core_siblings_list", "package_cpus",
                                                  "core_siblings"};
          std::string rel = dir + names[which];
          GPUAFF_TRY(members, r.cpus(rel, s, which < 2 ? Form::list : Form::mask, Empty::error));
          members &= t.online;
          if (!members.test(c)) return r.bad(Errc::parse_error, rel, "does not list cpu", c, " itself");
          if (members.intersects(covered))
            return r.bad(Errc::parse_error, rel, "disagrees with the package list of cpu", (members & covered).first());
        }
      }
      if (!lists) members = t.cores[static_cast<std::size_t>(core_index[static_cast<std::size_t>(c)])].threads;
      covered |= members;
      Package* same = nullptr;
      for (auto& p : t.packages)
        if (p.id == id) same = &p;
      if (same == nullptr) t.packages.push_back(Package{static_cast<int>(id), members});
      else same->cpus |= members;
    }
    // By id. Insertion sorts here and below: a few packages, and directory
    // listings that come nearly sorted (<algorithm> costs more to compile).
    for (std::size_t i = 1; i < t.packages.size(); ++i)
      for (std::size_t j = i; j > 0 && t.packages[j].id < t.packages[j - 1].id; --j)
        std::swap(t.packages[j], t.packages[j - 1]);
    for (auto& core : t.cores)
      if (const Package* p = t.package_of_cpu(core.first())) core.package = p->id;
  }

  // ---- last-level cache groups ----------------------------------------------------
  {
    int first = t.online.first();
    std::string base = detail::cpu_dir(first) + "/cache/index";
    int llc = -1;
    long long llc_level = 0;
    for (int k = 0; k < 32; ++k) {
      std::string lrel = base + std::to_string(k) + "/level";
      GPUAFF_TRY(bool have, r.get(lrel, s));
      if (!have) break;
      GPUAFF_TRY(long long level, r.integer(lrel, s, 1, 15));
      std::string trel = base + std::to_string(k) + "/type";
      GPUAFF_TRY(bool have_type, r.get(trel, s));
      if (!have_type) return r.bad(Errc::not_found, trel, "is missing");
      std::string_view type = detail::trim(s);
      if (type.empty()) return r.bad(Errc::parse_error, trel, "is empty");
      if ((type == "Unified" || type == "Data") && level > llc_level) {
        llc = k;
        llc_level = level;
      }
    }
    if (llc >= 0) {
      CpuSet covered;
      for (int c : t.online) {
        if (covered.test(c)) continue;
        std::string dir = detail::cpu_dir(c) + "/cache/index" + std::to_string(llc) + "/";
        GPUAFF_TRY(int which, r.first_of({dir + "shared_cpu_list", dir + "shared_cpu_map"}, s));
        if (which < 0) continue;  // this CPU lacks that cache: it is in no group
        std::string rel = dir + (which == 0 ? "shared_cpu_list" : "shared_cpu_map");
        GPUAFF_TRY(CpuSet group, r.cpus(rel, s, which == 0 ? Form::list : Form::mask, Empty::error));
        group &= t.online;
        if (!group.test(c)) return r.bad(Errc::parse_error, rel, "does not list cpu", c, " itself");
        if (group.intersects(covered))
          return r.bad(Errc::parse_error, rel, "disagrees with the cache group of cpu", (group & covered).first());
        covered |= group;
        t.core_complexes.push_back(CacheGroup{static_cast<int>(llc_level), group});
      }
    }
  }

  // ---- NUMA nodes -------------------------------------------------------------------
  {
    const std::string node = "sys/devices/system/node/";
    GPUAFF_TRY(int which, r.first_of({node + "online", node + "possible"}, s));
    if (which < 0) {
      if (r.is_directory("sys/devices/system/node"))
        return r.bad(Errc::not_found, node + "online", "is missing (and so is node/possible)");
      t.nodes.push_back(NumaNode{0, t.online, {}});  // CONFIG_NUMA=n: one node
    } else {
      bool from_possible = which == 1;
      std::string lrel = node + (from_possible ? "possible" : "online");
      GPUAFF_TRY(CpuSet ids, r.cpus(lrel, s, Form::list, Empty::error));
      std::vector<std::string> distance_files;
      for (int id : ids) {
        std::string dir = node + "node" + std::to_string(id) + "/";
        GPUAFF_TRY(int w, r.first_of({dir + "cpulist", dir + "cpumap"}, s));
        if (w < 0) {
          if (from_possible) continue;  // possible but absent node
          return r.bad(Errc::not_found, dir + "cpulist", "is missing (and so is cpumap), but ", lrel, " lists node ", id);
        }
        std::string crel = dir + (w == 0 ? "cpulist" : "cpumap");
        GPUAFF_TRY(CpuSet cpus, r.cpus(crel, s, w == 0 ? Form::list : Form::mask, Empty::allowed));
        NumaNode n{id, cpus & t.online, {}};
        std::string drel = dir + "distance";
        bool have = false;
        if (options_.detail == SysfsDetail::full) {
          GPUAFF_TRY(have, r.get(drel, s));
        }
        if (have) {
          std::string_view d = detail::trim(s);
          if (d.empty()) return r.bad(Errc::parse_error, drel, "is empty");
          std::size_t i = 0;
          while (i < d.size()) {
            std::size_t j = i;
            while (j < d.size() && d[j] != ' ' && d[j] != '\t' && d[j] != '\n') ++j;
            GPUAFF_TRY(long long v, r.integer(drel, d.substr(i, j - i), 0, 255));
            n.distances.push_back(static_cast<int>(v));
            i = j;
            while (i < d.size() && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n')) ++i;
          }
        }
        distance_files.push_back(drel);
        t.nodes.push_back(std::move(n));
      }
      if (t.nodes.empty()) return r.bad(Errc::parse_error, lrel, "names no node with a directory");
      for (std::size_t k = 0; k < t.nodes.size(); ++k) {
        auto& n = t.nodes[k];
        if (n.distances.empty() || n.distances.size() == t.nodes.size()) continue;
        if (from_possible) {
          n.distances.clear();  // cannot align them with the nodes that exist
          continue;
        }
        return r.bad(Errc::parse_error, distance_files[k], "has ", n.distances.size(), " distances but ", lrel, " names ",
                     t.nodes.size(), " nodes");
      }
    }
  }

  // ---- allowed CPUs and memory nodes --------------------------------------------------
  {
    const std::string rel = "proc/self/status";
    GPUAFF_TRY(bool have, r.get(rel, s));
    if (live) {
      GPUAFF_TRY(t.allowed, thread_affinity());
    } else {
      t.allowed = t.online;  // no recorded allowed set: everything online
      if (have) {
        if (auto v = detail::status_field(s, "Cpus_allowed_list")) {
          GPUAFF_TRY(t.allowed, r.cpus(rel + " (Cpus_allowed_list)", *v, Form::list, Empty::error));
        } else if (auto m = detail::status_field(s, "Cpus_allowed")) {
          GPUAFF_TRY(t.allowed, r.cpus(rel + " (Cpus_allowed)", *m, Form::mask, Empty::error));
          if (t.allowed.empty()) return r.bad(Errc::parse_error, rel, "Cpus_allowed is an empty mask");
        }
      }
    }
    if (have) {
      if (auto v = detail::status_field(s, "Mems_allowed_list")) {
        GPUAFF_TRY(t.mems_allowed, r.cpus(rel + " (Mems_allowed_list)", *v, Form::list, Empty::error));
      } else if (auto m = detail::status_field(s, "Mems_allowed")) {
        GPUAFF_TRY(t.mems_allowed, r.cpus(rel + " (Mems_allowed)", *m, Form::mask, Empty::error));
      }
    }
  }

  // ---- PCI devices ----------------------------------------------------------------------
  {
    const std::string pci = "sys/bus/pci/devices/";
    GPUAFF_TRY(auto names, r.list("sys/bus/pci/devices"));
    std::vector<std::pair<PciAddress, std::string>> devices;
    for (auto& n : names) {
      auto a = PciAddress::parse(n);
      if (a) devices.emplace_back(*a, std::move(n));
    }
    for (std::size_t i = 1; i < devices.size(); ++i)
      for (std::size_t j = i; j > 0 && devices[j].first < devices[j - 1].first; --j) std::swap(devices[j], devices[j - 1]);
    auto is_extra = [&](const PciAddress& a) {
      for (const auto& e : options_.extra_pci)
        if (e == a) return true;
      return false;
    };
    for (const auto& want : options_.extra_pci) {
      bool listed = false;
      for (const auto& d : devices) listed = listed || d.first == want;
      if (!listed)
        return fail(Errc::not_found, "PCI device ", want.to_string(), " is not in ", r.shown("sys/bus/pci/devices"),
                    "; check the address with `lspci -D`");
    }
    for (const auto& [addr, name] : devices) {
      bool extra = is_extra(addr);
      std::string dir = pci + name + "/";
      PciDevice d;
      d.address = addr;
      GPUAFF_TRY(bool have_class, r.get(dir + "class", s));
      if (have_class) {
        GPUAFF_TRY(long long cls, r.hex(dir + "class", s, 0xffffff));
        d.class_code = static_cast<std::uint32_t>(cls);
      } else if (!extra) {
        continue;
      }
      bool full = extra;
      if (is_gpu_candidate_class(d.class_code) || extra) {
        GPUAFF_TRY(bool have, r.get(dir + "vendor", s));
        if (!have) return r.bad(Errc::not_found, dir + "vendor", "is missing");
        GPUAFF_TRY(long long v, r.hex(dir + "vendor", s, 0xffff));
        d.vendor = static_cast<std::uint16_t>(v);
        full = full || d.is_gpu();
      }
      if (!full) continue;
      bool have_dev = false;
      if (options_.detail == SysfsDetail::full || extra) {
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
      int lw = -1;
      if (options_.detail == SysfsDetail::full || d.numa_node < 0) {
        GPUAFF_TRY(lw, r.first_of({dir + "local_cpulist", dir + "local_cpus"}, s));
      }
      if (lw >= 0) {
        GPUAFF_TRY(CpuSet local, r.cpus(dir + (lw == 0 ? "local_cpulist" : "local_cpus"), s,
                                        lw == 0 ? Form::list : Form::mask, Empty::allowed));
        d.local_cpus = local & t.online;
        d.has_local_cpus = true;
      }
      t.pci_devices.push_back(d);
    }
  }

  // ---- GPUs -------------------------------------------------------------------------------
  VisibleDevices visible = options_.visible.with_environment();
  bool want_uuids = options_.detail == SysfsDetail::full || detail::names_uuids(visible) ||
                    (options_.visible_later && detail::names_uuids(options_.visible_later->with_environment()));
  std::vector<Gpu> all;
  for (const auto& d : t.pci_devices) {
    if (!d.is_gpu()) continue;
    Gpu g;
    g.pci = d;
    if (d.vendor == pci_vendor::nvidia && want_uuids) {
      std::string rel = "proc/driver/nvidia/gpus/" + std::string(d.address.to_string().view()) + "/information";
      GPUAFF_TRY(bool have, r.get(rel, s));
      if (have) {
        if (auto u = detail::status_field(s, "GPU UUID")) {
          if (u->size() > 4 && u->substr(0, 4) == "GPU-" && u->size() <= decltype(g.uuid)::capacity) g.uuid = *u;
        }
      }
    }
    all.push_back(std::move(g));
  }
  GPUAFF_TRY(t.gpus, select_visible_gpus(std::move(all), visible));
  return t;
}

}  // namespace v0
}  // namespace gpuaff
