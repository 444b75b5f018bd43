// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host memory on chosen NUMA nodes, for the buffers a GPU copies from and to
// (LaunchPlan::host_nodes): map anonymous memory, bind the range to the nodes
// (mbind(2), MPOL_BIND), fault every page in, then ask the kernel where each
// page landed (move_pages(2) with no target nodes: a query) before the caller
// registers it with a GPU runtime (cudaHostRegister, hipHostRegister).
//
// Its own header, not part of gpuaff.hpp: it is only for callers that
// allocate. Raw system calls, no libnuma (as apply/mempolicy.hpp).
//
// Never half an allocation: before a page is faulted the request is checked
// against what would refuse it (the nodes must be in Mems_allowed_list of
// /proc/self/status, the memory cgroup's memory.max must leave room, the
// nodes must have that much free memory or free huge pages), because a page
// that cannot be placed under MPOL_BIND is not an error return but the OOM
// killer or SIGBUS. After faulting, every page must be on the nodes; if not,
// the mapping is released and the error names what happened.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// Who faults the pages in (both put them on the bound nodes; which is faster
/// is measured by benchmarks/, not assumed).
enum class FaultIn {
  touch,     ///< the calling thread writes one byte per page (the plan put it on the node: the kernel zeroes locally)
  populate,  ///< madvise(MADV_POPULATE_WRITE) (Linux 5.14): the kernel faults by the range's policy alone
};

/// Page size of the mapping.
enum class HugePages {
  none,         ///< the base page size
  transparent,  ///< madvise(MADV_HUGEPAGE): 2 MiB pages where THP can make them (needs THP enabled)
  hugetlb,      ///< MAP_HUGETLB: the default huge page size from the reserved pool (vm.nr_hugepages)
};

constexpr std::string_view to_string(FaultIn f) { return f == FaultIn::touch ? "touch" : "populate"; }
constexpr std::string_view to_string(HugePages h) {
  return h == HugePages::none ? "none" : h == HugePages::transparent ? "transparent" : "hugetlb";
}

struct HostBufferOptions {
  NodeSet nodes{};                 ///< required: the nodes (LaunchPlan::host_nodes)
  FaultIn fault = FaultIn::touch;
  HugePages huge = HugePages::none;
};

/// Where a range's pages are, as the kernel answers move_pages(2).
struct PagePlacement {
  std::size_t page_size = 0;
  std::size_t pages = 0;
  std::map<int, std::size_t> by_node{};  ///< node id -> pages on it
  std::size_t not_present = 0;           ///< pages not faulted in (-ENOENT)
  std::size_t other = 0;                 ///< pages the kernel would not say (-EFAULT, ...)
  /// Pages on `nodes`.
  std::size_t on(const NodeSet& nodes) const {
    std::size_t n = 0;
    for (const auto& [node, count] : by_node)
      if (NodeSet::valid_id(node) && nodes.test(node)) n += count;
    return n;
  }
  /// "node 0: 256 pages, node 1: 0 ...": for messages and reports.
  std::string summary() const {
    std::string s;
    for (const auto& [node, count] : by_node)
      s += (s.empty() ? "" : ", ") + std::string("node ") + std::to_string(node) + ": " + std::to_string(count);
    if (not_present) s += (s.empty() ? "" : ", ") + std::string("not present: ") + std::to_string(not_present);
    if (other) s += (s.empty() ? "" : ", ") + std::string("unknown: ") + std::to_string(other);
    return s + " (of " + std::to_string(pages) + " pages of " + std::to_string(page_size) + " bytes)";
  }
};

/// What may refuse an allocation, read from the machine (read_host_limits) or
/// written by a test.
struct HostLimits {
  std::optional<NodeSet> mems_allowed{};     ///< Mems_allowed_list of /proc/self/status
  std::optional<long long> cgroup_room{};    ///< memory.max - memory.current of the memory cgroup; nullopt: no limit
  std::string cgroup_file{};                 ///< the memory.max that gave cgroup_room
  std::map<int, long long> free_bytes{};     ///< per node: MemFree + file cache + SReclaimable of nodeN/meminfo
  std::map<int, long long> free_huge{};      ///< per node: free default-size huge pages
  std::size_t huge_page_size = 0;            ///< Hugepagesize of /proc/meminfo; 0 when unknown
  std::string thp_enabled{};                 ///< /sys/kernel/mm/transparent_hugepage/enabled; empty when absent
};

