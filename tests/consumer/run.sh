#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a two-line consumer
# against it with find_package(redlock), then runs it.
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/$(gcc -dumpmachine)" "$work/build/consumer"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/$(gcc -dumpmachine)/pkgconfig" \
  pkg-config --exists redlock && echo "redlock.pc: found"
