#pragma once
// What the text exposition format of Prometheus (version 0.0.4) asks of the
// text gpuaff writes into it (doctor --format prometheus, doctor.cpp).

#include <string>
#include <string_view>

namespace gpuaff::cli {

/// A label value: backslash, double quote and newline escaped.
inline std::string label_value(std::string_view text) {
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
