// SPDX-License-Identifier: Apache-2.0
#pragma once
// Starting a bound child process. The calling thread is bound under a
// ScopedAffinity, the child is created (posix_spawnp for a command, fork for a
// callable) and so runs on its CPUs from its first instruction, then the guard
// restores the thread. Other threads may spawn at the same time under other
// masks: affinity is per thread, and a child inherits the mask of the thread
// that created it.
//
// No shell is involved: a command is an argv vector, looked up in PATH.
//
// spawn_callable forks without exec. In a multithreaded parent only the
// forking thread exists in the child and locks held by other threads stay
// held: keep the callable simple (system calls, no locks other threads may
// hold, no new threads). glibc makes malloc usable in the child. The child
// ends with _exit, so stdio buffers are not flushed for it: flush what it
// writes. ThreadSanitizer builds inherit the same rules.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <csignal>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpuaff/apply/affinity.hpp"
#include "gpuaff/apply/fallback.hpp"
#include "gpuaff/apply/mempolicy.hpp"
#include "gpuaff/apply/scoped_affinity.hpp"
#include "gpuaff/cpu_set.hpp"
#include "gpuaff/result.hpp"

extern char** environ;  // NOLINT: POSIX

namespace gpuaff {
inline namespace v0 {

struct SpawnOptions {
  CpuSet cpus{};           ///< the child's CPUs; empty: the creating thread's current mask
  MemoryOptions memory{};  ///< the child's memory policy
  Fallback fallback = Fallback::error;
  int stdin_fd = -1;   ///< becomes the child's stdin; -1: inherit
  int stdout_fd = -1;  ///< becomes the child's stdout; -1: inherit
  int stderr_fd = -1;  ///< becomes the child's stderr; -1: inherit
};

/// How a child ended.
struct ExitStatus {
  int exit_code = -1;      ///< 0..255 when it exited, -1 when a signal ended it
  int signal = 0;          ///< the terminating signal, or 0
  bool threw = false;      ///< spawn_callable: the callable threw (exit_code is then 1)
  std::string exception;   ///< spawn_callable: what() of what it threw
  bool success() const { return exit_code == 0 && signal == 0 && !threw; }
};

class Child;

template <class = void>
Result<Child> spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

namespace detail {
template <class Body>
Result<Child> spawn_forked(Body& body, const SpawnOptions& options);
}  // namespace detail

/// A started child. wait() reaps it and says how it ended. A Child dropped
/// without wait() is waited for by its destructor, as std::jthread joins: no
/// child is left a zombie, and a parent that returns early (an error while
/// starting the next worker) does not leave its workers running unsupervised.
/// To stop a child rather than wait for it, kill() it first.
class Child {
 public:
  Child(Child&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        report_fd_(std::exchange(o.report_fd_, -1)),
        cpus_(o.cpus_),
        bound_(o.bound_),
        warnings_(std::move(o.warnings_)) {}
  Child& operator=(Child&& o) noexcept {
    if (this != &o) {
      reap();
      pid_ = std::exchange(o.pid_, -1);
      report_fd_ = std::exchange(o.report_fd_, -1);
      cpus_ = o.cpus_;
      bound_ = o.bound_;
      warnings_ = std::move(o.warnings_);
    }
    return *this;
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { reap(); }

  pid_t pid() const { return pid_; }
  /// Whether the child started under the requested binding (false after Fallback::unbound).
  bool bound() const { return bound_; }
  /// The CPUs the child started on (the requested set when bound()).
  const CpuSet& cpus() const { return cpus_; }
  /// Why the binding was not (fully) applied.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Whether the child has not been waited for yet.
  bool running() const { return pid_ > 0; }

  /// Sends `signal` (SIGTERM, SIGKILL, ...) to the child; wait() still reaps it.
  /// Errors: Errc::invalid_argument when already waited for; Errc::system_error
  /// when kill(2) fails.
  Result<void> kill(int signal) {
    if (pid_ <= 0) return fail(Errc::invalid_argument, "this child was already waited for");
    if (::kill(pid_, signal) != 0) {
      int e = errno;
      return Unexpected(make_sys_error(Errc::system_error, e, "kill(", pid_, ", ", signal, ") failed (",
                                       detail::errno_text(e), ")"));
    }
    return {};
  }

  /// Waits for the child to end and reaps it.
  /// Errors: Errc::invalid_argument when already waited for;
  /// Errc::system_error when waitpid fails.
  Result<ExitStatus> wait() {
    if (pid_ <= 0) return fail(Errc::invalid_argument, "this child was already waited for");
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      int e = errno;
      return Unexpected(make_sys_error(Errc::system_error, e, "waitpid(", pid_, ") failed (", detail::errno_text(e), ")"));
    }
    pid_ = -1;
    ExitStatus out;
    if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
    if (report_fd_ >= 0) {
      // The child has exited: what it wrote is in the pipe. Non-blocking, in
      // case a grandchild still holds the write end.
      std::string text;
      char buf[512];
      while (true) {
        ssize_t n = ::read(report_fd_, buf, sizeof buf);
        if (n > 0) {
          text.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
      }
      close_report();
      if (!text.empty() && text[0] == 'E') {
        out.threw = true;
        out.exception = text.substr(1);
      }
    }
    return out;
  }

 private:
  template <class>
  friend Result<Child> spawn(const std::vector<std::string>&, const SpawnOptions&);
  template <class Body>
  friend Result<Child> detail::spawn_forked(Body&, const SpawnOptions&);
  Child() = default;
  /// The destructor's wait: reaps a child still running, ignoring the outcome.
  void reap() noexcept {
    if (pid_ > 0) (void)wait();
    close_report();
  }
  void close_report() {
    if (report_fd_ >= 0) ::close(report_fd_);
    report_fd_ = -1;
  }

  pid_t pid_ = -1;
  int report_fd_ = -1;
  CpuSet cpus_{};
  bool bound_ = false;
  std::vector<std::string> warnings_;
};

/// Waits for every child in order. Errors: the first Child::wait error.
template <class = void>
Result<std::vector<ExitStatus>> wait_all(std::vector<Child>& children) {
  std::vector<ExitStatus> out;
  out.reserve(children.size());
  for (auto& c : children) {
    GPUAFF_TRY(ExitStatus s, c.wait());
    out.push_back(std::move(s));
  }
  return out;
}

namespace detail {

/// Binds the calling thread for the duration of a spawn, applying Fallback.
/// Fills the child's CPUs, bound flag and warnings; the optional is empty when
/// nothing had to be bound or the fallback chose to run unbound.
template <class = void>
Result<std::optional<ScopedAffinity>> bind_for_spawn(const SpawnOptions& o, CpuSet& cpus, bool& bound,
                                                     std::vector<std::string>& warnings) {
  CpuSet want = o.cpus;
  if (want.empty() && o.memory.policy == MemPolicy::none) {
    GPUAFF_TRY(cpus, thread_affinity());
    bound = true;
    return std::optional<ScopedAffinity>{};
  }
  if (want.empty()) {
    GPUAFF_TRY(want, thread_affinity());
  }
  auto guard = ScopedAffinity::create(want, o.memory);
  if (!guard) {
    if (o.fallback == Fallback::error) return Unexpected(guard.error());
    warnings.push_back(std::string("started unbound: ") + std::string(guard.error().message()));
    GPUAFF_TRY(cpus, thread_affinity());
    bound = false;
    return std::optional<ScopedAffinity>{};
  }
  for (const auto& w : guard->warnings()) warnings.push_back(w);
  cpus = want;
  bound = true;
  return std::optional<ScopedAffinity>(std::move(*guard));
}

template <class = void>
Error spawn_error(const std::string& file, int e) {
  if (e == ENOENT)
    return make_sys_error(Errc::not_found, e, "command '", file, "' not found (ENOENT); check the name and PATH");
  if (e == EACCES) return make_sys_error(Errc::permission_denied, e, "command '", file, "' is not executable (EACCES)");
  return make_sys_error(Errc::system_error, e, "cannot start '", file, "' (", errno_text(e), ")");
}

}  // namespace detail

/// Starts `argv[0]` (looked up in PATH) with `argv`, bound as `options` says;
/// the calling thread's mask is the same afterwards.
/// Errors: Errc::invalid_argument (empty argv), Errc::not_found (no such
/// command), Errc::permission_denied, Errc::system_error; binding errors as
/// ScopedAffinity::create when options.fallback is Fallback::error.
template <class>
Result<Child> spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) return fail(Errc::invalid_argument, "spawn needs a command (argv is empty)");
  Child child;
  GPUAFF_TRY(std::optional<ScopedAffinity> guard,
             detail::bind_for_spawn(options, child.cpus_, child.bound_, child.warnings_));
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  if (int e = posix_spawn_file_actions_init(&actions); e != 0)
    return Unexpected(make_sys_error(Errc::system_error, e, "cannot prepare the redirections of '", argv[0], "' (",
                                     detail::errno_text(e), ")"));
  const int fds[3] = {options.stdin_fd, options.stdout_fd, options.stderr_fd};
  // A redirection that cannot be set up stops the spawn: a child started with
  // the inherited stream instead would write where it must not.
  for (int target = 0; target < 3; ++target) {
    if (fds[target] < 0) continue;
    if (int e = posix_spawn_file_actions_adddup2(&actions, fds[target], target); e != 0) {
      posix_spawn_file_actions_destroy(&actions);
      return Unexpected(make_sys_error(Errc::invalid_argument, e, "cannot give '", argv[0], "' file descriptor ",
                                       fds[target], " as its fd ", target, " (", detail::errno_text(e), ")"));
    }
  }
  pid_t pid = -1;
  int e = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (e != 0) return Unexpected(detail::spawn_error(argv[0], e));
  child.pid_ = pid;
  return child;  // the guard restores the thread here
}

namespace detail {

/// spawn_callable once the callable is checked: forks a child that runs
/// body() and exits with its value.
template <class Body>
Result<Child> spawn_forked(Body& body, const SpawnOptions& options) {
  Child child;
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    int e = errno;
    return Unexpected(make_sys_error(Errc::system_error, e, "cannot create a pipe for the child (", detail::errno_text(e), ")"));
  }
  auto guard = detail::bind_for_spawn(options, child.cpus_, child.bound_, child.warnings_);
  if (!guard) {
    ::close(report[0]);
    ::close(report[1]);
    return Unexpected(guard.error());
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    // The streams the options name, as spawn() gives them; a failed dup2
    // ends the child with 127 before the callable runs.
    const int fds[3] = {options.stdin_fd, options.stdout_fd, options.stderr_fd};
    for (int target = 0; target < 3; ++target)
      if (fds[target] >= 0 && fds[target] != target && ::dup2(fds[target], target) < 0) ::_exit(127);
    // The text is written inside the handler: what() dies with the exception.
    auto report_exception = [fd = report[1]](const char* what) {
      // One write below PIPE_BUF: atomic, and never blocks on a full pipe.
      char msg[4000];
      msg[0] = 'E';
      std::size_t n = ::strnlen(what, sizeof msg - 1);
      std::memcpy(msg + 1, what, n);
      ssize_t w = ::write(fd, msg, n + 1);
      (void)w;
    };
    int code = 1;
    try {
      code = body() & 0xff;
    } catch (const std::exception& ex) {
      report_exception(ex.what());
      code = 1;
    } catch (...) {
      report_exception("an exception not derived from std::exception");
      code = 1;
    }
    ::_exit(code);
  }
  int e = errno;
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    return Unexpected(make_sys_error(Errc::system_error, e, "fork failed (", detail::errno_text(e), ")"));
  }
  ::fcntl(report[0], F_SETFL, O_NONBLOCK);
  child.pid_ = pid;
  child.report_fd_ = report[0];
  return child;
}

}  // namespace detail

