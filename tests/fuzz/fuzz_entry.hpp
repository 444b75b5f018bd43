// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one entry point shared by the libFuzzer target (fuzz_target.cpp, clang
// only) and the corpus replay test (fuzz_replay.cpp, any compiler).
//
// Input: the first byte picks what is fed (modulo 5 below 0xe0; 0xe0..0xef:
// 7; 0xf0 and above: even 5, odd 6); the rest is the text.
//   0  CpuSet::parse_list      (a parsed set must survive to_list/to_mask round trips)
//   1  CpuSet::parse_mask      (same)
//   2  PciAddress::parse       (a parsed address must survive to_string)
//   3  SysfsSource on a small tree: the text, split at 0xff bytes, gives the
//      contents of the files in tree_files() in order: an empty piece (or no
//      piece) keeps the valid default, a piece that is exactly 0xfe removes the
//      file, exactly 0xfd makes it empty, 0xfc followed by text makes it a
//      symlink to that text (loops, absolute and escaping targets included). The last four files exist only when
//      given. A piece after the files is CUDA_VISIBLE_DEVICES. The tree's
//      invariants are checked whenever the load succeeds.
//   4  select_visible_gpus with the text as CUDA_VISIBLE_DEVICES, then as
//      --visible-devices, on four fixed GPUs
//   5  record_topology of the tree of 3 (same encoding) into a fresh --out:
//      every file written holds what the root holds at that path, every link
//      written stays inside --out, nothing beside --out and the root appears,
//      and the file outside the root is unchanged
//   6  JsonSource on a file holding the text (--topology FILE.json); with
//      GPUAFF_FUZZ_JSON only (the JSON source needs nlohmann_json)
//   7  (first byte 0xe0..0xef) the text as a tar root (--root FILE.tar,
//      detail/archive_tree.hpp): it parses or is refused with a message;
//      parsed, every listed name is one plain component found again, every
//      file reads back as stored through RootDir, and SysfsSource loads it or
//      says why (seeds: GNU tar's pax and gnu formats, a hard link, a cut
//      archive, a name deeper than the limit)
// Every file the reader read must resolve inside the root, and the kernel's
// resolver (openat2) and RootResolver must give the same result.
// Any broken invariant calls std::abort() so that the fuzzer reports it.

#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/doctor/mappings.hpp"
#include "gpuaff/record/record.hpp"
#include "gpuaff/source/visible.hpp"
#include "gpuaff/source/sysfs.hpp"
#include "gpuaff/topology.hpp"
#ifdef GPUAFF_FUZZ_JSON
#include "gpuaff/source/json.hpp"
#endif

