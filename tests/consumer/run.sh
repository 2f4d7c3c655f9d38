#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the build into a scratch prefix and builds a two-line consumer
# against it with find_package(redlock), then runs it. Then builds the same
# program with pkg-config alone: against the shared library, against the
# static one (Requires.private and Libs.private must be enough), and once
# more after the installed tree was moved elsewhere (redlock.pc finds its
# prefix from its own location).
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/$(gcc -dumpmachine)" "$work/build/consumer"

cc=${CC:-cc}
# pkg-config with only this prefix's redlock.pc added to its search path.
pc() {
  local prefix=$1
  shift
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/$(gcc -dumpmachine)/pkgconfig" pkg-config "$@"
}
# pkgconfig_consumer PREFIX: builds and runs main.c with pkg-config's flags.
pkgconfig_consumer() {
  local prefix=$1 got libdir
  got=$(realpath "$(pc "$prefix" --variable=prefix redlock)")
  if [ "$got" != "$(realpath "$prefix")" ]; then
    echo "redlock.pc: prefix is $got, expected $prefix" >&2
    exit 1
  fi
  libdir=$(pc "$prefix" --variable=libdir redlock)
  # shellcheck disable=SC2046 # pkg-config's output is a list of words
  $cc -Wall -Werror -o "$work/pc-consumer" "$src/main.c" $(pc "$prefix" --cflags --libs redlock)
  LD_LIBRARY_PATH="$libdir" "$work/pc-consumer"
  echo "redlock.pc: shared consumer built and run from $prefix"
}

pkgconfig_consumer "$work/prefix"

# Static: -l:libredlock.a makes the linker take the archive over the .so.
# shellcheck disable=SC2046
$cc -Wall -Werror -o "$work/pc-consumer-static" "$src/main.c" \
  $(pc "$work/prefix" --cflags redlock) \
  $(pc "$work/prefix" --static --libs redlock | sed 's/-lredlock\b/-l:libredlock.a/')
if readelf -d "$work/pc-consumer-static" | grep -q 'NEEDED.*libredlock'; then
  echo "redlock.pc: the static consumer still needs libredlock.so" >&2
  exit 1
fi
"$work/pc-consumer-static"
echo "redlock.pc: static consumer built and run"

mv "$work/prefix" "$work/moved"
pkgconfig_consumer "$work/moved"
