// SPDX-License-Identifier: Apache-2.0
#pragma once
// A plan applied in-process, where another process can read it.
//
// `gpuaff exec` hands its plan to the program it runs in the environment it
// execs (GPUAFF_PLAN), which /proc/PID/environ shows to `gpuaff doctor`. A
// process that binds itself (Python's gpuaff.bind(), a C++ trainer calling
// launch()) cannot do that: /proc/PID/environ is the environment the process
// was exec'd with, and setenv() afterwards never reaches it. So such a process
// also publishes the plan in an anonymous file of its own: a memfd named
// "gpuaff-plan", holding the GPUAFF_PLAN value, sealed against change.
//
// Why a memfd, rather than a file in a runtime directory:
//   - it lives and dies with the process: nothing is left behind when the
//     process is killed, and a reused pid can never show another process's plan;
//   - it is read through /proc/PID/fd/N, which the kernel lets exactly the
//     processes read that may read /proc/PID/environ (the same ptrace access
//     check), so a doctor on the host sees a containerised rank's plan as it
//     sees its environment, whatever mount namespace the rank has;
//   - nothing is written anywhere; no directory to create, share or clean.
// The reader trusts it no more than GPUAFF_PLAN: the value must parse as a plan
// gpuaff wrote (parse_plan_variable), and the file must be a sealed memfd of
// that name. It is opened close-on-exec: a program the process execs carries
// GPUAFF_PLAN in its environment instead; a child forked without exec keeps
// the binding and the file, and is seen with the same plan.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <optional>
#include <string>
#include <string_view>

#include "gpuaff/detail/errno.hpp"
#include "gpuaff/result.hpp"

namespace gpuaff {
inline namespace v0 {

/// The memfd's name; /proc/PID/fd/N of it reads "/memfd:gpuaff-plan (deleted)".
inline constexpr std::string_view published_plan_name = "gpuaff-plan";

/// The longest published value a reader takes (a GPUAFF_PLAN of 4096 CPUs in
/// single ranges is some 20 KB).
inline constexpr std::size_t published_plan_max = 64 * 1024;

namespace detail {
/// This process's published memfd, -1 when none.
inline std::atomic<int>& published_plan_fd() {
  static std::atomic<int> fd{-1};
  return fd;
}
}  // namespace detail

/// Publishes `value` (a GPUAFF_PLAN value) as this process's plan, replacing
/// what it published before.
/// Errors: Errc::io_error with the system's reason (memfd_create refused: a
/// kernel before 3.17, or a seccomp filter); what was published before stays.
inline Result<void> publish_plan_value(std::string_view value) {
  int fd = ::memfd_create(std::string(published_plan_name).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    int e = errno;
    return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot publish the plan for gpuaff doctor (memfd_create: ",
                                            detail::errno_text(e), ")"));
  }
  for (std::size_t done = 0; done < value.size();) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      ::close(fd);
      return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot publish the plan for gpuaff doctor (write: ",
                                              detail::errno_text(e), ")"));
    }
    done += static_cast<std::size_t>(n);
  }
  // Sealed: neither this process nor anyone holding the file can change it.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    int e = errno;
    ::close(fd);
    return Unexpected<Error>(make_sys_error(Errc::io_error, e, "cannot publish the plan for gpuaff doctor (sealing: ",
                                            detail::errno_text(e), ")"));
  }
  int old = detail::published_plan_fd().exchange(fd);
  if (old >= 0) ::close(old);
  return {};
}

/// Withdraws what this process published (nothing when it published nothing).
inline void withdraw_published_plan() {
  int old = detail::published_plan_fd().exchange(-1);
  if (old >= 0) ::close(old);
}

/// The plan process `pid` published (publish_plan_value), or nullopt when it
/// published none, has ended, or may not be read by this process (the same
/// rule as its environ). A file of that name that is not a sealed memfd of at
/// most published_plan_max bytes is not taken.
inline std::optional<std::string> published_plan_value(int pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::nullopt;
  const std::string want = "/memfd:" + std::string(published_plan_name) + " (deleted)";
  std::optional<std::string> found;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string path = dir + "/" + e->d_name;
    char target[128];
    ssize_t n = ::readlink(path.c_str(), target, sizeof target);
    if (n <= 0 || static_cast<std::size_t>(n) != want.size() || std::string_view(target, static_cast<std::size_t>(n)) != want)
      continue;
    // /proc/PID/fd/N is the kernel's link to the open file itself: opening it
    // opens that memfd, whatever its name says (O_NONBLOCK: never waits).
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) continue;
    struct stat st {};
    int seals = ::fcntl(fd, F_GET_SEALS);
    bool sealed = seals >= 0 && (seals & F_SEAL_WRITE) != 0 && (seals & F_SEAL_GROW) != 0;
    if (sealed && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        static_cast<std::size_t>(st.st_size) <= published_plan_max) {
      std::string value(static_cast<std::size_t>(st.st_size), '\0');
      std::size_t got = 0;
      while (got < value.size()) {
        ssize_t r = ::pread(fd, value.data() + got, value.size() - got, static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<std::size_t>(r);
      }
      if (got == value.size()) found = std::move(value);
    }
    ::close(fd);
    if (found) break;
  }
  ::closedir(d);
  return found;
}

}  // namespace v0
}  // namespace gpuaff
