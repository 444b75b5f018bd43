// SPDX-License-Identifier: Apache-2.0
// CpuSet: set algebra, iteration, and the kernel's cpulist and mask syntax.
#include <gpuaff/cpu_set.hpp>
#include <gpuaff/os/cpu_buffer.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;

namespace {
constexpr CpuSet list(std::string_view s) { return CpuSet::parse_list(s).value(); }
constexpr CpuSet mask(std::string_view s) { return CpuSet::parse_mask(s).value(); }
}  // namespace

TEST_CASE("an empty set has no CPUs and no first or last") {
  GPUAFF_STATIC_CHECK(CpuSet{}.empty());
  GPUAFF_STATIC_CHECK(CpuSet{}.count() == 0);
  GPUAFF_STATIC_CHECK(CpuSet{}.first() == -1);
  GPUAFF_STATIC_CHECK(CpuSet{}.last() == -1);
  GPUAFF_STATIC_CHECK(CpuSet{}.nth(0) == -1);
}

TEST_CASE("set algebra follows the set identities") {
  constexpr CpuSet a{0, 1, 2, 3, 64, 65};
  constexpr CpuSet b{2, 3, 4, 65, 200};
  GPUAFF_STATIC_CHECK((a | b) == CpuSet{0, 1, 2, 3, 4, 64, 65, 200});
  GPUAFF_STATIC_CHECK((a & b) == CpuSet{2, 3, 65});
  GPUAFF_STATIC_CHECK((a - b) == CpuSet{0, 1, 64});
  GPUAFF_STATIC_CHECK((a ^ b) == CpuSet{0, 1, 4, 64, 200});
  GPUAFF_STATIC_CHECK((a & b).is_subset_of(a));
  GPUAFF_STATIC_CHECK(!a.is_subset_of(b));
  GPUAFF_STATIC_CHECK(a.intersects(b));
  GPUAFF_STATIC_CHECK(!(a - b).intersects(b));
}

TEST_CASE("sets of different extents compare and combine by their CPUs, not their history") {
  // Operations only visit the words in use; a set that once held a high CPU
  // must still equal one that never did.
  // (A set with a CPU past 1023 keeps its words on the heap, so these sets
  // are built inside each check: a constant can hold no heap memory.)
  constexpr auto shrunk = [] {
    CpuSet s{3, 5000};
    s.reset(5000);
    return s;
  };
  GPUAFF_STATIC_CHECK(shrunk() == CpuSet{3});
  GPUAFF_STATIC_CHECK(CpuSet{3} == shrunk());
  GPUAFF_STATIC_CHECK(shrunk().last() == 3);
  GPUAFF_STATIC_CHECK((CpuSet{1, 8000} & CpuSet{1, 2}) == CpuSet{1});
  GPUAFF_STATIC_CHECK((CpuSet{1, 2} & CpuSet{1, 8000}) == CpuSet{1});
  GPUAFF_STATIC_CHECK((CpuSet{1} | CpuSet{8000}).last() == 8000);
  GPUAFF_STATIC_CHECK((CpuSet{1} ^ CpuSet{1, 8000}) == CpuSet{8000});
  GPUAFF_STATIC_CHECK((CpuSet{1, 8000} - CpuSet{8000}) == CpuSet{1});
  GPUAFF_STATIC_CHECK((CpuSet{1, 8000} - CpuSet{8000}).count() == 1);
  GPUAFF_STATIC_CHECK(!CpuSet{8000}.is_subset_of(CpuSet{1}));
  GPUAFF_STATIC_CHECK(CpuSet{1}.is_subset_of(CpuSet{1, 8000}));
  GPUAFF_STATIC_CHECK(!CpuSet{1}.intersects(CpuSet{8000}));
  GPUAFF_STATIC_CHECK(CpuSet{8000}.next(1) == 8000);
  GPUAFF_STATIC_CHECK(CpuSet{1, 8000}.nth(1) == 8000);
  constexpr bool cleared = [] {
    CpuSet s = CpuSet::range(0, 8191);
    s.clear();
    return s.empty() && s == CpuSet{} && s.first() == -1;
  }();
  GPUAFF_STATIC_CHECK(cleared);
}

TEST_CASE("a set stays small unless it holds a CPU past 1023") {
  // CPUs 0-1023 are kept in the object (16 words); a set that is 1 KiB
  // (8,192 CPUs inline) costs every plan and every core a page fault per 4 KiB.
  static_assert(sizeof(CpuSet) <= 160);
}

