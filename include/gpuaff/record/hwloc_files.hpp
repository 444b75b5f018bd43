#pragma once
// What hwloc (2.x, Linux backend) reads from a root directory, beyond the files
// gpuaff's own sysfs reader reads: the hex-mask twins of the *_list files
// (hwloc reads only masks: thread_siblings, core_siblings, cache shared_cpu_map,
// node cpumap, PCI local_cpus), PCI config space (bridges, hence which devices
// share a host bridge), and the cgroup cpuset files that give hwloc its allowed
// set (proc/mounts, proc/self/cgroup, <cgroup mount>/<path>/cpuset.*).
//
// `gpuaff record` calls copy_hwloc_extras() so that a recording loads with the
// hwloc source (HWLOC_FSROOT) as well as with the sysfs source. This header has
// no hwloc dependency: the recorder is part of the core library.
//
// Not copied, because hwloc uses them only for descriptive attributes that a
// Topology does not hold: /proc/cpuinfo, DMI ids (which also hold serial
// numbers), cpufreq, block/net class links, udev data.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// What copy_hwloc_extras() did.
struct HwlocRecordSummary {
  int files_copied = 0;                ///< regular files written under the output root
  int links_made = 0;                  ///< symlinks recreated (sys/bus/pci/devices/*, HMAT initiators)
  std::uint64_t bytes = 0;             ///< bytes written to regular files
  std::vector<std::string> paths{};    ///< root-relative paths of the files written (links resolved)
  std::vector<std::string> unreadable{};  ///< root-relative files that exist but could not be read (EACCES)
};

namespace detail {

inline std::string hwloc_join(std::string_view a, std::string_view b) {
  std::string s(a);
  if (s.empty() || s.back() != '/') s.push_back('/');
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  s.append(b);
  return s;
}

/// Reads a whole (sysfs or proc) file. Returns 0 or an errno.
inline int hwloc_read_file(const std::string& path, std::string& out) {
  out.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[4096];
  int err = 0;
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > (std::size_t{1} << 24)) {
      err = EFBIG;
      break;
    }
  }
  ::close(fd);
  return err;
}

inline int hwloc_write_file(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

inline bool hwloc_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}
inline bool hwloc_is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Entry names of a directory (no "." and ".."), empty when it cannot be listed.
inline std::vector<std::string> hwloc_list_dir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

/// Lexically normalises a root-relative path ("a/b/../c" -> "a/c"); ".." stops at the root.
inline std::string hwloc_normalize(std::string_view p) {
  std::vector<std::string_view> parts;
  while (!p.empty()) {
    std::size_t slash = p.find('/');
    std::string_view c = p.substr(0, slash);
    p = slash == std::string_view::npos ? std::string_view{} : p.substr(slash + 1);
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(c);
  }
  std::string out;
  for (auto c : parts) {
    if (!out.empty()) out.push_back('/');
    out.append(c);
  }
  return out;
}

