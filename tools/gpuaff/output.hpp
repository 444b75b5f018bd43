#pragma once
// How every command writes: its result on stdout, or one error line on
// stderr ("gpuaff: <what is wrong>; <what to do>") and the exit code of the
// error's class.

#include <cstdio>
#include <string>
#include <string_view>

#include "cli_options.hpp"
#include "exit_codes.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff::cli {

/// Writes `text` as one line (see one_line) and flushes.
inline void print_line(std::FILE* f, std::string_view text) {
  std::string s = one_line(text);
  s += '\n';
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

inline void write_stdout(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
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
