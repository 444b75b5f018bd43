// SPDX-License-Identifier: Apache-2.0
#pragma once
// CpuSet: a constexpr set of logical CPU ids, large enough for the biggest
// machines (glibc's cpu_set_t stops at 1024), with the kernel's two text
// forms: cpulists ("0-3,8,10-11", "0-31:2/8") and hex masks ("ff,ffffffff").

#include "gpuaff/config.hpp"

#include <sched.h>

#include <array>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// The largest number of CPUs a CpuSet holds (ids 0 .. max_cpus-1). Linux's
/// NR_CPUS is 8192 on distribution kernels; ids beyond give Errc::out_of_range.
inline constexpr int max_cpus = 8192;

class CpuSet {
  static constexpr int word_bits = 64;
  static constexpr int max_words = max_cpus / word_bits;
  // Words kept in the object itself: CPUs 0-1023, as many as glibc's
  // cpu_set_t. A set with a higher CPU keeps its words on the heap instead.
  // With all 8,192 CPUs inline every set was 1 KiB: a topology, a plan and
  // each physical core carry several, and a one-shot `gpuaff bind` paid a page
  // fault for every 4 KiB of them it zeroed (benchmarks/README.md, row S).
  static constexpr int inline_words = 16;

 public:
  static constexpr int capacity = max_cpus;

  constexpr CpuSet() = default;
  /// CpuSet{0, 1, 8}: ids must be in [0, capacity) (checked by assert).
  constexpr CpuSet(std::initializer_list<int> ids) {
    for (int id : ids) set(id);
  }
  // Its own body, not assign(): through assign() GCC's LTO build warned of a
  // write past the inline words (-Wstringop-overflow) that cannot happen.
  constexpr CpuSet(const CpuSet& o) : used_(o.used_) {
    if (o.used_ > inline_words) {
      far_ = new std::uint64_t[static_cast<std::size_t>(o.used_)]{};
      far_room_ = o.used_;
    }
    copy_words(data(), o.data(), o.used_);
  }
  constexpr CpuSet(CpuSet&& o) noexcept { take(o); }
  constexpr CpuSet& operator=(const CpuSet& o) {
    if (this != &o) assign(o);
    return *this;
  }
  constexpr CpuSet& operator=(CpuSet&& o) noexcept {
    if (this == &o) return *this;
    if (o.far_ == nullptr) {
      assign(o);  // inline words: a copy is all a move can do
    } else {
      release();
      take(o);
    }
    return *this;
  }
  constexpr ~CpuSet() { delete[] far_; }

  /// The CPUs first..last, both included, as far as they lie in [0, capacity)
  /// (a range outside it, or with last < first, gives the empty set).
  static constexpr CpuSet range(int first, int last) {
    CpuSet s;
    s.set_range(first, last);
    return s;
  }
  /// A set with the single CPU `id`.
  static constexpr CpuSet single(int id) {
    CpuSet s;
    s.set(id);
    return s;
  }

  static constexpr bool valid_id(int id) { return id >= 0 && id < capacity; }

  constexpr bool test(int id) const { return valid_id(id) && ((word_at(word(id)) >> bit(id)) & 1U) != 0; }
  constexpr bool contains(int id) const { return test(id); }
  constexpr CpuSet& set(int id) {
    assert(valid_id(id));
    if (valid_id(id)) {
      use(word(id) + 1);
      data()[word(id)] |= std::uint64_t{1} << bit(id);
    }
    return *this;
  }
  constexpr CpuSet& reset(int id) {
    if (valid_id(id) && word(id) < used_) data()[word(id)] &= ~(std::uint64_t{1} << bit(id));
    return *this;
  }
  /// Adds first..last, both included, clipped to [0, capacity): this is public
  /// API, so ids out of range are left out at run time, never written past the words.
  constexpr CpuSet& set_range(int first, int last) {
    if (first < 0) first = 0;
    if (last >= capacity) last = capacity - 1;
    if (last < first) return *this;
    use(word(last) + 1);
    std::uint64_t* w = data();
    for (int id = first; id <= last; ++id) {
      if (bit(id) == 0 && id + word_bits - 1 <= last) {
        w[word(id)] = ~std::uint64_t{0};
        id += word_bits - 1;
      } else {
        w[word(id)] |= std::uint64_t{1} << bit(id);
      }
    }
    return *this;
  }
  constexpr void clear() {
    std::uint64_t* w = data();
    for (int i = 0; i < used_; ++i) w[i] = 0;
    used_ = 0;
  }

