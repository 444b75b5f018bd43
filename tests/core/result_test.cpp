// Result<T> and Error behave like std::expected<T, Error>, also at compile time.
#include <gpuaff/result.hpp>

#include <string>
#include <vector>

#include "support/check.hpp"

using gpuaff::Errc;
using gpuaff::Error;
using gpuaff::Result;

namespace {
constexpr Result<int> half(int v) {
  if (v % 2 != 0) return gpuaff::fail(Errc::invalid_argument, "value ", v, " is odd; pass an even number");
  return v / 2;
}
constexpr Result<int> quarter(int v) {
  GPUAFF_TRY(int h, half(v));
  return half(h);
}
constexpr Result<void> check_positive(int v) {
  if (v <= 0) return gpuaff::fail(Errc::out_of_range, "value ", v, " is not positive");
  return {};
}
constexpr Result<void> check_both(int a, int b) {
  GPUAFF_TRY_VOID(check_positive(a));
  GPUAFF_TRY_VOID(check_positive(b));
  return {};
}
}  // namespace

TEST_CASE("a value result holds its value") {
  GPUAFF_STATIC_CHECK(half(8).has_value());
  GPUAFF_STATIC_CHECK(*half(8) == 4);
  GPUAFF_STATIC_CHECK(half(8).value_or(-1) == 4);
}

TEST_CASE("an error result holds its code and message, built from parts") {
  GPUAFF_STATIC_CHECK(!half(3));
  GPUAFF_STATIC_CHECK(half(3).error().code() == Errc::invalid_argument);
  GPUAFF_STATIC_CHECK(half(3).error().message() == "value 3 is odd; pass an even number");
  GPUAFF_STATIC_CHECK(half(-7).error().message() == "value -7 is odd; pass an even number");
  GPUAFF_STATIC_CHECK(half(3).value_or(-1) == -1);
}

TEST_CASE("GPUAFF_TRY propagates the first error unchanged") {
  GPUAFF_STATIC_CHECK(*quarter(8) == 2);
  GPUAFF_STATIC_CHECK(quarter(6).error().message() == "value 3 is odd; pass an even number");
  GPUAFF_STATIC_CHECK(check_both(1, 2).has_value());
  GPUAFF_STATIC_CHECK(check_both(1, -2).error().message() == "value -2 is not positive");
}

TEST_CASE("and_then and transform chain like std::expected") {
  GPUAFF_STATIC_CHECK(*half(8).and_then(half) == 2);
  GPUAFF_STATIC_CHECK(!half(6).and_then(half));
  GPUAFF_STATIC_CHECK(*half(8).transform([](int v) { return v + 1; }) == 5);
}

TEST_CASE("value() on an error throws BadResultAccess carrying the error") {
  auto r = half(5);
  CHECK_THROWS_AS((void)r.value(), gpuaff::BadResultAccess);
  try {
    (void)r.value();
  } catch (const gpuaff::BadResultAccess& e) {
    CHECK(std::string(e.what()) == "value 5 is odd; pass an even number");
    CHECK(e.error().code() == Errc::invalid_argument);
  }
}

TEST_CASE("results of non-trivial types copy, move and destroy their contents") {
  Result<std::vector<int>> a(std::vector<int>{1, 2, 3});
  Result<std::vector<int>> b = a;
  CHECK(*b == std::vector<int>{1, 2, 3});
  Result<std::vector<int>> c = gpuaff::fail(Errc::io_error, "x");
  c = b;
  CHECK(c->size() == 3);
  b = gpuaff::unexpected(Error(Errc::not_found, "gone"));
  CHECK(b.error().message() == "gone");
  Result<std::vector<int>> d = std::move(c);
  CHECK(d->size() == 3);
}

TEST_CASE("errors carry errno and long messages are cut with an ellipsis") {
  Error e = gpuaff::make_sys_error(Errc::io_error, 2, "cannot open ", "/sys/x");
  CHECK(e.sys_errno() == 2);
  std::string longtext(2000, 'x');
  Error l(Errc::io_error, longtext);
  CHECK(l.message().size() == Error::max_message);
  CHECK(l.message().substr(l.message().size() - 3) == "...");
  e.prepend("reading topology: ");
  CHECK(e.message() == "reading topology: cannot open /sys/x");
}