namespace gpuaff_fuzz {

inline void require(bool ok) {
  if (!ok) std::abort();
}

/// The small tree: path and a valid default content (2 cores x SMT2, 2 nodes, one GPU).
inline const std::vector<std::pair<std::string, std::string>>& tree_files() {
  static const std::vector<std::pair<std::string, std::string>> files = {
      {"sys/devices/system/cpu/online", "0-3\n"},
      {"sys/devices/system/cpu/cpu0/topology/core_cpus_list", "0,2\n"},
      {"sys/devices/system/cpu/cpu1/topology/core_cpus_list", "1,3\n"},
      {"sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n"},
      {"sys/devices/system/cpu/cpu0/topology/package_cpus_list", "0-3\n"},
      {"sys/devices/system/cpu/cpu1/topology/physical_package_id", "0\n"},
      {"sys/devices/system/cpu/cpu1/topology/package_cpus_list", "0-3\n"},
      {"sys/devices/system/cpu/cpu0/cache/index0/level", "3\n"},
      {"sys/devices/system/cpu/cpu0/cache/index0/type", "Unified\n"},
      {"sys/devices/system/cpu/cpu0/cache/index0/shared_cpu_list", "0,2\n"},
      {"sys/devices/system/cpu/cpu1/cache/index0/shared_cpu_list", "1,3\n"},
      {"sys/devices/system/node/online", "0-1\n"},
      {"sys/devices/system/node/node0/cpulist", "0-3\n"},
      {"sys/devices/system/node/node0/distance", "10 20\n"},
      {"sys/devices/system/node/node1/cpulist", "\n"},
      {"sys/devices/system/node/node1/distance", "20 10\n"},
      {"sys/devices/pci0000:10/0000:10:00.0/class", "0x030200\n"},
      {"sys/devices/pci0000:10/0000:10:00.0/vendor", "0x10de\n"},
      {"sys/devices/pci0000:10/0000:10:00.0/numa_node", "0\n"},
      {"sys/devices/pci0000:10/0000:10:00.0/local_cpulist", "0-3\n"},
      {"proc/driver/nvidia/gpus/0000:10:00.0/information", "GPU UUID: \t GPU-12345678-abcd\n"},
      {"proc/self/status", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0-1\n"},
      {"sys/devices/system/cpu/present", "0-3\n"},
      {"sys/devices/system/cpu/cpu3/online", "1\n"},
      {"sys/devices/system/cpu/cpu2/topology/core_cpus_list", "0,2\n"},
      {"sys/devices/system/cpu/cpu0/topology/thread_siblings", "5\n"},
  };
  return files;
}

/// Removes `path` and everything under it, never following a link.
inline void remove_tree(const std::string& path) {
  ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16, FTW_DEPTH | FTW_PHYS);
}

/// The secret outside the root: the recorder must never copy or change it.
inline constexpr std::string_view outside_secret = "0-4095\n";

/// A scratch root, made once per process and removed at exit.
class Scratch {
 public:
  static Scratch& get() {
    static Scratch s;
    return s;
  }
  const std::string& root() const { return root_; }

 private:
  // base/root is the tree; base/outside holds a file that a reader escaping the
  // root through a symlink could reach.
  Scratch() {
    (void)tree_files();  // constructed first, so destroyed after ~Scratch, which uses it
    const char* tmp = std::getenv("TMPDIR");
    for (std::string base : {std::string(tmp != nullptr ? tmp : ""), std::string("/dev/shm"), std::string("/tmp")}) {
      if (base.empty()) continue;
      std::string pattern = base + "/gpuaff-fuzz-XXXXXX";
      if (::mkdtemp(pattern.data()) != nullptr) {
        base_ = pattern;
        break;
      }
    }
    require(!base_.empty());
    root_ = base_ + "/root";
    require(gpuaff::detail::make_directories(root_ + "/sys/bus/pci/devices") == 0);
    require(gpuaff::detail::make_directories(base_ + "/outside") == 0);
    require(gpuaff::detail::write_whole_file(base_ + "/outside/secret", outside_secret) == 0);
    std::string link = root_ + "/sys/bus/pci/devices/0000:10:00.0";
    require(::symlink("../../../devices/pci0000:10/0000:10:00.0", link.c_str()) == 0);
    char* real = ::realpath(root_.c_str(), nullptr);
    require(real != nullptr);
    real_root_ = real;
    std::free(real);  // NOLINT(cppcoreguidelines-no-malloc)
  }
  ~Scratch() {
    // Remove what tree_files() may have created, deepest first; then the directories.
    for (const auto& f : tree_files()) ::unlink((root_ + "/" + f.first).c_str());
    ::unlink((root_ + "/sys/bus/pci/devices/0000:10:00.0").c_str());
    std::vector<std::string> dirs;
    for (const auto& f : tree_files()) {
      std::string d = f.first;
      for (auto slash = d.rfind('/'); slash != std::string::npos; slash = d.rfind('/')) {
        d.resize(slash);
        dirs.push_back(d);
      }
    }
    dirs.emplace_back("sys/bus/pci/devices");
    dirs.emplace_back("sys/bus/pci");
    dirs.emplace_back("sys/bus");
    std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const auto& d : dirs) ::rmdir((root_ + "/" + d).c_str());
    ::rmdir(root_.c_str());
    remove_tree(base_ + "/out");
    ::unlink((base_ + "/topology.json").c_str());
    ::unlink((base_ + "/outside/secret").c_str());
    ::rmdir((base_ + "/outside").c_str());
    ::rmdir(base_.c_str());
  }