namespace detail {

inline constexpr int mpol_mf_strict = 1;
#ifndef MADV_POPULATE_WRITE
inline constexpr int madv_populate_write = 23;  // linux/mman.h, Linux 5.14
#else
inline constexpr int madv_populate_write = MADV_POPULATE_WRITE;
#endif

inline long raw_mbind(void* addr, std::size_t len, int mode, const unsigned long* mask, unsigned long maxnode,
                      unsigned flags) {
#ifdef SYS_mbind
  return ::syscall(SYS_mbind, addr, len, mode, mask, maxnode, flags);
#else
  (void)addr, (void)len, (void)mode, (void)mask, (void)maxnode, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

/// move_pages(2) of the calling process with `nodes` NULL: only asks.
inline long raw_move_pages_query(unsigned long count, void** pages, int* status) {
#ifdef SYS_move_pages
  return ::syscall(SYS_move_pages, 0, count, pages, nullptr, status, 0);
#else
  (void)count, (void)pages, (void)status;
  errno = ENOSYS;
  return -1;
#endif
}

/// The number after `key` in a "Key:   123 kB" line of `text`; nullopt without one.
inline std::optional<long long> meminfo_value(std::string_view text, std::string_view key) {
  std::size_t at = 0;
  while ((at = text.find(key, at)) != std::string_view::npos) {
    bool line_start = at == 0 || text[at - 1] == '\n' || text[at - 1] == ' ';
    std::size_t after = at + key.size();
    at = after;
    if (!line_start || after >= text.size() || text[after] != ':') continue;
    std::size_t p = after + 1;
    while (p < text.size() && text[p] == ' ') ++p;
    long long v = 0;
    bool any = false;
    while (p < text.size() && text[p] >= '0' && text[p] <= '9') v = v * 10 + (text[p++] - '0'), any = true;
    if (!any) return std::nullopt;
    if (text.substr(p, 3) == " kB") v *= 1024;
    return v;
  }
  return std::nullopt;
}

inline std::string mib(long long bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

/// The memory cgroup (v2) of this process: "/sys/fs/cgroup" + the "0::" path of /proc/self/cgroup.
inline std::string memory_cgroup_dir() {
  std::string text;
  if (read_whole_file("/proc/self/cgroup", text) != 0) return {};
  std::size_t at = text.find("0::");
  if (at == std::string::npos || (at != 0 && text[at - 1] != '\n')) return {};
  std::size_t end = text.find('\n', at);
  std::string rel = text.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
  return "/sys/fs/cgroup" + (rel == "/" ? std::string() : rel);
}

}  // namespace detail

/// What may refuse an allocation on this machine, for `nodes`. Values that
/// cannot be read stay unknown (no check), never guessed.
inline HostLimits read_host_limits(const NodeSet& nodes) {
  HostLimits l;
  std::string text;
  if (detail::read_whole_file("/proc/self/status", text) == 0) {
    std::size_t at = text.find("Mems_allowed_list:");
    if (at != std::string::npos) {
      std::size_t b = at + 18, e = text.find('\n', b);
      std::string v = text.substr(b, e == std::string::npos ? std::string::npos : e - b);
      v.erase(0, v.find_first_not_of(" \t"));
      if (auto s = CpuSet::parse_list(v)) l.mems_allowed = *s;
    }
  }
  // The tightest memory.max from this cgroup up to the root (v2).
  for (std::string dir = detail::memory_cgroup_dir(); dir.size() > std::string("/sys/fs/cgroup").size();
       dir = dir.substr(0, dir.rfind('/'))) {
    std::string max, cur;
    if (detail::read_whole_file(dir + "/memory.max", max) != 0 || max.rfind("max", 0) == 0) continue;
    if (detail::read_whole_file(dir + "/memory.current", cur) != 0) continue;
    long long room = std::atoll(max.c_str()) - std::atoll(cur.c_str());
    if (!l.cgroup_room || room < *l.cgroup_room) l.cgroup_room = room, l.cgroup_file = dir + "/memory.max";
  }
  if (detail::read_whole_file("/proc/meminfo", text) == 0)
    if (auto h = detail::meminfo_value(text, "Hugepagesize")) l.huge_page_size = static_cast<std::size_t>(*h);
  for (int n : nodes) {
    std::string base = "/sys/devices/system/node/node" + std::to_string(n);
    // Free, plus what the kernel reclaims before it would fail a bound page:
    // the file cache and reclaimable slab (a node full of a data set's cache
    // still takes a buffer).
    if (detail::read_whole_file(base + "/meminfo", text) == 0)
      if (auto f = detail::meminfo_value(text, "MemFree")) {
        long long room = *f;
        for (std::string_view k : {"Active(file)", "Inactive(file)", "SReclaimable"})
          room += detail::meminfo_value(text, k).value_or(0);
        l.free_bytes[n] = room;
      }
    if (l.huge_page_size != 0 &&
        detail::read_whole_file(base + "/hugepages/hugepages-" + std::to_string(l.huge_page_size / 1024) + "kB/free_hugepages",
                                text) == 0)
      l.free_huge[n] = std::atoll(text.c_str());
  }
  if (detail::read_whole_file("/sys/kernel/mm/transparent_hugepage/enabled", text) == 0) {
    detail::strip_trailing(text);
    l.thp_enabled = text;
  }
  return l;
}

/// The page size an allocation with `o` uses under `limits`.
/// Errors: Errc::unsupported when hugetlb pages have no known size.
inline Result<std::size_t> host_page_size(const HostBufferOptions& o, const HostLimits& limits) {
  if (o.huge != HugePages::hugetlb) return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (limits.huge_page_size == 0)
    return fail(Errc::unsupported, "huge pages (hugetlb) are not available here: /proc/meminfo has no Hugepagesize");
  return limits.huge_page_size;
}

/// Whether `bytes` on `o.nodes` can be placed under `limits`: every refusal the
/// kernel would give as the OOM killer or SIGBUS, said first, naming the node
/// and the limit.
/// Errors: Errc::invalid_argument (no nodes, zero bytes), Errc::empty_result
/// (a node outside Mems_allowed_list, no room in the memory cgroup or on the
/// nodes), Errc::unsupported (huge pages not available).
inline Result<void> check_host_room(std::size_t bytes, const HostBufferOptions& o, const HostLimits& limits) {
  if (o.nodes.empty()) return fail(Errc::invalid_argument, "a host buffer needs at least one NUMA node; none was given");
  if (bytes == 0) return fail(Errc::invalid_argument, "a host buffer of 0 bytes; ask for at least one byte");
  if (limits.mems_allowed && !o.nodes.is_subset_of(*limits.mems_allowed))
    return fail(Errc::empty_result, "NUMA node(s) ", (o.nodes - *limits.mems_allowed).to_list(),
                " are not allowed to this process (Mems_allowed_list in /proc/self/status: ",
                limits.mems_allowed->to_list(), "; a cgroup cpuset.mems or a container limit); use the allowed nodes");
  auto b = static_cast<long long>(bytes);
  if (limits.cgroup_room && *limits.cgroup_room < b)
    return fail(Errc::empty_result, "a host buffer of ", detail::mib(b), " does not fit in the memory cgroup: ",
                limits.cgroup_file, " leaves ", detail::mib(std::max(0LL, *limits.cgroup_room)),
                "; ask for less or raise the limit");
  if (o.huge == HugePages::hugetlb) {
    GPUAFF_TRY(std::size_t page, host_page_size(o, limits));
    long long need = (b + static_cast<long long>(page) - 1) / static_cast<long long>(page), have = 0;
    bool known = false;
    for (int n : o.nodes)
      if (auto it = limits.free_huge.find(n); it != limits.free_huge.end()) have += it->second, known = true;
    if (known && have < need)
      return fail(Errc::unsupported, "huge pages (hugetlb) are not available: node(s) ", o.nodes.to_list(), " have ",
                  have, " free ", page / 1024, " kB huge pages and ", need, " are needed (/sys/devices/system/node/nodeN/"
                  "hugepages/; reserve them with vm.nr_hugepages or that file's nr_hugepages), or use transparent huge pages");
    return {};
  }
  if (o.huge == HugePages::transparent && (limits.thp_enabled.empty() || limits.thp_enabled.find("[never]") != std::string::npos))
    return fail(Errc::unsupported, "transparent huge pages are not available: /sys/kernel/mm/transparent_hugepage/enabled ",
                limits.thp_enabled.empty() ? std::string("is absent") : "says '" + limits.thp_enabled + "'",
                "; enable them (madvise or always) or use huge=none");
  long long free = 0;
  bool known = false;
  for (int n : o.nodes)
    if (auto it = limits.free_bytes.find(n); it != limits.free_bytes.end()) free += it->second, known = true;
  if (known && free < b)
    return fail(Errc::empty_result, "a host buffer of ", detail::mib(b), " does not fit on NUMA node(s) ",
                o.nodes.to_list(), ": ", detail::mib(free), " free or reclaimable (MemFree, the file cache and "
                "SReclaimable of /sys/devices/system/node/nodeN/meminfo)"
                "; ask for less or free memory there");
  return {};
}

/// Where the pages of [addr, addr + bytes) are, one query per `page_size`
/// (move_pages(2) with no target nodes).
/// Errors: Errc::unsupported (ENOSYS: a kernel without NUMA), Errc::permission_denied, Errc::system_error.
inline Result<PagePlacement> page_placement(const void* addr, std::size_t bytes, std::size_t page_size) {
  PagePlacement r;
  r.page_size = page_size;
  r.pages = (bytes + page_size - 1) / page_size;
  constexpr std::size_t batch = 1024;
  std::vector<void*> pages(batch);
  std::vector<int> status(batch);
  auto base = reinterpret_cast<std::uintptr_t>(addr);
  for (std::size_t first = 0; first < r.pages; first += batch) {
    std::size_t n = std::min(batch, r.pages - first);
    for (std::size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(base + (first + i) * page_size);
    if (detail::raw_move_pages_query(n, pages.data(), status.data()) != 0) {
      int e = errno;
      return Unexpected(make_sys_error(e == ENOSYS ? Errc::unsupported : e == EPERM ? Errc::permission_denied : Errc::system_error,
                                       e, "cannot ask where the pages are (move_pages: ", detail::errno_text(e), ")"));
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (status[i] >= 0) ++r.by_node[status[i]];
      else if (status[i] == -ENOENT) ++r.not_present;
      else ++r.other;
    }
  }
  return r;
}

/// Anonymous memory bound to nodes, every page faulted in and checked.
/// Move-only; unmapped on destruction. Register it with a GPU runtime after
/// allocation and unregister before it is destroyed.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      mapped_ = std::exchange(o.mapped_, 0);
      page_size_ = o.page_size_;
      options_ = o.options_;
      placement_ = std::move(o.placement_);
    }
    return *this;
  }
  ~HostBuffer() { release(); }

