#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `cpack -G DEB` on the build: the two packages exist with the expected
# names, versions and dependencies, and between them hold the library,
# the headers, the CLI, its man page and bash completion, the CMake
# package and a redlock.pc that points where the packages put things.
# The packages and CPack's staging tree go to WORK (cpack -B), so the
# build directory is left as it was (but for CMake's install manifests).
#   deb.sh BUILD_DIR WORK VERSION
set -euo pipefail
build=$1 work=$2 version=$3
rm -rf "$work"
mkdir -p "$work"
if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work" >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log"
  exit 1
fi
arch=$(dpkg --print-architecture)
run=$work/redlock_${version}_$arch.deb
dev=$work/redlock-dev_${version}_$arch.deb
ls "$work"/*.deb
[ -f "$run" ] && [ -f "$dev" ] || { echo "FAIL: expected $run and $dev" >&2; exit 1; }

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# contains DEB REGEX WHAT: a path in DEB's listing matches REGEX.
contains() {
  if grep -Eq "$2" <<<"$(dpkg-deb -c "$1" | awk '{print $6}')"; then
    echo "ok   $(basename "$1"): $3"
  else
    fail "$(basename "$1") lacks $3 ($2)"
  fi
}
lacks() {
  if grep -Eq "$2" <<<"$(dpkg-deb -c "$1" | awk '{print $6}')"; then
    fail "$(basename "$1") should not hold $3 ($2)"
  else
    echo "ok   $(basename "$1"): no $3"
  fi
}
field() { dpkg-deb -f "$1" "$2"; }

lib='^\./usr/lib/([a-z0-9_]+-linux-gnu[a-z0-9_]*/)?'
contains "$run" "${lib}libredlock\.so\.[0-9]+\.[0-9]+\.[0-9]+$" "the shared library"
contains "$run" "${lib}libredlock\.so\.[0-9]+$" "the SONAME link"
contains "$run" '^\./usr/bin/redlock$' "the CLI"
contains "$run" '^\./usr/share/man/man1/redlock\.1(\.gz)?$' "the man page"
contains "$run" '^\./usr/share/bash-completion/completions/redlock$' "the bash completion"
contains "$run" '^\./usr/share/doc/redlock/LICENSE$' "the licence"
lacks "$run" '^\./usr/include/' "headers"
lacks "$run" "${lib}libredlock\.(so|a)$" "development links"
contains "$dev" '^\./usr/include/redlock/redlock\.h$' "the header"
contains "$dev" "${lib}libredlock\.so$" "the libredlock.so link"
contains "$dev" "${lib}libredlock\.a$" "the static library"
contains "$dev" "${lib}pkgconfig/redlock\.pc$" "redlock.pc"
contains "$dev" "${lib}cmake/redlock/redlock-config\.cmake$" "the CMake package"
contains "$dev" '^\./usr/share/redlock/lua/fair_acquire\.lua$' "the expanded scripts"
lacks "$dev" '^\./usr/share/redlock/lua/lib/' "unexpanded script parts"
lacks "$dev" '^\./usr/bin/' "programs"

[ "$(field "$run" Package)" = redlock ] || fail "Package: $(field "$run" Package)"
[ "$(field "$run" Version)" = "$version" ] || fail "Version: $(field "$run" Version), expected $version"
deps=$(field "$run" Depends)
for d in libc6 libhiredis libssl; do
  [[ $deps == *"$d"* ]] || fail "redlock Depends lacks $d: $deps"
done
devdeps=$(field "$dev" Depends)
[[ $devdeps == *"redlock (= $version)"* ]] || fail "redlock-dev Depends lacks redlock (= $version): $devdeps"
for d in libhiredis-dev libssl-dev; do
  [[ $devdeps == *"$d"* ]] || fail "redlock-dev Depends lacks $d: $devdeps"
done
echo "redlock Depends: $deps"
echo "redlock-dev Depends: $devdeps"

# The packaged redlock.pc names /usr (not ${pcfiledir}, which would make
# pkg-config print system directories it could not recognise) and points
# at where the packages put the header and the library: resolved inside
# the unpacked tree as the sysroot.
root=$work/root
dpkg-deb -x "$run" "$root"
dpkg-deb -x "$dev" "$root"
pc=$(find "$root" -name redlock.pc)
grep -qx 'prefix=/usr' "$pc" || fail "packaged redlock.pc: $(grep '^prefix=' "$pc")"
inc=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags-only-I redlock)
libs=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --libs-only-L redlock)
inc=${inc%% *} libs=${libs%% *}
if [ -f "${inc#-I}/redlock/redlock.h" ] && [ -e "${libs#-L}/libredlock.so" ]; then
  echo "ok   packaged redlock.pc: $inc $libs"
else
  fail "packaged redlock.pc gives $inc $libs"
fi

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