/// Copies one root-relative file from `from` to `to`, recreating every symlink met
/// on the way (so sys/bus/pci/devices/X stays a link into sys/devices/pci*, as
/// the kernel has it and as both readers expect). Symlinks whose target leaves
/// the root are re-rooted. Returns 0, or ENOENT when the source is absent, or an
/// errno (EACCES for an unreadable source; others are write failures, reported
/// through *write_error so the caller can tell them apart).
inline int hwloc_copy_one(const std::string& from, const std::string& to, std::string_view rel,
                          HwlocRecordSummary& summary, int* write_error) {
  std::string cur;  // root-relative path resolved so far (in the source tree)
  std::string todo = hwloc_normalize(rel);
  if (todo.compare(0, 5, "proc/") == 0) {
    // proc/self is a link to this process's pid: keep the path as named
    std::string data;
    if (int e = hwloc_read_file(hwloc_join(from, todo), data); e != 0) return e;
    std::string acc = to;
    for (std::size_t p = 0; (p = todo.find('/', p)) != std::string::npos; ++p) {
      acc = hwloc_join(to, todo.substr(0, p));
      if (::mkdir(acc.c_str(), 0755) != 0 && errno != EEXIST) {
        *write_error = errno;
        return errno;
      }
    }
    if (int e = hwloc_write_file(hwloc_join(to, todo), data); e != 0) {
      *write_error = e;
      return e;
    }
    ++summary.files_copied;
    summary.bytes += data.size();
    summary.paths.push_back(todo);
    return 0;
  }
  int hops = 0;
  while (!todo.empty()) {
    std::size_t slash = todo.find('/');
    std::string comp = todo.substr(0, slash);
    todo = slash == std::string::npos ? std::string{} : todo.substr(slash + 1);
    std::string next = cur.empty() ? comp : cur + "/" + comp;
    std::string src = hwloc_join(from, next);
    struct stat st {};
    if (::lstat(src.c_str(), &st) != 0) return errno;
    if (S_ISLNK(st.st_mode)) {
      if (++hops > 40) return ELOOP;
      char buf[4096];
      ssize_t n = ::readlink(src.c_str(), buf, sizeof buf - 1);
      if (n < 0) return errno;
      std::string target(buf, static_cast<std::size_t>(n));
      std::string dst = hwloc_join(to, next);
      if (!hwloc_exists(dst)) {
        // keep relative targets as they are; re-root absolute ones as relative
        std::string link = target;
        if (!target.empty() && target.front() == '/') {
          std::string up;
          for (char ch : cur)
            if (ch == '/') up += "../";
          link = (cur.empty() ? std::string{} : up + "../") + hwloc_normalize(target);
        }
        if (::symlink(link.c_str(), dst.c_str()) != 0 && errno != EEXIST) {
          *write_error = errno;
          return errno;
        }
        ++summary.links_made;
      }
      std::string resolved = !target.empty() && target.front() == '/' ? hwloc_normalize(target) : hwloc_normalize(cur + "/" + target);
      todo = todo.empty() ? resolved : resolved + "/" + todo;
      cur.clear();
      continue;
    }
    if (!todo.empty()) {  // a directory on the way
      if (!S_ISDIR(st.st_mode)) return ENOTDIR;
      std::string dst = hwloc_join(to, next);
      struct stat dt {};
      if (::lstat(dst.c_str(), &dt) != 0) {
        if (::mkdir(dst.c_str(), 0755) != 0 && errno != EEXIST) {
          *write_error = errno;
          return errno;
        }
      }
      cur = next;
      continue;
    }
    // the file itself
    std::string data;
    if (int e = hwloc_read_file(src, data); e != 0) return e;
    if (int e = hwloc_write_file(hwloc_join(to, next), data); e != 0) {
      *write_error = e;
      return e;
    }
    ++summary.files_copied;
    summary.bytes += data.size();
    summary.paths.push_back(next);
    return 0;
  }
  return 0;
}

/// The cgroup files hwloc reads for its allowed set, derived from the live
/// proc/mounts and proc/self/{cgroup,cpuset}; also returns the filtered mounts text.
inline std::vector<std::string> hwloc_cgroup_paths(const std::string& from, std::string& mounts_out) {
  std::vector<std::string> paths;
  std::string mounts;
  mounts_out.clear();
  if (hwloc_read_file(hwloc_join(from, "proc/mounts"), mounts) != 0) return paths;
  std::string cgroup_text;
  std::string cpuset_text;
  (void)hwloc_read_file(hwloc_join(from, "proc/self/cgroup"), cgroup_text);
  (void)hwloc_read_file(hwloc_join(from, "proc/self/cpuset"), cpuset_text);
  std::string v2_path;  // "0::/x" line
  std::string v1_path;  // "N:...cpuset...:/x" line
  std::size_t pos = 0;
  while (pos < cgroup_text.size()) {
    std::size_t eol = cgroup_text.find('\n', pos);
    std::string_view line(cgroup_text.data() + pos, (eol == std::string::npos ? cgroup_text.size() : eol) - pos);
    pos = eol == std::string::npos ? cgroup_text.size() : eol + 1;
    std::size_t c1 = line.find(':');
    std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    std::string_view path = line.substr(c2 + 1);
    if (line.substr(0, c1) == "0" && ctrls.empty()) v2_path = path;
    std::size_t f = ctrls.find("cpuset");
    if (f != std::string_view::npos) v1_path = path;
  }
  if (v1_path.empty() && !cpuset_text.empty()) {
    v1_path = cpuset_text;
    while (!v1_path.empty() && (v1_path.back() == '\n' || v1_path.back() == ' ')) v1_path.pop_back();
  }
  pos = 0;
  while (pos < mounts.size()) {
    std::size_t eol = mounts.find('\n', pos);
    std::string line = mounts.substr(pos, (eol == std::string::npos ? mounts.size() : eol) - pos);
    pos = eol == std::string::npos ? mounts.size() : eol + 1;
    // fields: device mountpoint type options ...
    std::vector<std::string> f;
    std::size_t p = 0;
    while (p < line.size() && f.size() < 4) {
      std::size_t sp = line.find(' ', p);
      f.push_back(line.substr(p, (sp == std::string::npos ? line.size() : sp) - p));
      p = sp == std::string::npos ? line.size() : sp + 1;
    }
    if (f.size() < 4) continue;
    const std::string& mnt = f[1];
    const std::string& type = f[2];
    bool v1 = type == "cpuset" || (type == "cgroup" && (f[3].find("cpuset") != std::string::npos));
    bool v2 = type == "cgroup2";
    if (!v1 && !v2) continue;
    mounts_out += line;
    mounts_out += '\n';
    if (v2) {
      paths.push_back(hwloc_join(mnt, "cgroup.controllers"));
      if (!v2_path.empty()) {
        paths.push_back(hwloc_join(hwloc_join(mnt, v2_path), "cpuset.cpus.effective"));
        paths.push_back(hwloc_join(hwloc_join(mnt, v2_path), "cpuset.mems.effective"));
      }
    } else if (!v1_path.empty()) {
      for (const char* leaf : {"cpuset.cpus", "cpuset.mems", "cpuset.effective_cpus", "cpuset.effective_mems", "cpus",
                               "mems", "effective_cpus", "effective_mems"})
        paths.push_back(hwloc_join(hwloc_join(mnt, v1_path), leaf));
    }
  }
  return paths;
}

