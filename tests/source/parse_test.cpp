// SPDX-License-Identifier: Apache-2.0
// The number and text scanning that every reader shares (detail/parse.hpp).
#include <gpuaff/detail/parse.hpp>
#include <gpuaff/detail/status_field.hpp>

#include <string_view>

#include "support/check.hpp"

using gpuaff::detail::is_decimal;
using gpuaff::detail::leading_number;
using gpuaff::detail::status_field;

namespace {

constexpr long long value_of(std::string_view s, int base, long long cap) {
  long long v = -1;
  leading_number(s, base, cap, v);
  return v;
}
constexpr std::size_t digits_of(std::string_view s, int base) {
  long long v = 0;
  return leading_number(s, base, 1LL << 40, v);
}

}  // namespace

TEST_CASE("a number is read up to the first character that is not a digit of its base") {
  GPUAFF_STATIC_CHECK(digits_of("123-7", 10) == 3);
  GPUAFF_STATIC_CHECK(value_of("123-7", 10, 1000) == 123);
  GPUAFF_STATIC_CHECK(digits_of("10de\n", 16) == 4);
  GPUAFF_STATIC_CHECK(value_of("10de", 16, 0xffff) == 0x10de);
  GPUAFF_STATIC_CHECK(value_of("FfA", 16, 0xffff) == 0xffa);  // either case
  GPUAFF_STATIC_CHECK(digits_of("ab", 10) == 0);               // hex digits are not decimal ones
  GPUAFF_STATIC_CHECK(digits_of("", 16) == 0);
  GPUAFF_STATIC_CHECK(value_of("x", 10, 5) == 0);  // no digits: zero, not the old value
}

TEST_CASE("an overlong number saturates at the cap instead of wrapping, so that it reads as out of range") {
  // 2^64 + 5 would wrap a 64-bit value to 5 (and 99999999999999999999 to a negative number).
  GPUAFF_STATIC_CHECK(value_of("18446744073709551621", 10, 1'000'000'000) == 1'000'000'000);
  GPUAFF_STATIC_CHECK(value_of("99999999999999999999", 10, 1'000'000'000'000) == 1'000'000'000'000);
  GPUAFF_STATIC_CHECK(value_of("ffffffffffffffffffff", 16, 0xffffffffLL) == 0xffffffffLL);
  GPUAFF_STATIC_CHECK(digits_of("18446744073709551621", 10) == 20);  // every digit is still consumed
}

TEST_CASE("a decimal is one or more digits and nothing else") {
  GPUAFF_STATIC_CHECK(is_decimal("0"));
  GPUAFF_STATIC_CHECK(is_decimal("12"));
  GPUAFF_STATIC_CHECK(!is_decimal(""));
  GPUAFF_STATIC_CHECK(!is_decimal("1a"));
  GPUAFF_STATIC_CHECK(!is_decimal(" 1"));
  GPUAFF_STATIC_CHECK(!is_decimal("-1"));
}

TEST_CASE("a status field is found only at the start of a line, its value trimmed") {
  constexpr std::string_view status = "Name:\tpython\nCpus_allowed_list:\t0-3\nMems_allowed_list:\t0\n";
  GPUAFF_STATIC_CHECK(status_field(status, "Cpus_allowed_list").value_or("?") == "0-3");
  GPUAFF_STATIC_CHECK(status_field(status, "Mems_allowed_list").value_or("?") == "0");
  // "allowed_list" occurs, but no line starts with it; "Cpus_allowed" is a prefix of another key.
  GPUAFF_STATIC_CHECK(!status_field(status, "allowed_list").has_value());
  GPUAFF_STATIC_CHECK(!status_field(status, "Cpus_allowed").has_value());
  GPUAFF_STATIC_CHECK(status_field("GPU UUID: \t GPU-1234 \n", "GPU UUID").value_or("?") == "GPU-1234");
}

TEST_CASE("outside text is escaped byte by byte where it could drive a terminal or is not UTF-8") {
  using gpuaff::detail::escape_control;
  // Plain ASCII and well-formed UTF-8 (e, e acute, the euro sign, an emoji) stay as written.
  CHECK(escape_control("GPU-0598409d") == "GPU-0598409d");
  CHECK(escape_control("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  // C0 controls, DEL: one escape each.
  CHECK(escape_control("a\nb\x1b[31m\x7f") == "a\\x0ab\\x1b[31m\\x7f");
  // A garbled sysfs file: bytes that start or continue no valid sequence.
  CHECK(escape_control("0-3\xff\xfe") == "0-3\\xff\\xfe");
  CHECK(escape_control("\x80x") == "\\x80x");            // a continuation byte alone
  CHECK(escape_control("\xc3") == "\\xc3");              // a sequence cut short at the end
  CHECK(escape_control("\xc3(") == "\\xc3(");            // ... or by an ASCII byte
  CHECK(escape_control("\xc0\xaf") == "\\xc0\\xaf");     // overlong '/'
  CHECK(escape_control("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");  // overlong, three bytes
  CHECK(escape_control("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate, U+D800
  CHECK(escape_control("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  // The C1 control U+009B (CSI) is valid UTF-8 but starts a terminal escape: both bytes escaped.
  CHECK(escape_control("x\xc2\x9b" "31m") == "x\\xc2\\x9b31m");
  CHECK(escape_control("\xc2\xa0") == "\xc2\xa0");  // U+00A0, the first character after C1, is kept
}

TEST_CASE("bidirectional controls in outside text are escaped: they would reorder what a terminal shows") {
  // U+202E (right-to-left override) makes "pid 12 gpu=3" read backwards from
  // where it sits: "Trojan Source" for a terminal. Each byte of the embedding,
  // override and isolate controls and of the marks U+200E/U+200F is escaped.
  using gpuaff::detail::escape_control;
  CHECK(escape_control("a\xe2\x80\xae" "b") == "a\\xe2\\x80\\xaeb");  // U+202E RLO
  CHECK(escape_control("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad") ==
        "\\xe2\\x80\\xaa\\xe2\\x80\\xab\\xe2\\x80\\xac\\xe2\\x80\\xad");  // U+202A..U+202D
  CHECK(escape_control("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9") ==
        "\\xe2\\x81\\xa6\\xe2\\x81\\xa7\\xe2\\x81\\xa8\\xe2\\x81\\xa9");  // U+2066..U+2069
  CHECK(escape_control("\xe2\x80\x8e\xe2\x80\x8f") == "\\xe2\\x80\\x8e\\xe2\\x80\\x8f");  // U+200E, U+200F
  // Their neighbours are text and stay: U+2010 (hyphen), U+2030 (per mille).
  CHECK(escape_control("\xe2\x80\x90\xe2\x80\xb0") == "\xe2\x80\x90\xe2\x80\xb0");
  CHECK(escape_control("\xe2\x80\x8d") == "\xe2\x80\x8d");  // U+200D ZWJ: emoji sequences need it
}
