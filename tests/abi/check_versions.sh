#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# One version story (docs/abi.md, "Versions"): the project version
# MAJOR.MINOR.PATCH, the ABI version in rknp.h (MAJOR.MINOR), the library's
# SONAME (librknp.so.MAJOR) and real file name (librknp.so.MAJOR.MINOR.PATCH),
# what the library and rknp-slirp4netns --version report, the newest entry of
# debian/changelog and of CHANGELOG.md must all agree.
#   check_versions.sh PROJECT_VERSION LIBRARY_FILE SLIRP4NETNS_BINARY SOURCE_DIR
set -euo pipefail
version=$1 lib=$2 s4n=$3 src=$4
fail=0
bad() { echo "version mismatch: $*"; fail=1; }
IFS=. read -r major minor _ <<<"$version"

header_major=$(sed -n 's/^#define RKNP_ABI_MAJOR \([0-9]*\)$/\1/p' "$src/abi/rknp.h")
header_minor=$(sed -n 's/^#define RKNP_ABI_MINOR \([0-9]*\)$/\1/p' "$src/abi/rknp.h")
[ "$header_major.$header_minor" = "$major.$minor" ] ||
    bad "rknp.h says ABI $header_major.$header_minor, project version is $version" \
        "(MAJOR.MINOR must be the ABI version: bump project() in CMakeLists.txt)"

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "librknp.so.$major" ] || bad "SONAME $soname, expected librknp.so.$major"
[ "$(basename "$lib")" = "librknp.so.$version" ] ||
    bad "library file $(basename "$lib"), expected librknp.so.$version"
case $(basename "$lib") in "$soname".*) ;; *) bad "file name does not start with $soname" ;; esac

out=$("$s4n" --version)
grep -qx "rknp-slirp4netns version $version (.*)" <<<"$out" ||
    bad "rknp-slirp4netns --version: $(head -n1 <<<"$out")"
grep -q "^rknp: $version (libslirp " <<<"$out" ||
    bad "rknp_library_version(): $(grep '^rknp:' <<<"$out")"
grep -qx "rknp ABI: $major.$minor" <<<"$out" ||
    bad "loaded library's ABI: $(grep '^rknp ABI' <<<"$out")"

deb=$(sed -n '1s/^rknp (\([^)-]*\)-[^)]*).*/\1/p' "$src/debian/changelog")
[ "$deb" = "$version" ] || bad "debian/changelog's newest entry is $deb (dch -v $version-1)"
released=$(grep -m1 -o '^## \[[0-9][^]]*\]' "$src/CHANGELOG.md" | tr -d '#[] ')
[ "$released" = "$version" ] || bad "CHANGELOG.md's newest release is $released"

[ "$fail" = 0 ] && echo "versions agree: $version, ABI $major.$minor, $soname -> librknp.so.$version"
exit "$fail"
