# SPDX-License-Identifier: BSD-3-Clause
# Embeds the Lua scripts into a C file. Run in script mode:
#   cmake -DOUT=<file.c> -DSCRIPTS="a;b" -DLUA_DIR=<dir> -DLUA_OUT=<dir> -P embed_lua.cmake
# A line "--@include lib/<file>.lua" in a script is replaced by that file
# of LUA_DIR, so code several scripts share is written once while each
# script stays self-contained for EVAL. The expanded scripts are also
# written to LUA_OUT (what other clients of the same keys should load),
# and the SHA1 is taken over those same bytes, so EVALSHA digests can
# never drift from what EVAL would send.
set(body "/* Generated from the files in lua/ by cmake/embed_lua.cmake. Do not edit. */\n")
string(APPEND body "#include \"resp/scripts.h\"\n\n")
set(table "")
file(MAKE_DIRECTORY "${LUA_OUT}")
foreach(name IN LISTS SCRIPTS)
  file(READ "${LUA_DIR}/${name}.lua" text)
  # Only whole lines: a comment may name the directive.
  string(REGEX MATCHALL "(^|\n)--@include [^\n]*" includes "${text}")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^\n?--@include " "" lib "${line}")
    string(REGEX REPLACE "^\n" "" line "${line}")
    if(NOT lib MATCHES "^lib/[a-z_]+\\.lua$" OR NOT EXISTS "${LUA_DIR}/${lib}")
      message(FATAL_ERROR "${name}.lua: cannot include '${lib}' (lib/<name>.lua of ${LUA_DIR})")
    endif()
    file(READ "${LUA_DIR}/${lib}" shared)
    string(REGEX REPLACE "\n$" "" shared "${shared}")
    string(REPLACE "${line}" "${shared}" text "${text}")
  endforeach()
  if(text MATCHES "(^|\n)--@include ")
    message(FATAL_ERROR "${name}.lua: an included file includes another (not supported)")
  endif()
  set(path "${LUA_OUT}/${name}.lua")
  file(WRITE "${path}.tmp" "${text}")
  file(COPY_FILE "${path}.tmp" "${path}" ONLY_IF_DIFFERENT)
  file(REMOVE "${path}.tmp")
  file(READ "${path}" hex HEX)
  file(SHA1 "${path}" sha)
  file(SIZE "${path}" size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n    " bytes "${bytes}")
  string(APPEND body "static const char script_${name}[] = {\n    ${bytes}0x00};\n\n")
  string(APPEND table "    {\"${name}\", script_${name}, ${size}, \"${sha}\"},\n")
endforeach()
string(APPEND body "const redlock__script redlock__scripts[REDLOCK__SCRIPT_COUNT] = {\n${table}};\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
