// SPDX-License-Identifier: Apache-2.0
#pragma once
// The exit codes' meanings and the one-line form of messages. The codes
// themselves are the library's (gpuaff/launch/exit_codes.hpp): a launch
// failure carries its code, and the CLI and the SPANK plugin exit with it.

#include <array>
#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"
#include "gpuaff/launch/exit_codes.hpp"
#include "gpuaff/launch/options.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff::cli {

// The library's codes, under the names the tool's files use.
using gpuaff::error_classes;
using gpuaff::exit_code;
using gpuaff::ExitCode;
using enum gpuaff::ExitCode;

/// Each exit code, the commands that can end with it (OptionCommand bits),
/// and what it means, as --help, the man page and docs/cli.md show it.
struct ExitCodeMeaning {
  ExitCode code;
  unsigned commands;
  std::string_view meaning;
};
inline constexpr unsigned every_command = for_bind | for_topo | for_exec | for_record | for_doctor | for_probe;
inline constexpr std::array<ExitCodeMeaning, 11> exit_code_meanings{{
    {exit_ok, every_command, "success"},
    {exit_internal, every_command, "internal error (a bug in gpuaff; please report it)"},
    {exit_usage, every_command, "usage: bad flag or value, bad or missing launcher variable (--local-rank)"},
    {exit_topology, every_command, "the topology cannot be read: missing root, unreadable or malformed file"},
    {exit_not_found, every_command, "no such GPU or PCI device, or its NUMA node is unknown (see --unknown-node)"},
    // record computes no binding
    {exit_cannot_bind, every_command & ~for_record & ~for_probe, "cannot bind: empty result, too few cores, CPUs not allowed here"},
    // every command: a result stdout cannot take (a full disk) is one
    {exit_system, every_command, "the system refused: permission denied, failed system call, unsupported"},
    {exit_unhealthy, for_doctor,
     "doctor: the process is not where its plan says (threads outside it, memory on other nodes)"},
    {exit_no_gpu, for_probe, "probe --gpu: no GPU runtime (libcuda.so.1, libamdhip64.so) or no GPU; the memory measurements are still printed"},
    {exit_cannot_execute, for_exec, "exec: the command cannot be executed"},
    {exit_command_not_found, for_exec, "exec: the command was not found"},
}};

/// The text as one line that is safe on a terminal: every control character
/// written as \xHH, trailing dots and spaces gone (detail::one_line).
using gpuaff::detail::one_line;

}  // namespace gpuaff::cli
