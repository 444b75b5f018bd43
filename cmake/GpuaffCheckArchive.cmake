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
#   - every symbolic link's target is a relative path (the characters above
#     and '/') and, read from the link's folder, stays inside the root, with
#     the links judged together as extraction meets them (below).
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
      if(_target MATCHES "^/" OR _target STREQUAL "")
        _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_member}' points to '${_target}', outside the root")
      endif()
      if(NOT _target MATCHES "^[A-Za-z0-9._:+,=@/-]+$")
        _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_member}' points to '${_target}', which is not a "
                            "plain relative path")
      endif()
      list(APPEND _link_paths "${_path}")
      list(APPEND _link_targets "${_target}")
    endif()
  endforeach()
  if(_link_paths)
    _gpuaff_check_archive_links()
  endif()
endfunction()

# Links are judged as extraction meets them, not one at a time: a link that
# looks inside from its own folder can lie behind another link
# (`a/b/up -> ../..`, then `a/b/up/esc -> ../../..` is really `esc -> ../../..`
# at the root), and a target can climb through another link (`here -> .`,
# then `sys/x -> ../here/..`). So, as GNU tar's extraction does:
#   - no member lies behind a link (its path goes through a link member), and
#     no link takes the place of another member or the reverse, whatever the
#     order: then every member is written where its name says, inside the root;
#   - every link's target, resolved the way the kernel does (component by
#     component, through every link of the archive, at most 40 of them), stays
#     inside the root.
# Recordings (links under sys/bus, sys/class) hold a few hundred links at most:
# members are matched against the link paths by one expression per few dozen links.
macro(_gpuaff_check_archive_links)
  string(REPLACE "\n" "\n\n" _all "\n${_listing}\n")
  set(_alternatives "")
  set(_chunks "")
  foreach(_link IN LISTS _link_paths)
    string(REGEX REPLACE "([.+])" "\\\\\\1" _escaped "${_link}")
    string(APPEND _alternatives "|${_escaped}")
    string(LENGTH "${_alternatives}" _length)
    if(_length GREATER 4000)
      list(APPEND _chunks "${_alternatives}")
      set(_alternatives "")
    endif()
  endforeach()
  if(NOT _alternatives STREQUAL "")
    list(APPEND _chunks "${_alternatives}")
  endif()
  # Every listing line whose member is a link path or lies below one.
  set(_near "")
  foreach(_chunk IN LISTS _chunks)
    string(SUBSTRING "${_chunk}" 1 -1 _chunk)
    string(REGEX MATCHALL "\n[^\n]+ [0-9]+:[0-9]+ (${_chunk})(/[^\n]*| -> [^\n]*)?\n" _found "${_all}")
    list(APPEND _near ${_found})
  endforeach()
  set(_seen_paths "")
  set(_seen_types "")
  foreach(_line IN LISTS _near)
    string(REGEX REPLACE "^\n(.)[^\n]* [0-9]+:[0-9]+ ([^\n]*)\n$" "\\1;\\2" _fields "${_line}")
    list(GET _fields 0 _type)
    list(GET _fields 1 _member)
    string(REGEX REPLACE " -> .*$" "" _member "${_member}")
    string(REGEX REPLACE "/$" "" _member "${_member}")
    # Behind a link: name the first link on its path.
    string(REPLACE "/" ";" _parts "${_member}")
    list(REMOVE_AT _parts -1)
    set(_prefix "")
    foreach(_part IN LISTS _parts)
      string(APPEND _prefix "${_part}")
      if(_prefix IN_LIST _link_paths)
        _gpuaff_archive_refused("fixtures/${_file}: member '${_member}' lies behind the symbolic link '${_prefix}', "
                            "so extracting it writes where that link leads (a recording never holds one)")
      endif()
      string(APPEND _prefix "/")
    endforeach()
    if(_member IN_LIST _link_paths)
      list(FIND _seen_paths "${_member}" _first)
      if(_first GREATER -1)
        # The second of two members at a link's path: which was first decides the words.
        list(GET _seen_types ${_first} _first_type)
        if(_first_type STREQUAL "l")
          _gpuaff_archive_refused("fixtures/${_file}: member '${_member}' replaces the symbolic link '${_member}' "
                              "(a recording holds each path once)")
        else()
          _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_member}' replaces the member '${_member}' "
                              "(a recording holds each path once)")
        endif()
      endif()
      list(APPEND _seen_paths "${_member}")
      list(APPEND _seen_types "${_type}")
    endif()
  endforeach()
  # Each target, resolved through every link, from the link's folder.
  list(LENGTH _link_paths _count)
  math(EXPR _last "${_count} - 1")
  foreach(_i RANGE ${_last})
    list(GET _link_paths ${_i} _link)
    list(GET _link_targets ${_i} _target)
    string(REPLACE "/" ";" _done "${_link}")
    list(REMOVE_AT _done -1)
    string(REPLACE "/" ";" _pending "${_target}")
    list(REVERSE _pending)  # a stack: its last entry is the next component
    set(_hops 0)
    while(_pending)
      list(POP_BACK _pending _step)
      if(_step STREQUAL "" OR _step STREQUAL ".")
        continue()
      endif()
      if(_step STREQUAL "..")
        if(NOT _done)
          _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_link}' points to '${_target}', outside the root")
        endif()
        list(POP_BACK _done)
        continue()
      endif()
      list(APPEND _done "${_step}")
      list(JOIN _done "/" _here)
      list(FIND _link_paths "${_here}" _at)
      if(_at GREATER -1)
        math(EXPR _hops "${_hops} + 1")
        if(_hops GREATER 40)
          _gpuaff_archive_refused("fixtures/${_file}: symbolic link '${_link}' points to '${_target}', which loops")
        endif()
        list(POP_BACK _done)
        list(GET _link_targets ${_at} _next)
        string(REPLACE "/" ";" _next "${_next}")
        list(REVERSE _next)
        list(APPEND _pending ${_next})
      endif()
    endwhile()
  endforeach()
endmacro()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED GPUAFF_CHECK_ARCHIVE)
  gpuaff_check_fixture_archive("${GPUAFF_CHECK_ARCHIVE}")
endif()
