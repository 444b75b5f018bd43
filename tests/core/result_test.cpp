// SPDX-License-Identifier: Apache-2.0
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

TEST_CASE("a message that would not fit cuts its longest pieces in the middle, and the reason after them survives") {
  // A path of 5,000 characters (a hostile root, a deep bridge chain) must not push
  // the reason and the advice out of the message; a message that fits is left whole.
  std::string path = "/root/" + std::string(5000, 'd') + "/node0/cpulist";
  Error e = gpuaff::make_error(Errc::parse_error, path, ": 'x' is not a CPU list; record the machine again");
  std::string_view m = e.message();
  CHECK(m.size() <= Error::max_message);
  CHECK(m.substr(0, 6) == "/root/");
  CHECK(m.find("d...d") != std::string_view::npos);
  CHECK(m.find("/node0/cpulist: 'x' is not a CPU list; record the machine again") != std::string_view::npos);
  // Three such pieces still leave the end of the message whole.
  Error three = gpuaff::make_error(Errc::io_error, path, " and ", path, " and ", path, ": cannot be read; check the root");
  CHECK(three.message().substr(three.message().size() - 32) == ": cannot be read; check the root");
  // Short pieces are kept whole; so is a long piece when the whole message fits.
  CHECK(gpuaff::make_error(Errc::not_found, "no GPU ", 9, " (", 8, " visible)").message() == "no GPU 9 (8 visible)");
  std::string long_fits(600, 'p');
  CHECK(gpuaff::make_error(Errc::io_error, long_fits, ": reason").message() == long_fits + ": reason");
}

// ---- std::expected's other members: or_else, transform_error, ==, rvalue chains ----

namespace {
// A move-only value, as gpuaff::Child is: chains must move it along.
struct MoveOnly {
  int v = 0;
  constexpr explicit MoveOnly(int x) : v(x) {}
  MoveOnly(const MoveOnly&) = delete;
  MoveOnly& operator=(const MoveOnly&) = delete;
  constexpr MoveOnly(MoveOnly&&) = default;
  constexpr MoveOnly& operator=(MoveOnly&&) = default;
};
constexpr Result<MoveOnly> make_move_only(int v) {
  if (v < 0) return gpuaff::fail(Errc::out_of_range, "negative ", v);
  return MoveOnly(v);
}
constexpr Result<MoveOnly> doubled(MoveOnly m) { return MoveOnly(m.v * 2); }
}  // namespace

TEST_CASE("a move-only value chains through rvalue and_then, transform and value()") {
  GPUAFF_STATIC_CHECK(make_move_only(3).and_then(doubled).and_then(doubled)->v == 12);
  GPUAFF_STATIC_CHECK(make_move_only(3).transform([](MoveOnly m) { return m.v + 1; }).value() == 4);
  GPUAFF_STATIC_CHECK(make_move_only(5).value().v == 5);
  GPUAFF_STATIC_CHECK(make_move_only(-1).and_then(doubled).error().message() == "negative -1");
  // The function never runs on an error, so an error passes through unchanged.
  GPUAFF_STATIC_CHECK(make_move_only(-2).transform([](MoveOnly m) { return m.v; }).error().code() == Errc::out_of_range);
  Result<MoveOnly> kept = make_move_only(7);
  MoveOnly taken = std::move(kept).value();
  CHECK(taken.v == 7);
}

TEST_CASE("or_else runs only on an error, and may recover from it") {
  constexpr auto recover = [](const Error& e) -> Result<int> {
    if (e.code() == Errc::invalid_argument) return 0;
    return gpuaff::unexpected(e);
  };
  GPUAFF_STATIC_CHECK(*half(8).or_else(recover) == 4);  // a value passes through
  GPUAFF_STATIC_CHECK(*half(3).or_else(recover) == 0);  // odd: invalid_argument, recovered
  GPUAFF_STATIC_CHECK(check_positive(-1).or_else([](const Error&) -> Result<void> { return {}; }).has_value());
  GPUAFF_STATIC_CHECK(!check_positive(-1).or_else([](Error e) -> Result<void> { return gpuaff::unexpected(e); }));
  GPUAFF_STATIC_CHECK(make_move_only(-1).or_else([](const Error&) -> Result<MoveOnly> { return MoveOnly(9); })->v == 9);
}

TEST_CASE("transform_error rewrites an error and leaves a value alone") {
  constexpr auto with_context = [](Error e) { return e.prepend("GPU 2: "); };
  GPUAFF_STATIC_CHECK(half(3).transform_error(with_context).error().message() ==
                      "GPU 2: value 3 is odd; pass an even number");
  GPUAFF_STATIC_CHECK(half(3).transform_error(with_context).error().code() == Errc::invalid_argument);
  GPUAFF_STATIC_CHECK(*half(4).transform_error(with_context) == 2);
  GPUAFF_STATIC_CHECK(check_positive(0).transform_error(with_context).error().message() ==
                      "GPU 2: value 0 is not positive");
  GPUAFF_STATIC_CHECK(check_positive(1).transform_error(with_context).has_value());
}