TEST_CASE("copies, moves and assignments between small and large sets keep exactly their CPUs") {
  // Each pairing of storage: inline to inline, inline to heap, heap to inline,
  // heap to heap, and the moved-from set left empty or unchanged, never both owners.
  constexpr auto round_trip = [] {
    CpuSet small{1, 2, 1023};
    CpuSet large{5, 1024, 8191};
    CpuSet a = small;        // inline copy
    CpuSet b = large;        // heap copy
    bool ok = a == CpuSet{1, 2, 1023} && b == CpuSet{5, 1024, 8191} && large.count() == 3;
    a = large;               // inline set takes heap words
    b = small;               // heap set takes inline words, keeps no CPU past them
    ok = ok && a == large && b == small && b.last() == 1023 && !b.test(8191);
    CpuSet c = std::move(a);  // heap words change owner
    ok = ok && c == large && a.empty() && a.last() == -1;
    a = std::move(c);
    ok = ok && a == large && c.empty();
    c = std::move(b);         // inline: a copy
    ok = ok && c == small;
    a.set(2000);              // grows in place
    a.reset(8191);
    ok = ok && a == CpuSet{5, 1024, 2000} && a.count() == 3;
    const CpuSet& same = a;
    a = same;                 // self-assignment keeps the set
    ok = ok && a == CpuSet{5, 1024, 2000};
    CpuSet grown;             // grows word by word past the inline words
    for (int id = 0; id < 8192; id += 97) grown.set(id);
    ok = ok && grown.count() == 85 && grown.last() == 8148 && grown.first() == 0;
    grown &= CpuSet{0, 97};   // the intersection drops the heap words' CPUs
    ok = ok && grown == CpuSet{0, 97} && grown.last() == 97;
    grown |= CpuSet::range(7000, 7001);
    ok = ok && grown.count() == 4;
    // A set that moved from its own words to the heap, then gave the heap
    // words away, starts again empty: none of its old low CPUs come back.
    CpuSet reused{1, 2};
    reused.set(3000);
    CpuSet taken = std::move(reused);
    reused.set(5);
    return ok && reused == CpuSet{5} && taken == CpuSet{1, 2, 3000};
  };
  GPUAFF_STATIC_CHECK(round_trip());
}

TEST_CASE("count, first, last, next and nth walk CPUs in ascending order across words") {
  constexpr auto s = [] { return CpuSet{5, 63, 64, 127, 8191}; };
  GPUAFF_STATIC_CHECK(s().count() == 5);
  GPUAFF_STATIC_CHECK(s().first() == 5);
  GPUAFF_STATIC_CHECK(s().last() == 8191);
  GPUAFF_STATIC_CHECK(s().next(5) == 63);
  GPUAFF_STATIC_CHECK(s().next(64) == 127);
  GPUAFF_STATIC_CHECK(s().next(8191) == -1);
  GPUAFF_STATIC_CHECK(s().nth(0) == 5);
  GPUAFF_STATIC_CHECK(s().nth(2) == 64);
  GPUAFF_STATIC_CHECK(s().nth(4) == 8191);
  GPUAFF_STATIC_CHECK(s().nth(5) == -1);
  GPUAFF_STATIC_CHECK(s().index_of(127) == 3);
  GPUAFF_STATIC_CHECK(s().index_of(6) == -1);
  GPUAFF_STATIC_CHECK(s().first_n(2) == CpuSet{5, 63});
  CpuSet spread = s();
  std::vector<int> seen(spread.begin(), spread.end());
  CHECK(seen == std::vector<int>{5, 63, 64, 127, 8191});
}

TEST_CASE("range covers both ends, including whole 64-bit words") {
  GPUAFF_STATIC_CHECK(CpuSet::range(60, 200).count() == 141);
  GPUAFF_STATIC_CHECK(CpuSet::range(60, 200).first() == 60);
  GPUAFF_STATIC_CHECK(CpuSet::range(60, 200).last() == 200);
  GPUAFF_STATIC_CHECK(CpuSet::range(0, 8191).count() == 8192);
}

TEST_CASE("cpulist parses ranges, singles, whitespace, newline and NUL padding") {
  GPUAFF_STATIC_CHECK(list("0-3,8,10-11") == CpuSet{0, 1, 2, 3, 8, 10, 11});
  GPUAFF_STATIC_CHECK(list("  7\n") == CpuSet{7});
  GPUAFF_STATIC_CHECK(list(std::string_view("0-1\n\0\0", 6)) == CpuSet{0, 1});
  GPUAFF_STATIC_CHECK(list("").empty());
  GPUAFF_STATIC_CHECK(list("\n").empty());
  GPUAFF_STATIC_CHECK(list("0-3, 8") == CpuSet{0, 1, 2, 3, 8});
}

