// SPDX-License-Identifier: Apache-2.0
#pragma once
// The number and text scanning every reader shares: cpulists and hex masks
// (cpu_set.hpp), PCI addresses (topology.hpp), sysfs attributes
// (source/sysfs_reader.hpp), JSON topologies (source/json.hpp) and GPU
// visibility lists (source/visible.hpp); "Key: value" lines of /proc files
// are detail/status_field.hpp's. Constexpr, so that CpuSet and PciAddress
// parse at compile time; no std::from_chars (not constexpr in GCC 12).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Whitespace as kernel files and user input write it, plus NUL (some
/// firmware-provided sysfs files end in NUL bytes).
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0' || c == '\v' || c == '\f';
}

/// The text without leading/trailing whitespace and NUL bytes; `offset` gets
/// the position of the first kept character.
constexpr std::string_view trim(std::string_view s, std::size_t* offset = nullptr) {
  std::size_t b = 0;
  while (b < s.size() && is_space(s[b])) ++b;
  std::size_t e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  if (offset != nullptr) *offset = b;
  return s.substr(b, e - b);
}

/// The value of a hex digit (either case), or -1.
constexpr int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Reads the digits at the start of `s` in `base` (10 or 16) into `value`,
/// saturating at `cap` so that an overlong number reads as out of range rather
/// than wrapping. Returns how many digits there were (0: `s` starts with none).
constexpr std::size_t leading_number(std::string_view s, int base, long long cap, long long& value) {
  value = 0;
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    int d = base == 16 ? hex_digit(s[i]) : (s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1);
    if (d < 0) break;
    value = value * base + d;
    if (value > cap) value = cap;
  }
  return i;
}

/// `s` is one or more decimal digits and nothing else.
constexpr bool is_decimal(std::string_view s) {
  long long ignored = 0;
  return !s.empty() && leading_number(s, 10, 0, ignored) == s.size();
}

/// The length of the well-formed UTF-8 sequence at the start of `text` (RFC
/// 3629: no overlong form, no surrogate, nothing above U+10FFFF), or 0.
template <class = void>
inline std::size_t utf8_length(std::string_view text) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  auto tail = [&](std::size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  unsigned char c = byte(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return tail(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!tail(1) || !tail(2)) return 0;
    if (c == 0xE0 && byte(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && byte(1) > 0x9F) return 0;  // a surrogate, U+D800..U+DFFF
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!tail(1) || !tail(2) || !tail(3)) return 0;
    if (c == 0xF0 && byte(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && byte(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;  // a continuation byte alone, 0xC0, 0xC1, 0xF5..0xFF
}

/// Whether the 3-byte UTF-8 sequence at the start of `text` is a bidirectional
/// control: the marks U+200E and U+200F, the embeddings and overrides
/// U+202A..U+202E and the isolates U+2066..U+2069. A terminal reorders what
/// follows one, so a name holding U+202E can make a line read as another.
template <class = void>
inline bool bidi_control(std::string_view text) {
  if (text.size() < 3 || static_cast<unsigned char>(text[0]) != 0xE2) return false;
  auto b1 = static_cast<unsigned char>(text[1]);
  auto b2 = static_cast<unsigned char>(text[2]);
  if (b1 == 0x80) return b2 == 0x8E || b2 == 0x8F || (b2 >= 0xAA && b2 <= 0xAE);
  return b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9;
}

/// `text` with every byte that could drive a terminal or break a line written
/// as \xHH: control characters (below 0x20, newlines and tabs included, and
/// 0x7f), the C1 controls U+0080..U+009F (each byte of their UTF-8 form: U+009B
/// starts a terminal escape sequence as ESC [ does), the bidirectional controls
/// (bidi_control: each byte of their UTF-8 form), and every byte that is not
/// part of well-formed UTF-8 (a garbled file's 0xff). Outside text (a file
/// name, a file's or a variable's contents) stays one printable line; valid
/// UTF-8 text, accents and all, is kept as it is.
template <class = void>
inline std::string escape_control(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = utf8_length(text.substr(i));
    bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    bool bidi = n == 3 && bidi_control(text.substr(i));
    if (n == 0 || c < 0x20 || c == 0x7f || c1 || bidi) {
      std::size_t whole = c1 || bidi ? n : 1;
      for (std::size_t k = 0; k < whole; ++k) escape(static_cast<unsigned char>(text[i + k]));
      i += whole;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

/// Outside text (a variable's value, a list entry) to quote in a message:
/// every ' written as \x27, so the quote that closes it is the message's own.
/// Front ends copy quoted text as it is (spell_options), so a value holding
/// "gpu=3" is never respelled as an option, nor can it close its quote early.
template <class = void>
inline std::string quotable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) out += c == '\'' ? std::string_view("\\x27") : std::string_view(&c, 1);
  return out;
}

/// The text as one line that is safe on a terminal (escape_control), without
/// trailing spaces and a sentence's final dot: how every front end prints a
/// message. An ellipsis ("...") is kept: it says a quoted text was shortened.
template <class = void>
inline std::string one_line(std::string_view text) {
  std::string s = escape_control(text);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  bool ellipsis = s.size() >= 3 && s.compare(s.size() - 3, 3, "...") == 0;
  if (!ellipsis)
    while (!s.empty() && (s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}

/// Whether `name` is one the kernel gives a network or RDMA interface: letters,
/// digits, '_', '.', '-'. Anything else would change the meaning of the lists
/// the names go into (NCCL_IB_HCA's ',' and ':', UCX's '^').
constexpr bool interface_name_ok(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

/// The items of a comma-separated list, as they are (empty ones kept: "a,,b"
/// is three items, "" one empty item).
template <class = void>
inline std::vector<std::string_view> comma_items(std::string_view list) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t comma = list.find(',', at);
    if (comma == std::string_view::npos) comma = list.size();
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
