#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Installs the build into a temporary prefix and builds a C consumer against
# it twice: with pkg-config and with CMake's find_package. Both must run.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d /tmp/rknp-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name rknp.pc)")/..
test -e "$libdir/librknp.so.1" || { echo "no librknp.so.1 in $libdir"; exit 1; }
test -e "$prefix/include/rknp.h" || { echo "header not installed"; exit 1; }
export PKG_CONFIG_PATH=$libdir/pkgconfig
# The prefix differs from the configured one: point pkg-config at it.
read -ra flags <<<"$(pkg-config --define-variable=prefix="$prefix" --cflags --libs rknp)"
cc -std=c99 -Wall -Wextra -pedantic -Werror "$src/consumer.c" -o "$prefix/consumer" \
    "${flags[@]}" -Wl,-rpath,"$libdir"
"$prefix/consumer"
cmake -S "$src/cmake-consumer" -B "$prefix/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm" >/dev/null
LD_LIBRARY_PATH=$libdir "$prefix/cm/consumer"
