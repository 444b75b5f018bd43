// SPDX-License-Identifier: Apache-2.0
#pragma once
// "Key: value" lines of /proc status files (Cpus_allowed_list,
// Mems_allowed_list). Apart from parse.hpp, which cpu_set.hpp includes, so
// that a TU that only binds does not open <optional> (benchmarks row 6).

#include <optional>
#include <string_view>

#include "gpuaff/detail/parse.hpp"

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// The value of "Key:" in a proc status text, or nullopt.
constexpr std::optional<std::string_view> status_field(std::string_view text, std::string_view key) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t e = text.find('\n', i);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(i, e - i);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':')
      return trim(line.substr(key.size() + 1));
    i = e + 1;
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