TEST_CASE("cpulist stride form takes `used` CPUs out of every `group`") {
  // 0-31:2/8 -> groups start at 0, 8, 16, 24; take 2 from each.
  GPUAFF_STATIC_CHECK(list("0-31:2/8") == CpuSet{0, 1, 8, 9, 16, 17, 24, 25});
  // The last group is cut by the range end: 0-9:3/4 -> 0,1,2, 4,5,6, 8,9.
  GPUAFF_STATIC_CHECK(list("0-9:3/4") == CpuSet{0, 1, 2, 4, 5, 6, 8, 9});
  GPUAFF_STATIC_CHECK(list("0-7:1/1") == CpuSet::range(0, 7));
}

TEST_CASE("malformed cpulists are errors that name the offset and text") {
  struct Bad {
    const char* text;
    const char* offset;  // "at offset N" expected in the message
  };
  for (Bad b : {Bad{"0-3,x", "at offset 4"}, Bad{"3-1", "at offset 0"}, Bad{"1,,2", "at offset 2"},
                Bad{"-1", "at offset 0"}, Bad{"0-", "at offset 2"}, Bad{"1 2", "at offset 1"},
                Bad{"0-7:2", "at offset 5"}, Bad{"0-7:0/4", "at offset 0"}, Bad{"0-7:5/4", "at offset 0"},
                Bad{"1,", "at offset 2"}, Bad{"0x3", "at offset 1"}}) {
    CAPTURE(b.text);
    auto r = CpuSet::parse_list(b.text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == Errc::parse_error);
    CHECK(r.error().message().find(b.offset) != std::string_view::npos);
  }
  GPUAFF_STATIC_CHECK(!CpuSet::parse_list("a"));
}

TEST_CASE("CPU ids beyond the capacity are out_of_range errors, never UB") {
  GPUAFF_STATIC_CHECK(CpuSet::parse_list("8191").has_value());
  GPUAFF_STATIC_CHECK(CpuSet::parse_list("8192").error().code() == Errc::out_of_range);
  GPUAFF_STATIC_CHECK(CpuSet::parse_list("0-99999999999999999999").error().code() == Errc::out_of_range);
  auto r = CpuSet::parse_list("0,9000");
  REQUIRE_FALSE(r);
  CHECK(r.error().message().find("9000") != std::string_view::npos);
}

TEST_CASE("hex masks read most significant word first") {
  GPUAFF_STATIC_CHECK(mask("ff") == CpuSet::range(0, 7));
  GPUAFF_STATIC_CHECK(mask("ff,ffffffff") == CpuSet::range(0, 39));
  GPUAFF_STATIC_CHECK(mask("00000001,00000000") == CpuSet{32});
  GPUAFF_STATIC_CHECK(mask("80000000,00000000,00000000\n") == CpuSet{95});
  GPUAFF_STATIC_CHECK(mask("0").empty());
  GPUAFF_STATIC_CHECK(mask("FF") == CpuSet::range(0, 7));
}

TEST_CASE("malformed masks are errors") {
  for (const char* t : {"", "g", "ff,,ff", ",ff", "123456789", "ff,"}) {
    CAPTURE(t);
    auto r = CpuSet::parse_mask(t);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == Errc::parse_error);
  }
  // 257 words: bit 8192 is beyond capacity; a zero word there is fine.
  std::string over = "1";
  std::string zeros = "0";
  for (int i = 0; i < 256; ++i) {
    over += ",00000000";
    zeros += ",00000000";
  }
  CHECK(CpuSet::parse_mask(over).error().code() == Errc::out_of_range);
  CHECK(CpuSet::parse_mask(zeros).value().empty());
}

TEST_CASE("formatting gives kernel-style cpulists and masks") {
  CHECK(CpuSet{0, 1, 2, 3, 8, 10, 11}.to_list() == "0-3,8,10-11");
  CHECK(CpuSet{}.to_list().empty());
  CHECK(CpuSet{5}.to_list() == "5");
  CHECK(CpuSet{1, 2}.to_list() == "1-2");
  CHECK(CpuSet::range(0, 39).to_mask() == "000000ff,ffffffff");
  CHECK(CpuSet{}.to_mask() == "00000000");
  CHECK(CpuSet{0}.to_mask(96) == "00000000,00000000,00000001");
}

TEST_CASE("cpu_set_t conversion round-trips below 1024 and refuses above") {
  CpuSet s{0, 3, 1023};
  auto c = s.to_cpu_set_t();
  REQUIRE(c);
  CHECK(CPU_ISSET(1023, &*c));
  CHECK(CPU_COUNT(&*c) == 3);
  CHECK(CpuSet::from_cpu_set_t(*c) == s);
  auto big = CpuSet{1024}.to_cpu_set_t();
  REQUIRE_FALSE(big);
  CHECK(big.error().code() == Errc::out_of_range);
}