  constexpr int count() const {
    int n = 0;
    for (int i = 0; i < used_; ++i) n += std::popcount(data()[i]);
    return n;
  }
  constexpr int size() const { return count(); }
  constexpr bool empty() const {
    for (int i = 0; i < used_; ++i)
      if (data()[i] != 0) return false;
    return true;
  }
  constexpr bool any() const { return !empty(); }

  /// Lowest CPU, or -1 when empty.
  constexpr int first() const { return next(-1); }
  /// Highest CPU, or -1 when empty.
  constexpr int last() const {
    for (int w = used_ - 1; w >= 0; --w)
      if (data()[w] != 0) return w * word_bits + (word_bits - 1 - std::countl_zero(data()[w]));
    return -1;
  }
  /// The lowest CPU greater than `after`, or -1.
  constexpr int next(int after) const {
    int id = after + 1;
    if (id < 0) id = 0;
    while (id < used_ * word_bits) {
      std::uint64_t w = data()[word(id)] >> bit(id);
      if (w != 0) return id + std::countr_zero(w);
      id = (word(id) + 1) * word_bits;
    }
    return -1;
  }
  /// The n-th CPU in ascending order (n counts from 0), or -1 when n >= count().
  constexpr int nth(int n) const {
    if (n < 0) return -1;
    for (int w = 0; w < used_; ++w) {
      std::uint64_t x = data()[w];
      int c = std::popcount(x);
      if (n < c) {
        for (int i = 0; i < n; ++i) x &= x - 1;  // drop the n lowest bits
        return w * word_bits + std::countr_zero(x);
      }
      n -= c;
    }
    return -1;
  }
  /// Position of `id` among the set's CPUs (0 for the lowest), or -1 if absent.
  constexpr int index_of(int id) const {
    if (!test(id)) return -1;
    int n = 0;
    for (int w = 0; w < word(id); ++w) n += std::popcount(data()[w]);
    return n + std::popcount(data()[word(id)] & ((std::uint64_t{1} << bit(id)) - 1));
  }
  /// The first `n` CPUs in ascending order (all of them if n >= count()).
  constexpr CpuSet first_n(int n) const {
    CpuSet out;
    for (int id = first(); id >= 0 && n > 0; id = next(id), --n) out.set(id);
    return out;
  }

  constexpr bool is_subset_of(const CpuSet& o) const {
    for (int i = 0; i < used_; ++i)
      if ((data()[i] & ~o.word_at(i)) != 0) return false;
    return true;
  }
  constexpr bool intersects(const CpuSet& o) const {
    const std::uint64_t* a = data();
    const std::uint64_t* b = o.data();
    for (int i = 0, n = used_ < o.used_ ? used_ : o.used_; i < n; ++i)
      if ((a[i] & b[i]) != 0) return true;
    return false;
  }

  constexpr CpuSet& operator|=(const CpuSet& o) {
    use(o.used_);
    std::uint64_t* a = data();
    const std::uint64_t* b = o.data();
    for (int i = 0; i < o.used_; ++i) a[i] |= b[i];
    return *this;
  }
  constexpr CpuSet& operator&=(const CpuSet& o) {
    std::uint64_t* a = data();
    const std::uint64_t* b = o.data();
    int n = used_ < o.used_ ? used_ : o.used_;
    for (int i = 0; i < n; ++i) a[i] &= b[i];
    for (int i = n; i < used_; ++i) a[i] = 0;  // o has no CPU there
    used_ = n;
    return *this;
  }
  constexpr CpuSet& operator^=(const CpuSet& o) {
    use(o.used_);
    std::uint64_t* a = data();
    const std::uint64_t* b = o.data();
    for (int i = 0; i < o.used_; ++i) a[i] ^= b[i];
    return *this;
  }
  /// Set difference.
  constexpr CpuSet& operator-=(const CpuSet& o) {
    std::uint64_t* a = data();
    const std::uint64_t* b = o.data();
    for (int i = 0, n = used_ < o.used_ ? used_ : o.used_; i < n; ++i) a[i] &= ~b[i];
    return *this;
  }
  friend constexpr CpuSet operator|(CpuSet a, const CpuSet& b) { return a |= b; }
  friend constexpr CpuSet operator&(CpuSet a, const CpuSet& b) { return a &= b; }
  friend constexpr CpuSet operator^(CpuSet a, const CpuSet& b) { return a ^= b; }
  friend constexpr CpuSet operator-(CpuSet a, const CpuSet& b) { return a -= b; }
  friend constexpr bool operator==(const CpuSet& a, const CpuSet& b) {
    int n = a.used_ > b.used_ ? a.used_ : b.used_;  // a set has no CPU past its own used_
    for (int i = 0; i < n; ++i)
      if (a.word_at(i) != b.word_at(i)) return false;
    return true;
  }

