// SPDX-License-Identifier: Apache-2.0
// Interrupt routes against the roles (gpuaff/doctor/interrupts.hpp) on the
// small root tests/doctor/irq_root (plain files, as the kernel writes them):
//   0000:29:02.0  MSI-X vectors 24 (may use 0-7, delivered to 1), 25 (2-3,
//                 delivered to 2), 26 (4-7, delivered to 5);
//   0000:15:03.0  vectors 30 (smp_affinity_list "garbage"), 31 ("0-9000":
//                 past the 8192 CPUs a CpuSet holds), 32 ("1500-1501": CPUs
//                 beyond 1024, which are fine), 33 (no proc/irq/33), and an
//                 entry "abc" that is no IRQ number;
//   0000:00:01.0  no msi_irqs directory (legacy INTx).
// The roles of the cases: main = 0-1, comm = 2-3, the rank's CPUs 0-7.
#include <gpuaff/doctor/interrupts.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/check.hpp"

namespace {

std::string irq_root() { return std::string(GPUAFF_SOURCE_DIR) + "/tests/doctor/irq_root"; }

gpuaff::Roles roles() {
  gpuaff::Roles r;
  r.main = gpuaff::CpuSet::parse_list("0-1").value();
  r.comm = gpuaff::CpuSet::parse_list("2-3").value();
  r.compute = gpuaff::CpuSet::parse_list("4-7").value();
  return r;
}

}  // namespace

TEST_CASE("interrupts: vectors, routes, and which of them land on main and comm") {
  auto a = gpuaff::read_device_irqs(irq_root(), "0000:29:02.0", "GPU 0");
  CHECK(a.note.empty());
  REQUIRE(a.vectors.size() == 3);
  CHECK(a.vectors[0].irq == 24);
  CHECK(a.vectors[0].affinity->to_list() == "0-7");
  CHECK(a.vectors[0].lands()->to_list() == "1");  // the effective CPU, not all it may use
  std::vector<gpuaff::DeviceIrqs> devices{a};
  gpuaff::mark_irq_roles(devices, roles());
  // 24 is delivered to CPU 1 (main), 25 to CPU 2 (comm), 26 to CPU 5 (compute: fine).
  CHECK(devices[0].vectors[0].roles_hit == std::vector<std::string>{"main"});
  // 24 may use 0-7: the kernel may move it onto comm (2-3) too.
  CHECK(devices[0].vectors[0].roles_allowed == std::vector<std::string>{"comm"});
  CHECK(devices[0].vectors[1].roles_allowed.empty());  // 2-3 is comm itself: hit, not only allowed
  CHECK(devices[0].vectors[1].roles_hit == std::vector<std::string>{"comm"});
  CHECK(devices[0].vectors[2].roles_hit.empty());
  // The suggestion: 24 and 25 to the rank's CPUs outside main and comm (4-7); 26 stays.
  auto s = gpuaff::irq_steering(devices, roles(), gpuaff::CpuSet::parse_list("0-7").value());
  CHECK(s.why.empty());
  CHECK(s.commands() == std::vector<std::string>{"echo 4-7 > /proc/irq/24/smp_affinity_list",
                                                 "echo 4-7 > /proc/irq/25/smp_affinity_list"});
  // A rank all of whose CPUs are main or comm has nowhere to steer to.
  auto none = gpuaff::irq_steering(devices, roles(), gpuaff::CpuSet::parse_list("0-3").value());
  CHECK(none.moves.empty());
  CHECK(none.why.find("no CPU to steer to") != std::string::npos);
  // A vector delivered to compute but allowed onto main (an affinity written
  // but not yet taken: x86 moves a vector at its next interrupt) is steered too.
  auto pending = a;
  pending.vectors[2].affinity = gpuaff::CpuSet::parse_list("0-1").value();
  std::vector<gpuaff::DeviceIrqs> p{pending};
  gpuaff::mark_irq_roles(p, roles());
  CHECK(p[0].vectors[2].roles_hit.empty());
  CHECK(p[0].vectors[2].roles_allowed == std::vector<std::string>{"main"});
  CHECK(gpuaff::irq_steering(p, roles(), gpuaff::CpuSet::parse_list("0-7").value()).moves.size() == 3);
  // Without main and comm roles nothing is judged.
  std::vector<gpuaff::DeviceIrqs> plain{a};
  gpuaff::mark_irq_roles(plain, gpuaff::Roles{});
  auto no_roles = gpuaff::irq_steering(plain, gpuaff::Roles{}, gpuaff::CpuSet::parse_list("0-7").value());
  CHECK(no_roles.moves.empty());
  CHECK(no_roles.why.find("no main or comm role") != std::string::npos);
}

