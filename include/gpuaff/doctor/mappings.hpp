// SPDX-License-Identifier: Apache-2.0
#pragma once
// A running process's mappings and the nodes their pages are on, from
// /proc/PID/numa_maps (doctor, docs/doctor.md "Mappings and host buffers").
//
// The kernel writes one line per mapping (numa(7); fs/proc/task_mmu.c,
// show_numa_map): the start address in hex, the memory policy ("default",
// "bind:1", "interleave:0-1", "prefer:1", ...), then items: `file=PATH` (the
// path with space, tab, newline and '=' written as octal escapes, so it holds
// no blank), the words `heap`, `stack` and `huge` (hugetlb), `key=count` items
// (anon, dirty, mapped, mapmax, swapcache, active, writeback), `N<node>=<pages>`
// per node with resident pages, and, since Linux 4.0, `kernelpagesize_kB`
// (the unit of every count: a hugetlb mapping counts huge pages). A mapping
// without resident pages has only the address, the policy and its kind.
//
// The parser is strict where a mistake would be believed (a node or page
// count that is not one is an error naming the file and the line) and lenient
// where kernels differ (items it does not know are skipped).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/doctor/doctor.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// One line of numa_maps.
struct Mapping {
  std::uint64_t address = 0;       ///< the start address
  std::string policy{};            ///< the memory policy as the kernel names it ("default", "bind:1")
  std::string file{};              ///< `file=` as the kernel wrote it (octal escapes kept); empty for none
  bool heap = false;
  bool stack = false;
  bool huge = false;               ///< hugetlb
  long long page_bytes = 0;        ///< the unit of the counts (kernelpagesize_kB, or the base page size)
  std::map<int, long long> pages{};  ///< resident pages per node
  bool off_host = false;           ///< set by doctor's verdict: a host buffer off the plan's host nodes

  long long resident_pages() const {
    long long n = 0;
    for (const auto& [node, count] : pages) n += count;
    return n;
  }
  long long bytes() const { return resident_pages() * page_bytes; }
  std::string address_text() const {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    std::uint64_t a = address;
    do {
      s.insert(s.begin(), digits[a & 15]);
      a >>= 4;
    } while (a != 0);
    return s;
  }
  /// What the mapping is: "heap", "stack", "hugetlb", "shared" (anonymous
  /// shared memory: /dev/zero, memfd, /dev/shm, SysV), "file" (a regular
  /// file's pages) or "anon".
  std::string_view kind() const {
    if (huge) return "hugetlb";
    if (heap) return "heap";
    if (stack) return "stack";
    if (file.empty()) return "anon";
    for (std::string_view shared : {"/dev/zero", "/memfd:", "/dev/shm/", "/SYSV", "/anon_hugepage", "/dev/hugepages/"})
      if (std::string_view(file).substr(0, shared.size()) == shared) return "shared";
    return "file";
  }
  /// Whether it may be a host buffer (anonymous memory of any kind but the
  /// stack); a regular file's pages are where the page cache put them.
  bool buffer_like() const {
    std::string_view k = kind();
    return k != "stack" && k != "file";
  }
};

/// numa_maps of one process.
struct NumaMaps {
  std::vector<Mapping> mappings{};  ///< those with resident pages, in the file's order
  std::map<int, long long> pages{};  ///< resident pages per node, every mapping summed
  std::size_t lines = 0;            ///< mappings in the file, with resident pages or not
};

