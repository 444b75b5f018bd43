// SPDX-License-Identifier: Apache-2.0
#pragma once
// Result<T> and Error: shaped like C++23 std::expected<T, Error> (GCC 12 has
// no <expected> in C++20) so that switching to it later is mechanical. Both
// work in constant evaluation (C++20 allows an allocation there that is freed
// before the evaluation ends, which is what a Result's Error does).

#include "gpuaff/config.hpp"

#include <array>
#include <cstddef>
#include <exception>
#include <string_view>
#include <type_traits>
#include <utility>

#include "gpuaff/fixed_string.hpp"

// std::construct_at and std::destroy_at: libstdc++ declares them in a small
// header of their own; all of <memory> costs about 0.5 s more per translation
// unit at -O2 (benchmarks row 6).
#if __has_include(<bits/stl_construct.h>)
#include <bits/stl_construct.h>
#else
#include <memory>
#endif

namespace gpuaff {
inline namespace v0 {

/// What went wrong, coarsely; the CLI maps each class to an exit code.
enum class Errc {
  invalid_argument = 1,  ///< a value given by the caller (flag, env variable, option) is wrong
  parse_error,           ///< a file or string does not have the expected syntax
  io_error,              ///< a file could not be opened or read
  not_found,             ///< a GPU, node, device or file that is needed does not exist
  out_of_range,          ///< an id beyond what gpuaff or the kernel can hold
  empty_result,          ///< the binding would be empty (e.g. no allowed CPU on the node), or the kernel refuses its CPUs
  unknown_locality,      ///< the device's NUMA node cannot be determined
  insufficient_cores,    ///< fewer cores than the policy needs
  permission_denied,     ///< the kernel refused (EPERM), e.g. set_mempolicy in a container
  system_error,          ///< another system call failed; see sys_errno
  unsupported,           ///< not available in this build or on this kernel
};

constexpr std::string_view to_string(Errc c) {
  switch (c) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::parse_error: return "parse error";
    case Errc::io_error: return "I/O error";
    case Errc::not_found: return "not found";
    case Errc::out_of_range: return "out of range";
    case Errc::empty_result: return "empty result";
    case Errc::unknown_locality: return "unknown locality";
    case Errc::insufficient_cores: return "insufficient cores";
    case Errc::permission_denied: return "permission denied";
    case Errc::system_error: return "system error";
    case Errc::unsupported: return "unsupported";
  }
  return "unknown error";
}

/// An error: a code, the errno of the failing system call (0 if none), and one
/// human sentence naming the file or value and what to do about it.
class Error {
 public:
  /// The longest message kept; a longer one is cut to its first
  /// max_message - 3 characters and "...".
  static constexpr std::size_t max_message = 1024;
  /// A message being built (detail::compose): on the stack of the cold path
  /// that builds it, never in an Error.
  using Message = FixedString<max_message>;

  constexpr Error() = default;
  constexpr Error(Errc code, std::string_view message, int sys_errno = 0) : code_(code), sys_errno_(sys_errno) {
    assign(message, {});
  }
  constexpr Error(const Error& o) : code_(o.code_), sys_errno_(o.sys_errno_) {
    assign(o.message(), {});
    truncated_ = o.truncated_;
  }
  constexpr Error(Error&& o) noexcept
      : code_(o.code_), sys_errno_(o.sys_errno_), text_(std::exchange(o.text_, nullptr)),
        size_(std::exchange(o.size_, 0)), truncated_(o.truncated_) {}
  constexpr Error& operator=(const Error& o) {
    if (this != &o) *this = Error(o);
    return *this;
  }
  constexpr Error& operator=(Error&& o) noexcept {
    std::swap(code_, o.code_);
    std::swap(sys_errno_, o.sys_errno_);
    std::swap(text_, o.text_);
    std::swap(size_, o.size_);
    std::swap(truncated_, o.truncated_);
    return *this;
  }
  constexpr ~Error() { delete[] text_; }

  constexpr Errc code() const { return code_; }
  constexpr int sys_errno() const { return sys_errno_; }
  constexpr std::string_view message() const { return text_ == nullptr ? std::string_view() : std::string_view(text_, size_); }
  constexpr const char* what() const { return text_ == nullptr ? "" : text_; }

