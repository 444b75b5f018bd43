# SPDX-License-Identifier: Apache-2.0
# The README's C++ example must be examples/quickstart.cpp exactly, so that the
# code people copy is the code the build compiles and the tests run.
# Usage: cmake -DREADME=... -DEXAMPLE=... -P readme_snippet.cmake
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "```cpp\n" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "${README} has no ```cpp block; it should show ${EXAMPLE}")
endif()
math(EXPR begin "${begin} + 7")
string(SUBSTRING "${readme}" ${begin} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} snippet)
if(NOT snippet STREQUAL example)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/readme_snippet.cpp" "${snippet}")
  message(FATAL_ERROR "the README's C++ block differs from ${EXAMPLE}; copy the file into the README "
                      "(diff ${CMAKE_CURRENT_BINARY_DIR}/readme_snippet.cpp ${EXAMPLE})")
endif()
