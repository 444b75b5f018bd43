// SPDX-License-Identifier: Apache-2.0
#pragma once
// errno values as people read them: "EFBIG (File too large)", not "errno 27".
// Every error message that carries a system call's errno spells it this way.

#include <string.h>

#include <cerrno>
#include <string>

namespace gpuaff {
inline namespace v0 {
namespace detail {

/// Returned by the file layer (detail/fs.hpp) for a path that is not a regular
/// file: a FIFO, socket or device (a directory gives EISDIR). Above every errno
/// the kernel can return (they end at 4095), so it is never mistaken for one.
inline constexpr int not_regular_file = 4096;

/// The symbolic name of an errno value ("EINVAL"); "errno N" for one the C
/// library does not know.
inline std::string errno_name(int e) {
  if (e == not_regular_file) return "not a regular file";
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* name = ::strerrorname_np(e); name != nullptr) return name;
#else
  switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case ENOEXEC: return "ENOEXEC";
    case ECHILD: return "ECHILD";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC";
    case EROFS: return "EROFS";
    case EFBIG: return "EFBIG";
    case ENOSYS: return "ENOSYS";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    default: break;
  }
#endif
  return std::string("errno ") + std::to_string(e);
}

/// "EFBIG (File too large)": the name and the C library's description.
inline std::string errno_text(int e) {
  if (e == not_regular_file) return "not a regular file: a FIFO, socket or device";
  std::string s = errno_name(e);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* desc = ::strerrordesc_np(e);  // not translated and thread-safe, unlike strerror
#else
  const char* desc = ::strerror(e);
#endif
  if (desc != nullptr) {
    s += " (";
    s += desc;
    s += ')';
  }
  return s;
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
