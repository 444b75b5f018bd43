// gpuaff record: copy the files gpuaff reads into a directory, to replay
// with --root DIR anywhere.
#include <filesystem>

#include "commands.hpp"
#include "gpuaff/record/record.hpp"
#include "output.hpp"

namespace gpuaff::cli {

int run_record(const RecordArgs& args) {
  std::vector<PciAddress> extra;
  for (const auto& text : args.pci) {
    auto a = PciAddress::parse(text);
    if (!a) return report_error(make_error(Errc::invalid_argument, "--pci: ", a.error().message()));
    extra.push_back(*a);
  }
  std::error_code ec;
  if (!args.force && std::filesystem::is_directory(args.out, ec) && !std::filesystem::is_empty(args.out, ec)) {
    return report_error(make_error(Errc::invalid_argument, "output directory '", args.out,
                                   "' is not empty; choose a new directory, or pass --force to write into it"));
  }
  auto summary = record_topology(RecordOptions{
      .out_dir = args.out, .root = args.root, .extra_pci = extra, .allow_non_empty = args.force});
  if (!summary) return report_error(summary.error());
  write_stdout("recorded " + std::to_string(summary->files) + " files and " + std::to_string(summary->symlinks) +
               " symlinks from " + args.root + " into " + args.out + "; replay with: gpuaff topo --root " + args.out +
               '\n');
  return exit_ok;
}

}  // namespace gpuaff::cli