namespace detail {

/// The most pages one N<node>= item may count (2^40 pages: 4 PiB of 4 KiB pages).
inline constexpr long long max_numa_maps_pages = 1LL << 40;
/// The largest page a kernel reports (16 GiB, in kB).
inline constexpr long long max_numa_maps_page_kb = 1LL << 24;
/// The most bytes one mapping may hold (2^60).
inline constexpr long long max_mapping_bytes = 1LL << 60;

/// Parses numa_maps text. `file` names it in errors; `base_page_bytes` is
/// the unit of the counts of a line without kernelpagesize_kB (before Linux 4.0).
/// Errors: Errc::parse_error naming the file, the line and the item: a line
/// that does not start with a hex address and a policy, an item `N...=` that
/// is not N<node>=<pages> with a node id below the largest gpuaff handles and
/// a count up to 2^40, a node named twice on one line, a kernelpagesize_kB
/// that is not a page size, a mapping of more than 2^60 bytes, text that ends
/// inside a line (the kernel ends each with a newline: a cut read).
inline Result<NumaMaps> parse_numa_maps_mappings(std::string_view text, std::string_view file, long long base_page_bytes) {
  NumaMaps out;
  std::size_t number = 0;
  auto bad = [&](std::string_view what, std::string_view item) {
    return fail(Errc::parse_error, file, " line ", number, ": ", what, " ('", quotable(escape_control(item.substr(0, 80))),
                "'); this is not numa_maps as the kernel writes it (numa(7)): doctor reads the file of a live process");
  };
  while (!text.empty()) {
    ++number;
    std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos)
      return bad("the text ends inside this line (the kernel ends every line with a newline: the file was cut)", text);
    std::string_view line = text.substr(0, nl);
    const std::string_view whole = line;
    text.remove_prefix(nl + 1);
    ++out.lines;
    Mapping m;
    m.page_bytes = base_page_bytes;
    std::size_t field = 0;
    while (!line.empty()) {
      std::size_t sp = line.find(' ');
      std::string_view item = line.substr(0, sp);
      line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
      if (item.empty()) continue;
      ++field;
      if (field == 1) {
        long long ignored = 0;
        if (item.size() > 16 || leading_number(item, 16, 0, ignored) != item.size())
          return bad("it does not start with a mapping's address (hex)", item);
        for (char c : item) m.address = m.address * 16 + static_cast<std::uint64_t>(hex_digit(c));
        continue;
      }
      if (field == 2) {
        m.policy = std::string(item);
        continue;
      }
      std::size_t eq = item.find('=');
      std::string_view key = item.substr(0, eq);
      std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
      if (!key.empty() && key[0] == 'N') {
        long long node = 0, count = 0;
        std::string_view id = key.substr(1);
        if (eq == std::string_view::npos || id.empty() || !is_decimal(id) || value.empty() || !is_decimal(value))
          return bad("not a node's page count N<node>=<pages>", item);
        leading_number(id, 10, CpuSet::capacity, node);
        leading_number(value, 10, max_numa_maps_pages + 1, count);
        if (node >= CpuSet::capacity)
          return bad("a node id beyond the " + std::to_string(CpuSet::capacity) + " nodes gpuaff handles", item);
        if (count > max_numa_maps_pages) return bad("more pages than any machine has (above 2^40)", item);
        if (!m.pages.emplace(static_cast<int>(node), count).second) return bad("a node named twice on one line", item);
      } else if (key == "file" && eq != std::string_view::npos) {
        m.file = std::string(value);
      } else if (key == "kernelpagesize_kB") {
        long long kb = 0;
        if (value.empty() || !is_decimal(value) || leading_number(value, 10, max_numa_maps_page_kb + 1, kb) == 0 ||
            kb == 0 || kb > max_numa_maps_page_kb)
          return bad("kernelpagesize_kB is not a page size (1 to 16777216 kB)", item);
        m.page_bytes = kb * 1024;
      } else if (eq == std::string_view::npos) {
        m.heap = m.heap || item == "heap";
        m.stack = m.stack || item == "stack";
        m.huge = m.huge || item == "huge";
      }
      // anon=, dirty=, mapped=, mapmax=, swapcache=, active=, writeback= and
      // what later kernels add: not needed, skipped.
    }
    if (field == 0) {
      --out.lines;  // an empty line
      continue;
    }
    if (field < 2) return bad("the line is cut short: no memory policy after the address", whole);
    if (m.page_bytes <= 0) m.page_bytes = 4096;
    if (m.resident_pages() > max_mapping_bytes / m.page_bytes)
      return bad("a mapping of more than 2^60 bytes", m.address_text());
    for (const auto& [node, count] : m.pages) out.pages[node] += count;
    if (m.resident_pages() > 0) out.mappings.push_back(std::move(m));
  }
  return out;
}

}  // namespace detail

/// numa_maps of process `pid`, read below `proc` (the /proc of the machine
/// doctor runs on; a test's own directory). A kernel without NUMA support has
/// no numa_maps: an empty result when the process exists.
/// Errors: Errc::not_found (no such process), Errc::permission_denied,
/// Errc::io_error (a read that fails; a file that is not a regular file or is
/// larger than 16 MiB), those of detail::parse_numa_maps_mappings; each names
/// the file.
inline Result<NumaMaps> process_numa_maps(int pid, const std::string& proc = "/proc") {
  std::string dir = proc + "/" + std::to_string(pid);
  std::string path = dir + "/numa_maps";
  std::string text;
  int e = detail::read_whole_file(path, text);
  if (e == ENOENT) {
    std::string ignored;
    if (detail::read_whole_file(dir + "/stat", ignored) == 0) return NumaMaps{};
  }
  if ((e == ENOENT || e == ESRCH || e == EACCES || e == EPERM) && proc == "/proc") return detail::proc_error(pid, "numa_maps", e);
  if (e == ENOENT)
    return unexpected(make_sys_error(Errc::not_found, e, "no process ", pid, " (", path, " is missing); check the PID with ps"));
  if (e == EACCES || e == EPERM)
    return unexpected(make_sys_error(Errc::permission_denied, e, "cannot read ", path,
                                     ": permission denied; run doctor as the process's user or as root"));
  if (e == EFBIG)
    return fail(Errc::io_error, "cannot read ", path, ": it is larger than ", detail::max_small_file >> 20,
                " MiB, more than the mappings a process may have at the kernel's default vm.max_map_count");
  if (e != 0)
    return unexpected(make_sys_error(Errc::io_error, e, "cannot read ", path, ": ", detail::errno_text(e)));
  long long page = ::sysconf(_SC_PAGESIZE);
  return detail::parse_numa_maps_mappings(text, path, page > 0 ? page : 4096);
}

}  // namespace v0
}  // namespace gpuaff
