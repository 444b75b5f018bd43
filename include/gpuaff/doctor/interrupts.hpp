// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where a GPU's and a NIC's interrupts land, against the rank's `main` and
// `comm` roles (`topo --irqs`, `doctor --irqs`; docs/doctor.md, "Interrupts").
//
// A PCI device's MSI and MSI-X vectors are the entries of
// sys/bus/pci/devices/BDF/msi_irqs/ (one file per Linux IRQ number; the
// kernel's Documentation/ABI/testing/sysfs-bus-pci). Where each one may be
// delivered is proc/irq/N/smp_affinity_list; where the interrupt controller
// really sends it, proc/irq/N/effective_affinity_list (Linux 4.15+; the
// kernel's Documentation/core-api/irq/irq-affinity.rst). A vector that lands
// on the CPUs of the main or the communication thread preempts them. The
// steering suggestion moves such vectors to the rank's other CPUs (data and
// compute roles), never applied unless asked (apply_irq_steering, root only).

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/policy/roles.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// One vector and where the kernel routes it.
struct IrqRoute {
  int irq = -1;
  std::optional<CpuSet> affinity{};   ///< smp_affinity_list; nullopt: unknown (see note)
  std::optional<CpuSet> effective{};  ///< effective_affinity_list; nullopt: unknown or not exported
  std::vector<std::string> roles_hit{};  ///< "main", "comm": the roles the CPUs it lands on overlap
  /// The roles it may be moved onto: its smp_affinity_list overlaps them, not
  /// where it lands now. x86 moves a vector at its next interrupt, so a new
  /// affinity shows in effective_affinity_list only then; irqbalance and CPU
  /// hotplug pick any CPU of the list.
  std::vector<std::string> roles_allowed{};
  std::string note{};                 ///< why a route is unknown

  /// Where it lands: the effective CPUs where known, else those it may use.
  const std::optional<CpuSet>& lands() const { return effective ? effective : affinity; }
};

/// A device's vectors.
struct DeviceIrqs {
  std::string what{};  ///< "GPU 0", "NIC mlx5_0"
  std::string bdf{};
  std::vector<IrqRoute> vectors{};
  std::string note{};  ///< no msi_irqs, and why
};

namespace detail {

/// A root-relative list file read as a cpulist; nullopt with `why` when it is
/// missing or not a cpulist of CPUs gpuaff can hold.
inline std::optional<CpuSet> read_irq_list(RootDir& dir, const std::string& rel, std::string& why) {
  std::string text;
  int e = dir.read(rel, text);
  if (e != 0) {
    why = rel + ": " + (e == ENOENT ? std::string("missing") : errno_text(e));
    return std::nullopt;
  }
  auto set = CpuSet::parse_list(text);
  if (!set) {
    why = rel + " holds '" + quotable(one_line(trim(text)).substr(0, 60)) + "', not a cpulist of CPUs below " +
          std::to_string(CpuSet::capacity);
    return std::nullopt;
  }
  return *set;
}

}  // namespace detail

/// The MSI vectors of the PCI device `bdf` under `root` ("" or "/": this
/// machine) and their routes; `what` names it in reports. Never fails: a
/// device without msi_irqs (legacy INTx, or a recording without them) has a
/// note; a route that cannot be read is unknown, with a note.
inline DeviceIrqs read_device_irqs(const std::string& root, std::string_view bdf, std::string what) {
  bool live = root.empty() || detail::is_host_root(root);
  detail::RootDir dir(live ? std::string("/") : root, live);
  DeviceIrqs d{.what = std::move(what), .bdf = std::string(bdf)};
  if (bdf.empty() || bdf.find('/') != std::string_view::npos || bdf.find("..") != std::string_view::npos) {
    d.note = "'" + detail::quotable(bdf.substr(0, 40)) + "' is not a PCI address";
    return d;
  }
  std::vector<std::string> names;
  std::string base = "sys/bus/pci/devices/" + std::string(bdf) + "/msi_irqs";
  int e = dir.list(base, names);
  if (e != 0) {
    d.note = e == ENOENT ? "no " + base + " (no MSI vector enabled: legacy INTx, no driver, or not recorded)"
                         : base + ": " + detail::errno_text(e);
    return d;
  }
  std::vector<int> irqs;
  for (const auto& n : names) {
    long long v = 0;
    if (!detail::is_decimal(n) || n.size() > 9 || detail::leading_number(n, 10, 1LL << 30, v) != n.size()) {
      if (d.note.empty()) d.note = base + " holds '" + detail::quotable(detail::escape_control(n).substr(0, 40)) + "', not an IRQ number: skipped";
      continue;
    }
    irqs.push_back(static_cast<int>(v));
  }
  std::sort(irqs.begin(), irqs.end());
  for (int irq : irqs) {
    IrqRoute r{.irq = irq};
    std::string at = "proc/irq/" + std::to_string(irq) + "/";
    std::string why;
    r.affinity = detail::read_irq_list(dir, at + "smp_affinity_list", why);
    std::string why_effective;
    r.effective = detail::read_irq_list(dir, at + "effective_affinity_list", why_effective);
    if (!r.affinity) r.note = why;
    else if (!r.effective && why_effective.find("missing") == std::string::npos) r.note = why_effective;
    d.vectors.push_back(std::move(r));
  }
  if (irqs.empty() && d.note.empty()) d.note = base + " is empty (no vector enabled)";
  return d;
}

