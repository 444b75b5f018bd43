// SPDX-License-Identifier: Apache-2.0
// libFuzzer target (clang -fsanitize=fuzzer): every parser, the sysfs reader,
// the recorder and the JSON source (fuzz_entry.hpp). GPUAFF_FUZZ_SELECT=N in
// the environment fixes the first byte to N, so that one run explores one of
// them (tools/fuzz.sh runs each in turn).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_entry.hpp"

namespace {
int selected = -1;  // the fixed first byte, or -1: the input's own
}

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (const char* s = std::getenv("GPUAFF_FUZZ_SELECT"); s != nullptr && *s != '\0') {
    char* end = nullptr;
    long v = std::strtol(s, &end, 0);
    if (*end != '\0' || v < 0 || v > 255) std::abort();  // a typo must not fuzz something else
    selected = static_cast<int>(v);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (selected < 0) return gpuaff_fuzz::fuzz_one(data, size);
  std::vector<std::uint8_t> input(size + 1);
  input[0] = static_cast<std::uint8_t>(selected);
  for (std::size_t i = 0; i < size; ++i) input[i + 1] = data[i];
  return gpuaff_fuzz::fuzz_one(input.data(), input.size());
}
