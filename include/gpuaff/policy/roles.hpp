// SPDX-License-Identifier: Apache-2.0
#pragma once
// Roles inside a rank (docs/contract.md section 3, "Roles"): a rank's CPUs cut
// into named pools of whole physical cores, one per kind of thread that runs
// in it. `main` is the Python or C++ thread that launches the GPU work,
// `comm` the communication library's threads (NCCL's proxy and service
// threads compete for a CPU with the main thread: nccl#780), `data` the data
// loading workers, and `compute` the rest of the cores, for OpenMP/intra-op
// threads. The cores reserved for the OS come out earlier, for every node
// (reserve_os_cores), before any share is computed.
//
// Sizes count physical cores; a role of size 0 is left out, and compute gets
// every core the others leave (at least one). Cores are taken in order: main,
// then comm, then data, each from the lowest-numbered cores of the share that
// are left, compute the remainder. With `priority` the cores are first
// ordered by their priority class (the faster cores a platform marks: see
// core_priority_classes), so main and comm sit on the fastest cores.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/cpu_set.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/detail/suggest.hpp"
#include "gpuaff/policy/priority.hpp"
#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// The roles, in the order they take cores.
enum class Role { main, comm, data, compute };
inline constexpr std::array<std::string_view, 4> role_names{"main", "comm", "data", "compute"};

/// Physical cores per role (compute: the rest).
struct RoleSizes {
  int main = 0;
  int comm = 0;
  int data = 0;
  constexpr bool given() const { return main + comm + data > 0; }
  constexpr int fixed() const { return main + comm + data; }
  friend constexpr bool operator==(const RoleSizes&, const RoleSizes&) = default;
};

/// A rank's CPUs by role; a role of size 0 is empty.
struct Roles {
  CpuSet main, comm, data, compute;
  const CpuSet& of(Role r) const {
    switch (r) {
      case Role::main: return main;
      case Role::comm: return comm;
      case Role::data: return data;
      case Role::compute: break;
    }
    return compute;
  }
  friend bool operator==(const Roles&, const Roles&) = default;
};

/// "main=1,comm=1,data=4": the sizes of the roles that take a fixed number of
/// cores (compute takes the rest and is not sized).
/// Errors: Errc::invalid_argument naming the item (unknown role, with a
/// suggestion; a size that is not a count from 0 to 4096; a role named twice;
/// compute sized; nothing sized).
template <class = void>
Result<RoleSizes> parse_roles(std::string_view text) {
  constexpr std::array<std::string_view, 3> sized{"main", "comm", "data"};
  RoleSizes out;
  std::array<bool, 3> seen{};
  auto bad = [&](auto&&... what) {
    return fail(Errc::invalid_argument, "roles=", text.substr(0, 60), ": ", what...,
                " (use a list like main=1,comm=1,data=4: physical cores per role; compute gets the rest)");
  };
  for (std::string_view item : detail::comma_items(text)) {
    std::size_t eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    if (name == "compute") return bad("compute takes the cores the other roles leave and has no size");
    const auto* at = std::find(sized.begin(), sized.end(), name);
    if (at == sized.end()) {
      std::string_view guess = detail::closest(name, sized);
      return bad("'", name.substr(0, 40), "' is not a role",
                 guess.empty() ? std::string() : std::string("; did you mean ") + std::string(guess) + "?");
    }
    auto k = static_cast<std::size_t>(at - sized.begin());
    if (seen[k]) return bad("'", name, "' is named twice");
    seen[k] = true;
    std::string_view digits = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    long long n = 0;
    if (!detail::is_decimal(digits) || (detail::leading_number(digits, 10, 4097, n), n > 4096))
      return bad("'", item.substr(0, 40), "' needs a number of cores from 0 to 4096");
    int cores = static_cast<int>(n);
    (k == 0 ? out.main : k == 1 ? out.comm : out.data) = cores;
  }
  if (!out.given()) return bad("no role takes a core");
  return out;
}

/// The sizes as parse_roles reads them: "main=1,comm=1,data=4" (roles of
/// size 0 left out).
template <class = void>
std::string roles_text(const RoleSizes& s) {
  std::string out;
  auto add = [&out](std::string_view name, int n) {
    if (n == 0) return;
    out += std::string(out.empty() ? "" : ",") + std::string(name) + std::string("=") + std::to_string(n);
  };
  add("main", s.main);
  add("comm", s.comm);
  add("data", s.data);
  return out;
}

/// The roles of `share` on `topo` (whose cores must have been read; a CPU no
/// core lists counts as a core of its own). With `by_priority`, cores are
/// ordered by the priority class of Core::priority (0 first), then by CPU.
/// With `isolated` (the CPUs the system keeps free of housekeeping work), the
/// cores wholly in it come before the others, whatever their priority.
/// Errors: Errc::insufficient_cores when the share has fewer cores than the
/// sized roles plus one for compute.
template <class = void>
Result<Roles> split_roles(const Topology& topo, const CpuSet& share, const RoleSizes& sizes,
                          bool by_priority = false, const CpuSet& isolated = CpuSet{}) {
  struct Unit {
    CpuSet threads;
    long long priority;
  };
  std::vector<Unit> units;
  for (const CpuSet& threads : topo.cores_within(share)) {
    const Core* c = topo.core_of_cpu(threads.first());
    units.push_back(Unit{threads, c != nullptr ? c->priority : -1});
  }
  // Cores the system isolated (every thread of the core in `isolated`) come
  // first, in CPU order: main and comm run there, free of housekeeping work.
  if (!isolated.empty())
    std::stable_partition(units.begin(), units.end(), [&](const Unit& u) { return u.threads.is_subset_of(isolated); });
  std::size_t need = static_cast<std::size_t>(sizes.fixed()) + 1;
  if (units.size() < need)
    return fail(Errc::insufficient_cores, "roles=", roles_text(sizes), " need ", need,
                " physical cores (one at least for compute), and the share ", share.to_list(), " has ", units.size(),
                "; give smaller roles, or the rank more CPUs (another policy, fewer ranks per GPU)");
  if (by_priority) {
    std::vector<long long> values;
    for (const auto& u : units) values.push_back(u.priority);
    std::vector<int> cls = priority_classes(values);
    std::vector<std::size_t> order(units.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto apart = [&](std::size_t i) { return isolated.empty() || units[i].threads.is_subset_of(isolated) ? 0 : 1; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return apart(a) != apart(b) ? apart(a) < apart(b) : cls[a] < cls[b];
    });
    std::vector<Unit> sorted;
    for (std::size_t i : order) sorted.push_back(units[i]);
    units = std::move(sorted);
  }
  Roles r;
  std::size_t at = 0;
  auto take = [&](CpuSet& into, int n) {
    for (int k = 0; k < n; ++k) into |= units[at++].threads;
  };
  take(r.main, sizes.main);
  take(r.comm, sizes.comm);
  take(r.data, sizes.data);
  while (at < units.size()) r.compute |= units[at++].threads;
  return r;
}

/// OMP_PLACES for `cpus`: one place per physical core ("{6,118},{7,119}"), so
/// that OMP_PROC_BIND=close puts one OpenMP thread on each core of the role.
template <class = void>
std::string omp_places(const Topology& topo, const CpuSet& cpus) {
  std::string out;
  for (const CpuSet& threads : topo.cores_within(cpus)) {
    out += out.empty() ? "{" : ",{";
    std::string list;
    for (int t : threads) list += std::string(list.empty() ? "" : ",") + std::to_string(t);
    out += list + "}";
  }
  return out;
}

}  // namespace v0
}  // namespace gpuaff
