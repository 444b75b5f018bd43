// SPDX-License-Identifier: Apache-2.0
#pragma once
// The command-line numbers of the QEMU guests' helper programs
// (first_touch, host_buffers): decimal, whole, 0..max.

#include <cerrno>
#include <cstdlib>

namespace guest {

/// `s` as a decimal number in 0..max, or false (garbage, a sign, overflow).
inline bool parse_int(const char* s, long max, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max) return false;
  out = v;
  return true;
}

}  // namespace guest
