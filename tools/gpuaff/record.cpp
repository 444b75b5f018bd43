// SPDX-License-Identifier: Apache-2.0
// gpuaff record: copy the files gpuaff reads into a directory (or one tar
// file), to replay with --root DIR anywhere.
//
// The recording is made in a scratch directory beside the output and moved
// into place by one rename, so an output is whole or absent. The work runs in
// a child process: SIGINT, SIGTERM or SIGHUP stop it at once, wherever it is
// (nothing is held off for the whole recording), the parent removes the
// scratch directory and ends as the signal says. Only the rename is held off
// the signals, so it is never half done.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "commands.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/record/archive.hpp"
#include "gpuaff/record/record.hpp"
#include "output.hpp"

namespace gpuaff::cli {

namespace {

/// The signals that stop a recording: SIGINT, SIGTERM and SIGHUP, but not
/// one this process was started ignoring (a background job's SIGINT), which
/// it keeps ignoring.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    if (::sigaction(s, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(&set, s);
  }
  return set;
}

/// Holds off the stop signals while it lives: around the rename that puts
/// the recording in place, which then happens whole or not at all.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t set = stop_signals();
    ::sigprocmask(SIG_BLOCK, &set, &before_);
  }
  ~SignalsHeld() { ::sigprocmask(SIG_SETMASK, &before_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t before_{};
};

/// Makes the scratch folder (make_scratch; "" for none), runs `work` on it in
/// a child process and removes the folder once it has ended. A
/// stop signal the parent gets is passed on to the child, which ends at once
/// by it; then the parent, `scratch` removed, ends by the same signal. Returns
/// the child's exit code otherwise.
int run_stoppable(const std::function<Result<std::string>()>& make_scratch,
                  const std::function<int(const std::string&)>& work) {
  sigset_t wait_for = stop_signals();
  sigaddset(&wait_for, SIGCHLD);
  sigset_t before;
  ::sigprocmask(SIG_BLOCK, &wait_for, &before);
  // Made with the signals held, so that none can end record between making
  // the scratch folder and watching over it.
  auto made = make_scratch();
  if (!made) {
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    return report_error(made.error());
  }
  const std::string& scratch = *made;
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    int code = work(scratch);
    std::fflush(nullptr);
    ::_exit(code);
  }
  std::error_code ec;
  if (child < 0) {
    int e = errno;
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    if (!scratch.empty()) std::filesystem::remove_all(scratch, ec);
    return report_error(make_sys_error(Errc::system_error, e, "cannot start the recording: fork failed (",
                                       detail::errno_text(e), ")"));
  }
  int stop = 0;
  int status = 0;
  bool ended = false;
  while (!ended) {
    siginfo_t info{};
    int s = ::sigwaitinfo(&wait_for, &info);
    if (s < 0) continue;  // EINTR
    if (s == SIGCHLD) {
      ended = ::waitpid(child, &status, WNOHANG) == child;
    } else {
      stop = s;
      ::kill(child, s);
    }
  }
  if (!scratch.empty()) std::filesystem::remove_all(scratch, ec);
  int by = stop != 0 ? stop : WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (by != 0 && sigismember(&wait_for, by) == 1 && by != SIGCHLD) {
    // End as the signal says (the shell prints nothing and $? is 128 + N).
    ::signal(by, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, by);
    ::raise(by);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return report_error(make_error(Errc::system_error, "the recording ended by signal ", WTERMSIG(status), " (",
                                 strsignal(WTERMSIG(status)), "); nothing was written"));
}

/// What the reader assumed about the recorded root, one "gpuaff: note:" line
/// each on stderr: the recording holds the files as they are.
void print_notes(const RecordSummary& summary) {
  for (const auto& n : summary.topology.notes) print_line(stderr, "gpuaff: note: " + n);
}

std::string recorded_line(const RecordSummary& summary, const RecordArgs& args) {
  return "recorded " + std::to_string(summary.files) + " files and " + std::to_string(summary.symlinks) +
         " symlinks from " + args.root + " into " + args.out + "; replay with: gpuaff topo --root " +
         shell_quote(args.out) + "\n";
}

/// A scratch directory beside `out` (in its directory, so a rename moves it
/// into place), or an error already reported.
Result<std::string> scratch_beside(const std::string& out) {
  std::filesystem::path parent = std::filesystem::path(out).parent_path();
  std::string scratch = (parent.empty() ? std::filesystem::path(".") : parent) / ".gpuaff-record-XXXXXX";
  if (::mkdtemp(scratch.data()) == nullptr)
    return fail(Errc::io_error, "cannot create a scratch directory beside '", out, "': ", detail::errno_text(errno),
                "; check that its directory exists and is writable");
  return scratch;
}

/// Renames `from` to `to`, the stop signals held off: `to` is replaced only
/// with `replace` (else an existing one is an error, as it was when checked).
int commit(const std::string& from, const std::string& to, bool replace) {
  SignalsHeld held;
  if (!replace) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL) return errno;
    // A filesystem without RENAME_NOREPLACE: checked, then renamed.
    struct stat st {};
    if (::lstat(to.c_str(), &st) == 0) return EEXIST;
  }
  return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

