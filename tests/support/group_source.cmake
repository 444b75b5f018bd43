# SPDX-License-Identifier: Apache-2.0
# Writes the one translation unit of a test group (tests/CMakeLists.txt,
# GPUAFF_TEST_GROUPS): every header the members include, then each member
# inside a namespace of its own, so that the members' file-local helpers (most
# of them in anonymous namespaces, many with the same names) never meet.
#
#   cmake -DOUT=group.cpp -DSOURCES=a.cpp|b.cpp -DINCLUDE_DIRS=dir|dir -P group_source.cmake
#
# The headers come first, at global scope, with the #if structure they have in
# each member; a member's own #include lines then find them already included.
# A textual include (.inc, .cpp, ...) stays in its member, and the headers it
# includes join the list. After each member, the macros it #defines are
# #undef'd, so the next member starts as it would alone. A member that a group
# would change is refused with the reason: one that #defines a macro before an
# #include (the header would be read without it), or that reopens a namespace
# of the library or of what it uses (it would land in the member's namespace).
# Such a test gets an executable of its own when its macro is given with
# target_compile_definitions(NAME PRIVATE ...) instead.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" SOURCES "${SOURCES}")
string(REPLACE "|" ";" INCLUDE_DIRS "${INCLUDE_DIRS}")

set(_textual_ext "\\.(inc|cpp|cc|cxx|ipp|tpp|def)$")
set(_pp "^[ \t]*#[ \t]*")

# Appends to _preamble the #include and #if lines of FILE (and, recursively,
# of the textual files it includes). Checks MEMBER's rules on the way.
function(scan file member)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "test group: cannot read ${file} (included by ${member})")
  endif()
  get_filename_component(_dir "${file}" DIRECTORY)
  file(STRINGS "${file}" _lines REGEX "${_pp}(include|if|ifdef|ifndef|elif|else|endif|define|undef)([^A-Za-z0-9_]|$)|^[ \t]*namespace[ \t]+(std|gpuaff|doctest|nlohmann)([^A-Za-z0-9_]|$)")
  # The last #include: a #define before it would not reach the headers.
  set(_last_include -1)
  set(_i 0)
  foreach(_l IN LISTS _lines)
    if(_l MATCHES "${_pp}include")
      set(_last_include ${_i})
    endif()
    math(EXPR _i "${_i} + 1")
  endforeach()
  set(_i 0)
  foreach(_l IN LISTS _lines)
    if(_l MATCHES "^[ \t]*namespace[ \t]+([A-Za-z_]+)")
      message(FATAL_ERROR "test group: ${file} reopens namespace ${CMAKE_MATCH_1}, which inside the member's "
                          "own namespace would be another namespace; give the test its own executable (see ${CMAKE_CURRENT_LIST_FILE})")
    elseif(_l MATCHES "${_pp}(define|undef)[ \t]+([A-Za-z0-9_]+)")
      if(_i LESS _last_include)
        message(FATAL_ERROR "test group: ${file} #${CMAKE_MATCH_1}s ${CMAKE_MATCH_2} before an #include; "
                            "a group reads the headers first, without it. Give the macro with "
                            "target_compile_definitions(<test> PRIVATE ...) instead (see ${CMAKE_CURRENT_LIST_FILE})")
      endif()
      if(CMAKE_MATCH_1 STREQUAL "define")
        set_property(GLOBAL APPEND PROPERTY _member_macros "${CMAKE_MATCH_2}")
      endif()
    elseif(_l MATCHES "${_pp}include[ \t]*([<\"])([^>\"]+)[>\"]")
      set(_quote "${CMAKE_MATCH_1}")
      set(_name "${CMAKE_MATCH_2}")
      # Where the compiler will find it: beside the includer (quoted), then the include directories.
      set(_found "")
      if(_quote STREQUAL "\"" AND EXISTS "${_dir}/${_name}")
        set(_found "${_dir}/${_name}")
      else()
        foreach(_d IN LISTS INCLUDE_DIRS)
          if(EXISTS "${_d}/${_name}")
            set(_found "${_d}/${_name}")
            break()
          endif()
        endforeach()
      endif()
      if(_name MATCHES "${_textual_ext}")
        if(NOT _found)
          message(FATAL_ERROR "test group: cannot find ${_name}, included by ${file}")
        endif()
        scan("${_found}" "${member}")
      elseif(_quote STREQUAL "\"" AND _found)
        set_property(GLOBAL APPEND PROPERTY _preamble "#include \"${_found}\"")
      elseif(_quote STREQUAL "<")
        set_property(GLOBAL APPEND PROPERTY _preamble "#include <${_name}>")
      else()
        set_property(GLOBAL APPEND PROPERTY _preamble "#include \"${_name}\"")
      endif()
    elseif(_l MATCHES "${_pp}(if|ifdef|ifndef|elif|else|endif)([^A-Za-z0-9_].*)?$")
      string(STRIP "${_l}" _l)
      set_property(GLOBAL APPEND PROPERTY _preamble "${_l}")
    endif()
    math(EXPR _i "${_i} + 1")
  endforeach()
endfunction()

set(_body "")
set(_n 0)
foreach(_src IN LISTS SOURCES)
  set_property(GLOBAL PROPERTY _member_macros "")
  set_property(GLOBAL APPEND PROPERTY _preamble "// ${_src}")
  scan("${_src}" "${_src}")
  get_property(_macros GLOBAL PROPERTY _member_macros)
  string(APPEND _body "\nnamespace gpuaff_test_group_${_n} {\n#include \"${_src}\"\n}  // namespace gpuaff_test_group_${_n}\n")
  if(_macros)
    list(REMOVE_DUPLICATES _macros)
    foreach(_m IN LISTS _macros)
      string(APPEND _body "#undef ${_m}\n")
    endforeach()
  endif()
  math(EXPR _n "${_n} + 1")
endforeach()
get_property(_preamble GLOBAL PROPERTY _preamble)
list(JOIN _preamble "\n" _preamble)
set(_text "// Generated by tests/support/group_source.cmake: the test group's one translation unit.\n${_preamble}\n${_body}")
# Rewritten only when it changes, so that an unchanged group is not compiled again.
if(EXISTS "${OUT}")
  file(READ "${OUT}" _old)
  if(_old STREQUAL _text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${_text}")
