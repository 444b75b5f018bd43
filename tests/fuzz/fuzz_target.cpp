// libFuzzer target (clang -fsanitize=fuzzer): every parser and the sysfs reader.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gpuaff_fuzz::fuzz_one(data, size);
}
