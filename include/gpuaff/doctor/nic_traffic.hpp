// SPDX-License-Identifier: Apache-2.0
#pragma once
// `gpuaff doctor --nics`: do the ranks' bytes go over the NICs their plans
// name? Two samples of every RDMA port's byte counters, the ranks' NIC sets,
// and a pure verdict on them (judge_nic_traffic), which a loop may call once
// per interval (docs/doctor.md, "NIC traffic").
//
// The counters, as the drivers name them under sys/class/infiniband/DEV/ports/N:
// - hw_counters/tx_bytes and hw_counters/rx_bytes, in bytes, where the driver
//   has them (the EFA driver's port statistics; bnxt_re's);
// - else counters/port_xmit_data and counters/port_rcv_data, the InfiniBand
//   PMA counters every IB and RoCE port has, which count "data octets, divided
//   by 4 (lanes)" (the kernel's Documentation/ABI/stable/sysfs-class-infiniband):
//   bytes are 4 times the value.
//
// A counter sequence (recorded counters, and the tests) is text: a line
// `sample SECONDS` starts a sample taken at that time; each line after it is
// `PATH VALUE`, PATH the counter file below sys/class/infiniband
// (`mlx5_0/ports/1/counters/port_xmit_data 1234`); `#` starts a comment.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/fs.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// One RDMA port's byte counters at one moment, in bytes.
struct NicPortBytes {
  std::uint64_t tx = 0;
  std::uint64_t rx = 0;
  std::string source{};  ///< the files they came from ("counters/port_xmit_data x4", "hw_counters/tx_bytes")
};

/// Every RDMA port's counters at one moment: "mlx5_0:1" (device:port) -> bytes.
struct NicSample {
  double at = 0;  ///< seconds (a monotonic clock, or the sequence's `sample` time)
  std::map<std::string, NicPortBytes> ports{};
  std::vector<std::string> notes{};  ///< ports whose counters could not be read, and why
};

namespace detail {

/// A counter file's value: a decimal number (a newline after it allowed).
inline std::optional<std::uint64_t> counter_value(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.size() > 20 || !is_decimal(text)) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

/// A port's bytes from its counter files (`files`: name below ports/N -> text,
/// e.g. "counters/port_xmit_data"); nullopt with `why` when neither pair is
/// there or a value is not a number.
inline std::optional<NicPortBytes> port_bytes(const std::map<std::string, std::string>& files, std::string& why) {
  auto pair = [&](std::string_view tx, std::string_view rx, std::uint64_t scale,
                  std::string_view source) -> std::optional<NicPortBytes> {
    auto t = files.find(std::string(tx));
    auto r = files.find(std::string(rx));
    if (t == files.end() || r == files.end()) return std::nullopt;
    auto tv = counter_value(t->second);
    auto rv = counter_value(r->second);
    if (!tv || !rv) {
      why = std::string(!tv ? tx : rx) + " holds '" + quotable(one_line(trim((!tv ? t : r)->second)).substr(0, 40)) +
            "', not a counter";
      return std::nullopt;
    }
    return NicPortBytes{.tx = *tv * scale, .rx = *rv * scale, .source = std::string(source)};
  };
  if (auto b = pair("hw_counters/tx_bytes", "hw_counters/rx_bytes", 1, "hw_counters/tx_bytes")) return b;
  if (!why.empty()) return std::nullopt;
  if (auto b = pair("counters/port_xmit_data", "counters/port_rcv_data", 4, "counters/port_xmit_data x4")) return b;
  if (why.empty()) why = "no byte counters (hw_counters/tx_bytes, counters/port_xmit_data)";
  return std::nullopt;
}

/// The counter files the sample reads, below ports/N.
inline constexpr std::string_view nic_counter_files[] = {"hw_counters/tx_bytes", "hw_counters/rx_bytes",
                                                         "counters/port_xmit_data", "counters/port_rcv_data"};

/// A sample from each port's counter files ("DEV:N" -> name below ports/N -> text).
inline NicSample sample_of_ports(const std::map<std::string, std::map<std::string, std::string>>& by_port, double at) {
  NicSample s;
  s.at = at;
  for (const auto& [port, f] : by_port) {
    std::string why;
    if (auto bytes = port_bytes(f, why)) s.ports[port] = std::move(*bytes);
    else s.notes.push_back("NIC " + escape_control(port) + ": " + why);
  }
  return s;
}

/// A sample from counter files, keyed by their path below sys/class/infiniband
/// ("DEV/ports/N/counters/port_xmit_data").
inline NicSample sample_of_files(const std::map<std::string, std::string>& files, double at) {
  std::map<std::string, std::map<std::string, std::string>> by_port;
  for (const auto& [path, text] : files) {
    std::size_t a = path.find("/ports/");
    if (a == std::string::npos || a == 0) continue;
    std::size_t b = path.find('/', a + 7);
    if (b == std::string::npos) continue;
    std::string port = path.substr(a + 7, b - a - 7);
    if (!is_decimal(port)) continue;
    by_port[path.substr(0, a) + ":" + port][path.substr(b + 1)] = text;
  }
  return sample_of_ports(by_port, at);
}

}  // namespace detail

