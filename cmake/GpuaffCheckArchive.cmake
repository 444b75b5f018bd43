# SPDX-License-Identifier: Apache-2.0
# Checks a fixture archive before anything of it is extracted: extraction
# (file(ARCHIVE_EXTRACT), like libarchive without its secure flags) writes
# wherever a member's name or a link says, and whoever configures a branch
# (CI, a reviewer, often as root) would get those writes before any test runs.
#
# gpuaff_check_fixture_archive(ARCHIVE) stops the configure with one line
# naming the archive and the member unless:
#   - the fixture's name (the file name less .tar.xz) is plain: [A-Za-z0-9._-]+, no leading dot;
#   - every member is a regular file, a folder or a symbolic link (no hard
#     link, FIFO, device or socket), without setuid, setgid or sticky bits;
#   - every member's name is relative, made of plain components (letters,
#     digits and ._:+,=@-), none of them '..' or '.';
#   - every symbolic link's target is relative and, read from the link's
#     folder, stays inside the root.
# The listing comes from GNU tar (`tar --list --verbose`), as the docs' replay does.
#
# Usable as a script too: cmake -DGPUAFF_CHECK_ARCHIVE=FILE -P GpuaffCheckArchive.cmake

# One line on stderr, as written (CMake wraps its own error messages), then stop.
macro(_gpuaff_archive_refused)
  string(CONCAT _line ${ARGN})
  message(NOTICE "gpuaff: ${_line}")
  message(FATAL_ERROR "the fixture archive check above failed; nothing was extracted")
endmacro()

function(gpuaff_check_fixture_archive archive)
  get_filename_component(_file "${archive}" NAME)
  string(REGEX REPLACE "\\.tar\\.xz$" "" _name "${_file}")
  if(NOT _name MATCHES "^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
    _gpuaff_archive_refused("fixtures/${_file}: a fixture's name must be letters, digits, '.', '_' and '-', not starting "
                        "with '.'; rename the archive")
  endif()
  find_program(GPUAFF_TAR NAMES tar gtar)
  if(NOT GPUAFF_TAR)
    _gpuaff_archive_refused("fixtures/${_file}: no tar program to check the archive with (Debian: apt-get install tar)")
  endif()
  execute_process(COMMAND "${GPUAFF_TAR}" --list --verbose --numeric-owner -J -f "${archive}"
                  OUTPUT_VARIABLE _listing ERROR_VARIABLE _error RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    string(STRIP "${_error}" _error)
    _gpuaff_archive_refused("fixtures/${_file}: not a readable .tar.xz archive (${_error})")
  endif()
  set(_component "[A-Za-z0-9_:+,=@-][A-Za-z0-9._:+,=@-]*|\\.[A-Za-z0-9_:+,=@-][A-Za-z0-9._:+,=@-]*")
  # Most members are plain files and folders, and CMake runs a loop of regular
  # expressions over 85,000 lines slowly (a minute for the bundled set). So one
  # expression first removes every file or folder line that the rules below
  # accept (no special mode bits, a plain relative path); the rules then judge
  # what is left, the links and anything unusual, one line at a time.
  # Each line gets a line break of its own on both sides, so that a match
  # covers whole lines only.
  string(REPLACE "\n" "\n\n" _rest "\n${_listing}\n")
  string(REGEX REPLACE "\n[-d][-rwx]+ +[0-9]+/[0-9]+ +[0-9,]+ +[0-9-]+ +[0-9:]+ +(${_component})(/(${_component}))*/?\n"
         "" _rest "${_rest}")
  string(REPLACE ";" "\\;" _rest "${_rest}")
  string(REPLACE "\n" ";" _lines "${_rest}")
  foreach(_line IN LISTS _lines)
    if(_line STREQUAL "")
      continue()
    endif()
    if(NOT _line MATCHES "^(.)([-rwxsStT]+) +[0-9]+/[0-9]+ +[0-9,]+ +[0-9-]+ +[0-9:]+ +(.*)$")
      _gpuaff_archive_refused("fixtures/${_file}: cannot read the listing line '${_line}'; the archive is not one "
                          "gpuaff record or fixtures/generate.py writes")
    endif()
    set(_type "${CMAKE_MATCH_1}")
    set(_mode "${CMAKE_MATCH_2}")
    set(_rest "${CMAKE_MATCH_3}")
    set(_target "")
    if(_type STREQUAL "l" AND _rest MATCHES "^(.*) -> (.*)$")
      set(_member "${CMAKE_MATCH_1}")
      set(_target "${CMAKE_MATCH_2}")
    else()
      set(_member "${_rest}")
    endif()
    if(NOT _type MATCHES "^[-dl]$")
      _gpuaff_archive_refused("fixtures/${_file}: member '${_member}' is not a file, folder or symbolic link "
                          "(type '${_type}'); a recording holds only those")
    endif()
    if(_mode MATCHES "[sStT]")
      _gpuaff_archive_refused("fixtures/${_file}: member '${_member}' has a setuid, setgid or sticky mode (${_mode})")
    endif()
    string(REGEX REPLACE "/$" "" _path "${_member}")
    if(NOT _path MATCHES "^(${_component})(/(${_component}))*$" OR _path MATCHES "(^|/)\\.\\.?(/|$)")
      _gpuaff_archive_refused("fixtures/${_file}: member '${_member}' is not a plain relative path inside the root")
    endif()
    if(_type STREQUAL "l")
      # The target, read from the link's folder, must stay inside the root.
      if(_target MATCHES "^/" OR _target STREQUAL "")
        _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_member}' points to '${_target}', outside the root")
      endif()
      string(REPLACE "/" ";" _parts "${_path}")
      list(REMOVE_AT _parts -1)
      string(REPLACE "/" ";" _steps "${_target}")
      foreach(_step IN LISTS _steps)
        if(_step STREQUAL "..")
          list(LENGTH _parts _depth)
          if(_depth EQUAL 0)
            _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_member}' points to '${_target}', outside the root")
          endif()
          list(REMOVE_AT _parts -1)
        elseif(NOT _step STREQUAL "." AND NOT _step STREQUAL "")
          list(APPEND _parts "${_step}")
        endif()
      endforeach()
    endif()
  endforeach()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED GPUAFF_CHECK_ARCHIVE)
  gpuaff_check_fixture_archive("${GPUAFF_CHECK_ARCHIVE}")
endif()
