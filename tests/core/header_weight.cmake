# SPDX-License-Identifier: Apache-2.0
# What a trainer's translation unit pays for including gpuaff (benchmarks row
# 6) is mostly the standard headers it drags in: a few cost more than the
# rest of gpuaff together. Compiles a TU with the umbrella header, and one
# with one policy's header, under -H (the compiler lists every header it
# opens, one dot per level of nesting) and fails if a heavy standard header
# is among them, naming the chain of headers that brought it in.
#
# The heavy ones, measured alone with GCC 12 -std=c++20 -O2 against <vector>
# (about 0.2 s): <atomic> 0.35 s (C++20's wait and notify pull in <chrono>
# and the thread headers), <memory> 0.5 s, the stream headers, <chrono>,
# <functional>, the unordered containers, <regex>, <filesystem>, <format>.
# One policy's header (policy/node.hpp) also stays without <algorithm> and
# <map> and <optional>: row 6b's TU binds with it and nothing else.
#
# cmake -DCXX=... -DINCLUDE_DIR=... -DWORK_DIR=... -P header_weight.cmake
cmake_minimum_required(VERSION 3.25)
set(heavy atomic memory iostream istream ostream sstream fstream iomanip chrono thread mutex condition_variable
          future stop_token semaphore functional unordered_map unordered_set deque list regex filesystem format
          random locale ranges variant)
set(failures "")
foreach(tu IN ITEMS "gpuaff/gpuaff.hpp" "gpuaff/policy/node.hpp")
  set(banned ${heavy})
  if(tu STREQUAL "gpuaff/policy/node.hpp")
    list(APPEND banned algorithm map tuple optional)
  endif()
  string(MAKE_C_IDENTIFIER "${tu}" name)
  file(WRITE "${WORK_DIR}/weight_${name}.cpp" "#include <${tu}>\n")
  execute_process(
    COMMAND "${CXX}" -std=c++20 -H -fsyntax-only "-I${INCLUDE_DIR}" "${WORK_DIR}/weight_${name}.cpp"
    RESULT_VARIABLE rc
    ERROR_VARIABLE err
    OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${CXX} cannot compile a TU that includes <${tu}>:\n${err}")
  endif()
  string(REPLACE ";" "," err "${err}")
  string(REPLACE "\n" ";" lines "${err}")
  set(opened 0)
  set(found 0)
  # chain_<depth>: the header opened at that depth most recently, so a
  # header's includer is the latest one at the depth above it.
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^(\\.+) (.+)$")
      continue()
    endif()
    math(EXPR opened "${opened} + 1")
    string(LENGTH "${CMAKE_MATCH_1}" depth)
    set(path "${CMAKE_MATCH_2}")
    set(chain_${depth} "${path}")
    get_filename_component(base "${path}" NAME)
    if(NOT base IN_LIST banned)
      continue()
    endif()
    set(via "")
    math(EXPR up "${depth} - 1")
    if(up GREATER 0)
      foreach(d RANGE 1 ${up})
        string(REGEX REPLACE "^.*/include/(gpuaff/)" "\\1" shown "${chain_${d}}")
        string(APPEND via "${shown} -> ")
      endforeach()
    endif()
    string(APPEND failures "  <${tu}> opens <${base}>: ${via}${path}\n")
    math(EXPR found "${found} + 1")
  endforeach()
  if(opened EQUAL 0)
    message(FATAL_ERROR "${CXX} -H listed no header for <${tu}>: cannot check what it includes")
  endif()
  if(found EQUAL 0)
    message(STATUS "<${tu}>: ${opened} headers opened, none of the heavy ones")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "heavy standard headers in gpuaff's light path (each costs a trainer's TU a few tenths of a "
                      "second; benchmarks/README.md, row 6); include what is needed without them:\n${failures}")
endif()
