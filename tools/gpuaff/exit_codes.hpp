// SPDX-License-Identifier: Apache-2.0
#pragma once
// The exit codes' help section and the one-line form of messages. The codes
// themselves are the library's (gpuaff/launch/exit_codes.hpp): a launch
// failure carries its code, and the CLI and the SPANK plugin exit with it.

#include <array>
#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/launch/exit_codes.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff::cli {

// The library's codes, under the names the tool's files use.
using gpuaff::error_classes;
using gpuaff::exit_code;
using gpuaff::ExitCode;
using enum gpuaff::ExitCode;

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
/// written as \xHH, trailing dots and spaces gone (detail::one_line).
using gpuaff::detail::one_line;

}  // namespace gpuaff::cli
