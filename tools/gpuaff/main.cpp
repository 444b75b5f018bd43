// gpuaff: the command-line tool (work in progress).
#include <CLI/CLI.hpp>

#include "gpuaff/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gpuaff: bind GPU processes to the right CPUs and NUMA memory", "gpuaff"};
  app.set_version_flag("--version", gpuaff::version_string);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