  /// Iterates the CPU ids in ascending order. It yields ids by value, so it
  /// is a C++20 std::forward_iterator, and to pre-C++20 algorithms (through
  /// std::iterator_traits, which deduces the category) an input iterator; no
  /// tag is named here, which keeps <iterator> out of the umbrella header.
  class iterator {
   public:
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using pointer = const int*;
    using reference = int;

    constexpr iterator() = default;
    constexpr iterator(const CpuSet* s, int id) : set_(s), id_(id) {}
    constexpr int operator*() const { return id_; }
    constexpr iterator& operator++() {
      id_ = set_->next(id_);
      return *this;
    }
    constexpr iterator operator++(int) {
      iterator t = *this;
      ++*this;
      return t;
    }
    friend constexpr bool operator==(const iterator& a, const iterator& b) { return a.id_ == b.id_; }

   private:
    const CpuSet* set_ = nullptr;
    int id_ = -1;
  };
  constexpr iterator begin() const { return {this, first()}; }
  constexpr iterator end() const { return {this, -1}; }

  /// CPUs 64*i .. 64*i+63 as one 64-bit word (CPU 64*i in bit 0); 0 for a
  /// word past the set's highest CPU, including i >= capacity / 64.
  constexpr std::uint64_t word_at(int i) const { return i >= 0 && i < used_ ? data()[i] : 0; }

  // ---- text forms ---------------------------------------------------------

  /// Parses a kernel cpulist: "", "0-3,8,10-11", "0-31:2/8" (groups of 2 out
  /// of every 8), with surrounding whitespace, newlines and trailing NUL bytes.
  /// Errors: Errc::parse_error (names the offset and the bad text),
  /// Errc::out_of_range (an id >= capacity).
  template <class = void>
  static constexpr Result<CpuSet> parse_list(std::string_view text);

  /// Parses a kernel hex mask ("ff,ffffffff", as in cpumap and Cpus_allowed):
  /// comma-separated 32-bit words, most significant first.
  /// Errors: Errc::parse_error, Errc::out_of_range (a set bit >= capacity).
  template <class = void>
  static constexpr Result<CpuSet> parse_mask(std::string_view text);

  /// "0-3,8,10-11"; the empty set gives "".
  std::string to_list() const;
  /// Kernel hex mask, zero-padded 32-bit words: "000000ff,ffffffff". At least
  /// `min_bits` bits are written (rounded up to 32); the empty set gives "00000000".
  std::string to_mask(int min_bits = 32) const;

  // ---- glibc cpu_set_t ----------------------------------------------------

  /// Errors: Errc::out_of_range when a CPU id is >= CPU_SETSIZE (1024); use
  /// AllocatedCpuSet for larger ids.
  Result<cpu_set_t> to_cpu_set_t() const;
  static CpuSet from_cpu_set_t(const cpu_set_t& s) { return from_cpu_set(&s, sizeof s); }
  /// From a (possibly CPU_ALLOC'ed) set of `bytes` bytes; bits beyond capacity are dropped.
  static CpuSet from_cpu_set(const cpu_set_t* s, std::size_t bytes);

 private:
  static constexpr int word(int id) { return id / word_bits; }
  static constexpr int bit(int id) { return id % word_bits; }

  constexpr std::uint64_t* data() { return far_ != nullptr ? far_ : inline_.data(); }
  constexpr const std::uint64_t* data() const { return far_ != nullptr ? far_ : inline_.data(); }
  constexpr int room() const { return far_ != nullptr ? far_room_ : inline_words; }