/// Root-relative paths of the files hwloc reads from the root `from` that are
/// worth recording (see the header comment). Only paths that exist are listed.
inline std::vector<std::string> hwloc_record_paths(const std::string& from) {
  std::vector<std::string> out;
  auto add_if = [&](const std::string& rel) {
    if (hwloc_exists(hwloc_join(from, rel))) out.push_back(rel);
  };
  auto add_files_in = [&](const std::string& rel_dir, std::initializer_list<const char*> names) {
    for (const char* n : names) add_if(hwloc_join(rel_dir, n));
  };
  for (const char* f : {"proc/self/cgroup", "proc/self/cpuset", "proc/meminfo"}) add_if(f);

  const std::string cpu = "sys/devices/system/cpu";
  add_files_in(cpu, {"online", "possible", "present", "offline", "kernel_max"});
  for (const auto& name : hwloc_list_dir(hwloc_join(from, cpu))) {
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    std::string c = cpu + "/" + name;
    add_files_in(c, {"online", "cpu_capacity"});
    add_files_in(c + "/topology",
                 {"physical_package_id", "core_id", "die_id", "cluster_id", "book_id", "drawer_id", "thread_siblings",
                  "thread_siblings_list", "core_cpus", "core_cpus_list", "core_siblings", "core_siblings_list",
                  "package_cpus", "package_cpus_list", "die_cpus", "die_cpus_list", "cluster_cpus",
                  "cluster_cpus_list", "book_siblings", "drawer_siblings"});
    for (const auto& idx : hwloc_list_dir(hwloc_join(from, c + "/cache"))) {
      if (idx.compare(0, 5, "index") != 0) continue;
      add_files_in(c + "/cache/" + idx,
                   {"level", "type", "size", "id", "shared_cpu_map", "shared_cpu_list", "coherency_line_size",
                    "number_of_sets", "ways_of_associativity", "physical_line_partition"});
    }
  }

  const std::string node = "sys/devices/system/node";
  add_files_in(node, {"possible", "online", "has_cpu", "has_memory", "has_normal_memory", "has_generic_initiator"});
  for (const auto& name : hwloc_list_dir(hwloc_join(from, node))) {
    if (name.size() < 5 || name.compare(0, 4, "node") != 0 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos)
      continue;
    std::string n = node + "/" + name;
    add_files_in(n, {"cpumap", "cpulist", "distance", "meminfo"});
    for (const auto& hp : hwloc_list_dir(hwloc_join(from, n + "/hugepages")))
      add_if(n + "/hugepages/" + hp + "/nr_hugepages");
    // HMAT: accessK/initiators holds symlinks named nodeN plus performance files
    for (const auto& acc : hwloc_list_dir(hwloc_join(from, n))) {
      if (acc.compare(0, 6, "access") != 0) continue;
      for (const auto& e : hwloc_list_dir(hwloc_join(from, n + "/" + acc + "/initiators"))) {
        if (e.compare(0, 4, "node") == 0) {
          out.push_back(n + "/" + acc + "/initiators/" + e + "/cpumap");  // goes through the link
        } else {
          add_if(n + "/" + acc + "/initiators/" + e);
        }
      }
    }
  }

  const std::string pci = "sys/bus/pci/devices";
  for (const auto& bdf : hwloc_list_dir(hwloc_join(from, pci))) {
    add_files_in(pci + "/" + bdf,
                 {"class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision", "local_cpus",
                  "local_cpulist", "numa_node", "current_link_speed", "current_link_width", "config"});
  }
  const std::string nv = "proc/driver/nvidia/gpus";
  for (const auto& bdf : hwloc_list_dir(hwloc_join(from, nv))) add_files_in(nv + "/" + bdf, {"information", "numa_status"});
  return out;
}

}  // namespace detail

