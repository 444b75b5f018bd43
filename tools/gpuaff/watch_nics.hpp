// SPDX-License-Identifier: Apache-2.0
#pragma once
// doctor --watch --nics: the NIC check of each watch interval (doctor_nics.cpp),
// run by run_watch (doctor.cpp) after the processes' check.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "commands.hpp"
#include "gpuaff/doctor/all.hpp"
#include "gpuaff/doctor/nic_traffic.hpp"
#include "gpuaff/doctor/watch.hpp"

namespace gpuaff::cli {

/// The watch's NIC state: the machine's NIC sets (read once: they do not
/// change under a running job), the rails, and the samples (NicWatch).
struct WatchNics {
  std::optional<Topology> topo{};
  std::vector<std::string> topo_notes{};
  NicWatch watch{};
  std::set<std::string> shown{};  ///< the notes printed at the interval before
  bool any_port = false;          ///< a port was seen at some sample
};

/// Reads the NIC sets of the machine the options name.
WatchNics watch_nics_start(const DoctorArgs& args);

/// One interval: this machine's counters sampled and judged against the
/// previous sample for the planned processes of `now` (the first interval
/// only records). `notes` gets the notes not printed at the interval before
/// (the first time: that the machine has no RDMA NIC, when so).
std::vector<WatchEvent> watch_nics_step(WatchNics& w, const DoctorArgs& args, const NodeReport& now,
                                        std::vector<std::string>& notes);

/// The series `doctor --nics --format prometheus` writes for a verdict.
std::string nic_prometheus(const NicTrafficReport& r);

}  // namespace gpuaff::cli
