// SPDX-License-Identifier: Apache-2.0
#pragma once
// How every command writes: its result on stdout, or one error line on
// stderr ("gpuaff: <what is wrong>; <what to do>") and the exit code of the
// error's class.

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>

#include "cli_options.hpp"
#include "exit_codes.hpp"
#include "gpuaff/detail/errno.hpp"
#include "gpuaff/detail/parse.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff::cli {

/// Text that came from a process (its thread names, its environment, its
/// GPUAFF_PLAN) or from a recording, safe on an administrator's terminal:
/// control characters as \xHH, so a newline cannot forge a line.
inline std::string safe(std::string_view text) { return detail::escape_control(text); }

/// Seconds on the monotonic clock, for intervals.
inline double monotonic_seconds() {
  ::timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Writes `text` as one line (see one_line) and flushes.
inline void print_line(std::FILE* f, std::string_view text) {
  std::string s = one_line(text);
  s += '\n';
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

/// `text` as one word a POSIX shell reads back as is: unchanged when it holds
/// only characters no shell treats specially, else in single quotes (a quote
/// inside written '\''), so that a pasted hint runs nothing a name smuggled in.
inline std::string shell_quote(std::string_view text) {
  bool plain = !text.empty();
  for (char c : text)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("_./:=@%+-,").find(c) != std::string_view::npos);
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Writes a command's result on stdout and returns `code`, or, when it cannot
/// be written (a full disk, a closed pipe), says so on stderr and returns
/// exit_system: a script that saves a binding must never get an empty file
/// and success.
inline int write_result(std::string_view text, int code = exit_ok) {
  errno = 0;
  bool whole = std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
  bool flushed = std::fflush(stdout) == 0;
  if (whole && flushed) return code;
  int e = errno != 0 ? errno : EIO;
  print_line(stderr, "gpuaff: cannot write the result to stdout: " + detail::errno_text(e) +
                         "; check the file or pipe it goes to (a full disk?) and run again");
  return exit_system;
}

/// Prints "gpuaff: <message>" on stderr, options spelled as flags, and
/// returns the exit code of its class.
inline int report_error(const Error& e) {
  print_line(stderr, "gpuaff: " + cli_spelling(e.message()));
  return exit_code(e.code());
}

/// Prints "gpuaff: warning: <text>" on stderr, options spelled as flags.
inline void print_warning(std::string_view text) { print_line(stderr, "gpuaff: warning: " + cli_spelling(text)); }

}  // namespace gpuaff::cli
