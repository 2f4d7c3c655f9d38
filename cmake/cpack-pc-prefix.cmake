# SPDX-License-Identifier: BSD-3-Clause
# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS): in packages that always
# install at the same place (DEB, RPM), redlock.pc names its prefix instead
# of finding it from ${pcfiledir}. pkg-config drops -I/usr/include and
# -L/usr/lib/<triplet> only when spelled like that, not as
# /usr/lib/<triplet>/pkgconfig/../../../include; an explicit -L of a system
# directory would also come before the caller's own -L options. Archives
# (TGZ) keep the relocatable file.
if(NOT CPACK_GENERATOR MATCHES "^(DEB|RPM)$")
  return()
endif()
file(GLOB_RECURSE _pcs "${CPACK_TEMPORARY_DIRECTORY}/*/redlock.pc" "${CPACK_TEMPORARY_DIRECTORY}/redlock.pc")
foreach(_pc IN LISTS _pcs)
  file(READ "${_pc}" _text)
  string(REGEX REPLACE "\nprefix=\\\${pcfiledir}[^\n]*" "\nprefix=${CPACK_PACKAGING_INSTALL_PREFIX}" _text "${_text}")
  file(WRITE "${_pc}" "${_text}")
endforeach()
