# SPDX-License-Identifier: BSD-3-Clause
# Generates redlock.pc with paths relative to ${pcfiledir}, the directory
# pkg-config found the file in. The file goes to <libdir>/pkgconfig, and
# libdir may be several levels deep (GNUInstallDirs picks lib/<multiarch>
# on Debian when the prefix is /usr), so the way back up to the prefix is
# computed here rather than written as a fixed "../..".
#
# An absolute CMAKE_INSTALL_LIBDIR or CMAKE_INSTALL_INCLUDEDIR cannot move
# with the prefix; those are written as given.
function(redlock_write_pkgconfig in out)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(REDLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    set(REDLOCK_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  else()
    cmake_path(SET _pcdir NORMALIZE "/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
    file(RELATIVE_PATH _up "${_pcdir}" "/")
    string(REGEX REPLACE "/$" "" _up "${_up}")
    set(REDLOCK_PC_PREFIX "\${pcfiledir}/${_up}")
    set(REDLOCK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(REDLOCK_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
  else()
    set(REDLOCK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  configure_file("${in}" "${out}" @ONLY)
endfunction()
