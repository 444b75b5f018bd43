// SPDX-License-Identifier: Apache-2.0
#pragma once
// Exit codes of a launch, one per failure class: the library's error classes
// (Errc) map onto them. `gpuaff exec`, `gpuaff bind` and the SPANK plugin end
// with these numbers, the help text and docs/cli.md's table come from the
// same lists (tests/cli checks the docs). Scripts test these numbers: they
// are part of the CLI contract (docs/contract.md section 3), so extend the
// lists, never renumber them.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <array>
#include <string_view>

#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

enum ExitCode : int {
  exit_ok = 0,
  exit_internal = 1,           ///< a bug in gpuaff (an unexpected exception)
  exit_usage = 2,              ///< bad command line or bad environment variable
  exit_topology = 3,           ///< the topology (root, recording, JSON) cannot be read or parsed
  exit_not_found = 4,          ///< no such GPU, PCI device or NUMA node; its node is unknown
  exit_cannot_bind = 5,        ///< the binding would be empty, too few cores, CPUs not allowed here
  exit_system = 6,             ///< the kernel refused (permission) or a system call failed
  exit_unhealthy = 7,          ///< doctor: the process is not where its plan says
  exit_no_gpu = 8,             ///< probe --gpu: no GPU runtime (libcuda.so.1, libamdhip64.so) or no GPU
  exit_cannot_execute = 126,   ///< exec: COMMAND exists but cannot be run (as shells do)
  exit_command_not_found = 127 ///< exec: COMMAND not found (as shells do)
};

/// Each library error class, its name in the docs, and its exit code.
struct ErrorClass {
  Errc errc;
  std::string_view name;  ///< the enumerator's name, as docs/cli.md writes it
  ExitCode code;
};
inline constexpr std::array<ErrorClass, 11> error_classes{{
    {Errc::invalid_argument, "invalid_argument", exit_usage},
    {Errc::parse_error, "parse_error", exit_topology},
    {Errc::io_error, "io_error", exit_topology},
    {Errc::out_of_range, "out_of_range", exit_topology},
    {Errc::not_found, "not_found", exit_not_found},
    {Errc::unknown_locality, "unknown_locality", exit_not_found},
    {Errc::empty_result, "empty_result", exit_cannot_bind},
    {Errc::insufficient_cores, "insufficient_cores", exit_cannot_bind},
    {Errc::permission_denied, "permission_denied", exit_system},
    {Errc::system_error, "system_error", exit_system},
    {Errc::unsupported, "unsupported", exit_system},
}};

/// The exit code for a library error class.
constexpr int exit_code(Errc c) {
  for (const auto& e : error_classes)
    if (e.errc == c) return e.code;
  return exit_internal;
}

}  // namespace v0
}  // namespace gpuaff