 public:
  const std::string& real_root() const { return real_root_; }
  const std::string& base() const { return base_; }
  /// Where the recorder writes (removed before and after each record).
  std::string out() const { return base_ + "/out"; }
  /// A scratch file for the JSON source.
  std::string json_file() const { return base_ + "/topology.json"; }
  std::string tar_file() const { return base_ + "/root.tar"; }

 private:
  std::string base_;
  std::string real_root_;
  std::string root_;
};

inline void check_set_round_trip(const gpuaff::CpuSet& s) {
  auto l = gpuaff::CpuSet::parse_list(s.to_list());
  require(l && *l == s);
  auto m = gpuaff::CpuSet::parse_mask(s.to_mask());
  require(m && *m == s);
}

inline void check_topology(const gpuaff::Topology& t) {
  using gpuaff::CpuSet;
  require(!t.online.empty());
  CpuSet in_cores;
  for (const auto& c : t.cores) {
    require(!c.threads.empty());
    require(c.threads.is_subset_of(t.online));
    require(!c.threads.intersects(in_cores));  // cores are disjoint
    in_cores |= c.threads;
  }
  require(in_cores == t.online);  // and cover every online CPU
  CpuSet in_packages;
  for (std::size_t i = 0; i < t.packages.size(); ++i) {
    require(t.packages[i].cpus.is_subset_of(t.online));
    if (i > 0) require(t.packages[i - 1].id < t.packages[i].id);
    in_packages |= t.packages[i].cpus;
  }
  require(in_packages == t.online);
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    require(t.nodes[i].cpus.is_subset_of(t.online));
    if (i > 0) require(t.nodes[i - 1].id < t.nodes[i].id);
    require(t.nodes[i].distances.empty() || t.nodes[i].distances.size() == t.nodes.size());
  }
  CpuSet in_groups;
  for (const auto& g : t.core_complexes) {
    require(g.cpus.is_subset_of(t.online) && !g.cpus.intersects(in_groups));
    in_groups |= g.cpus;
  }
  for (std::size_t i = 0; i < t.gpus.size(); ++i) {
    require(t.gpus[i].index == static_cast<int>(i));
    require(t.gpus[i].pci.is_gpu());
  }
  for (std::size_t i = 1; i < t.pci_devices.size(); ++i)
    require(t.pci_devices[i - 1].address < t.pci_devices[i].address);
}

/// Writes the tree of `text` (see the top of this file) into the scratch root;
/// returns the CUDA_VISIBLE_DEVICES piece, if any.
inline std::optional<std::string> write_tree(std::string_view text) {
  Scratch& s = Scratch::get();
  const auto& files = tree_files();
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; !text.empty() && i <= text.size() && pieces.size() < files.size() + 1;) {
    std::size_t j = text.find('\xff', i);
    if (j == std::string_view::npos) j = text.size();
    pieces.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  // The last piece beyond the files, if any, is CUDA_VISIBLE_DEVICES.
  std::optional<std::string> cuda;
  if (pieces.size() > files.size()) cuda = std::string(pieces[files.size()]);
  for (std::size_t k = 0; k < files.size(); ++k) {
    std::string path = s.root() + "/" + files[k].first;
    bool has_piece = k < pieces.size() && !pieces[k].empty();
    // Files after the default tree (present, cpuN/online, ...) exist only when given.
    bool extra = k + 4 >= files.size();
    ::unlink(path.c_str());  // never write through a link an earlier input made
    if ((has_piece && pieces[k] == "\xfe") || (!has_piece && extra)) continue;
    if (has_piece && pieces[k][0] == '\xfc') {
      std::string target(pieces[k].substr(1));
      auto slash = path.rfind('/');
      require(gpuaff::detail::make_directories(path.substr(0, slash)) == 0);
      (void)::symlink(target.c_str(), path.c_str());  // an empty target fails: the file is then missing
      continue;
    }
    std::string content = !has_piece ? files[k].second : pieces[k] == "\xfd" ? std::string() : std::string(pieces[k]);
    auto slash = path.rfind('/');
    require(gpuaff::detail::make_directories(path.substr(0, slash)) == 0);
    require(gpuaff::detail::write_whole_file(path, content) == 0);
  }
  return cuda;
}

