# SPDX-License-Identifier: BSD-3-Clause
# Embeds the Lua scripts into a C file. Run in script mode:
#   cmake -DOUT=<file.c> -DSCRIPTS="a;b" -DLUA_DIR=<dir> -P embed_lua.cmake
# The SHA1 is taken over the same bytes that are embedded, so EVALSHA
# digests can never drift from what EVAL would send.
set(body "/* Generated from the files in lua/ by cmake/embed_lua.cmake. Do not edit. */\n")
string(APPEND body "#include \"resp/scripts.h\"\n\n")
set(table "")
foreach(name IN LISTS SCRIPTS)
  set(path "${LUA_DIR}/${name}.lua")
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
