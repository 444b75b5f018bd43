// SPDX-License-Identifier: Apache-2.0
// bind_process: every thread of the process, or none.
#include <gpuaff/apply/process.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "apply_support.hpp"
#include "support/check.hpp"

using gpuaff::CpuSet;
using gpuaff::Errc;
using namespace apply_test;

namespace {
// Threads that start, report their tid, and park until released.
class ParkedThreads {
 public:
  explicit ParkedThreads(int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        std::unique_lock lock(m_);
        tids_.push_back(gpuaff::detail::current_tid());
        cv_.notify_all();
        cv_.wait(lock, [this] { return released_; });
      });
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return static_cast<int>(tids_.size()) == n; });
  }
  ~ParkedThreads() {
    {
      std::lock_guard lock(m_);
      released_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  std::vector<pid_t> tids() {
    std::lock_guard lock(m_);
    return tids_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<pid_t> tids_;
  bool released_ = false;
  std::vector<std::thread> threads_;
};

void unbind_all() { REQUIRE(gpuaff::bind_process(allowed_at_start())); }
}  // namespace

TEST_CASE("bind_process reaches threads created before it") {
  ParkedThreads parked(4);
  CpuSet target = CpuSet::single(cpu_b());
  auto r = gpuaff::bind_process(target);
  REQUIRE(r);
  CHECK(r->threads_bound >= 5);  // the 4 parked ones and this one (sanitizer runtimes add their own)
  CHECK(r->passes >= 2);         // the last scan found nothing new
  CHECK(r->warnings.empty());
  for (pid_t tid : parked.tids()) CHECK(thread_status_cpus(tid) == target);
  CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == target);
  unbind_all();
  for (pid_t tid : parked.tids()) CHECK(thread_status_cpus(tid) == allowed_at_start());
}

namespace {
// A kernel that refuses to change one particular thread.
std::atomic<pid_t> refused_tid{-1};
int refuse_one(pid_t tid, std::size_t bytes, const cpu_set_t* mask) {
  if (tid == refused_tid.load()) {
    errno = EPERM;
    return -1;
  }
  return sched_setaffinity(tid, bytes, mask);
}
}  // namespace

TEST_CASE("when one thread cannot be bound, every thread already bound is put back") {
  ParkedThreads parked(3);
  auto tids = parked.tids();
  // Refuse the highest tid: scans go in ascending order, so the others are bound first.
  refused_tid = *std::max_element(tids.begin(), tids.end());
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
  fake.set_affinity = &refuse_one;
  gpuaff::detail::ScopedSyscalls use(fake);
  auto r = gpuaff::bind_process(CpuSet::single(cpu_b()));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == Errc::permission_denied);
  std::string msg(r.error().message());
  CHECK(msg.find("thread " + std::to_string(refused_tid.load())) != std::string::npos);
  CHECK(msg.find("put back") != std::string::npos);
  for (pid_t tid : tids) CHECK(thread_status_cpus(tid) == allowed_at_start());
  CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == allowed_at_start());
}

TEST_CASE("the memory policy is set for the calling thread only, and bind_process says so") {
  ParkedThreads parked(1);
  long probe = syscall(SYS_set_mempolicy, 0, nullptr, 0UL);
  if (probe != 0) {
    MESSAGE("set_mempolicy is refused here; skipping");
    return;
  }
  auto r = gpuaff::bind_process(allowed_at_start(), {.policy = gpuaff::MemPolicy::first_touch});
  REQUIRE(r);
  CHECK(r->memory_applied);
  REQUIRE(r->warnings.size() == 1);
  CHECK(r->warnings[0].find("calling thread only") != std::string::npos);
  CHECK(gpuaff::memory_policy()->mode == 4);  // MPOL_LOCAL
  syscall(SYS_set_mempolicy, 0, nullptr, 0UL);
}

TEST_CASE("Rebinder notices threads whose mask was reset and binds them again") {
  ParkedThreads parked(2);
  CpuSet target = CpuSet::single(cpu_b());
  auto rb = gpuaff::Rebinder::create(target);
  REQUIRE(rb);
  REQUIRE(rb->drifted());
  CHECK(rb->drifted()->empty());
  // What an OpenMP runtime or NCCL does: widen one thread's mask behind our back.
  pid_t victim = parked.tids()[0];
  cpu_set_t wide;
  CPU_ZERO(&wide);
  for (int c : allowed_at_start()) CPU_SET(c, &wide);
  REQUIRE(sched_setaffinity(victim, sizeof wide, &wide) == 0);
  if (allowed_at_start() != target) {
    auto drift = rb->drifted();
    REQUIRE(drift);
    CHECK(*drift == std::vector<pid_t>{victim});
  }
  REQUIRE(rb->reapply());
  CHECK(thread_status_cpus(victim) == target);
  CHECK(rb->drifted()->empty());
  unbind_all();
}