TEST_CASE("interrupts: hostile and missing routes are unknown, never a crash") {
  auto b = gpuaff::read_device_irqs(irq_root(), "0000:15:03.0", "NIC x");
  // "abc" is skipped with a note; 30-33 are read in order.
  CHECK(b.note.find("'abc', not an IRQ number") != std::string::npos);
  REQUIRE(b.vectors.size() == 4);
  CHECK_FALSE(b.vectors[0].affinity.has_value());
  CHECK(b.vectors[0].note.find("holds 'garbage'") != std::string::npos);
  CHECK_FALSE(b.vectors[1].affinity.has_value());  // 9000 is past the 8192 CPUs a set holds
  CHECK(b.vectors[1].note.find("not a cpulist of CPUs below 8192") != std::string::npos);
  REQUIRE(b.vectors[2].affinity.has_value());  // CPUs 1500-1501: beyond 1024, still CPUs
  CHECK(b.vectors[2].affinity->to_list() == "1500-1501");
  CHECK_FALSE(b.vectors[2].effective.has_value());  // not exported (kernels before 4.15): no note
  CHECK(b.vectors[2].note.empty());
  CHECK_FALSE(b.vectors[3].affinity.has_value());
  CHECK(b.vectors[3].note.find("proc/irq/33/smp_affinity_list: missing") != std::string::npos);
  std::vector<gpuaff::DeviceIrqs> devices{b};
  gpuaff::mark_irq_roles(devices, roles());
  for (const auto& v : devices[0].vectors) {  // unknown or far: nothing hit
    CHECK(v.roles_hit.empty());
    CHECK(v.roles_allowed.empty());
  }
  auto c = gpuaff::read_device_irqs(irq_root(), "0000:00:01.0", "NIC y");
  CHECK(c.vectors.empty());
  CHECK(c.note.find("no MSI vector enabled") != std::string::npos);
  auto d = gpuaff::read_device_irqs(irq_root(), "../../etc", "NIC z");
  CHECK(d.note.find("is not a PCI address") != std::string::npos);
}

TEST_CASE("interrupts: the opt-in applies the suggestion, inside the root only") {
  char dir[] = "/tmp/gpuaff-irq-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  std::string root = dir;
  std::string copy = "cp -r '" + irq_root() + "/.' '" + root + "'";
  REQUIRE(std::system(copy.c_str()) == 0);
  std::vector<gpuaff::DeviceIrqs> devices{gpuaff::read_device_irqs(root, "0000:29:02.0", "GPU 0")};
  gpuaff::mark_irq_roles(devices, roles());
  auto s = gpuaff::irq_steering(devices, roles(), gpuaff::CpuSet::parse_list("0-7").value());
  s.moves.emplace_back(99, gpuaff::CpuSet::parse_list("4").value());  // no proc/irq/99: one failure, named
  auto failed = gpuaff::apply_irq_steering(root, s);
  REQUIRE(failed.has_value());
  REQUIRE(failed->size() == 1);
  CHECK((*failed)[0].find("IRQ 99: cannot write proc/irq/99/smp_affinity_list") != std::string::npos);
  auto again = gpuaff::read_device_irqs(root, "0000:29:02.0", "GPU 0");
  CHECK(again.vectors[0].affinity->to_list() == "4-7");
  CHECK(again.vectors[1].affinity->to_list() == "4-7");
  CHECK(again.vectors[2].affinity->to_list() == "4-7");  // 26 was never moved: as recorded
  std::string rm = "rm -rf '" + root + "'";
  CHECK(std::system(rm.c_str()) == 0);
  if (::geteuid() != 0) {  // this machine needs root
    auto live = gpuaff::apply_irq_steering("/", s);
    REQUIRE_FALSE(live.has_value());
    CHECK(live.error().code() == gpuaff::Errc::permission_denied);
  }
}