/// Every RDMA port's counters under `root` ("" or "/": this machine), read now,
/// stamped `at`. Never fails as a whole: a machine without
/// sys/class/infiniband gives no port; a port whose counters are missing or
/// garbled is left out with a note naming the file.
inline NicSample sample_nic_counters(const std::string& root, double at) {
  bool live = root.empty() || detail::is_host_root(root);
  detail::RootDir dir(live ? std::string("/") : root, live);
  std::map<std::string, std::map<std::string, std::string>> by_port;
  std::vector<std::string> devices;
  const std::string base = "sys/class/infiniband";
  dir.list(base, devices);
  for (const auto& dev : devices) {
    if (dev.empty() || dev[0] == '.') continue;
    std::vector<std::string> ports;
    dir.list(base + "/" + dev + "/ports", ports);
    for (const auto& port : ports) {
      if (!detail::is_decimal(port)) continue;
      auto& files = by_port[dev + ":" + port];
      for (std::string_view f : detail::nic_counter_files) {
        std::string text;
        if (dir.read(base + "/" + dev + "/ports/" + port + "/" + std::string(f), text) == 0)
          files[std::string(f)] = std::move(text);
      }
    }
  }
  return detail::sample_of_ports(by_port, at);
}

/// The samples of a counter sequence (the format at the top of this file).
/// Errors: Errc::parse_error naming `name`, the line and what it should be.
inline Result<std::vector<NicSample>> parse_nic_sequence(std::string_view text, std::string_view name) {
  std::vector<std::map<std::string, std::string>> files;
  std::vector<double> times;
  std::size_t line_no = 0;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    line = detail::trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::size_t sp = line.find_first_of(" \t");
    std::string_view key = line.substr(0, sp);
    std::string_view value = sp == std::string_view::npos ? std::string_view() : detail::trim(line.substr(sp));
    auto bad = [&](std::string_view what) {
      return fail(Errc::parse_error, "counter sequence ", detail::quotable(name), " line ", line_no, ": ", what,
                  " (lines are 'sample SECONDS' or 'DEV/ports/N/counters/FILE VALUE'; docs/doctor.md)");
    };
    if (key == "sample") {
      std::string v(value);
      char* end = nullptr;
      double t = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(t >= 0) || t > 1e12)
        return bad("'sample' takes the time in seconds, a number from 0");
      if (!times.empty() && t <= times.back()) return bad("the samples' times must increase");
      times.push_back(t);
      files.emplace_back();
      continue;
    }
    if (times.empty()) return bad("a counter before the first 'sample' line");
    if (value.empty() || key.find("/ports/") == std::string_view::npos || key.find("..") != std::string_view::npos)
      return bad("'" + detail::quotable(key.substr(0, 80)) + "' is not 'DEV/ports/N/FILE VALUE'");
    files.back()[std::string(key)] = std::string(value);
  }
  if (times.size() < 2) return fail(Errc::parse_error, "counter sequence ", detail::quotable(name), " holds ",
                                    times.size(), " sample(s); it needs two or more ('sample SECONDS' lines)");
  std::vector<NicSample> out;
  for (std::size_t i = 0; i < times.size(); ++i) out.push_back(detail::sample_of_files(files[i], times[i]));
  return out;
}

// ---- The ranks' NIC sets.