  void* data() const { return data_; }
  std::size_t size() const { return size_; }          ///< the bytes asked for
  std::size_t mapped() const { return mapped_; }      ///< rounded up to whole pages
  std::size_t page_size() const { return page_size_; }
  const HostBufferOptions& options() const { return options_; }
  /// Where the pages were when the allocation was checked.
  const PagePlacement& placement() const { return placement_; }
  /// Asks the kernel again (the pages may have moved since: NUMA balancing, migration).
  Result<PagePlacement> query() const { return page_placement(data_, mapped_, page_size_); }

  /// Unmaps now (the buffer is then empty).
  void release() {
    if (data_ != nullptr) ::munmap(data_, mapped_);
    data_ = nullptr;
    size_ = mapped_ = 0;
  }

 private:
  friend Result<HostBuffer> allocate_host_buffer(std::size_t, const HostBufferOptions&, const HostLimits&);
  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;
  std::size_t page_size_ = 0;
  HostBufferOptions options_{};
  PagePlacement placement_{};
};

/// `bytes` of anonymous memory on `o.nodes`: checked against `limits`
/// (check_host_room), mapped, bound (mbind MPOL_BIND), faulted in as
/// `o.fault` says, and every page checked to be on the nodes. On any error
/// nothing stays mapped.
/// Errors: those of check_host_room; Errc::system_error (mmap, mbind,
/// MADV_POPULATE_WRITE refused; a page not on the nodes), Errc::unsupported
/// (a kernel without NUMA or without MADV_POPULATE_WRITE; huge pages refused).
inline Result<HostBuffer> allocate_host_buffer(std::size_t bytes, const HostBufferOptions& o, const HostLimits& limits) {
  GPUAFF_TRY_VOID(check_host_room(bytes, o, limits));
  GPUAFF_TRY(std::size_t page, host_page_size(o, limits));
  HostBuffer b;
  b.options_ = o;
  b.page_size_ = page;
  b.size_ = bytes;
  b.mapped_ = (bytes + page - 1) / page * page;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (o.huge == HugePages::hugetlb) flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB;
  void* p = ::mmap(nullptr, b.mapped_, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    b.mapped_ = 0;
    if (o.huge == HugePages::hugetlb)
      return Unexpected(make_sys_error(Errc::unsupported, e, "huge pages (hugetlb) are not available: mmap(MAP_HUGETLB) of ",
                                       detail::mib(static_cast<long long>(bytes)), " was refused (", detail::errno_text(e),
                                       "); reserve them with vm.nr_hugepages, or use transparent huge pages"));
    return Unexpected(make_sys_error(Errc::system_error, e, "cannot map ", detail::mib(static_cast<long long>(bytes)),
                                     " for a host buffer (mmap: ", detail::errno_text(e), ")"));
  }
  b.data_ = p;
  std::string where = "NUMA node(s) " + o.nodes.to_list();
  if (o.huge == HugePages::transparent && ::madvise(p, b.mapped_, MADV_HUGEPAGE) != 0) {
    int e = errno;
    return Unexpected(make_sys_error(Errc::unsupported, e, "transparent huge pages are not available: madvise(MADV_HUGEPAGE) "
                                     "was refused (", detail::errno_text(e), ")"));
  }
  detail::NodeMask mask = detail::to_nodemask(o.nodes);
  if (detail::raw_mbind(p, b.mapped_, detail::mpol_bind, mask.data(), detail::nodemask_maxnode, 0) != 0) {
    int e = errno;
    return Unexpected(detail::mempolicy_error("cannot bind a host buffer to " + where + " (mbind)", e));
  }
  if (o.fault == FaultIn::populate) {
    if (::madvise(p, b.mapped_, detail::madv_populate_write) != 0) {
      int e = errno;
      return Unexpected(make_sys_error(e == EINVAL ? Errc::unsupported : Errc::system_error, e,
                                       "cannot fault in a host buffer on ", where, " (madvise(MADV_POPULATE_WRITE): ",
                                       detail::errno_text(e), e == EINVAL ? "; it needs Linux 5.14 or later: use fault=touch)" : ")"));
    }
  } else {
    auto* bytes_p = static_cast<volatile unsigned char*>(p);
    for (std::size_t off = 0; off < b.mapped_; off += page) bytes_p[off] = 0;
  }
  GPUAFF_TRY(b.placement_, page_placement(p, b.mapped_, page));
  if (std::size_t on = b.placement_.on(o.nodes); on != b.placement_.pages)
    return fail(Errc::system_error, "a host buffer bound to ", where, " has ", b.placement_.pages - on,
                " of its pages elsewhere or not present (", b.placement_.summary(), "); it was released");
  return b;
}

/// As above, with this machine's limits (read_host_limits).
inline Result<HostBuffer> allocate_host_buffer(std::size_t bytes, const HostBufferOptions& o) {
  return allocate_host_buffer(bytes, o, read_host_limits(o.nodes));
}

}  // namespace v0
}  // namespace gpuaff
