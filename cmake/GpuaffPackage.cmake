# SPDX-License-Identifier: Apache-2.0
# Debian packages with CPack (tools/package.sh runs `cpack -G DEB` in a Release
# build configured with CMAKE_INSTALL_PREFIX=/usr):
#   gpuaff        the tool (`gpuaff`), its man page and bash completion, and the
#                 library for C++ users: headers, CMake package, pkg-config file
#   gpuaff-hwloc  `gpuaff-hwloc`, the same tool reading through hwloc (needs libhwloc)
#   gpuaff-slurm  spank_gpuaff.so, the Slurm SPANK plugin (when it is built:
#                 slurm/spank.h found), for the Slurm release it was built against
# Install components: tool, dev and doc go to gpuaff; hwloc to gpuaff-hwloc;
# spank to gpuaff-slurm.

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
if(TARGET spank_gpuaff)
  list(APPEND CPACK_COMPONENTS_ALL spank)
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
set(CPACK_COMPONENT_SPANK_GROUP slurm)
set(CPACK_DEBIAN_SLURM_PACKAGE_NAME gpuaff-slurm)
set(CPACK_DEBIAN_SLURM_PACKAGE_SECTION admin)
# Slurm loads a plugin only when it was built for the running release (its
# plugin_version is SLURM_VERSION_NUMBER; major and minor must match): the
# package names that release of the package holding Slurm's plugin loader
# (libslurmfull, in slurm-wlm-basic-plugins), e.g. 22.05 for Debian 12.
if(TARGET spank_gpuaff AND EXISTS "${GPUAFF_SPANK_INCLUDE_DIR}/slurm/slurm_version.h")
  file(STRINGS "${GPUAFF_SPANK_INCLUDE_DIR}/slurm/slurm_version.h" _slurm_number
       REGEX "^#define SLURM_VERSION_NUMBER 0x[0-9a-fA-F]+")
  string(REGEX REPLACE ".*0x([0-9a-fA-F]+).*" "\\1" _slurm_hex "${_slurm_number}")
  math(EXPR _slurm_major "0x${_slurm_hex} >> 16" OUTPUT_FORMAT DECIMAL)
  math(EXPR _slurm_minor "(0x${_slurm_hex} >> 8) & 255" OUTPUT_FORMAT DECIMAL)
  math(EXPR _slurm_next "${_slurm_minor} + 1" OUTPUT_FORMAT DECIMAL)
  foreach(_v _slurm_minor _slurm_next)
    string(LENGTH "${${_v}}" _len)
    if(_len EQUAL 1)
      set(${_v} "0${${_v}}")
    endif()
  endforeach()
  set(CPACK_DEBIAN_SLURM_PACKAGE_DEPENDS
      "slurm-wlm-basic-plugins (>= ${_slurm_major}.${_slurm_minor}), slurm-wlm-basic-plugins (<< ${_slurm_major}.${_slurm_next})")
endif()
set(CPACK_DEBIAN_SLURM_PACKAGE_ENHANCES "slurmd, slurm-client")
# The extended descriptions (CPack puts the summary line above each).
set(CPACK_DEBIAN_GPUAFF_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
string(CONCAT CPACK_DEBIAN_HWLOC_DESCRIPTION
    "gpuaff-hwloc is the gpuaff tool with --source hwloc and --hwloc-xml, which\n"
    "read the machine through the hwloc library.")
string(CONCAT CPACK_DEBIAN_SLURM_DESCRIPTION
    "gpuaff-slurm is spank_gpuaff.so, a Slurm SPANK plugin: srun --gpuaff binds\n"
    "each task to its GPU's CPUs and memory as 'gpuaff exec --local-rank' does,\n"
    "before the task starts. A site enables it with one line in plugstack.conf.")

# Each package's /usr/share/doc/PACKAGE: the copyright file (machine-readable,
# DEP-5: Apache-2.0, whose text Debian keeps in /usr/share/common-licenses) and a
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
foreach(_pkg gpuaff gpuaff-hwloc gpuaff-slurm)
  set(_component doc)
  if(_pkg STREQUAL "gpuaff-hwloc")
    set(_component hwloc)
  elseif(_pkg STREQUAL "gpuaff-slurm")
    set(_component spank)
  endif()
  if((_component STREQUAL "hwloc" AND NOT TARGET gpuaff_hwloc_cli) OR (_component STREQUAL "spank" AND NOT TARGET spank_gpuaff))
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