/// One rank (a planned process) and its NICs, as "DEV:PORT" or "DEV" names.
struct RankNics {
  std::string rank{};                ///< how it is named (its plan's `from`, "LOCAL_RANK=3"; else "pid N")
  int pid = 0;
  std::vector<std::string> planned{};  ///< its GPU's NIC set (launch/nics.hpp): where its traffic belongs
  /// The NICs its variables tell its libraries to use (UCX_NET_DEVICES,
  /// NVSHMEM_HCA_LIST, NCCL_IB_HCA; see rank_listed_nics); empty: none set,
  /// the planned set stands for them.
  std::vector<std::string> listed{};
};

/// The devices an NCCL_IB_HCA value selects among `known` (the node's RDMA
/// device names), as NCCL reads it: "=" first matches names exactly, else each
/// item is a prefix (mlx5_1 also selects mlx5_10); ":PORT" and what follows it
/// (rail fields) are dropped; "^" first excludes the items: every known
/// device but them.
inline std::vector<std::string> nccl_hca_devices(std::string_view value, const std::vector<std::string>& known) {
  bool exclude = !value.empty() && value.front() == '^';
  if (exclude) value.remove_prefix(1);
  bool exact = !value.empty() && value.front() == '=';
  if (exact) value.remove_prefix(1);
  std::vector<std::string_view> items;
  for (std::string_view item : detail::comma_items(value)) {
    item = detail::trim(item.substr(0, item.find(':')));
    if (!item.empty()) items.push_back(item);
  }
  std::vector<std::string> out;
  for (const auto& dev : known) {
    bool named = std::any_of(items.begin(), items.end(), [&](std::string_view i) {
      return exact ? dev == i : std::string_view(dev).substr(0, i.size()) == i;
    });
    if (named != exclude) out.push_back(dev);
  }
  return out;
}

/// The variables whose lists rank_listed_nics reads.
inline constexpr std::string_view nic_traffic_variables[] = {"UCX_NET_DEVICES", "NVSHMEM_HCA_LIST", "NCCL_IB_HCA"};

/// The devices a process's variables (`vars`) tell its libraries to use: the
/// union of UCX_NET_DEVICES and NVSHMEM_HCA_LIST (launch/nics.hpp's
/// listed_devices) and NCCL_IB_HCA (nccl_hca_devices over `known`). A list
/// naming more devices than `planned` holds (nccl-rails writes every rail of
/// the node; a site may list them all) is a menu the library chooses from by
/// locality, not a choice: it is left out, with a note in `notes`.
inline std::vector<std::string> rank_listed_nics(const std::map<std::string, std::string>& vars,
                                                 const std::vector<std::string>& known, std::size_t planned,
                                                 std::vector<std::string>* notes = nullptr) {
  std::set<std::string> out;
  for (std::string_view name : nic_traffic_variables) {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) continue;
    std::vector<std::string> devs;
    if (name == "NCCL_IB_HCA") {
      devs = nccl_hca_devices(it->second, known);
    } else {
      std::string_view v = it->second;
      if (v.empty() || v.front() == '^' || v == "all") continue;
      for (std::string_view item : detail::comma_items(v)) {
        item = detail::trim(item.substr(0, item.find(':')));
        if (!item.empty()) devs.emplace_back(item);
      }
    }
    if (planned > 0 && devs.size() > planned) {
      if (notes != nullptr)
        notes->push_back(std::string(name) + " names " + std::to_string(devs.size()) + " devices, more than the " +
                         std::to_string(planned) + " of the rank's set: a list the library chooses from, not counted");
      continue;
    }
    out.insert(devs.begin(), devs.end());
  }
  return {out.begin(), out.end()};
}

// ---- The verdict.

/// What doctor --nics names.
enum class NicFindingKind {
  idle_in_set,   ///< a NIC of a rank's set carries nothing while that rank moves data
  outside_sets,  ///< traffic on a NIC outside every rank's set
  piled,         ///< two or more ranks' traffic on one NIC while a NIC of their sets is idle
};

inline constexpr std::string_view to_string(NicFindingKind k) {
  switch (k) {
    case NicFindingKind::idle_in_set: return "idle_in_set";
    case NicFindingKind::outside_sets: return "outside_sets";
    case NicFindingKind::piled: return "piled";
  }
  return "?";
}