TEST_CASE("== compares against values, errors and other results, like std::expected") {
  GPUAFF_STATIC_CHECK(half(8) == 4);
  GPUAFF_STATIC_CHECK(!(half(8) == 5));
  GPUAFF_STATIC_CHECK(half(8) != 5);
  GPUAFF_STATIC_CHECK(!(half(3) == 1));  // an error equals no value
  GPUAFF_STATIC_CHECK(half(3) == gpuaff::unexpected(Error(Errc::invalid_argument, "value 3 is odd; pass an even number")));
  GPUAFF_STATIC_CHECK(half(3) != gpuaff::unexpected(Error(Errc::parse_error, "value 3 is odd; pass an even number")));
  GPUAFF_STATIC_CHECK(!(half(8) == gpuaff::unexpected(Error(Errc::invalid_argument, ""))));
  GPUAFF_STATIC_CHECK(half(8) == half(8));
  GPUAFF_STATIC_CHECK(half(8) != half(12));
  GPUAFF_STATIC_CHECK(half(3) == half(3));
  GPUAFF_STATIC_CHECK(half(3) != half(5));  // the messages differ
  GPUAFF_STATIC_CHECK(half(8) != half(3));
  GPUAFF_STATIC_CHECK(half(8) == Result<long>(4L));
  GPUAFF_STATIC_CHECK(check_positive(1) == check_positive(2));
  GPUAFF_STATIC_CHECK(check_positive(-1) != check_positive(1));
  GPUAFF_STATIC_CHECK(check_positive(-1) != check_positive(-2));
  GPUAFF_STATIC_CHECK(check_positive(-1) == gpuaff::unexpected(Error(Errc::out_of_range, "value -1 is not positive")));
}

TEST_CASE("a successful Result<void> copies and assigns like a failed one") {
  constexpr bool ok = [] {
    Result<void> a = check_positive(1);
    Result<void> b = check_positive(-3);
    Result<void> c = b;  // copies the error
    b = a;               // now a success
    a = c;               // now the error
    return b.has_value() && !a && a.error().message() == "value -3 is not positive" && !c &&
           c.error().code() == Errc::out_of_range;
  }();
  GPUAFF_STATIC_CHECK(ok);
  // void and_then / transform.
  GPUAFF_STATIC_CHECK(*check_positive(1).and_then([] { return half(10); }) == 5);
  GPUAFF_STATIC_CHECK(!check_positive(0).and_then([] { return half(10); }));
  GPUAFF_STATIC_CHECK(*check_positive(1).transform([] { return 7; }) == 7);
}

TEST_CASE("an Error keeps its message on the heap: copies, moves and assignments own their own") {
  // A Result carries an Error in every frame that calls something fallible;
  // the message is allocated only when there is an error.
  static_assert(sizeof(Error) <= 48);
  static_assert(sizeof(Result<bool>) <= 56);
  Error a(Errc::not_found, "no GPU 3");
  Error b = a;  // a copy owns its text: changing one leaves the other
  b.append(" (2 visible)");
  CHECK(a.message() == "no GPU 3");
  CHECK(b.message() == "no GPU 3 (2 visible)");
  CHECK(std::string_view(b.what()) == "no GPU 3 (2 visible)");
  Error c = std::move(b);
  CHECK(c.message() == "no GPU 3 (2 visible)");
  c = a;
  CHECK(c == a);
  c.append(42LL).append(-7LL);
  CHECK(c.message() == "no GPU 342-7");
  Error empty;
  CHECK(empty.message().empty());
  CHECK(std::string_view(empty.what()).empty());
  // Once cut, a message takes nothing more: its end stays the ellipsis.
  Error l(Errc::io_error, std::string(2000, 'x'));
  l.append(": what to do");
  CHECK(l.message().size() == Error::max_message);
  CHECK(l.message().substr(Error::max_message - 3) == "...");
  // A message exactly max_message long is whole; one character more cuts it.
  Error full(Errc::io_error, std::string(Error::max_message, 'y'));
  CHECK(full.message().find("...") == std::string_view::npos);
  full.append("z");
  CHECK(full.message().substr(Error::max_message - 3) == "...");
  // Result<void> copies and assignments between errors and successes.
  Result<void> ok;
  Result<void> bad = gpuaff::fail(Errc::io_error, "cannot read ", "/x");
  Result<void> copy = bad;
  CHECK(copy.error().message() == "cannot read /x");
  copy = ok;
  CHECK(copy.has_value());
  copy = bad;
  copy = Result<void>(gpuaff::fail(Errc::parse_error, "second"));
  CHECK(copy.error().message() == "second");
  CHECK(bad.error().message() == "cannot read /x");
}

namespace {
// An error built, copied and read within one constant evaluation.
constexpr bool error_in_constant_evaluation() {
  Result<int> r = gpuaff::fail(Errc::out_of_range, "cpu ", 9000, " is beyond ", 8192);
  Result<int> copy = r;
  return !copy && copy.error().message() == "cpu 9000 is beyond 8192" && copy.error().code() == Errc::out_of_range;
}
static_assert(error_in_constant_evaluation());
}  // namespace