  // Makes words [0, n) usable (those past used_ are 0) and used_ >= n.
  constexpr void use(int n) {
    if (n > room()) {
      int r = room() * 2 < n ? n : room() * 2;
      if (r > max_words) r = max_words;
      auto* w = new std::uint64_t[static_cast<std::size_t>(r)]{};
      copy_words(w, data(), used_);
      if (far_ == nullptr)  // the inline words stay 0 while the heap holds the set
        for (int i = 0; i < used_; ++i) inline_[static_cast<std::size_t>(i)] = 0;
      delete[] far_;
      far_ = w;
      far_room_ = r;
    }
    if (n > used_) used_ = n;
  }
  // Becomes a copy of o (this != &o).
  constexpr void assign(const CpuSet& o) {
    if (o.used_ > room()) {
      release();
      far_ = new std::uint64_t[static_cast<std::size_t>(o.used_)]{};
      far_room_ = o.used_;
    }
    std::uint64_t* a = data();
    copy_words(a, o.data(), o.used_);
    for (int i = o.used_; i < used_; ++i) a[i] = 0;
    used_ = o.used_;
  }
  static constexpr void copy_words(std::uint64_t* to, const std::uint64_t* from, int n) {
    for (int i = 0; i < n; ++i) to[i] = from[i];
  }
  // Takes o's heap words, or copies its inline ones; this holds no heap words.
  constexpr void take(CpuSet& o) {
    if (o.far_ == nullptr) {
      assign(o);
      return;
    }
    far_ = o.far_;
    far_room_ = o.far_room_;
    used_ = o.used_;
    o.far_ = nullptr;
    o.far_room_ = 0;
    o.used_ = 0;
  }
  // Drops every CPU and the heap words.
  constexpr void release() {
    if (far_ == nullptr) {
      clear();
      return;
    }
    delete[] far_;
    far_ = nullptr;
    far_room_ = 0;
    used_ = 0;
  }

  // Operations touch only words [0, used_): on a 224-CPU machine that is 4.
  // Invariants: every word at or past used_ is 0 (used_ is an upper bound, not
  // always tight, e.g. after reset()); with far_ set, the inline words are all 0.
  std::array<std::uint64_t, inline_words> inline_{};
  std::uint64_t* far_ = nullptr;
  int far_room_ = 0;
  int used_ = 0;
};

/// A set of NUMA node ids (memory binding, a GPU's memory nodes). Node ids are
/// small integers, so the CPU set type serves.
using NodeSet = CpuSet;

// ---- implementation ---------------------------------------------------------

namespace detail {

/// A short excerpt of the text at `pos`, for error messages.
constexpr std::string_view excerpt(std::string_view s, std::size_t pos) {
  if (pos >= s.size()) return "end of text";
  return s.substr(pos, 16);
}

constexpr Unexpected<Error> parse_failure(std::string_view what, std::string_view full, std::size_t pos,
                                          std::string_view why) {
  return fail(Errc::parse_error, "malformed ", what, " at offset ", pos, " ('", excerpt(full, pos), "'): ", why);
}

}  // namespace detail

