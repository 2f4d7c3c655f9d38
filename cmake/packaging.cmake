# SPDX-License-Identifier: BSD-3-Clause
# CPack: `cpack -G DEB` in the build directory makes two Debian packages,
#   redlock      libredlock.so.N, the redlock tool, its man page, bash
#                completion and rig script (install component "runtime");
#   redlock-dev  headers, the libredlock.so link, the static library, the
#                CMake package and redlock.pc (install component "dev").
# Configure with -DCMAKE_INSTALL_PREFIX=/usr to get Debian's multiarch
# libdir (lib/<triplet>); the packages always install under /usr.
# `cpack -G TGZ` makes one archive of everything.
set(REDLOCK_PACKAGE_CONTACT "the libredlock authors" CACHE STRING
  "Maintainer of the Debian packages (\"Name <email>\")")

set(CPACK_VERBATIM_VARIABLES ON)
set(CPACK_PACKAGE_NAME redlock)
set(CPACK_PACKAGE_VENDOR "the libredlock authors")
set(CPACK_PACKAGE_CONTACT "${REDLOCK_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed locks on Redis: RedLock, MultiLock and the redlock tool")
set(CPACK_PACKAGE_DESCRIPTION
  "libredlock is a C11 library for distributed locks on Redis: a reentrant lock with
Redisson's data layout, a RedLock / MultiLock quorum over independent masters,
a watchdog that renews held locks and reports lost ones, and fencing tokens.
redlock(1) runs a command under such a lock, like a distributed flock(1).")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR TGZ)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\.git/" "/build.*/" "/out/")

# Debian: one package per install component; the -dev package depends on
# the exact runtime version.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME redlock)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION utils)
# `redlock rig` and `redlock demo` start redis-server processes.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "redis-server")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME redlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# redlock.pc (Requires.private) and redlock-config.cmake (pkg-config for
# hiredis, find_dependency(OpenSSL)) need these to be usable at all.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libhiredis-dev, libssl-dev, pkgconf | pkg-config")
# CPack reads the binaries with file(1) to find libraries and programs.
find_program(REDLOCK_FILE_CMD file)
find_program(REDLOCK_DPKG_SHLIBDEPS dpkg-shlibdeps)
mark_as_advanced(REDLOCK_FILE_CMD REDLOCK_DPKG_SHLIBDEPS)
if(REDLOCK_FILE_CMD)
  # A shlibs file, and ldconfig run on install and removal.
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
endif()
if(REDLOCK_FILE_CMD AND REDLOCK_DPKG_SHLIBDEPS)
  # The library packages and versions the binaries need, read from them.
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
else()
  # Debian 12's names; without file and dpkg-shlibdeps (dpkg-dev) nothing
  # can check them.
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libc6, libhiredis0.14, libssl3")
endif()

# The packaged redlock.pc names /usr as its prefix (see the script).
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/cpack-pc-prefix.cmake)

include(CPack)
# Each package's description: the summary line, then these paragraphs.
cpack_add_component(runtime DISPLAY_NAME "library and redlock tool" REQUIRED
  DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}\n.\nThis package holds the shared library and the redlock tool.")
cpack_add_component(dev DISPLAY_NAME "development files" DEPENDS runtime
  DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}\n.\nThis package holds the headers, the static library and the CMake and\npkg-config files for building programs with libredlock.")