struct NicFinding {
  NicFindingKind kind = NicFindingKind::idle_in_set;
  std::string nic{};                ///< "mlx5_3:1"
  std::vector<std::string> ranks{};  ///< the ranks concerned
  std::vector<std::string> idle{};   ///< piled: the idle NICs of those ranks' sets
  bool problem = true;              ///< false: a note (traffic of no rank on a NIC that is no rail)
  std::string message{};
};

/// One port over the interval.
struct NicTrafficRow {
  std::string nic{};                 ///< "mlx5_3:1"
  std::uint64_t tx = 0, rx = 0;      ///< bytes moved between the samples
  double seconds = 0;
  std::vector<std::string> owners{};  ///< ranks whose planned set holds it
  std::vector<std::string> users{};   ///< ranks whose variables (or, without any, plan) name it
  bool busy = false;
  bool rail = false;                 ///< in some GPU's NIC set of the machine
  std::string source{};

  double bytes_per_second() const { return seconds > 0 ? static_cast<double>(tx + rx) / seconds : 0.0; }
};

struct NicTrafficOptions {
  /// A port that moves fewer bytes per second (sent and received) is idle:
  /// an InfiniBand port's management traffic (subnet manager MADs) is a few
  /// kB/s, a rank's collectives are GB/s.
  double idle_below = 1e6;
  /// The machine's rails (every GPU's NIC set), "DEV:PORT"; traffic of no
  /// rank on a NIC outside them (storage, in-band management) is a note.
  std::vector<std::string> rails{};
};

struct NicTrafficReport {
  double seconds = 0;
  std::vector<NicTrafficRow> nics{};
  std::vector<NicFinding> findings{};
  std::vector<std::string> notes{};

  bool healthy() const {
    return std::none_of(findings.begin(), findings.end(), [](const NicFinding& f) { return f.problem; });
  }
};

namespace detail {

/// Whether `port` ("mlx5_0:1") is named by `names` ("mlx5_0:1" or "mlx5_0").
inline bool names_port(const std::vector<std::string>& names, std::string_view port) {
  std::string_view dev = port.substr(0, port.find(':'));
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n == port || n == dev; });
}

inline std::string joined(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : std::string(sep)) + i;
  return out;
}

inline std::string rate_text(double bytes_per_second) {
  char buf[48];
  if (bytes_per_second >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB/s", bytes_per_second / 1e9);
  else if (bytes_per_second >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MB/s", bytes_per_second / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f B/s", bytes_per_second);
  return buf;
}

}  // namespace detail