/// `record --out FILE.tar`: the recording is made in the scratch directory,
/// written into a tar file there, and that file renamed to FILE.tar.
int record_to_tar(const RecordArgs& args, const std::vector<PciAddress>& extra) {
  std::error_code ec;
  auto existing = std::filesystem::symlink_status(args.out, ec);
  if (std::filesystem::is_directory(existing))
    return report_error(make_error(Errc::invalid_argument, "output '", args.out, "' is a directory; name a .tar file"));
  if (std::filesystem::exists(existing) && !args.force)
    return report_error(make_error(Errc::invalid_argument, "output '", args.out,
                                   "' exists; choose a new name, or pass force=true to overwrite it"));
  return run_stoppable([&] { return scratch_beside(args.out); }, [&](const std::string& scratch) {
    std::string tree = scratch + "/tree";
    std::string tar_file = scratch + "/recording.tar";
    auto summary = record_topology(RecordOptions{.out_dir = tree,
                                                 .root = args.root,
                                                 .extra_pci = extra,
                                                 .probe_device_nodes = device_nodes_probe_due(process_environment())});
    if (!summary) return report_error(summary.error());
    auto tar = write_tar(tree, tar_file);
    if (!tar) return report_error(tar.error());
    if (int e = commit(tar_file, args.out, args.force); e != 0)
      return report_error(make_sys_error(Errc::io_error, e, "cannot put the recording in place as '", args.out, "': ",
                                         detail::errno_text(e),
                                         e == EEXIST ? "; it appeared meanwhile: choose a new name, or pass force=true"
                                                     : "; check that its directory is writable"));
    print_notes(*summary);
    return write_result(recorded_line(*summary, args));
  });
}

}  // namespace

int run_record(const RecordArgs& args) {
  std::vector<PciAddress> extra;
  for (const auto& text : args.pci) {
    auto a = PciAddress::parse(text);
    if (!a) return report_error(make_error(Errc::invalid_argument, "--pci: ", a.error().message()));
    extra.push_back(*a);
  }
  if (args.out.ends_with(".tar")) return record_to_tar(args, extra);
  std::error_code ec;
  bool non_empty = std::filesystem::is_directory(args.out, ec) && !std::filesystem::is_empty(args.out, ec);
  if (!args.force && non_empty) {
    return report_error(make_error(Errc::invalid_argument, "output directory '", args.out,
                                   "' is not empty; choose a new directory, or pass --force to write into it"));
  }
  RecordOptions options{.out_dir = args.out,
                        .root = args.root,
                        .extra_pci = extra,
                        .allow_non_empty = args.force,
                        .probe_device_nodes = device_nodes_probe_due(process_environment())};
  // The checks record_topology makes (a tar file as the root, an output that
  // is not a directory), before anything is made.
  if (auto checked = detail::check_record_paths(options); !checked) return report_error(checked.error());
  auto record = [&options, &args] {
    auto summary = record_topology(options);
    if (!summary) return report_error(summary.error());
    print_notes(*summary);
    return write_result(recorded_line(*summary, args));
  };
  // --force into a folder with entries: the files go in among them (an
  // interrupted recording leaves those it wrote). Otherwise the recording is
  // made beside DIR and renamed to it (an empty DIR is replaced).
  if (non_empty)  // no scratch folder of its own
    return run_stoppable([] { return Result<std::string>(std::string()); }, [&](const std::string&) { return record(); });
  // An empty DIR that exists (through a link too, as --out may name one) is
  // replaced by the recording, which keeps its permissions.
  std::string target = args.out;
  while (target.size() > 1 && target.back() == '/') target.pop_back();  // "rec/" is the folder rec
  struct stat existing {};
  bool was_dir = ::stat(args.out.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode);
  if (was_dir) {
    auto real = std::filesystem::canonical(args.out, ec);
    if (!ec) target = real.string();
  }
  std::filesystem::path parent = std::filesystem::path(target).parent_path();
  if (!parent.empty()) {
    if (int e = detail::make_directories(parent.string()); e != 0)
      return report_error(make_sys_error(Errc::io_error, e, "cannot create directory '", parent.string(), "' (",
                                         detail::errno_text(e), "); check that the output directory is writable"));
  }
  return run_stoppable([&] { return scratch_beside(target); }, [&](const std::string& scratch) {
    std::string tree = scratch + "/tree";
    options.out_dir = tree;
    options.allow_non_empty = false;
    auto summary = record_topology(options);
    if (!summary) return report_error(summary.error());
    if (was_dir) ::chmod(tree.c_str(), existing.st_mode & 07777);
    if (int e = commit(tree, target, true); e != 0)
      return report_error(make_sys_error(Errc::io_error, e, "cannot put the recording in place as '", args.out, "': ",
                                         detail::errno_text(e),
                                         e == ENOTEMPTY || e == EEXIST
                                             ? "; something was written into it meanwhile: choose a new directory"
                                             : "; check that its directory is writable"));
    print_notes(*summary);
    return write_result(recorded_line(*summary, args));
  });
}

}  // namespace gpuaff::cli
