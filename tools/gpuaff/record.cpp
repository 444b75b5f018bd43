// SPDX-License-Identifier: Apache-2.0
// gpuaff record: copy the files gpuaff reads into a directory (or one tar
// file), to replay with --root DIR anywhere.
#include <signal.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "commands.hpp"
#include "gpuaff/launch/front.hpp"
#include "gpuaff/record/archive.hpp"
#include "gpuaff/record/record.hpp"
#include "output.hpp"

namespace gpuaff::cli {

namespace {

/// Holds off SIGINT, SIGTERM and SIGHUP while it lives: a signal that comes
/// while the scratch recording exists is delivered once it has been removed,
/// so an interrupted `record` leaves nothing behind and still ends as the
/// signal says.
class SignalsHeld {
 public:
  SignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    ::sigprocmask(SIG_BLOCK, &set, &before_);
  }
  ~SignalsHeld() { ::sigprocmask(SIG_SETMASK, &before_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t before_{};
};

/// What the reader assumed about the recorded root, one "gpuaff: note:" line
/// each on stderr: the recording holds the files as they are.
void print_notes(const RecordSummary& summary) {
  for (const auto& n : summary.topology.notes) print_line(stderr, "gpuaff: note: " + n);
}

/// `record --out FILE.tar`: the recording is made in a scratch directory beside
/// FILE.tar, written into that one tar file, and the directory removed.
int record_to_tar(const RecordArgs& args, const std::vector<PciAddress>& extra) {
  SignalsHeld held;
  std::filesystem::path parent = std::filesystem::path(args.out).parent_path();
  std::string scratch = (parent.empty() ? std::filesystem::path(".") : parent) / ".gpuaff-record-XXXXXX";
  if (::mkdtemp(scratch.data()) == nullptr) {
    return report_error(make_error(Errc::io_error, "cannot create a scratch directory beside '", args.out,
                                   "': ", detail::errno_text(errno)));
  }
  auto summary = record_topology(RecordOptions{.out_dir = scratch,
                                               .root = args.root,
                                               .extra_pci = extra,
                                               .probe_device_nodes = device_nodes_probe_due(process_environment())});
  auto tar = summary ? write_tar(scratch, args.out, args.force) : Result<TarSummary>(unexpected(summary.error()));
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  if (!tar) return report_error(tar.error());
  print_notes(*summary);
  return write_result("recorded " + std::to_string(summary->files) + " files and " + std::to_string(summary->symlinks) +
                      " symlinks from " + args.root + " into " + args.out + "; replay with: gpuaff topo --root " +
                      shell_quote(args.out) + "\n");
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
  if (!args.force && std::filesystem::is_directory(args.out, ec) && !std::filesystem::is_empty(args.out, ec)) {
    return report_error(make_error(Errc::invalid_argument, "output directory '", args.out,
                                   "' is not empty; choose a new directory, or pass --force to write into it"));
  }
  auto summary = record_topology(RecordOptions{
      .out_dir = args.out,
      .root = args.root,
      .extra_pci = extra,
      .allow_non_empty = args.force,
      .probe_device_nodes = device_nodes_probe_due(process_environment())});
  if (!summary) return report_error(summary.error());
  print_notes(*summary);
  return write_result("recorded " + std::to_string(summary->files) + " files and " + std::to_string(summary->symlinks) +
                      " symlinks from " + args.root + " into " + args.out + "; replay with: gpuaff topo --root " +
                      shell_quote(args.out) + '\n');
}

}  // namespace gpuaff::cli