  /// Adds to the message (a message already cut stays as it is).
  constexpr Error& append(std::string_view s) {
    if (!truncated_) assign(message(), s);
    return *this;
  }
  constexpr Error& append(long long v) {
    FixedString<24> digits;
    digits.append_int(v);
    return append(digits.view());
  }
  constexpr Error& prepend(std::string_view s) {
    assign(s, message());
    return *this;
  }

  friend constexpr bool operator==(const Error& a, const Error& b) {
    return a.code_ == b.code_ && a.sys_errno_ == b.sys_errno_ && a.message() == b.message();
  }

 private:
  /// The message becomes `head` then `tail`, cut at max_message. Out of line
  /// and on the heap: an Error is three words in every Result, so that the
  /// frames of the paths that succeed stay small (a Result used to carry the
  /// 1 KiB message inline, and each one deepened the stack a short-lived
  /// process touches; benchmarks/README.md, row S).
  [[gnu::noinline]] constexpr void assign(std::string_view head, std::string_view tail) {
    std::size_t total = head.size() + tail.size();
    bool cut = total > max_message;
    std::size_t size = cut ? max_message : total;
    char* text = new char[size + 1];
    for (std::size_t i = 0; i < size; ++i) text[i] = i < head.size() ? head[i] : tail[i - head.size()];
    if (cut)
      for (std::size_t i = size - 3; i < size; ++i) text[i] = '.';
    text[size] = '\0';
    delete[] text_;
    text_ = text;
    size_ = size;
    truncated_ = truncated_ || cut;
  }

  Errc code_ = Errc::invalid_argument;
  int sys_errno_ = 0;
  char* text_ = nullptr;  ///< NUL-terminated; null for an empty message
  std::size_t size_ = 0;
  bool truncated_ = false;
};

namespace detail {
/// One piece of an error message: a text, or an integer written out. The
/// builders below turn their arguments into pieces and hand them to one
/// function, so each distinct argument list costs a few lines of code, not a
/// copy of the cutting and appending (benchmarks row 6: the copies were most
/// of the optimizer's time in a TU that binds).
class MessagePart {
 public:
  constexpr MessagePart(std::string_view s) : text_(s), size_(s.size()) {}  // NOLINT
  constexpr MessagePart(const char* s) : MessagePart(std::string_view(s)) {}  // NOLINT: a literal
  template <class S>  // a std::string, or another class that converts to a string_view
    requires(std::is_class_v<S> && std::is_convertible_v<const S&, std::string_view> &&
             !std::is_same_v<S, std::string_view>)
  constexpr MessagePart(const S& s) : MessagePart(std::string_view(s)) {}  // NOLINT
  constexpr MessagePart(const char& c) : text_(&c, 1), size_(1) {}  // NOLINT
  template <std::size_t N>
  constexpr MessagePart(const FixedString<N>& s) : MessagePart(s.view()) {}  // NOLINT
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, char> && !std::is_same_v<I, bool>)
  constexpr MessagePart(I v) : MessagePart(static_cast<long long>(v), integer_tag{}) {}  // NOLINT

  constexpr std::string_view text() const {
    return integer_ ? std::string_view(digits_.data() + first_digit_, digits_.size() - first_digit_) : text_;
  }
  /// The length the cutting counts.
  constexpr std::size_t size() const { return size_; }
  constexpr bool integer() const { return integer_; }

 private:
  struct integer_tag {};
  // An integer is counted as 20 characters, at most, when cutting.
  [[gnu::noinline]] constexpr MessagePart(long long v, integer_tag) : size_(20) {
    unsigned long long u = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
    std::size_t n = digits_.size();
    do {
      digits_[--n] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) digits_[--n] = '-';
    first_digit_ = n;
    integer_ = true;
  }