/// Marks each vector whose CPUs overlap the `main` or `comm` role: those it
/// lands on (lands()) in roles_hit, the others of its smp_affinity_list in
/// roles_allowed.
inline void mark_irq_roles(std::vector<DeviceIrqs>& devices, const Roles& roles) {
  for (auto& d : devices)
    for (auto& v : d.vectors) {
      v.roles_hit.clear();
      v.roles_allowed.clear();
      const auto& cpus = v.lands();
      if (!cpus) continue;
      for (const auto& [name, set] : {std::pair<const char*, const CpuSet*>{"main", &roles.main}, {"comm", &roles.comm}}) {
        if (set->empty()) continue;
        if (cpus->intersects(*set)) v.roles_hit.emplace_back(name);
        else if (v.affinity && v.affinity->intersects(*set)) v.roles_allowed.emplace_back(name);
      }
    }
}

/// A reviewable steering: each vector to move and where.
struct IrqSteering {
  CpuSet target{};                          ///< the CPUs the vectors go to
  std::vector<std::pair<int, CpuSet>> moves{};  ///< IRQ -> new smp_affinity_list
  std::string why{};                        ///< no move possible or needed, and why

  /// The commands that apply it, one line each, for a person to review and run as root.
  std::vector<std::string> commands() const {
    std::vector<std::string> out;
    for (const auto& [irq, cpus] : moves)
      out.push_back("echo " + cpus.to_list() + " > /proc/irq/" + std::to_string(irq) + "/smp_affinity_list");
    return out;
  }
};

/// The steering for `devices` (marked by mark_irq_roles) of a rank whose CPUs
/// are `rank_cpus`: every vector that lands on `main` or `comm`, or may be
/// moved there (roles_allowed), moves to the
/// rank's CPUs outside both roles (its data and compute CPUs). None when no
/// vector needs it, or when every CPU of the rank is main or comm (then `why`).
inline IrqSteering irq_steering(const std::vector<DeviceIrqs>& devices, const Roles& roles, const CpuSet& rank_cpus) {
  IrqSteering s;
  s.target = rank_cpus - roles.main - roles.comm;
  bool needed = false;
  for (const auto& d : devices)
    for (const auto& v : d.vectors) needed = needed || !v.roles_hit.empty() || !v.roles_allowed.empty();
  if (!needed) {
    s.why = roles.main.empty() && roles.comm.empty()
                ? "the plan has no main or comm role (roles=main=N,comm=N): nothing to keep interrupts off"
                : "no vector lands on, or may be moved onto, the main or comm role";
    return s;
  }
  if (s.target.empty()) {
    s.why = "every CPU of the rank (" + rank_cpus.to_list() + ") is in the main or comm role: no CPU to steer to";
    return s;
  }
  for (const auto& d : devices)
    for (const auto& v : d.vectors)
      if (!v.roles_hit.empty() || !v.roles_allowed.empty()) s.moves.emplace_back(v.irq, s.target);
  return s;
}

/// Applies `s`: writes each move's list into proc/irq/N/smp_affinity_list
/// under `root` ("" or "/": this machine, which needs root). Returns the
/// failures, one line each naming the IRQ and the error (an IRQ whose
/// affinity the kernel manages refuses the write with EIO); empty: all applied.
/// Errors: Errc::permission_denied on this machine without root.
inline Result<std::vector<std::string>> apply_irq_steering(const std::string& root, const IrqSteering& s) {
  bool live = root.empty() || detail::is_host_root(root);
  if (live && ::geteuid() != 0)
    return fail(Errc::permission_denied, "steering interrupts writes /proc/irq/N/smp_affinity_list, which needs root; "
                "run it as root, or run the printed commands after reviewing them");
  detail::RootDir dir(live ? std::string("/") : root, live);
  std::vector<std::string> failed;
  for (const auto& [irq, cpus] : s.moves) {
    std::string rel = "proc/irq/" + std::to_string(irq) + "/smp_affinity_list";
    int fd = -1;
    int e = dir.open(rel, O_WRONLY | O_TRUNC | O_NOFOLLOW, fd);
    if (e == 0) {
      std::string text = cpus.to_list() + "\n";
      e = detail::write_all(fd, text);
      if (::close(fd) != 0 && e == 0) e = errno;
    }
    if (e != 0) failed.push_back("IRQ " + std::to_string(irq) + ": cannot write " + rel + " (" + detail::errno_text(e) + ")" +
                                 (e == EIO ? "; the kernel manages this vector's affinity" : ""));
  }
  return failed;
}

}  // namespace v0
}  // namespace gpuaff
