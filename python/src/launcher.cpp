// SPDX-License-Identifier: Apache-2.0
// gpuaff-python: the executable given to multiprocessing.set_executable (see
// gpuaff.use_executable). It binds this process to the CPUs (and memory) the
// parent planned, then replaces itself with the Python interpreter, with the
// same arguments: the interpreter's first instruction already runs bound, so
// nothing Python imports (and no thread it starts) runs elsewhere. No shell,
// no temporary file, no numactl.
//
// The parent sets, in the environment the child inherits:
//   GPUAFF_PYTHON   the interpreter to run (sys.executable)
//   GPUAFF_CPUS     the CPUs, as a cpulist ("0-3,8")
//   GPUAFF_MEMBIND  optional: none, local, bind, preferred or interleave
//   GPUAFF_MEMS     the memory nodes as a list, when GPUAFF_MEMBIND is not none
// A missing or bad value is an error (exit 2): never an unbound child.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gpuaff/apply/process.hpp"
#include "gpuaff/launch/choices.hpp"

namespace {

int fail(std::string_view message) {
  std::fprintf(stderr, "gpuaff-python: %.*s\n", static_cast<int>(message.size()), message.data());
  return 2;
}

const char* variable(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuaff;
  const char* python = variable("GPUAFF_PYTHON");
  const char* cpus_text = variable("GPUAFF_CPUS");
  if (python == nullptr || cpus_text == nullptr)
    return fail("GPUAFF_PYTHON and GPUAFF_CPUS must be set; start this program through "
                "multiprocessing after gpuaff.use_executable(), which sets them");
  auto cpus = CpuSet::parse_list(cpus_text);
  if (!cpus) return fail("GPUAFF_CPUS: " + std::string(cpus.error().message()));
  MemoryOptions memory;
  if (const char* word = variable("GPUAFF_MEMBIND")) {
    auto policy = parse_choice("GPUAFF_MEMBIND", word, membind_choices);
    if (!policy)
      return fail("GPUAFF_MEMBIND '" + std::string(word).substr(0, 40) + "' is not valid; use " +
                  choice_names(membind_choices, "|"));
    memory.policy = *policy;
  }
  if (memory.policy != MemPolicy::none) {
    const char* mems = variable("GPUAFF_MEMS");
    auto nodes = CpuSet::parse_list(mems != nullptr ? mems : "");
    if (!nodes) return fail("GPUAFF_MEMS: " + std::string(nodes.error().message()));
    memory.nodes = *nodes;
  }
  auto bound = bind_process(*cpus, memory);
  if (!bound) return fail(bound.error().message());

  std::vector<char*> args{const_cast<char*>(python)};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(python, args.data());
  int e = errno;
  return fail(std::string("cannot run GPUAFF_PYTHON='") + python + "' (" + std::strerror(e) +
              "); set it to a Python interpreter");
}
