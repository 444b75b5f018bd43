# SPDX-License-Identifier: Apache-2.0
# The fixture machines, unpacked into the build tree at configure time.
#
# fixtures/NAME.tar.xz holds one root laid out like `/` (docs/contract.md
# section 1); it is extracted to ${GPUAFF_FIXTURES_DIR}/NAME, and the plain
# fixture files (NAME.json, NAME.topo.json, NAME.xml, NAME.truth.txt) are
# copied beside the roots, so tests, benchmarks and examples read plain files
# from one folder and never open an archive or run Python.
#
# A root is extracted again when its archive's content changes (a SHA-256
# stamp per root; archives are CMAKE_CONFIGURE_DEPENDS, so a build after
# `git pull` re-runs this); a root whose archive is gone is removed.

include("${CMAKE_CURRENT_LIST_DIR}/GpuaffCheckArchive.cmake")

# Build trees of one source tree may share one folder of roots (tests/run.sh
# does: its three test trees would otherwise unpack, or link, some 250,000 files
# each). The stamps live beside the folder, so each tree sees what is current.
# No test writes into a fixture: a test that changes one works on a copy.
set(GPUAFF_FIXTURES_DIR "${PROJECT_BINARY_DIR}/fixtures" CACHE PATH
    "Folder the fixture archives are unpacked into (build trees of one source tree may share one)")
set(_gpuaff_fixture_stamps "${GPUAFF_FIXTURES_DIR}-stamps")

file(GLOB _gpuaff_fixture_archives CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/fixtures/*.tar.xz")
set(_gpuaff_fixture_names "")
foreach(_archive IN LISTS _gpuaff_fixture_archives)
  get_filename_component(_name "${_archive}" NAME)
  string(REGEX REPLACE "\\.tar\\.xz$" "" _name "${_name}")
  list(APPEND _gpuaff_fixture_names "${_name}")
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_archive}")
  file(SHA256 "${_archive}" _hash)
  set(_stamp "${_gpuaff_fixture_stamps}/${_name}.sha256")
  set(_extracted "")
  if(EXISTS "${_stamp}")
    file(READ "${_stamp}" _extracted)
  endif()
  if(NOT _extracted STREQUAL _hash OR NOT IS_DIRECTORY "${GPUAFF_FIXTURES_DIR}/${_name}/sys")
    gpuaff_check_fixture_archive("${_archive}")  # before anything is removed or written
    file(REMOVE_RECURSE "${GPUAFF_FIXTURES_DIR}/${_name}")
    file(ARCHIVE_EXTRACT INPUT "${_archive}" DESTINATION "${GPUAFF_FIXTURES_DIR}/${_name}")
    file(WRITE "${_stamp}" "${_hash}")
  endif()
endforeach()

# Roots whose archive was deleted or renamed.
file(GLOB _gpuaff_fixture_old_stamps "${_gpuaff_fixture_stamps}/*.sha256")
foreach(_stamp IN LISTS _gpuaff_fixture_old_stamps)
  get_filename_component(_name "${_stamp}" NAME)
  string(REGEX REPLACE "\\.sha256$" "" _name "${_name}")
  if(NOT _name IN_LIST _gpuaff_fixture_names)
    file(REMOVE_RECURSE "${GPUAFF_FIXTURES_DIR}/${_name}")
    file(REMOVE "${_stamp}")
  endif()
endforeach()

# The plain files; configure_file copies again when the source changes.
file(GLOB _gpuaff_fixture_files CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/fixtures/*.json" "${PROJECT_SOURCE_DIR}/fixtures/*.xml" "${PROJECT_SOURCE_DIR}/fixtures/*.txt")
foreach(_file IN LISTS _gpuaff_fixture_files)
  get_filename_component(_name "${_file}" NAME)
  configure_file("${_file}" "${GPUAFF_FIXTURES_DIR}/${_name}" COPYONLY)
endforeach()