TEST_CASE("AllocatedCpuSet holds ids beyond 1023") {
  CpuSet s{0, 1500, 4095};
  gpuaff::AllocatedCpuSet a(s);
  CHECK(a.cpus() >= 4096);
  CHECK(CPU_ISSET_S(4095, a.bytes(), a.get()));
  CHECK(CPU_COUNT_S(a.bytes(), a.get()) == 3);
  CHECK(a.to_cpu_set() == s);
  gpuaff::AllocatedCpuSet moved(std::move(a));
  CHECK(moved.to_cpu_set() == s);
}

namespace {
// The walk below reads some 120,000 small files (the fixtures' and this
// machine's): plain open/read/close and readdir's file types, without a
// stream's buffers or an lstat per entry (under AddressSanitizer those were
// most of this test's time).
std::string slurp(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// Every *_list/cpulist and mask file under dir (recursively, no symlinks).
void walk(const std::string& dir, const std::function<void(const std::string&, const std::string&)>& fn, int depth = 0) {
  if (depth > 8) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {  // a file system that does not say: ask
      struct stat st {};
      if (lstat(path.c_str(), &st) != 0) continue;
      type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (type == DT_DIR) walk(path, fn, depth + 1);
    else if (type == DT_REG) fn(name, path);
  }
  closedir(d);
}

bool is_list_name(const std::string& n) {
  return n == "cpulist" || n == "online" || n == "possible" || n == "present" || n == "has_cpu" ||
         n == "has_memory" || n == "has_normal_memory" ||
         (n.size() > 5 && n.compare(n.size() - 5, 5, "_list") == 0) || n == "local_cpulist";
}
bool is_mask_name(const std::string& n) {
  return n == "cpumap" || n == "shared_cpu_map" || n == "core_cpus" || n == "thread_siblings" ||
         n == "core_siblings" || n == "package_cpus" || n == "local_cpus";
}

void round_trip_tree(const std::string& root, int& lists, int& masks) {
  walk(root + "/sys/devices/system", [&](const std::string& name, const std::string& path) {
    std::string text = slurp(path);
    std::string trimmed(gpuaff::detail::trim(text));
    if (is_list_name(name)) {
      auto r = CpuSet::parse_list(text);
      INFO(path << ": '" << text << "'");
      REQUIRE(r);
      CHECK(r->to_list() == trimmed);
      ++lists;
    } else if (is_mask_name(name)) {
      auto r = CpuSet::parse_mask(text);
      INFO(path);
      REQUIRE(r);
      // The kernel sizes the top word by nr_cpu_ids; compare from the first significant digit.
      int words = static_cast<int>(std::count(trimmed.begin(), trimmed.end(), ',')) + 1;
      auto significant = [](const std::string& m) { return m.substr(std::min(m.find_first_not_of("0,"), m.size())); };
      CHECK(significant(r->to_mask(words * 32)) == significant(trimmed));
      ++masks;
    }
  });
}
}  // namespace

TEST_CASE("every cpulist and mask in this machine's sysfs and in the fixtures round-trips") {
  int lists = 0;
  int masks = 0;
  round_trip_tree("", lists, masks);
  CHECK(lists > 0);  // a Linux machine has at least cpu/online and cpu0's siblings
  DIR* d = opendir(GPUAFF_FIXTURES_DIR);
  if (d != nullptr) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n[0] != '.') round_trip_tree(std::string(GPUAFF_FIXTURES_DIR) + "/" + n, lists, masks);
    }
    closedir(d);
  }
  MESSAGE("round-tripped " << lists << " cpulists and " << masks << " masks");
}

TEST_CASE("ranges and masks outside the 8192 CPUs never touch memory outside the set") {
  using gpuaff::CpuSet;
  // Public API: out-of-range arguments are clipped at run time, not only asserted.
  CHECK(CpuSet::range(-5, 3) == CpuSet::range(0, 3));
  CHECK(CpuSet::range(-70, -1).empty());
  CHECK(CpuSet::range(8190, 9000).to_list() == "8190-8191");
  CHECK(CpuSet::range(5, 2).empty());
  CpuSet s;
  s.set_range(-1000, 1);
  CHECK(s.to_list() == "0-1");
  // A mask wider than the set is zero-filled: 8192 + 64 bits, 258 words of 32 bits.
  std::string wide = CpuSet{0}.to_mask(CpuSet::capacity + 64);
  CHECK(wide.size() == 258 * 9 - 1);
  CHECK(wide.substr(wide.size() - 8) == "00000001");
  CHECK(wide.substr(0, 9) == "00000000,");
}