/// Returns whether the load succeeded (for the replay test's own checks).
inline bool run_tree(std::string_view text) {
  Scratch& s = Scratch::get();
  std::optional<std::string> cuda = write_tree(text);
  gpuaff::SysfsSource src(gpuaff::SysfsOptions{
      .root = s.root(), .visible = {.use_environment = false, .cuda_visible_devices = cuda}});
  auto r = src.load();
  // Whatever was read must lie inside the root once every link is followed.
  gpuaff::detail::RootResolver resolver(s.root());
  for (const auto& f : src.files_read()) {
    std::string resolved;
    require(resolver.resolve(f, resolved) == 0);
    char* real = ::realpath(resolver.host_path(resolved).c_str(), nullptr);
    require(real != nullptr);
    std::string_view rp(real);
    bool inside = rp.size() > s.real_root().size() && rp.substr(0, s.real_root().size()) == s.real_root() &&
                  rp[s.real_root().size()] == '/';
    std::free(real);  // NOLINT(cppcoreguidelines-no-malloc)
    require(inside);
  }
  // Differential: the user-space resolver (kernels without openat2) must agree.
  gpuaff::detail::sysfs_force_user_space_resolution = true;
  gpuaff::SysfsSource user_space(src.options());
  auto u = user_space.load();
  gpuaff::detail::sysfs_force_user_space_resolution = false;
  require(u.has_value() == r.has_value());
  if (r) require(*u == *r);
  else require(u.error().code() == r.error().code());
  require(user_space.files_read() == src.files_read());
  if (r) {
    check_topology(*r);
    return true;
  }
  require(!r.error().message().empty());
  return false;
}

inline void run_visible(std::string_view text) {
  std::vector<gpuaff::Gpu> gpus;
  const char* uuids[] = {"GPU-aaaa1111", "GPU-aaaa2222", "GPU-bbbb", ""};
  for (int i = 0; i < 4; ++i) {
    gpuaff::Gpu g;
    g.pci.address.bus = static_cast<std::uint8_t>(0x10 * (i + 1));
    g.pci.vendor = i == 3 ? gpuaff::pci_vendor::amd : gpuaff::pci_vendor::nvidia;
    g.pci.class_code = 0x030200;
    g.uuid = std::string_view(uuids[i]);
    gpus.push_back(g);
  }
  for (int pass = 0; pass < 2; ++pass) {
    gpuaff::VisibleDevices v{.use_environment = false};
    if (pass == 0) v.cuda_visible_devices = std::string(text);
    else v.list = std::string(text);
    auto r = gpuaff::select_visible_gpus(gpus, v);
    if (!r) {
      require(!r.error().message().empty());
      continue;
    }
    require(r->size() <= gpus.size() + 8);
    for (std::size_t i = 0; i < r->size(); ++i) require((*r)[i].index == static_cast<int>(i));
  }
}

/// Whether the host path `p`, every link followed, lies in the directory `dir` (real path).
inline bool resolves_inside(const std::string& p, const std::string& dir) {
  char* real = ::realpath(p.c_str(), nullptr);
  if (real == nullptr) return true;  // dangling: leads nowhere
  std::string_view rp(real);
  bool inside = rp == dir || (rp.size() > dir.size() && rp.substr(0, dir.size()) == dir && rp[dir.size()] == '/');
  std::free(real);  // NOLINT(cppcoreguidelines-no-malloc)
  return inside;
}

