// SPDX-License-Identifier: Apache-2.0
// thread_affinity / set_thread_affinity: one thread's mask, any size, never partial.
#include <gpuaff/apply/affinity.hpp>

#include <cstring>
#include <thread>

#include "apply_support.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using namespace apply_test;

namespace {
// Restores the main thread's mask whatever a test did.
struct RestoreMask {
  ~RestoreMask() { (void)gpuaff::set_thread_affinity(allowed_at_start()); }
};
}  // namespace

TEST_CASE("thread_affinity reports what the kernel shows in /proc for this thread") {
  auto cpus = gpuaff::thread_affinity();
  REQUIRE(cpus);
  CHECK(*cpus == thread_status_cpus(gpuaff::detail::current_tid()));
  CHECK(*cpus == allowed_at_start());
}

TEST_CASE("set_thread_affinity binds the calling thread only") {
  RestoreMask restore;
  CpuSet one = CpuSet::single(cpu_b());
  std::thread other_before([] {});  // a thread that exists elsewhere is untouched
  other_before.join();
  REQUIRE(gpuaff::set_thread_affinity(one));
  CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == one);
  CHECK(*gpuaff::thread_affinity() == one);
  // A thread created now inherits the mask.
  CpuSet seen;
  std::thread t([&] { seen = thread_status_cpus(gpuaff::detail::current_tid()); });
  t.join();
  CHECK(seen == one);
}

TEST_CASE("an empty set is refused before any system call") {
  auto r = gpuaff::set_thread_affinity(CpuSet{});
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == Errc::empty_result);
  CHECK(*gpuaff::thread_affinity() == allowed_at_start());
}

TEST_CASE("CPUs outside the allowed set are named in the error and nothing changes") {
  RestoreMask restore;
  int outside = impossible_cpu();
  REQUIRE(gpuaff::set_thread_affinity(CpuSet::single(cpu_a())));
  SUBCASE("only outside CPUs: the kernel answers EINVAL") {
    auto r = gpuaff::set_thread_affinity(CpuSet::single(outside));
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == Errc::empty_result);  // the machine refuses: exit 5, not a usage mistake
    CHECK(r.error().sys_errno() == EINVAL);
    std::string msg(r.error().message());
    CHECK(msg.find("CPUs " + std::to_string(outside) + " ") != std::string::npos);
    CHECK(msg.find("allowed set (cgroup/taskset)") != std::string::npos);
  }
  SUBCASE("some outside CPUs: the kernel would drop them silently; gpuaff refuses") {
    auto r = gpuaff::set_thread_affinity(CpuSet{cpu_b(), outside});
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == Errc::empty_result);  // the machine refuses: exit 5, not a usage mistake
    std::string msg(r.error().message());
    CHECK(msg.find("CPUs " + std::to_string(outside) + " ") != std::string::npos);
  }
  CHECK(*gpuaff::thread_affinity() == CpuSet::single(cpu_a()));
}

// ---- a kernel with more than 1024 CPUs, played through the syscall table ----
namespace big {
constexpr int kernel_cpus = 4096;  // nr_cpu_ids of the pretend kernel
constexpr std::size_t kernel_bytes = kernel_cpus / 8;
unsigned char mask[kernel_bytes];
int get_calls = 0;

int get(pid_t, std::size_t bytes, cpu_set_t* out) {
  ++get_calls;
  if (bytes < kernel_bytes) {  // what sched_getaffinity does with a short buffer
    errno = EINVAL;
    return -1;
  }
  std::memset(out, 0, bytes);
  std::memcpy(out, mask, kernel_bytes);
  return 0;
}
int set(pid_t, std::size_t bytes, const cpu_set_t* in) {
  std::memset(mask, 0, kernel_bytes);
  std::memcpy(mask, in, bytes < kernel_bytes ? bytes : kernel_bytes);
  return 0;
}
void put(int cpu) { mask[cpu / 8] = static_cast<unsigned char>(mask[cpu / 8] | (1U << (cpu % 8))); }
}  // namespace big

TEST_CASE("a kernel with more than 1024 CPUs gets a buffer large enough (grown on EINVAL)") {
  std::memset(big::mask, 0, sizeof big::mask);
  big::put(0);
  big::put(2049);
  big::put(4095);
  big::get_calls = 0;
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
  fake.get_affinity = &big::get;
  fake.set_affinity = &big::set;
  gpuaff::detail::ScopedSyscalls use(fake);
  auto cpus = gpuaff::thread_affinity();
  REQUIRE(cpus);
  CHECK(*cpus == CpuSet{0, 2049, 4095});
  CHECK(big::get_calls == 3);  // 1024, 2048, then 4096 bits
  REQUIRE(gpuaff::set_thread_affinity(CpuSet{3000}));
  CHECK(*gpuaff::thread_affinity() == CpuSet{3000});
}
