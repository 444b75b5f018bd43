// SPDX-License-Identifier: Apache-2.0
#pragma once
// A throw-away directory for tests that write roots and recordings, removed
// (with everything under it) when the test ends.

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace gpuaff_test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::string(GPUAFF_BINARY_DIR) + "/hwloc-test-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    path_ = made != nullptr ? std::string(made) : std::string();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) {
      ::nftw(
          path_.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16,
          FTW_DEPTH | FTW_PHYS);
    }
  }
  const std::string& path() const { return path_; }
  std::string operator/(std::string_view rel) const { return path_ + "/" + std::string(rel); }

  /// Writes `text` to the root-relative file `rel`, making its directories.
  void write(std::string_view rel, std::string_view text) const {
    std::string full = path_ + "/" + std::string(rel);
    for (std::size_t p = path_.size() + 1; (p = full.find('/', p)) != std::string::npos; ++p)
      ::mkdir(full.substr(0, p).c_str(), 0755);
    if (FILE* f = std::fopen(full.c_str(), "w")) {
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  }
  /// Makes the symlink `rel` -> `target` (made relative by the caller, as sysfs does).
  void link(std::string_view rel, std::string_view target) const {
    std::string full = path_ + "/" + std::string(rel);
    for (std::size_t p = path_.size() + 1; (p = full.find('/', p)) != std::string::npos; ++p)
      ::mkdir(full.substr(0, p).c_str(), 0755);
    (void)::symlink(std::string(target).c_str(), full.c_str());
  }

 private:
  std::string path_;
};

}  // namespace gpuaff_test