/// Checks what record_topology left in `out` (relative path `rel` below it).
inline void check_recorded(const std::string& out, const std::string& real_out, const std::string& rel,
                           gpuaff::detail::RootDir& root) {
  std::vector<std::string> names;
  require(gpuaff::detail::list_directory(out + "/" + rel, names) == 0);
  for (const auto& n : names) {
    std::string r = rel.empty() ? n : rel + "/" + n;
    std::string host = out + "/" + r;
    struct stat st {};
    require(::lstat(host.c_str(), &st) == 0);
    if (S_ISLNK(st.st_mode)) {
      require(resolves_inside(host, real_out));
    } else if (S_ISDIR(st.st_mode)) {
      check_recorded(out, real_out, r, root);
    } else {
      require(S_ISREG(st.st_mode));
      require((st.st_mode & 07133) == 0);  // never wider than 0644
      if (r == "proc/self/status" || r == "proc/mounts") continue;  // written fresh, not copied
      std::string written;
      std::string in_root;
      require(gpuaff::detail::read_whole_file(host, written) == 0);
      require(root.read(r, in_root) == 0);  // a file the root holds (read inside it) ...
      require(written == in_root);          // ... byte for byte
    }
  }
}

/// Records the tree of `text` into a fresh --out; returns whether it succeeded.
inline bool run_record(std::string_view text) {
  Scratch& s = Scratch::get();
  (void)write_tree(text);
  remove_tree(s.out());
  auto r = gpuaff::record_topology(gpuaff::RecordOptions{.out_dir = s.out(), .root = s.root()});
  if (!r) require(!r.error().message().empty());
  // Beside the root, --out and the outside directory, nothing was created.
  std::vector<std::string> names;
  require(gpuaff::detail::list_directory(s.base(), names) == 0);
  for (const auto& n : names) require(n == "root" || n == "out" || n == "outside" || n == "topology.json");
  std::vector<std::string> outside;
  require(gpuaff::detail::list_directory(s.base() + "/outside", outside) == 0);
  require(outside.size() == 1);
  std::string secret;
  require(gpuaff::detail::read_whole_file(s.base() + "/outside/secret", secret) == 0 && secret == outside_secret);
  if (gpuaff::detail::is_directory(s.out())) {
    char* real = ::realpath(s.out().c_str(), nullptr);
    require(real != nullptr);
    std::string real_out(real);
    std::free(real);  // NOLINT(cppcoreguidelines-no-malloc)
    gpuaff::detail::RootDir root(s.root(), false);
    check_recorded(s.out(), real_out, "", root);
  }
  remove_tree(s.out());
  return r.has_value();
}

/// Loads the text as a --topology file; returns whether it loaded.
inline bool run_json(std::string_view text) {
#ifdef GPUAFF_FUZZ_JSON
  Scratch& s = Scratch::get();
  require(gpuaff::detail::write_whole_file(s.json_file(), text) == 0);
  gpuaff::JsonSource src(gpuaff::JsonSource::Options{.path = s.json_file(), .visible = {.use_environment = false}});
  auto r = src.load();
  if (!r) {
    require(!r.error().message().empty());
    return false;
  }
  for (std::size_t i = 0; i < r->gpus.size(); ++i) require(r->gpus[i].index == static_cast<int>(i));
  return true;
#else
  (void)text;
  return false;
#endif
}

