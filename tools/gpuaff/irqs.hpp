// SPDX-License-Identifier: Apache-2.0
#pragma once
// `--irqs` of topo and doctor: a plan's GPU and its NIC set, their MSI
// vectors and routes (gpuaff/doctor/interrupts.hpp), printed as text or JSON.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_options.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/doctor/interrupts.hpp"
#include "gpuaff/launch/nics.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff::cli {

/// The device at `pci` ("GPU N") and the NICs of its set on `topo` (when read
/// with its NICs), each with its vectors under `root`.
inline std::vector<DeviceIrqs> plan_device_irqs(const std::string& root, const Topology* topo, std::string_view pci,
                                                const std::string& gpu_label) {
  std::vector<DeviceIrqs> out{read_device_irqs(root, pci, gpu_label)};
  if (topo == nullptr) return out;
  const Gpu* gpu = nullptr;
  for (const auto* list : {&topo->host_gpus, &topo->gpus})
    for (const auto& g : *list)
      if (gpu == nullptr && g.address().to_string().view() == pci) gpu = &g;
  if (gpu == nullptr) return out;
  for (const Nic* n : nic_set_of(*topo, *gpu).nics)
    out.push_back(read_device_irqs(root, n->address.to_string().view(), "NIC " + std::string(n->rdma_names.front().view())));
  return out;
}

/// The text section: each device, each vector and its route, the roles it
/// lands on, then the steering suggestion (or why there is none).
inline std::string irqs_text(const std::vector<DeviceIrqs>& devices, const IrqSteering& s, std::string_view indent = "") {
  std::string in(indent);
  std::string out = in + "interrupts (MSI vectors; 'lands on': effective_affinity_list, else smp_affinity_list):\n";
  for (const auto& d : devices) {
    out += in + "  " + detail::escape_control(d.what) + " " + detail::escape_control(d.bdf) + ": " +
           std::to_string(d.vectors.size()) + " vector(s)" + (d.note.empty() ? "" : "; " + detail::escape_control(d.note)) + '\n';
    for (const auto& v : d.vectors) {
      out += in + "    IRQ " + std::to_string(v.irq) + ": ";
      if (!v.affinity) {
        out += "route unknown (" + detail::escape_control(v.note) + ")\n";
        continue;
      }
      out += "may use " + v.affinity->to_list() + ", lands on " + v.lands()->to_list();
      for (const auto& r : v.roles_hit) out += ", ON ROLE " + r;
      for (const auto& r : v.roles_allowed) out += ", may be moved onto role " + r;
      if (!v.note.empty()) out += " (" + detail::escape_control(v.note) + ")";
      out += '\n';
    }
  }
  if (s.moves.empty()) {
    out += in + "steering: none (" + cli_spelling(s.why) + ")\n";
  } else {
    out += in + "steering (never applied unless asked: review, then run as root or pass --steer-irqs; irqbalance "
                "may move them back: stop it or ban these IRQs):\n";
    for (const auto& c : s.commands()) out += in + "  " + c + '\n';
  }
  return out;
}

inline nlohmann::ordered_json irqs_json(const std::vector<DeviceIrqs>& devices, const IrqSteering& s) {
  using J = nlohmann::ordered_json;
  J ds = J::array();
  for (const auto& d : devices) {
    J vs = J::array();
    for (const auto& v : d.vectors)
      vs.push_back(J{{"irq", v.irq},
                     {"affinity", v.affinity ? J(v.affinity->to_list()) : J(nullptr)},
                     {"effective", v.effective ? J(v.effective->to_list()) : J(nullptr)},
                     {"roles_hit", v.roles_hit},
                     {"roles_allowed", v.roles_allowed},
                     {"note", v.note}});
    ds.push_back(J{{"device", d.what}, {"bdf", d.bdf}, {"vectors", std::move(vs)}, {"note", d.note}});
  }
  return J{{"devices", std::move(ds)},
           {"steering", J{{"target", s.target.to_list()}, {"commands", s.commands()}, {"why", cli_spelling(s.why)}}}};
}

}  // namespace gpuaff::cli