template <class>
constexpr Result<CpuSet> CpuSet::parse_list(std::string_view full) {
  std::size_t base = 0;
  std::string_view s = detail::trim(full, &base);
  CpuSet out;
  std::size_t i = 0;
  auto number = [&](long long& v) -> bool {
    std::size_t digits = detail::leading_number(s.substr(i), 10, 1'000'000'000, v);  // saturated: out of range below
    i += digits;
    return digits > 0;
  };
  if (s.empty()) return out;
  while (true) {
    std::size_t item = i;
    long long a = 0;
    long long b = 0;
    long long used = 1;
    long long group = 1;
    if (!number(a)) return detail::parse_failure("cpulist", full, base + i, "expected a CPU number");
    b = a;
    if (i < s.size() && s[i] == '-') {
      ++i;
      if (!number(b)) return detail::parse_failure("cpulist", full, base + i, "expected the end of a range");
      if (b < a) return detail::parse_failure("cpulist", full, base + item, "range end is below its start");
      if (i < s.size() && s[i] == ':') {
        ++i;
        if (!number(used)) return detail::parse_failure("cpulist", full, base + i, "expected a group size after ':'");
        if (i >= s.size() || s[i] != '/')
          return detail::parse_failure("cpulist", full, base + i, "expected '/' in a stride (first-last:used/group)");
        ++i;
        if (!number(group)) return detail::parse_failure("cpulist", full, base + i, "expected a group length after '/'");
        if (used == 0 || group == 0 || used > group)
          return detail::parse_failure("cpulist", full, base + item, "stride needs 0 < used <= group");
      }
    }
    if (b >= capacity)
      return fail(Errc::out_of_range, "CPU id ", b, " at offset ", base + item, " of cpulist '", full.substr(0, 64),
                  "' is beyond the ", static_cast<int>(capacity), " CPUs gpuaff supports");
    if (used == group) {
      out.set_range(static_cast<int>(a), static_cast<int>(b));  // every CPU of the range: whole words at a time
    } else {
      for (long long start = a; start <= b; start += group) {
        for (long long k = 0; k < used && start + k <= b; ++k) out.set(static_cast<int>(start + k));
      }
    }
    if (i == s.size()) break;
    if (s[i] != ',') return detail::parse_failure("cpulist", full, base + i, "expected ',' or the end");
    ++i;
    // tolerate blanks after commas, as some tools write "0-3, 8"
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  return out;
}

template <class>
constexpr Result<CpuSet> CpuSet::parse_mask(std::string_view full) {
  std::size_t base = 0;
  std::string_view s = detail::trim(full, &base);
  if (s.empty()) return detail::parse_failure("hex mask", full, base, "empty mask");
  // Words are most significant first: walk from the end.
  CpuSet out;
  int word_index = 0;
  std::size_t end = s.size();
  while (true) {
    std::size_t start = end;
    while (start > 0 && s[start - 1] != ',') --start;
    std::size_t len = end - start;
    if (len == 0) return detail::parse_failure("hex mask", full, base + start, "empty word between commas");
    if (len > 8) return detail::parse_failure("hex mask", full, base + start, "a word has more than 8 hex digits");
    long long value = 0;
    std::size_t digits = detail::leading_number(s.substr(start, len), 16, 0xffffffffLL, value);
    if (digits < len) return detail::parse_failure("hex mask", full, base + start + digits, "not a hex digit");
    auto w = static_cast<std::uint32_t>(value);
    if (w != 0) {
      long long first_bit = static_cast<long long>(word_index) * 32;
      if (first_bit + 32 > capacity)
        return fail(Errc::out_of_range, "hex mask '", full.substr(0, 64), "...' sets a CPU id >= ", static_cast<int>(capacity),
                    ", beyond what gpuaff supports");
      for (int b = 0; b < 32; ++b)
        if ((w >> b) & 1U) out.set(static_cast<int>(first_bit) + b);
    }
    ++word_index;
    if (start == 0) break;
    end = start - 1;
    if (end == 0) return detail::parse_failure("hex mask", full, base, "mask starts with ','");
  }
  return out;
}

inline std::string CpuSet::to_list() const {
  std::string out;
  int id = first();
  while (id >= 0) {
    int end = id;
    while (test(end + 1)) ++end;
    if (!out.empty()) out += ',';
    out += std::to_string(id);
    if (end > id) {
      out += '-';
      out += std::to_string(end);
    }
    id = next(end);
  }
  return out;
}

inline std::string CpuSet::to_mask(int min_bits) const {
  int bits = last() + 1;
  if (bits < min_bits) bits = min_bits;
  int words32 = bits <= 0 ? 1 : (bits + 31) / 32;
  std::string out;
  for (int w = words32 - 1; w >= 0; --w) {
    // A mask wider than the set (min_bits beyond capacity) is zero-filled, never read past the words.
    std::uint64_t word64 = word_at(w / 2);
    std::uint32_t v = static_cast<std::uint32_t>(word64 >> ((w % 2) * 32));
    for (int shift = 28; shift >= 0; shift -= 4) out += "0123456789abcdef"[(v >> shift) & 0xf];
    if (w > 0) out += ',';
  }
  return out;
}

inline Result<cpu_set_t> CpuSet::to_cpu_set_t() const {
  if (last() >= CPU_SETSIZE)
    return fail(Errc::out_of_range, "CPU ", last(), " does not fit in a cpu_set_t (", static_cast<int>(CPU_SETSIZE),
                " CPUs); use AllocatedCpuSet");
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int id : *this) CPU_SET(static_cast<std::size_t>(id), &s);
  return s;
}

inline CpuSet CpuSet::from_cpu_set(const cpu_set_t* s, std::size_t bytes) {
  CpuSet out;
  if (s == nullptr) return out;
  std::size_t bits = bytes * 8;
  if (bits > static_cast<std::size_t>(capacity)) bits = static_cast<std::size_t>(capacity);
  for (std::size_t id = 0; id < bits; ++id)
    if (CPU_ISSET_S(id, bytes, s)) out.set(static_cast<int>(id));
  return out;
}

}  // namespace v0
}  // namespace gpuaff
