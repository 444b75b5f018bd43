// SPDX-License-Identifier: Apache-2.0
// The device node probe (SysfsOptions::probe_device_nodes, docs/contract.md
// section 2): in a batch job with CUDA_VISIBLE_DEVICES set, an NVIDIA GPU whose
// dev/nvidiaM this process may not open is not the process's. Roots hold real
// character devices (mknod, so root only); a device cgroup that denies one
// (cgroup v1's devices controller) shows the denial itself.
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gpuaff/doctor/verdict.hpp>
#include <gpuaff/launch/front.hpp>
#include <gpuaff/record/record.hpp>
#include <gpuaff/source/sysfs.hpp>

#include "source/tree.hpp"
#include "support/check.hpp"

using gpuaff::SysfsOptions;
using gpuaff::SysfsSource;
using gpuaff::Topology;
using gpuaff_test::add_cpu;
using gpuaff_test::add_node;
using gpuaff_test::add_pci;
using gpuaff_test::cpu_root;
using gpuaff_test::node_root;
using gpuaff_test::TempTree;

namespace {

const std::string gpu0 = "0000:e1:00.0";
const std::string gpu1 = "0000:e2:00.0";
const std::string info0 = "proc/driver/nvidia/gpus/" + gpu0 + "/information";
const std::string info1 = "proc/driver/nvidia/gpus/" + gpu1 + "/information";
const std::string cannot_tell0 = ": cannot tell whether this process may open GPU " + gpu0 + "'s device node; kept as its GPU";

gpuaff::Environment env_of(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string info(int minor) {
  return "Model: \t\t fake GPU\nBus Location: \t 0000:00:00.0\nDevice Minor: \t " + std::to_string(minor) +
         "\nGPU Excluded:\t No\n";
}

// Two CPUs, one node, two NVIDIA GPUs the driver lists (Device Minor 0 and 1); no dev/.
void machine(TempTree& t) {
  t.write(cpu_root + "online", "0-1\n");
  add_cpu(t, 0, "0", 0, "0-1");
  add_cpu(t, 1, "1", 0, "0-1");
  t.write(node_root + "online", "0\n");
  add_node(t, 0, "0-1", "10");
  add_pci(t, gpu0, "0x030200", "0x10de", "0", "0-1");
  add_pci(t, gpu1, "0x030200", "0x10de", "0", "0-1");
  t.write(info0, info(0));
  t.write(info1, info(1));
  t.write("proc/self/status", "Cpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n");
}

bool make_node(const TempTree& t, const std::string& rel, unsigned maj, unsigned min) {
  std::string p = t.path(rel);
  (void)gpuaff::detail::make_directories(t.path("dev"));
  return ::mknod(p.c_str(), S_IFCHR | 0666, makedev(maj, min)) == 0;
}

// Both GPUs' nodes, as the driver makes them; false (the test skips) without the right to mknod.
bool both_nodes(const TempTree& t) { return make_node(t, "dev/nvidia0", 195, 0) && make_node(t, "dev/nvidia1", 195, 1); }

/// The note the probe gives node dev/nvidiaM of `t`: whatever the kernel
/// answers an open of 195:M with, when that is not EPERM (ENXIO without the
/// NVIDIA driver; ENODEV from the driver for a minor with no GPU behind it);
/// "" when a GPU of this machine stands behind it and the open succeeds.
std::string open_note(const TempTree& t, int m) {
  int fd = ::open(t.path("dev/nvidia" + std::to_string(m)).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0) {
    ::close(fd);
    return "";
  }
  int err = errno;
  REQUIRE(err != EPERM);
  REQUIRE(err != EACCES);
  return "dev/nvidia" + std::to_string(m) + ": opening it failed with " + gpuaff::detail::errno_text(err) +
         ", not EPERM: cannot tell whether this process may open GPU " + (m == 0 ? gpu0 : gpu1) +
         "'s device node; kept as its GPU\n";
}

SysfsOptions opts(const TempTree& t, bool probe) {
  return SysfsOptions{.root = t.root(), .visible = {.use_environment = false}, .probe_device_nodes = probe};
}

std::string addresses(const std::vector<gpuaff::Gpu>& gpus) {
  std::string s;
  for (const auto& g : gpus) s += (s.empty() ? "" : ",") + std::string(g.pci.address.to_string().view());
  return s;
}
std::string addresses(const std::vector<gpuaff::PciAddress>& list) {
  std::string s;
  for (const auto& a : list) s += (s.empty() ? "" : ",") + std::string(a.to_string().view());
  return s;
}
std::string notes(const Topology& t) {
  std::string s;
  for (const auto& n : t.notes) s += n + "\n";
  return s;
}

// IN_OPEN events on one file: O_PATH opens make none, any real open one.
class OpenWatch {
 public:
  explicit OpenWatch(const std::string& path) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0 && ::inotify_add_watch(fd_, path.c_str(), IN_OPEN) < 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~OpenWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  OpenWatch(const OpenWatch&) = delete;
  OpenWatch& operator=(const OpenWatch&) = delete;
  bool ok() const { return fd_ >= 0; }
  /// Events since the last call.
  int opens() {
    alignas(inotify_event) char buf[4096];
    int n = 0;
    while (true) {
      ssize_t got = ::read(fd_, buf, sizeof buf);
      if (got <= 0) return n;
      for (ssize_t i = 0; i < got;) {
        auto* e = reinterpret_cast<inotify_event*>(buf + i);
        if ((e->mask & IN_OPEN) != 0) ++n;
        i += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
  }

 private:
  int fd_ = -1;
};

}  // namespace

TEST_CASE("the probe is due in a batch job with CUDA_VISIBLE_DEVICES set, and only there") {
  using gpuaff::device_nodes_probe_due;
  CHECK_FALSE(device_nodes_probe_due(env_of({})));
  CHECK_FALSE(device_nodes_probe_due(env_of({{"SLURM_JOB_ID", "7"}})));
  CHECK_FALSE(device_nodes_probe_due(env_of({{"CUDA_VISIBLE_DEVICES", "0"}})));
  CHECK_FALSE(device_nodes_probe_due(env_of({{"SLURM_JOBID", "7"}, {"CUDA_VISIBLE_DEVICES", "0"}})));
  CHECK(device_nodes_probe_due(env_of({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "0"}})));
  CHECK(device_nodes_probe_due(env_of({{"PBS_JOBID", "7.server"}, {"CUDA_VISIBLE_DEVICES", "0"}})));
  CHECK(device_nodes_probe_due(env_of({{"LSB_JOBID", "7"}, {"CUDA_VISIBLE_DEVICES", "GPU-1"}})));
  CHECK(device_nodes_probe_due(env_of({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", ""}})));
  gpuaff::LaunchOptions o;
  o.machine.root = "/nonexistent";
  CHECK(gpuaff::load_request(o, env_of({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "0"}}), {},
                             gpuaff::SysfsDetail::binding)
            .probe_device_nodes);
  CHECK_FALSE(gpuaff::load_request(o, env_of({{"SLURM_JOB_ID", "7"}}), {}, gpuaff::SysfsDetail::binding)
                  .probe_device_nodes);
}

TEST_CASE("not due: no device node and no extra information file is opened") {
  TempTree t;
  machine(t);
  if (!both_nodes(t)) {
    MESSAGE("skipped: mknod needs root");
    return;
  }
  SysfsSource plain(opts(t, false));
  REQUIRE(plain.load());
  // Through the front door: without SLURM_JOB_ID, or without CUDA_VISIBLE_DEVICES, as without the probe.
  gpuaff::LaunchOptions o;
  o.machine.root = t.root();
  for (const auto& env : {env_of({{"CUDA_VISIBLE_DEVICES", "0,1"}}), env_of({{"SLURM_JOB_ID", "7"}})}) {
    gpuaff::LoadRequest r = gpuaff::load_request(o, env, {}, gpuaff::SysfsDetail::binding);
    CHECK_FALSE(r.probe_device_nodes);
    SysfsSource s(SysfsOptions{.root = t.root(), .visible = {.use_environment = false},
                               .detail = gpuaff::SysfsDetail::binding, .probe_device_nodes = r.probe_device_nodes});
    SysfsSource binding(SysfsOptions{.root = t.root(), .visible = {.use_environment = false},
                                     .detail = gpuaff::SysfsDetail::binding});
    auto a = s.load();
    auto b = binding.load();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(s.files_opened() == binding.files_opened());
    CHECK(s.files_read() == binding.files_read());
    CHECK(a->notes.empty());
    auto topo = gpuaff::load(o, env);
    REQUIRE(topo);
    CHECK(addresses(topo->gpus) == gpu0 + "," + gpu1);
    CHECK(topo->notes.empty());
  }
  SysfsSource probed(opts(t, true));
  auto p = probed.load();
  REQUIRE(p);
  // Each GPU: its information file (read once more), the node's O_PATH open and the real open.
  CHECK(probed.files_opened() == plain.files_opened() + 6);
  CHECK(addresses(p->gpus) == gpu0 + "," + gpu1);
  CHECK(p->hidden_gpus.empty());
  CHECK(probed.denied_gpus().empty());
  // What the kernel answers for each node decides the note: where a GPU of
  // this machine stands behind 195:M (an NVIDIA server) the open succeeds and
  // nothing is noted; without one the open fails (ENXIO with no driver,
  // ENODEV from the driver for a minor with no GPU) and the note says so.
  CHECK(notes(*p) == open_note(t, 0) + open_note(t, 1));
  // The front door in a batch job: the same probe, through load().
  gpuaff::LaunchOptions o2;
  o2.machine.root = t.root();
  auto topo = gpuaff::load(o2, env_of({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "1"}}));
  REQUIRE(topo);
  CHECK(addresses(topo->gpus) == gpu1);
  CHECK(topo->notes == p->notes);
}

TEST_CASE("a node that is not the GPU's character device is never opened for real, and the GPU stays") {
  TempTree t;
  machine(t);
  if (!make_node(t, "dev/nvidia1", 195, 1)) {
    MESSAGE("skipped: mknod needs root");
    return;
  }
  SysfsSource plain(opts(t, false));
  REQUIRE(plain.load());
  const std::string not_opened = ", and was not opened" + cannot_tell0;
  for (int kind = 0; kind < 4; ++kind) {
    CAPTURE(kind);
    t.remove("dev/nvidia0");
    bool made = true;
    std::string expected;
    if (kind == 0) {  // a regular file
      t.write("dev/nvidia0", "not a device\n");
      expected = "dev/nvidia0 is a regular file, not the character device 195:0" + not_opened;
    } else if (kind == 1) {  // /dev/null's numbers: a real open would succeed
      made = make_node(t, "dev/nvidia0", 1, 3);
      expected = "dev/nvidia0 is the character device 1:3, not the character device 195:0" + not_opened;
    } else if (kind == 2) {  // the other GPU's minor
      made = make_node(t, "dev/nvidia0", 195, 1);
      expected = "dev/nvidia0 is the character device 195:1, not the character device 195:0" + not_opened;
    } else {  // a link to the host's /dev/null: not followed
      t.link("dev/nvidia0", "/dev/null");
      expected = "dev/nvidia0 is a symbolic link, not the character device 195:0" + not_opened;
    }
    REQUIRE(made);
    OpenWatch watch(t.path("dev/nvidia0"));
    if (kind != 3) {
      REQUIRE(watch.ok());
      // The watch sees a real open (so that its silence below means something).
      int fd = ::open(t.path("dev/nvidia0").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      if (kind != 2) CHECK(watch.opens() == 1);  // 195:1 without a driver: ENXIO, no event
      (void)watch.opens();
    }
    SysfsSource s(opts(t, true));
    auto topo = s.load();
    REQUIRE(topo);
    if (kind != 3) CHECK(watch.opens() == 0);
    CHECK(addresses(topo->gpus) == gpu0 + "," + gpu1);
    CHECK(s.denied_gpus().empty());
    REQUIRE_FALSE(topo->notes.empty());
    CHECK(topo->notes.front() == expected);
    // GPU 0: its information file and the O_PATH open; GPU 1: those and the real open.
    CHECK(s.files_opened() == plain.files_opened() + 5);
  }
}

TEST_CASE("a missing or garbled Device Minor, or a missing node, keeps the GPU with a note") {
  TempTree t;
  machine(t);
  SysfsSource plain(opts(t, false));
  REQUIRE(plain.load());
  // A root without a dev folder (a recording) is not probed: nothing more is
  // read and nothing noted, even with the probe due.
  SysfsSource recording(opts(t, true));
  auto unprobed = recording.load();
  REQUIRE(unprobed);
  CHECK(unprobed->notes.empty());
  CHECK(recording.files_opened() == plain.files_opened());
  t.mkdir("dev");  // a root with a dev folder, whose nodes are missing
  struct Case {
    std::string information;  // "" : the file removed
    std::string note;
  };
  const std::vector<Case> cases = {
      {"Device Minor: \t zero\n", info0 + ": 'Device Minor:' is 'zero', not a minor number" + cannot_tell0},
      {"Device Minor: \t -1\n", info0 + ": 'Device Minor:' is '-1', not a minor number" + cannot_tell0},
      {"Device Minor: \t 99999999999999999999\n",
       info0 + ": 'Device Minor:' is '99999999999999999999', not a minor number" + cannot_tell0},
      {"Device Minor: \t \n", info0 + ": 'Device Minor:' is '', not a minor number" + cannot_tell0},
      {"Model: x\nGPU UUID: GPU-1234\n", info0 + " has no 'Device Minor:' line" + cannot_tell0},
      {"", info0 + " is missing" + cannot_tell0},
      {info(0), "dev/nvidia0 (the character device 195:0) is missing" + cannot_tell0},
  };
  for (const auto& c : cases) {
    CAPTURE(c.information);
    if (c.information.empty()) t.remove(info0);
    else t.write(info0, c.information);
    SysfsSource s(opts(t, true));
    auto topo = s.load();
    REQUIRE(topo);
    CHECK(addresses(topo->gpus) == gpu0 + "," + gpu1);
    CHECK(topo->hidden_gpus.empty());
    REQUIRE(topo->notes.size() == 2);  // GPU 1's node is missing too
    CHECK(topo->notes[0] == c.note);
    // Without the probe nothing of this is read, and nothing is noted.
    SysfsSource off(opts(t, false));
    auto quiet = off.load();
    REQUIRE(quiet);
    CHECK(quiet->notes.empty());
    CHECK(off.files_opened() == plain.files_opened());
  }
  // A directory where the information file should be: a note naming it, not an error.
  t.remove(info0);
  t.mkdir(info0);
  SysfsOptions binding = opts(t, true);
  binding.detail = gpuaff::SysfsDetail::binding;  // full detail reads it for the UUID, and fails
  auto topo = SysfsSource(binding).load();
  REQUIRE(topo);
  CHECK(addresses(topo->gpus) == gpu0 + "," + gpu1);
  REQUIRE_FALSE(topo->notes.empty());
  CHECK(topo->notes[0].find(t.root() + "/" + info0 + ": cannot be read (EISDIR") == 0);
}

TEST_CASE("a device cgroup that denies a GPU's node hides the GPU; a recording leaves it out of the driver's list") {
  TempTree t;
  machine(t);
  if (!both_nodes(t)) {
    MESSAGE("skipped: mknod needs root");
    return;
  }
  // cgroup v1's devices controller (v2 device rules are eBPF programs).
  std::string cg = "/sys/fs/cgroup/devices/gpuaff-test-" + std::to_string(::getpid());
  if (::access("/sys/fs/cgroup/devices/devices.deny", W_OK) != 0 || ::mkdir(cg.c_str(), 0755) != 0) {
    MESSAGE("skipped: no writable cgroup v1 devices controller");
    return;
  }
  TempTree out;
  std::string rec = out.path("rec");
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipefd[0]);
    std::ostringstream said;
    auto put = [&](const std::string& s) { (void)gpuaff::detail::write_all(pipefd[1], s); };
    bool in = gpuaff::detail::write_whole_file(cg + "/devices.deny", "c 195:0 rwm\n") == 0 &&
              gpuaff::detail::write_whole_file(cg + "/cgroup.procs", std::to_string(::getpid()) + "\n") == 0;
    if (!in) {
      put("cannot enter the cgroup");
      ::_exit(0);
    }
    SysfsSource s(opts(t, true));
    auto topo = s.load();
    if (!topo) {
      put("load failed: " + std::string(topo.error().message()));
      ::_exit(0);
    }
    said << "visible=" << addresses(topo->gpus) << " hidden=" << addresses(topo->hidden_gpus)
         << " denied=" << addresses(s.denied_gpus()) << "\n"
         << notes(*topo);
    auto r = gpuaff::record_topology(gpuaff::RecordOptions{.out_dir = rec, .root = t.root(), .probe_device_nodes = true});
    said << "record=" << (r ? "ok" : std::string(r.error().message())) << "\n";
    put(said.str());
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::rmdir(cg.c_str());
  std::string refused = open_note(t, 1);  // opened here, outside the child's cgroup
  CHECK(got == "visible=" + gpu1 + " hidden=" + gpu0 + " denied=" + gpu0 + "\n" +
                   "dev/nvidia0 cannot be opened (EPERM (Operation not permitted)): GPU " + gpu0 +
                   " is not this process's (a device cgroup, such as Slurm's ConstrainDevices, hides it)\n" + refused +
                   "record=ok\n");
  // The recording holds the driver's list as the task saw it: GPU 1 only.
  struct stat st {};
  CHECK(::stat((rec + "/proc/driver/nvidia/gpus/" + gpu1 + "/information").c_str(), &st) == 0);
  CHECK(::stat((rec + "/proc/driver/nvidia/gpus/" + gpu0).c_str(), &st) != 0);
  auto replay = SysfsSource(SysfsOptions{.root = rec, .visible = {.use_environment = false}}).load();
  REQUIRE(replay);
  CHECK(addresses(replay->gpus) == gpu1);
  CHECK(addresses(replay->hidden_gpus) == gpu0);
  // Outside the cgroup, the same root gives both GPUs.
  auto here = SysfsSource(opts(t, true)).load();
  REQUIRE(here);
  CHECK(addresses(here->gpus) == gpu0 + "," + gpu1);
}

TEST_CASE("which cgroup lines decide device access: v1's devices controller and the v2 line") {
  using gpuaff::detail::device_cgroup_lines;
  CHECK(device_cgroup_lines("9:name=systemd:/\n5:devices:/slurm/job_7\n4:memory:/x\n0::/user.slice\n") ==
        "5:devices:/slurm/job_7, 0::/user.slice");
  CHECK(device_cgroup_lines("0::/system.slice/slurmstepd.scope/job_7/step_0\n") ==
        "0::/system.slice/slurmstepd.scope/job_7/step_0");
  CHECK(device_cgroup_lines("3:cpu,devices:/a\n2:memory:/b") == "3:cpu,devices:/a");
  CHECK(device_cgroup_lines("4:memory:/only\ngarbage\n").empty());
  CHECK(device_cgroup_lines("").empty());
}

TEST_CASE("doctor from outside a batch process's device cgroup refuses to guess its GPU, and takes pci=BDF") {
  // The task's cgroup denies GPU 0's node: it has GPU 1 only, and its
  // CUDA_VISIBLE_DEVICES=0 means GPU 1. Doctor, outside that cgroup, may
  // open both nodes: its own probe would call GPU 0 the task's GPU 0.
  TempTree t;
  machine(t);
  if (!both_nodes(t)) {
    MESSAGE("skipped: mknod needs root");
    return;
  }
  std::string cg = "/sys/fs/cgroup/devices/gpuaff-doctor-test-" + std::to_string(::getpid());
  if (::access("/sys/fs/cgroup/devices/devices.deny", W_OK) != 0 || ::mkdir(cg.c_str(), 0755) != 0) {
    MESSAGE("skipped: no writable cgroup v1 devices controller");
    return;
  }
  REQUIRE(gpuaff::detail::write_whole_file(cg + "/devices.deny", "c 195:0 rwm\n") == 0);
  auto task = [](std::vector<std::string> vars) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
      std::vector<char*> envp;
      for (auto& v : vars) envp.push_back(v.data());
      envp.push_back(nullptr);
      ::execve("/bin/sleep", argv, envp.data());
      ::_exit(127);
    }
    // Until it runs sleep: before, /proc shows the parent's environment.
    for (int i = 0; i < 500; ++i) {
      std::string comm;
      if (gpuaff::detail::read_whole_file("/proc/" + std::to_string(child) + "/comm", comm) == 0 &&
          comm.rfind("sleep", 0) == 0)
        break;
      ::usleep(10000);
    }
    return child;
  };
  const std::vector<std::string> job{"PATH=/usr/bin:/bin", "SLURM_JOB_ID=7", "CUDA_VISIBLE_DEVICES=0", "LOCAL_RANK=0"};
  pid_t inside = task(job);
  bool entered = gpuaff::detail::write_whole_file(cg + "/cgroup.procs", std::to_string(inside) + "\n") == 0;
  pid_t beside = task(job);  // in doctor's own cgroup
  gpuaff::LaunchOptions o;
  o.machine.root = t.root();
  auto guessed = gpuaff::examine_process(inside, o);
  gpuaff::LaunchOptions by_pci = o;
  REQUIRE(gpuaff::set_option(by_pci, "pci", gpu1));
  auto named = gpuaff::examine_process(inside, by_pci);
  gpuaff::LaunchOptions by_index = o;
  REQUIRE(gpuaff::set_option(by_index, "gpu", "0"));
  auto indexed = gpuaff::examine_process(inside, by_index);
  auto same = gpuaff::examine_process(beside, o);
  for (pid_t p : {inside, beside}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  ::rmdir(cg.c_str());
  REQUIRE(entered);
  // Guessed from its rank, or given as an index: the index is the task's, which doctor cannot see.
  for (const auto* r : {&guessed, &indexed}) {
    REQUIRE_FALSE(r->has_value());
    std::string m(r->error().message());
    INFO(m);
    CHECK(r->error().code() == gpuaff::Errc::invalid_argument);
    CHECK(m.find("in another device cgroup than doctor (its '5:devices:/gpuaff-doctor-test-") != std::string::npos);
    CHECK(m.find("it does not guess; pass pci=BDF") != std::string::npos);
  }
  // Named by PCI address: checked against that GPU.
  REQUIRE_MESSAGE(named.has_value(), named.error().message());
  CHECK(named->expected.pci == gpu1);
  // A task in doctor's own cgroup: doctor's probe is the task's.
  REQUIRE_MESSAGE(same.has_value(), same.error().message());
  CHECK(same->expected.pci == gpu0);
}
