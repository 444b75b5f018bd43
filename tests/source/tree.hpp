// SPDX-License-Identifier: Apache-2.0
#pragma once
// A tiny sysfs tree builder for tests: a temporary directory removed at the
// end, files written at root-relative paths (parents created), symlinks, and
// helpers that lay out CPUs, nodes and PCI devices the way Linux does.

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuaff/detail/fs.hpp"

namespace gpuaff_test {

class TempTree {
 public:
  // TMPDIR if set; else tmpfs (/dev/shm), where thousands of small files cost
  // little (a busy ext4 /tmp made the 1280-CPU tree take seconds); else /tmp.
  TempTree() {
    const char* tmp = std::getenv("TMPDIR");
    std::vector<std::string> bases;
    if (tmp != nullptr && *tmp != '\0') bases.emplace_back(tmp);
    bases.emplace_back("/dev/shm");
    bases.emplace_back("/tmp");
    for (const auto& base : bases) {
      std::string pattern = base + "/gpuaff-tree-XXXXXX";
      std::vector<char> buf(pattern.begin(), pattern.end());
      buf.push_back('\0');
      if (::mkdtemp(buf.data()) != nullptr) {
        root_ = buf.data();
        return;
      }
    }
    throw std::runtime_error("mkdtemp failed in $TMPDIR, /dev/shm and /tmp");
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;
  ~TempTree() { remove_all(root_); }

  const std::string& root() const { return root_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  /// Writes `content` at `rel` (parents created).
  TempTree& write(const std::string& rel, const std::string& content) {
    mkdirs_for(rel);
    if (gpuaff::detail::write_whole_file(path(rel), content) != 0) throw std::runtime_error("cannot write " + rel);
    return *this;
  }
  /// Makes `rel` a symlink to `target` (parents created).
  TempTree& link(const std::string& rel, const std::string& target) {
    mkdirs_for(rel);
    if (::symlink(target.c_str(), path(rel).c_str()) != 0) throw std::runtime_error("cannot link " + rel);
    return *this;
  }
  TempTree& mkdir(const std::string& rel) {
    if (gpuaff::detail::make_directories(path(rel)) != 0) throw std::runtime_error("cannot mkdir " + rel);
    return *this;
  }
  /// Removes a file, link or directory tree.
  TempTree& remove(const std::string& rel) {
    remove_all(path(rel));
    made_.clear();
    return *this;
  }

  static void remove_all(const std::string& p) {
    ::nftw(
        p.c_str(), [](const char* f, const struct stat*, int, struct FTW*) { return ::remove(f); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }

 private:
  void mkdirs_for(const std::string& rel) {
    auto slash = rel.rfind('/');
    if (slash == std::string::npos) return;
    std::string dir = rel.substr(0, slash);
    if (made_.count(dir) != 0) return;  // big trees write thousands of files into few directories
    if (gpuaff::detail::make_directories(path(dir)) != 0) throw std::runtime_error("cannot mkdir for " + rel);
    made_.insert(dir);
  }
  std::string root_;
  std::set<std::string> made_;
};

inline const std::string cpu_root = "sys/devices/system/cpu/";
inline const std::string node_root = "sys/devices/system/node/";

/// One CPU's topology files. llc: shared_cpu_list of cache index3 ("" = no cache dir).
inline void add_cpu(TempTree& t, int cpu, const std::string& siblings, int package, const std::string& package_cpus,
                    const std::string& llc = "") {
  std::string d = cpu_root + "cpu" + std::to_string(cpu) + "/";
  t.write(d + "topology/core_cpus_list", siblings + "\n");
  t.write(d + "topology/physical_package_id", std::to_string(package) + "\n");
  t.write(d + "topology/package_cpus_list", package_cpus + "\n");
  if (!llc.empty()) {
    // L1d, L1i, L2 private, L3 shared, as on x86.
    const char* levels[] = {"1", "1", "2", "3"};
    const char* types[] = {"Data", "Instruction", "Unified", "Unified"};
    for (int k = 0; k < 4; ++k) {
      std::string c = d + "cache/index" + std::to_string(k) + "/";
      t.write(c + "level", std::string(levels[k]) + "\n");
      t.write(c + "type", std::string(types[k]) + "\n");
      t.write(c + "shared_cpu_list", (k == 3 ? llc : siblings) + "\n");
    }
  }
}

inline void add_node(TempTree& t, int id, const std::string& cpulist, const std::string& distance) {
  std::string d = node_root + "node" + std::to_string(id) + "/";
  t.write(d + "cpulist", cpulist + "\n");
  t.write(d + "distance", distance + "\n");
}

/// A PCI device the way sysfs has it: a directory under sys/devices/pciDDDD:BB and a
/// relative symlink in sys/bus/pci/devices.
inline void add_pci(TempTree& t, const std::string& bdf, const std::string& cls, const std::string& vendor,
                    const std::string& numa_node, const std::string& local_cpulist) {
  std::string real = "sys/devices/pci" + bdf.substr(0, bdf.size() - 5) + "/" + bdf + "/";
  t.write(real + "class", cls + "\n");
  t.write(real + "vendor", vendor + "\n");
  t.write(real + "device", "0x2330\n");
  if (!numa_node.empty()) t.write(real + "numa_node", numa_node + "\n");
  if (!local_cpulist.empty()) t.write(real + "local_cpulist", local_cpulist + "\n");
  t.link("sys/bus/pci/devices/" + bdf, "../../../devices/pci" + bdf.substr(0, bdf.size() - 5) + "/" + bdf);
}

}  // namespace gpuaff_test