  std::string_view text_;
  std::size_t size_ = 0;
  std::array<char, 21> digits_{};
  std::size_t first_digit_ = 0;
  bool integer_ = false;
};

inline constexpr std::size_t max_message_parts = 32;

/// The message of `parts`. When they would not fit, the longest pieces (a
/// path of 5,000 characters, a file's garbage, another error's message) are
/// cut in their middle until they do, so that what comes after them, usually
/// the reason and what to do, is kept whole.
[[gnu::noinline]] constexpr Error::Message compose(const MessagePart* parts, std::size_t count) {
  constexpr std::size_t least = 64;  // no piece is cut below this
  constexpr std::size_t most_parts = max_message_parts;
  std::array<std::size_t, most_parts> keep{};
  std::size_t total = 0;
  for (std::size_t i = 0; i < count && i < most_parts; ++i) total += keep[i] = parts[i].size();
  while (total > Error::max_message) {
    std::size_t longest = 0;
    for (std::size_t i = 1; i < count && i < most_parts; ++i)
      if (keep[i] > keep[longest]) longest = i;
    if (keep[longest] <= least) break;  // many short pieces: the end is cut, with "..."
    std::size_t cut = total - Error::max_message < keep[longest] - least ? total - Error::max_message
                                                                          : keep[longest] - least;
    keep[longest] -= cut;
    total -= cut;
  }
  Error::Message m;
  for (std::size_t i = 0; i < count; ++i) {
    std::string_view s = parts[i].text();
    std::size_t k = i < most_parts ? keep[i] : s.size();
    if (parts[i].integer() || s.size() <= k) {
      m.append(s);
      continue;
    }
    std::size_t head = (k - 3) / 2;  // a text keeps its start and its end around "..."
    m.append(s.substr(0, head));
    m.append("...");
    m.append(s.substr(s.size() - (k - 3 - head)));
  }
  return m;
}

/// The body of make_error, make_sys_error and fail, out of line: an error
/// site is then its list of pieces and one call, not a copy of building the
/// 1 KiB message (benchmarks row 6).
[[gnu::cold, gnu::noinline]] constexpr Error error_with(Errc code, int sys_errno, const MessagePart* parts,
                                                        std::size_t count) {
  return Error(code, compose(parts, count).view(), sys_errno);
}
}  // namespace detail

/// Builds an error from pieces: make_error(Errc::not_found, "no GPU ", 3, " (", n, " visible)").
/// The error builders are cold: the optimizer keeps them off the paths that succeed.
template <class... Parts>
[[gnu::cold]] constexpr Error make_error(Errc code, const Parts&... parts) {
  static_assert(sizeof...(Parts) > 0 && sizeof...(Parts) <= detail::max_message_parts);
  const detail::MessagePart list[] = {parts...};
  return detail::error_with(code, 0, list, sizeof...(Parts));
}

/// Same, with the errno of a failed system call.
template <class... Parts>
[[gnu::cold]] constexpr Error make_sys_error(Errc code, int sys_errno, const Parts&... parts) {
  static_assert(sizeof...(Parts) > 0 && sizeof...(Parts) <= detail::max_message_parts);
  const detail::MessagePart list[] = {parts...};
  return detail::error_with(code, sys_errno, list, sizeof...(Parts));
}

/// The std::unexpected of Result.
template <class E = Error>
class Unexpected {
 public:
  constexpr explicit Unexpected(E e) : error_(std::move(e)) {}
  constexpr const E& error() const& { return error_; }
  constexpr E& error() & { return error_; }
  constexpr E&& error() && { return std::move(error_); }

 private:
  E error_;
};

constexpr Unexpected<Error> unexpected(Error e) { return Unexpected<Error>(std::move(e)); }

namespace detail {
/// fail()'s body, out of line: each error site is then its list of pieces
/// and one call, not a copy of building the 1 KiB message and moving it
/// into the result (benchmarks row 6).
[[gnu::cold, gnu::noinline]] constexpr Unexpected<Error> fail_with(Errc code, const MessagePart* parts, std::size_t count) {
  return Unexpected<Error>(error_with(code, 0, parts, count));
}
}  // namespace detail

/// Shorthand for `return fail(Errc::x, "what", value, "what to do");`
template <class... Parts>
[[gnu::cold]] constexpr Unexpected<Error> fail(Errc code, const Parts&... parts) {
  static_assert(sizeof...(Parts) > 0 && sizeof...(Parts) <= detail::max_message_parts);
  const detail::MessagePart list[] = {parts...};
  return detail::fail_with(code, list, sizeof...(Parts));
}

/// Thrown by Result::value() on an error; carries the Error.
class BadResultAccess : public std::exception {
 public:
  explicit BadResultAccess(Error e) : error_(std::move(e)) {}
  const char* what() const noexcept override { return error_.what(); }
  const Error& error() const { return error_; }

 private:
  Error error_;
};

template <class T>
class Result;

