# SPDX-License-Identifier: Apache-2.0
# Compiles a TU that includes the umbrella header with -std=c++17 and checks
# that the compiler's first error is gpuaff's one line saying it needs C++20.
# cmake -DCXX=... -DINCLUDE_DIR=... -DWORK_DIR=... -P cxx17_error.cmake
file(WRITE "${WORK_DIR}/cxx17_umbrella.cpp" "#include <gpuaff/gpuaff.hpp>\nint main() { return 0; }\n")
execute_process(
  COMMAND "${CXX}" -std=c++17 -fsyntax-only "-I${INCLUDE_DIR}" "${WORK_DIR}/cxx17_umbrella.cpp"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err
  OUTPUT_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "the umbrella header compiled under -std=c++17; it must stop with an error")
endif()
string(REPLACE "\n" ";" lines "${out}${err}")
set(first "")
foreach(line IN LISTS lines)
  if(line MATCHES "error")
    set(first "${line}")
    break()
  endif()
endforeach()
if(NOT first MATCHES "gpuaff needs C\\+\\+20 \\(-std=c\\+\\+20\\)")
  message(FATAL_ERROR "the first error is not gpuaff's C++20 requirement:\n  ${first}")
endif()
message(STATUS "first error: ${first}")