TEST_CASE("bind_process refuses an empty set and CPUs outside the allowed set, binding nothing") {
  ParkedThreads parked(2);
  CHECK(gpuaff::bind_process(CpuSet{}).error().code() == Errc::empty_result);
  int outside = impossible_cpu();
  auto r = gpuaff::bind_process(CpuSet{cpu_a(), outside});
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == Errc::empty_result);  // the machine refuses: exit 5, not a usage mistake
  for (pid_t tid : parked.tids()) CHECK(thread_status_cpus(tid) == allowed_at_start());
}

namespace {
// A kernel on which one thread exits just as it is looked at.
std::atomic<pid_t> vanishing_tid{-1};
int vanish_one(pid_t tid, std::size_t bytes, cpu_set_t* mask) {
  if (tid == vanishing_tid.load()) {
    errno = ESRCH;
    return -1;
  }
  return sched_getaffinity(tid, bytes, mask);
}
}  // namespace

TEST_CASE("a thread that exits while the process is being bound is skipped, not an error") {
  ParkedThreads parked(2);
  vanishing_tid = parked.tids()[1];
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
  fake.get_affinity = &vanish_one;
  gpuaff::detail::ScopedSyscalls use(fake);
  auto r = gpuaff::bind_process(CpuSet::single(cpu_b()));
  REQUIRE(r);
  CHECK(r->threads_exited == 1);
  CHECK(thread_status_cpus(parked.tids()[0]) == CpuSet::single(cpu_b()));
  CHECK(thread_status_cpus(parked.tids()[1]) == allowed_at_start());  // the "exited" one was left alone
  vanishing_tid = -1;
  unbind_all();
}

TEST_CASE("bind_process succeeds while threads are being created and exiting") {
  std::atomic<bool> stop{false};
  std::atomic<int> made{0};
  std::atomic<pid_t> churn_tid{0};
  // Churns short-lived threads until told to stop.
  std::thread churn([&] {
    churn_tid = gpuaff::detail::current_tid();
    while (!stop.load()) {
      std::thread([] {}).join();
      made.fetch_add(1);
    }
  });
  while (made.load() < 20) std::this_thread::yield();
  CpuSet target = CpuSet::single(cpu_b());
  auto r = gpuaff::bind_process(target);
  REQUIRE(r);
  CHECK(thread_status_cpus(churn_tid.load()) == target);
  // Let it create (bound) threads for a while before unbinding everything.
  int after = made.load();
  while (made.load() < after + 5) std::this_thread::yield();
  stop = true;
  churn.join();
  unbind_all();
}

namespace {
// A kernel on which binding thread `busy_tid` fails with EBUSY (as for a
// SCHED_DEADLINE thread), and on which binding the thread `spawner_tid` makes
// it start a new thread right after: the newcomer inherits the binding, and
// the scan under way listed the threads before it existed. Putting back
// `stuck_tid` fails with EPERM. The first set of a thread is its binding;
// a later one is the undo.
std::atomic<pid_t> busy_tid{-1};
std::atomic<pid_t> spawner_tid{-1};
std::atomic<pid_t> stuck_tid{-1};
std::mutex fake_mutex;
std::vector<pid_t> bound_once;
ParkedThreads* newborn = nullptr;

int busy_and_spawning(pid_t tid, std::size_t bytes, const cpu_set_t* mask) {
  std::unique_lock lock(fake_mutex);
  bool undo = std::find(bound_once.begin(), bound_once.end(), tid) != bound_once.end();
  bound_once.push_back(tid);
  lock.unlock();
  if (!undo && tid == busy_tid.load()) {
    errno = EBUSY;
    return -1;
  }
  if (undo && tid == stuck_tid.load()) {
    errno = EPERM;
    return -1;
  }
  int rc = sched_setaffinity(tid, bytes, mask);
  if (!undo && tid == spawner_tid.load() && newborn == nullptr) newborn = new ParkedThreads(1);
  return rc;
}

struct BusyKernel {
  explicit BusyKernel(pid_t busy, pid_t stuck = -1) {
    busy_tid = busy;
    stuck_tid = stuck;
    spawner_tid = gpuaff::detail::current_tid();
    bound_once.clear();
    fake.set_affinity = &busy_and_spawning;
  }
  ~BusyKernel() {
    delete newborn;
    newborn = nullptr;
    busy_tid = spawner_tid = stuck_tid = -1;
  }
  gpuaff::detail::Syscalls fake = gpuaff::detail::real_syscalls;
};
}  // namespace