/// Copies, from the root `from` (normally "/") into the recording `to`, the files
/// hwloc needs to load the recording with HWLOC_FSROOT (see the header comment),
/// keeping sysfs symlinks as links. Files that already exist in `to` are
/// overwritten with the same content. Unreadable files (EACCES: PCI config space
/// beyond 64 bytes for non-root, some cgroup files) are listed, not fatal.
/// Errors: Errc::io_error naming the file that could not be written under `to`.
inline Result<HwlocRecordSummary> copy_hwloc_extras(const std::string& from, const std::string& to) {
  HwlocRecordSummary summary;
  if (!detail::hwloc_is_dir(to)) {
    return fail(Errc::io_error, "recording directory '", to, "' does not exist; create it first");
  }
  std::string mounts;
  std::vector<std::string> paths = detail::hwloc_record_paths(from);
  for (auto& p : detail::hwloc_cgroup_paths(from, mounts)) paths.push_back(detail::hwloc_normalize(p));
  for (const auto& rel : paths) {
    int write_error = 0;
    int e = detail::hwloc_copy_one(from, to, rel, summary, &write_error);
    if (write_error != 0) {
      return Unexpected<Error>(make_sys_error(Errc::io_error, write_error, "cannot write '",
                                              detail::hwloc_join(to, rel), "' while recording for hwloc: ",
                                              std::string_view(std::strerror(write_error)),
                                              "; check that the output directory is writable and has space"));
    }
    if (e == EACCES || e == EPERM) summary.unreadable.push_back(rel);
  }
  if (!mounts.empty()) {
    // Only the cgroup/cpuset mounts: hwloc looks for nothing else in this file.
    std::string dir = detail::hwloc_join(to, "proc");
    ::mkdir(dir.c_str(), 0755);
    std::string file = detail::hwloc_join(to, "proc/mounts");
    if (int e = detail::hwloc_write_file(file, mounts); e != 0) {
      return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot write '", file,
                                              "' while recording for hwloc: ", std::string_view(std::strerror(e))));
    }
    ++summary.files_copied;
    summary.bytes += mounts.size();
    summary.paths.emplace_back("proc/mounts");
  }
  return summary;
}

/// Why hwloc's Linux backend would not read the root `root`, or "" when it
/// would: hwloc 2.x reads only the hex-mask files (cpuN/topology/thread_siblings
/// or core_cpus), and when they are missing it silently falls back to a
/// topology of the machine it runs on.
inline std::string hwloc_root_problem(const std::string& root) {
  if (!detail::hwloc_is_dir(root)) return "'" + root + "' is not a directory";
  std::string cpu = detail::hwloc_join(root, "sys/devices/system/cpu");
  if (!detail::hwloc_is_dir(cpu))
    return "'" + root + "' has no sys/devices/system/cpu directory (not a recorded root)";
  // hwloc probes cpu0 (on Linux cpu0 exists even when other ids are sparse)
  for (const char* f : {"package_cpus", "core_cpus", "core_siblings", "thread_siblings"})
    if (detail::hwloc_exists(detail::hwloc_join(cpu, std::string("cpu0/topology/") + f))) return {};
  return "'" + root +
         "' has no sys/devices/system/cpu/cpu0/topology/{thread_siblings,core_cpus,core_siblings,package_cpus}: "
         "hwloc reads these hex masks, not the *_list files; record the root with 'gpuaff record', "
         "which copies them";
}

}  // namespace v0
}  // namespace gpuaff