/// Reads the text as a tar root; returns whether it parsed.
inline bool run_archive(std::string_view text) {
  Scratch& s = Scratch::get();
  require(gpuaff::detail::write_whole_file(s.tar_file(), text) == 0);
  struct Remove {  // the recorder's case checks that nothing else lies beside the root
    std::string path;
    ~Remove() { ::unlink(path.c_str()); }
  } remove{s.tar_file()};
  auto tree = gpuaff::detail::ArchiveTree::read(s.tar_file());
  if (!tree) {
    require(!tree.error().message().empty());
    return false;
  }
  using Kind = gpuaff::detail::ArchiveTree::Node::Kind;
  gpuaff::detail::RootDir dir(s.tar_file(), false);
  require(dir.archive() && dir.archive_error() == nullptr);
  // Walk the tree from its root: names are plain components, found again.
  std::vector<std::string> folders{""};
  int files = 0;
  while (!folders.empty() && files < 10000) {
    std::string folder = std::move(folders.back());
    folders.pop_back();
    for (const std::string& name : tree->children(folder)) {
      require(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos);
      std::string path = folder.empty() ? name : folder + "/" + name;
      const auto* node = tree->find(path);
      require(node != nullptr);
      ++files;
      if (node->kind == Kind::directory) folders.push_back(path);
      // A file reached through folders only (no link on the way) reads back as stored.
      if (node->kind == Kind::file && node->data.size() <= gpuaff::detail::max_small_file) {
        bool through_link = false;
        for (std::size_t at = path.find('/'); at != std::string::npos && !through_link; at = path.find('/', at + 1)) {
          const auto* up = tree->find(std::string_view(path).substr(0, at));
          through_link = up == nullptr || up->kind != Kind::directory;
        }
        std::string got;
        if (!through_link) require(dir.read(path, got) == 0 && got == node->data);
      }
    }
  }
  auto loaded = gpuaff::SysfsSource(gpuaff::SysfsOptions{.root = s.tar_file(), .visible = {.use_environment = false}}).load();
  if (!loaded) require(!loaded.error().message().empty());
  return true;
}

/// numa_maps text (doctor's mappings): parsed, or one error; a mapping's bytes
/// never negative, every node id a valid one, the pages per node the sum of
/// the mappings' (of those with resident pages).
inline void run_numa_maps(std::string_view text) {
  auto r = gpuaff::detail::parse_numa_maps_mappings(text, "numa_maps", 4096);
  if (!r) {
    require(!r.error().message().empty());
    return;
  }
  std::map<int, long long> sum;
  for (const auto& m : r->mappings) {
    require(m.bytes() > 0 && m.page_bytes > 0);
    for (const auto& [node, n] : m.pages) {
      require(gpuaff::NodeSet::valid_id(node) && n >= 0);
      sum[node] += n;
    }
    (void)m.kind();
    (void)m.address_text();
  }
  for (const auto& [node, n] : r->pages) require(n == 0 || sum[node] == n);
}

/// Runs one input; returns 0 (libFuzzer's convention) or aborts on a broken invariant.
inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  // 0xf0 and above pick the recorder and the JSON source; below, the first
  // byte modulo 5 picks as it always did (the corpus relies on it).
  if (data[0] >= 0xf0) {
    if ((data[0] & 1) == 0) (void)run_record(text);
    else (void)run_json(text);
    return 0;
  }
  if (data[0] >= 0xe0) {  // no corpus file of the older cases starts with 0xe0..0xef
    (void)run_archive(text);
    return 0;
  }
  if (data[0] >= 0xd0) {  // nor with 0xd0..0xdf
    run_numa_maps(text);
    return 0;
  }
  switch (data[0] % 5) {
    case 0:
      if (auto r = gpuaff::CpuSet::parse_list(text)) check_set_round_trip(*r);
      else require(!r.error().message().empty());
      break;
    case 1:
      if (auto r = gpuaff::CpuSet::parse_mask(text)) check_set_round_trip(*r);
      else require(!r.error().message().empty());
      break;
    case 2:
      if (auto r = gpuaff::PciAddress::parse(text)) {
        auto again = gpuaff::PciAddress::parse(r->to_string().view());
        require(again && *again == *r);
      }
      break;
    case 3:
      (void)run_tree(text);
      break;
    default:
      run_visible(text);
      break;
  }
  return 0;
}

}  // namespace gpuaff_fuzz
