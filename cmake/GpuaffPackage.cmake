# Debian packages with CPack (tools/package.sh runs `cpack -G DEB` in a Release
# build configured with CMAKE_INSTALL_PREFIX=/usr):
#   gpuaff        the tool (`gpuaff`), its man page and bash completion, and the
#                 library for C++ users: headers, CMake package, pkg-config file
#   gpuaff-hwloc  `gpuaff-hwloc`, the same tool reading through hwloc (needs libhwloc)
# Install components: tool, dev and doc go to gpuaff; hwloc to gpuaff-hwloc.

set(CPACK_PACKAGE_NAME gpuaff)
set(CPACK_PACKAGE_VENDOR "gpuaff developers")
set(CPACK_PACKAGE_CONTACT "gpuaff developers <maintainers@gpuaff.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "bind GPU processes to the CPUs and NUMA memory closest to their GPU")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "gpuaff computes and applies, for each GPU, the CPUs and NUMA memory nodes a\n"
    "process using it should run on: PyTorch's numa binding modes and NVIDIA's\n"
    "gpu_affinity modes, right under containers, cgroups and launchers.")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tool dev doc)
if(TARGET gpuaff_hwloc_cli)
  list(APPEND CPACK_COMPONENTS_ALL hwloc)
endif()
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
# Components grouped into the two packages.
set(CPACK_COMPONENT_TOOL_GROUP gpuaff)
set(CPACK_COMPONENT_DEV_GROUP gpuaff)
set(CPACK_COMPONENT_DOC_GROUP gpuaff)
set(CPACK_COMPONENT_HWLOC_GROUP hwloc)
set(CPACK_DEBIAN_GPUAFF_PACKAGE_NAME gpuaff)
set(CPACK_DEBIAN_HWLOC_PACKAGE_NAME gpuaff-hwloc)
set(CPACK_DEBIAN_HWLOC_PACKAGE_DEPENDS "gpuaff (= ${PROJECT_VERSION}-1)")
# The extended descriptions (CPack puts the summary line above each).
set(CPACK_DEBIAN_GPUAFF_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
string(CONCAT CPACK_DEBIAN_HWLOC_DESCRIPTION
    "gpuaff-hwloc is the gpuaff tool with --source hwloc and --hwloc-xml, which\n"
    "read the machine through the hwloc library.")

# Each package's /usr/share/doc/PACKAGE: the copyright statement and a
# changelog, compressed as Debian wants (gzip -9n: no name, no time stamp).
find_program(GPUAFF_GZIP gzip)
set(_doc "${CMAKE_CURRENT_BINARY_DIR}/packaging")
file(MAKE_DIRECTORY "${_doc}")
string(TIMESTAMP _date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE "${_doc}/changelog.Debian"
     "gpuaff (${PROJECT_VERSION}-1) unstable; urgency=medium\n\n"
     "  * Release ${PROJECT_VERSION}.\n\n"
     " -- ${CPACK_PACKAGE_CONTACT}  ${_date}\n")
if(GPUAFF_GZIP)
  execute_process(COMMAND "${GPUAFF_GZIP}" -9nf "${_doc}/changelog.Debian" RESULT_VARIABLE _gz)
endif()
foreach(_pkg gpuaff gpuaff-hwloc)
  set(_component doc)
  if(_pkg STREQUAL "gpuaff-hwloc")
    set(_component hwloc)
  endif()
  if(_component STREQUAL "hwloc" AND NOT TARGET gpuaff_hwloc_cli)
    continue()
  endif()
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/copyright" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/${_pkg}"
          COMPONENT ${_component})
  if(EXISTS "${_doc}/changelog.Debian.gz")
    install(FILES "${_doc}/changelog.Debian.gz" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/${_pkg}" COMPONENT ${_component})
  endif()
endforeach()

# The static tool is on purpose; Debian's checker is told so.
if(GPUAFF_STATIC_TOOLS)
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/lintian-overrides" DESTINATION "${CMAKE_INSTALL_DATADIR}/lintian/overrides"
          RENAME gpuaff COMPONENT doc)
endif()

include(CPack)