/// Forks a child that runs `fn` bound as `options` says and exits with its
/// return value (0..255). `fn` is any callable taking no argument and
/// returning an int: a lambda, a function pointer, a std::function. If `fn`
/// throws, the child exits with 1 and Child::wait reports threw and the
/// exception text. See the header comment for what a callable may do in a
/// forked child of a multithreaded parent.
/// Errors: Errc::invalid_argument (a null function pointer or an empty
/// std::function), Errc::system_error (pipe, fork); binding errors as
/// ScopedAffinity::create under Fallback::error.
template <class F>
  requires std::is_invocable_r_v<int, F&>
Result<Child> spawn_callable(F&& fn, const SpawnOptions& options = {}) {
  using Fn = std::remove_reference_t<F>;
  bool empty = false;
  if constexpr (std::is_pointer_v<std::remove_cv_t<Fn>>) {
    empty = fn == nullptr;
  } else if constexpr (requires { fn.operator bool(); }) {  // std::function and the like
    empty = !static_cast<bool>(fn);
  }
  if (empty) return fail(Errc::invalid_argument, "spawn_callable needs a function (got an empty one)");
  // By reference: the callable runs in the forked copy of this process, so
  // it is neither copied nor moved, and move-only callables work.
  auto body = [&fn]() -> int { return static_cast<int>(fn()); };
  return detail::spawn_forked(body, options);
}

}  // namespace v0
}  // namespace gpuaff
