// SPDX-License-Identifier: Apache-2.0
#pragma once
// A real refusal of one system call, as a container's seccomp profile makes
// it (docker's default answers EPERM to the memory policy calls without
// CAP_SYS_NICE). Call it in a forked child: a filter cannot be removed.

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpuaff_test {

/// Makes system call `nr` fail with `err` for the rest of this process.
/// Returns 0, or 10 (no_new_privs refused) / 11 (seccomp refused): the exit
/// codes a child reports when the machine offers no filters (the caller then
/// skips). x86-64 only (the filter does not check the architecture).
inline int refuse_syscall(long nr, int err) {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 10;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return 11;
  return 0;
}

}  // namespace gpuaff_test
