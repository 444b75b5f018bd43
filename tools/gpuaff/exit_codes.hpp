#pragma once
// Exit codes of gpuaff, one per failure class, and the single-line error
// report. Scripts test these numbers: they are part of the CLI contract
// (docs/cli.md), so extend the list, never renumber it.

#include <string>
#include <string_view>

#include "gpuaff/result.hpp"

namespace gpuaff::cli {

enum ExitCode : int {
  exit_ok = 0,
  exit_internal = 1,           ///< a bug in gpuaff (an unexpected exception)
  exit_usage = 2,              ///< bad command line or bad environment variable
  exit_topology = 3,           ///< the topology (root, recording, JSON) cannot be read or parsed
  exit_not_found = 4,          ///< no such GPU, PCI device or NUMA node; its node is unknown
  exit_cannot_bind = 5,        ///< the binding would be empty, too few cores, CPUs not allowed here
  exit_system = 6,             ///< the kernel refused (permission) or a system call failed
  exit_cannot_execute = 126,   ///< exec: COMMAND exists but cannot be run (as shells do)
  exit_command_not_found = 127 ///< exec: COMMAND not found (as shells do)
};

/// The exit code for a library error class.
constexpr int exit_code(Errc c) {
  switch (c) {
    case Errc::invalid_argument: return exit_usage;
    case Errc::parse_error:
    case Errc::io_error:
    case Errc::out_of_range: return exit_topology;
    case Errc::not_found:
    case Errc::unknown_locality: return exit_not_found;
    case Errc::empty_result:
    case Errc::insufficient_cores: return exit_cannot_bind;
    case Errc::permission_denied:
    case Errc::system_error:
    case Errc::unsupported: return exit_system;
  }
  return exit_internal;
}

/// The text as one line: newlines and tabs become spaces, trailing dots and spaces go.
inline std::string one_line(std::string_view text) {
  std::string s(text);
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}

}  // namespace gpuaff::cli
