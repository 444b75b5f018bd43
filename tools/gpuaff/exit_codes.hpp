// SPDX-License-Identifier: Apache-2.0
#pragma once
// Exit codes of gpuaff, one per failure class: the library's error classes
// (Errc) map onto them, and the help text and docs/cli.md's table come from
// the same lists (tests/cli checks the docs). Scripts test these numbers: they
// are part of the CLI contract (docs/contract.md section 3), so extend the
// lists, never renumber them.

#include <array>
#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"
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
  exit_unhealthy = 7,          ///< doctor: the process is not where its plan says
  exit_cannot_execute = 126,   ///< exec: COMMAND exists but cannot be run (as shells do)
  exit_command_not_found = 127 ///< exec: COMMAND not found (as shells do)
};

/// Each exit code and what it means, as `--help` prints it.
struct ExitCodeMeaning {
  ExitCode code;
  std::string_view meaning;
};
inline constexpr std::array<ExitCodeMeaning, 10> exit_code_meanings{{
    {exit_ok, "success"},
    {exit_internal, "internal error (a bug in gpuaff; please report it)"},
    {exit_usage, "usage: bad flag or value, bad or missing launcher variable (--local-rank)"},
    {exit_topology, "the topology cannot be read: missing root, unreadable or malformed file"},
    {exit_not_found, "no such GPU or PCI device, or its NUMA node is unknown (see --unknown-node)"},
    {exit_cannot_bind, "cannot bind: empty result, too few cores, CPUs not allowed here"},
    {exit_system, "the system refused: permission denied, failed system call, unsupported"},
    {exit_unhealthy, "doctor: the process is not where its plan says (threads outside it, memory on other nodes)"},
    {exit_cannot_execute, "exec: the command cannot be executed"},
    {exit_command_not_found, "exec: the command was not found"},
}};

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

/// The "Exit codes:" section every --help ends with.
inline std::string exit_codes_help() {
  std::string out = "Exit codes:\n";
  for (const auto& e : exit_code_meanings) {
    std::string code = std::to_string(e.code);
    code.resize(5, ' ');
    out += "  " + code + std::string(e.meaning) + '\n';
  }
  return out + "Errors are one line on stderr, \"gpuaff: <what is wrong>; <what to do>\"; stdout stays empty.\n";
}

/// The text as one line that is safe on a terminal: every control character
/// (bytes below 0x20, newlines and tabs included, and 0x7f) is written as \xHH,
/// so a terminal escape read from a file or an environment variable reaches
/// stderr as text; trailing dots and spaces go.
inline std::string one_line(std::string_view text) {
  std::string s = gpuaff::detail::escape_control(text);
  while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}

}  // namespace gpuaff::cli