/// The verdict on two samples of the same ports (`before` first) against the
/// ranks' sets: pure. A port is busy when it moves at least `o.idle_below`
/// bytes per second. A rank moves data when a port it uses (its listed NICs,
/// else its planned set) or one of its planned set is busy, or, when all of
/// those are idle, when another rank's are busy (the ranks of one job move data
/// alike: its bytes then went elsewhere). Named:
/// - idle_in_set: a port of a rank's planned set that is idle while the rank moves data;
/// - outside_sets: a busy port in no rank's planned set (a problem when a rank
///   lists it or it is a rail; a note for a port that is neither: storage);
/// - piled: a busy port that two or more ranks use while a port of their
///   planned sets is idle.
/// A port missing from one sample, or whose counter went backwards (a reset,
/// a driver reload), is left out with a note; so is a zero interval.
inline NicTrafficReport judge_nic_traffic(const NicSample& before, const NicSample& after,
                                          const std::vector<RankNics>& ranks, const NicTrafficOptions& o = {}) {
  NicTrafficReport r;
  r.seconds = after.at - before.at;
  r.notes = after.notes;
  if (!(r.seconds > 0)) {
    r.notes.push_back("the samples are not apart in time (" + std::to_string(r.seconds) + " s): nothing judged");
    return r;
  }
  if (ranks.empty()) {
    r.notes.push_back("no process of this machine carries a GPUAFF_PLAN: the traffic is shown, not judged");
  }
  auto uses = [](const RankNics& k, std::string_view port) {
    return detail::names_port(k.listed.empty() ? k.planned : k.listed, port);
  };
  for (const auto& [port, b] : before.ports) {
    auto a = after.ports.find(port);
    if (a == after.ports.end()) {
      r.notes.push_back("NIC " + detail::escape_control(port) + " is gone from the second sample: not judged");
      continue;
    }
    if (a->second.tx < b.tx || a->second.rx < b.rx) {
      r.notes.push_back("NIC " + detail::escape_control(port) + ": a counter went backwards (reset, or the driver "
                        "reloaded): not judged");
      continue;
    }
    NicTrafficRow row{.nic = port, .tx = a->second.tx - b.tx, .rx = a->second.rx - b.rx, .seconds = r.seconds,
                      .source = a->second.source};
    row.busy = row.bytes_per_second() >= o.idle_below;
    row.rail = detail::names_port(o.rails, port);
    for (const auto& k : ranks) {
      if (detail::names_port(k.planned, port)) row.owners.push_back(k.rank);
      if (uses(k, port)) row.users.push_back(k.rank);
    }
    r.nics.push_back(std::move(row));
  }
  for (const auto& [port, a] : after.ports)
    if (before.ports.count(port) == 0)
      r.notes.push_back("NIC " + detail::escape_control(port) + " appeared in the second sample: not judged");
  // Per rank: whether a port it uses or is planned on is busy.
  std::vector<bool> own_busy;
  bool any_busy = false;
  for (const auto& k : ranks) {
    bool b = std::any_of(r.nics.begin(), r.nics.end(), [&](const NicTrafficRow& n) {
      return n.busy && (uses(k, n.nic) || detail::names_port(k.planned, n.nic));
    });
    own_busy.push_back(b);
    any_busy = any_busy || b;
  }
  if (ranks.empty()) return r;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankNics& k = ranks[i];
    bool moves = own_busy[i] || any_busy;
    if (!moves) continue;
    for (const auto& n : r.nics) {
      if (n.busy || !detail::names_port(k.planned, n.nic)) continue;
      NicFinding f{.kind = NicFindingKind::idle_in_set, .nic = n.nic, .ranks = {k.rank}};
      f.message = "NIC " + n.nic + " of " + k.rank + "'s set carries nothing (" + detail::rate_text(n.bytes_per_second()) +
                  ") while " + k.rank + (own_busy[i] ? " moves data over " : "'s bytes go elsewhere, the other ranks over ");
      std::vector<std::string> over;
      for (const auto& m : r.nics)
        if (m.busy && (own_busy[i] ? (uses(k, m.nic) || detail::names_port(k.planned, m.nic)) : true)) over.push_back(m.nic);
      f.message += detail::joined(over) + "; check its UCX_NET_DEVICES / NCCL_IB_HCA against the plan (gpuaff exec with "
                   "nic_env=true sets them)";
      r.findings.push_back(std::move(f));
    }
  }
  for (const auto& n : r.nics) {
    if (!n.busy || !n.owners.empty()) continue;
    NicFinding f{.kind = NicFindingKind::outside_sets, .nic = n.nic, .ranks = n.users};
    f.problem = !n.users.empty() || n.rail;
    f.message = "NIC " + n.nic + " moves " + detail::rate_text(n.bytes_per_second()) + " (sent and received) but is in no rank's set";
    if (!n.users.empty()) f.message += "; " + detail::joined(n.users) + " list(s) it in their variables";
    else if (n.rail) f.message += "; it is the rail of a GPU no planned rank drives";
    else f.message += " and no GPU's rail (storage or in-band traffic?)";
    r.findings.push_back(std::move(f));
  }
  for (const auto& n : r.nics) {
    if (!n.busy || n.users.size() < 2) continue;
    std::vector<std::string> idle;
    for (const auto& k : ranks) {
      if (std::find(n.users.begin(), n.users.end(), k.rank) == n.users.end()) continue;
      for (const auto& m : r.nics)
        if (!m.busy && detail::names_port(k.planned, m.nic) && std::find(idle.begin(), idle.end(), m.nic) == idle.end())
          idle.push_back(m.nic);
    }
    if (idle.empty()) continue;  // ranks sharing a NIC their sets share (p4d's EFA): as planned
    NicFinding f{.kind = NicFindingKind::piled, .nic = n.nic, .ranks = n.users, .idle = idle};
    f.message = detail::joined(n.users) + " all use NIC " + n.nic + " (" + detail::rate_text(n.bytes_per_second()) +
                ") while " + detail::joined(idle) + " of their sets carries nothing";
    r.findings.push_back(std::move(f));
  }
  return r;
}

}  // namespace v0
}  // namespace gpuaff