namespace {
/// Runs `body` on a thread started now, before the threads `body` starts:
/// bind_process scans in ascending thread id, and these cases need the
/// binding thread scanned before them. This test's own thread cannot stand
/// in for it: the kernel's id counter wraps at pid_max (32768 on a small
/// machine), and threads started after a wrap have lower ids than one
/// started before it. REQUIRE would throw out of that thread, so the body
/// uses CHECK and returns early where REQUIRE would stop.
template <class F>
void on_new_thread(F body) {
  std::thread t(body);
  t.join();
}

/// The ids of `parked` in the order bind_process scans them (ascending);
/// empty, with a failed check, unless this thread comes before all of them
/// (the ids wrapped between its start and theirs).
std::vector<pid_t> scanned_after_this_thread(ParkedThreads& parked) {
  auto tids = parked.tids();
  std::sort(tids.begin(), tids.end());
  CHECK(gpuaff::detail::current_tid() < tids[0]);
  if (gpuaff::detail::current_tid() > tids[0]) tids.clear();
  return tids;
}

/// bind_process to CPU b through the system calls of `kernel`.
auto bind_through(BusyKernel& kernel) {
  gpuaff::detail::ScopedSyscalls use(kernel.fake);
  return gpuaff::bind_process(CpuSet::single(cpu_b()));
}
}  // namespace

TEST_CASE("after a failure, a thread born during the scan with the binding is put back too") {
  REQUIRE(cpu_b() != cpu_a());  // the binding must differ from the threads' mask to be seen
  on_new_thread([] {
    ParkedThreads parked(3);
    // Scans go in ascending order: this thread (started before the parked
    // ones) is bound and starts the newcomer, tids[0] is bound, tids[1] fails.
    // (The test's main thread is scanned first, or after the failure when
    // the ids wrapped: bound and put back, or never touched.)
    auto tids = scanned_after_this_thread(parked);
    if (tids.empty()) return;
    BusyKernel kernel(tids[1]);
    auto r = bind_through(kernel);
    CHECK_FALSE(r);
    CHECK(newborn != nullptr);
    if (r || newborn == nullptr) return;
    pid_t born = newborn->tids()[0];
    std::string msg(r.error().message());
    CHECK(msg.find("thread " + std::to_string(tids[1])) != std::string::npos);
    CHECK(msg.find("every thread was put back") != std::string::npos);
    // The newcomer was created by a bound thread, so it started bound; the undo found it.
    CHECK(thread_status_cpus(born) == allowed_at_start());
    for (pid_t tid : tids) CHECK(thread_status_cpus(tid) == allowed_at_start());
    CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == allowed_at_start());
  });
  CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == allowed_at_start());
}

TEST_CASE("after a failure, a thread that cannot be put back is named, and the others are put back") {
  REQUIRE(cpu_b() != cpu_a());
  on_new_thread([] {
    ParkedThreads parked(3);
    auto tids = scanned_after_this_thread(parked);
    if (tids.empty()) return;
    BusyKernel kernel(tids[2], tids[0]);  // tids[0] and tids[1] get bound, tids[2] fails, tids[0] stays bound
    auto r = bind_through(kernel);
    CHECK_FALSE(r);
    CHECK(newborn != nullptr);
    if (r || newborn == nullptr) return;
    std::string msg(r.error().message());
    CHECK(msg.find("thread " + std::to_string(tids[0]) + " could not be put back and stays bound to CPUs " +
                   std::to_string(cpu_b())) != std::string::npos);
    CHECK(msg.find("every thread was put back") == std::string::npos);
    CHECK(thread_status_cpus(tids[0]) == CpuSet::single(cpu_b()));  // as the message says
    CHECK(thread_status_cpus(tids[1]) == allowed_at_start());
    CHECK(thread_status_cpus(newborn->tids()[0]) == allowed_at_start());
    CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == allowed_at_start());
  });
  CHECK(thread_status_cpus(gpuaff::detail::current_tid()) == allowed_at_start());
  unbind_all();
}
