// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a topology source is: anything with a `load()` that gives a Topology or
// an Error. SysfsSource (a root directory), JsonSource (a JSON file) and the
// hwloc source model it; code that only needs a Topology can take any of them.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <concepts>

#include "gpuaff/result.hpp"
#include "gpuaff/topology.hpp"

namespace gpuaff {
inline namespace v0 {

/// A source of topologies: `s.load()` returns Result<Topology>. Loading may do I/O
/// and may be repeated (each call reads afresh).
template <class S>
concept TopologySource = requires(S& s) {
  { s.load() } -> std::same_as<Result<Topology>>;
};

}  // namespace v0
}  // namespace gpuaff