namespace detail {
template <class R>
inline constexpr bool is_result = false;
template <class T>
inline constexpr bool is_result<Result<T>> = true;
template <class E>
inline constexpr bool is_unexpected = false;
template <class E>
inline constexpr bool is_unexpected<Unexpected<E>> = true;

/// Makes `x` as if default-constructed, where it is: `x = T{}` builds a
/// temporary first, which for a Topology (1.2 KB) or a LaunchPlan (3 KB) is
/// stack of that size.
template <class T>
constexpr void reset_in_place(T& x) {
  std::destroy_at(&x);
  std::construct_at(&x);
}
}  // namespace detail

/// A T or an Error, like std::expected<T, Error>: value(), error(),
/// and_then, transform, or_else, transform_error and == behave as there.
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference_v<T> && !std::is_same_v<std::remove_cv_t<T>, Error>);

 public:
  using value_type = T;
  using error_type = Error;

  constexpr Result()
    requires std::is_default_constructible_v<T>
      : value_(), has_(true) {}
  constexpr Result(const T& v) : value_(v), has_(true) {}        // NOLINT
  constexpr Result(T&& v) : value_(std::move(v)), has_(true) {}  // NOLINT
  template <class E>
  constexpr Result(const Unexpected<E>& e) : error_(e.error()), has_(false) {}  // NOLINT
  template <class E>
  constexpr Result(Unexpected<E>&& e) : error_(std::move(e).error()), has_(false) {}  // NOLINT

  constexpr Result(const Result& o) : has_(o.has_) {
    if (has_) std::construct_at(&value_, o.value_);
    else std::construct_at(&error_, o.error_);
  }
  constexpr Result(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : has_(o.has_) {
    if (has_) std::construct_at(&value_, std::move(o.value_));
    else std::construct_at(&error_, std::move(o.error_));
  }
  constexpr Result& operator=(const Result& o) {
    if (this != &o) {
      destroy();
      has_ = o.has_;
      if (has_) std::construct_at(&value_, o.value_);
      else std::construct_at(&error_, o.error_);
    }
    return *this;
  }
  constexpr Result& operator=(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      destroy();
      has_ = o.has_;
      if (has_) std::construct_at(&value_, std::move(o.value_));
      else std::construct_at(&error_, std::move(o.error_));
    }
    return *this;
  }
  /// Becomes the error, as std::expected's assignment from unexpected: the
  /// value (if any) is destroyed, and no whole Result is built to move from.
  template <class E>
  constexpr Result& operator=(Unexpected<E>&& e) {
    destroy();
    std::construct_at(&error_, std::move(e).error());
    has_ = false;
    return *this;
  }
  template <class E>
  constexpr Result& operator=(const Unexpected<E>& e) {
    Error copy(e.error());
    destroy();
    std::construct_at(&error_, std::move(copy));
    has_ = false;
    return *this;
  }
  constexpr ~Result() { destroy(); }

  constexpr bool has_value() const { return has_; }
  constexpr explicit operator bool() const { return has_; }

  /// The value; throws BadResultAccess carrying the error when there is none.
  constexpr T& value() & {
    check();
    return value_;
  }
  constexpr const T& value() const& {
    check();
    return value_;
  }
  constexpr T&& value() && {
    check();
    return std::move(value_);
  }
  constexpr const T&& value() const&& {
    check();
    return std::move(value_);
  }
  constexpr T& operator*() & { return value_; }
  constexpr const T& operator*() const& { return value_; }
  constexpr T&& operator*() && { return std::move(value_); }
  constexpr const T&& operator*() const&& { return std::move(value_); }
  constexpr T* operator->() { return &value_; }
  constexpr const T* operator->() const { return &value_; }

  constexpr const Error& error() const& { return error_; }
  constexpr Error& error() & { return error_; }
  constexpr Error&& error() && { return std::move(error_); }

  template <class U>
  constexpr T value_or(U&& fallback) const& {
    return has_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U>
  constexpr T value_or(U&& fallback) && {
    return has_ ? std::move(value_) : static_cast<T>(std::forward<U>(fallback));
  }

  /// f(T) -> Result<U>; errors pass through.
  template <class F>
  constexpr auto and_then(F&& f) & {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  constexpr auto and_then(F&& f) const& {
    return and_then_impl(*this, std::forward<F>(f));
  }
  /// f(T&&) -> Result<U>: the value is moved into f (a move-only T chains).
  template <class F>
  constexpr auto and_then(F&& f) && {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  /// f(T) -> U; errors pass through.
  template <class F>
  constexpr auto transform(F&& f) & {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  constexpr auto transform(F&& f) const& {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  constexpr auto transform(F&& f) && {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  /// f(Error) -> Result<T>, called only on an error (to recover or replace
  /// it); a value passes through.
  template <class F>
  constexpr Result or_else(F&& f) const& {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  constexpr Result or_else(F&& f) && {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }
  /// f(Error) -> Error, called only on an error (to add context); a value
  /// passes through.
  template <class F>
  constexpr Result transform_error(F&& f) const& {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  constexpr Result transform_error(F&& f) && {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }

  /// Equal when both hold equal values or both hold equal errors.
  template <class U>
    requires(!std::is_void_v<U>)
  friend constexpr bool operator==(const Result& a, const Result<U>& b) {
    if (a.has_value() != b.has_value()) return false;
    return a.has_value() ? *a == *b : a.error() == b.error();
  }
  /// Equal when it holds a value equal to `v`.
  template <class U>
    requires(!detail::is_result<U> && !detail::is_unexpected<U>)
  friend constexpr bool operator==(const Result& a, const U& v) {
    return a.has_value() && *a == v;
  }
  /// Equal when it holds an error equal to `e.error()`.
  template <class E>
  friend constexpr bool operator==(const Result& a, const Unexpected<E>& e) {
    return !a.has_value() && a.error() == e.error();
  }

 private:
  template <class Self, class F>
  static constexpr auto and_then_impl(Self&& self, F&& f) {
    using R = std::remove_cvref_t<std::invoke_result_t<F, decltype(*std::forward<Self>(self))>>;
    static_assert(detail::is_result<R>, "and_then: the function must return a gpuaff::Result");
    if (self.has_) return std::forward<F>(f)(*std::forward<Self>(self));
    return R(Unexpected<Error>(std::forward<Self>(self).error()));
  }
  template <class Self, class F>
  static constexpr auto transform_impl(Self&& self, F&& f) {
    using U = std::remove_cvref_t<std::invoke_result_t<F, decltype(*std::forward<Self>(self))>>;
    if constexpr (std::is_void_v<U>) {
      if (!self.has_) return Result<U>(Unexpected<Error>(std::forward<Self>(self).error()));
      std::forward<F>(f)(*std::forward<Self>(self));
      return Result<U>();
    } else {
      if (self.has_) return Result<U>(std::forward<F>(f)(*std::forward<Self>(self)));
      return Result<U>(Unexpected<Error>(std::forward<Self>(self).error()));
    }
  }
  template <class Self, class F>
  static constexpr Result or_else_impl(Self&& self, F&& f) {
    static_assert(std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F, decltype(std::forward<Self>(self).error())>>,
                                 Result>,
                  "or_else: the function must return the same Result type");
    if (self.has_) return Result(*std::forward<Self>(self));
    return std::forward<F>(f)(std::forward<Self>(self).error());
  }
  template <class Self, class F>
  static constexpr Result transform_error_impl(Self&& self, F&& f) {
    if (self.has_) return Result(*std::forward<Self>(self));
    return Result(Unexpected<Error>(std::forward<F>(f)(std::forward<Self>(self).error())));
  }
  constexpr void check() const {
    if (!has_) throw BadResultAccess(error_);
  }
  constexpr void destroy() {
    if (has_) std::destroy_at(&value_);
    else std::destroy_at(&error_);
  }

  union {
    T value_;
    Error error_;
  };
  bool has_;
};

/// Success, or an Error. Success holds no Error: the error storage is only
/// constructed when there is one.
template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  using error_type = Error;

  constexpr Result() : none_(), has_(true) {}
  template <class E>
  constexpr Result(const Unexpected<E>& e) : error_(e.error()), has_(false) {}  // NOLINT
  template <class E>
  constexpr Result(Unexpected<E>&& e) : error_(std::move(e).error()), has_(false) {}  // NOLINT
  constexpr Result(const Result& o) : none_(), has_(o.has_) {
    if (!has_) std::construct_at(&error_, o.error_);
  }
  constexpr Result(Result&& o) noexcept : none_(), has_(o.has_) {
    if (!has_) std::construct_at(&error_, std::move(o.error_));
  }
  constexpr Result& operator=(const Result& o) {
    if (this != &o) *this = Result(o);
    return *this;
  }
  constexpr Result& operator=(Result&& o) noexcept {
    if (this != &o) {
      if (!has_) std::destroy_at(&error_);
      has_ = o.has_;
      if (!has_) std::construct_at(&error_, std::move(o.error_));
    }
    return *this;
  }
  constexpr ~Result() {
    if (!has_) std::destroy_at(&error_);
  }

  constexpr bool has_value() const { return has_; }
  constexpr explicit operator bool() const { return has_; }
  /// Throws BadResultAccess carrying the error when there is one.
  constexpr void value() const {
    if (!has_) throw BadResultAccess(error_);
  }
  constexpr void operator*() const {}
  constexpr const Error& error() const& { return error_; }
  constexpr Error& error() & { return error_; }
  constexpr Error&& error() && { return std::move(error_); }

  /// f() -> Result<U>; an error passes through.
  template <class F>
  constexpr auto and_then(F&& f) const {
    using R = std::remove_cvref_t<std::invoke_result_t<F>>;
    static_assert(detail::is_result<R>, "and_then: the function must return a gpuaff::Result");
    if (has_) return std::forward<F>(f)();
    return R(Unexpected<Error>(error_));
  }
  /// f() -> U; an error passes through.
  template <class F>
  constexpr auto transform(F&& f) const {
    using U = std::remove_cvref_t<std::invoke_result_t<F>>;
    if constexpr (std::is_void_v<U>) {
      if (has_) std::forward<F>(f)();
      return *this;
    } else {
      if (has_) return Result<U>(std::forward<F>(f)());
      return Result<U>(Unexpected<Error>(error_));
    }
  }
  /// f(Error) -> Result<void>, called only on an error.
  template <class F>
  constexpr Result or_else(F&& f) const {
    if (has_) return *this;
    return std::forward<F>(f)(error_);
  }
  /// f(Error) -> Error, called only on an error.
  template <class F>
  constexpr Result transform_error(F&& f) const {
    if (has_) return *this;
    return Result(Unexpected<Error>(std::forward<F>(f)(error_)));
  }

  friend constexpr bool operator==(const Result& a, const Result& b) {
    if (a.has_ != b.has_) return false;
    return a.has_ || a.error_ == b.error_;
  }
  template <class E>
  friend constexpr bool operator==(const Result& a, const Unexpected<E>& e) {
    return !a.has_ && a.error_ == e.error();
  }

 private:
  union {
    char none_;
    Error error_;
  };
  bool has_;
};

namespace detail {

/// A Result<T> built where the caller keeps it: `fill(T&)`, a Result<void>,
/// fills a default-constructed T in place, and the one named Result is
/// returned without a copy. For a Topology (1.2 KB) or a LaunchPlan
/// (3 KB), each copy on the way out is stack pages a short-lived process
/// touches (benchmarks/README.md, row S).
template <class T, class Fill>
constexpr Result<T> built_in_place(Fill&& fill) {
  Result<T> out;
  if (auto ok = std::forward<Fill>(fill)(*out); !ok) out = Unexpected<Error>(std::move(ok).error());
  return out;
}

/// `into = *read(args...)`, or read's error. Out of line: the Result `read`
/// returns is stack the caller's usual path does not touch.
template <class T, class Read, class... Args>
[[gnu::noinline]] Result<void> read_into(T& into, const Read& read, const Args&... args) {
  auto got = read(args...);
  if (!got) return Unexpected<Error>(std::move(got).error());
  into = std::move(*got);
  return {};
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff

/// Propagates an error: GPUAFF_TRY(auto x, expr); or GPUAFF_TRY_VOID(expr);
#define GPUAFF_CONCAT_IMPL(a, b) a##b
#define GPUAFF_CONCAT(a, b) GPUAFF_CONCAT_IMPL(a, b)
#define GPUAFF_TRY_IMPL(tmp, decl, expr)                               \
  auto tmp = (expr);                                                   \
  if (!tmp) return ::gpuaff::Unexpected<::gpuaff::Error>(std::move(tmp).error()); \
  decl = std::move(*tmp)
#define GPUAFF_TRY(decl, expr) GPUAFF_TRY_IMPL(GPUAFF_CONCAT(gpuaff_try_, __LINE__), decl, expr)
#define GPUAFF_TRY_VOID(expr)                                                                  \
  do {                                                                                         \
    auto gpuaff_try_void_ = (expr);                                                            \
    if (!gpuaff_try_void_) return ::gpuaff::Unexpected<::gpuaff::Error>(std::move(gpuaff_try_void_).error()); \
  } while (false)
