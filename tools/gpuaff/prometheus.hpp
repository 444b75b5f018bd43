// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the text exposition format of Prometheus (version 0.0.4) asks of the
// text gpuaff writes into it (doctor --format prometheus, doctor.cpp).

#include <string>
#include <string_view>

#include "gpuaff/detail/parse.hpp"

namespace gpuaff::cli {

/// A label value: valid UTF-8 with no control character (what is not, a
/// byte of a garbled plan's text, is written \xHH as the text output writes
/// it), then backslash, double quote and newline escaped as the format asks.
/// Prometheus refuses a whole report for one label value that is not UTF-8.
inline std::string label_value(std::string_view raw) {
  std::string text = detail::escape_control(raw);
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace gpuaff::cli
