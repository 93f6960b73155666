#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Compares a built librknp.so.1 with the committed abigail baseline
# (abi/librknp.so.1.abi). Fails on any difference: an incompatible change
# needs a new ABI major (and SONAME); an addition needs RKNP_ABI_MINOR (and
# the project version) bumped and abi/update-baseline.sh run in the same
# commit. Fails too when the baseline was written for another ABI version
# than rknp.h declares. Exit 77 (skip) where it cannot run: no abigail
# tools, no debug info in the library, or not x86_64.
#   check-abi.sh path/to/librknp.so.1
set -euo pipefail
# shellcheck source=abi/abi-lib.sh
source "$(dirname "$0")/abi-lib.sh"
lib=${1:?usage: check-abi.sh LIBRARY}
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
    echo "SKIP: abidw/abidiff missing (Debian package abigail-tools)"
    exit 77
fi
abi_arch_supported || { echo "SKIP: the baseline is for x86_64"; exit 77; }
readelf -S "$lib" | grep -q '\.debug_info' ||
    { echo "SKIP: $lib has no debug info (build with -g)"; exit 77; }

header=$(header_abi_version)
baseline=$(cat "$BASELINE_VERSION")
if [ "$header" != "$baseline" ]; then
    echo "FAIL: the baseline is for ABI $baseline but rknp.h declares $header:"
    echo "      run abi/update-baseline.sh $lib in the same commit"
    exit 1
fi
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
abi_dump "$lib" >"$tmp"
out=$(abi_diff "$BASELINE" "$tmp")
verdict=$(tail -n1 <<<"$out")
[ "$verdict" = same ] || head -n -1 <<<"$out"
case $verdict in
    same) echo "ABI matches the baseline (ABI $header)"; exit 0 ;;
    additions)
        echo "FAIL: ABI additions not in the baseline (ABI $header): bump RKNP_ABI_MINOR"
        echo "      and the project version, then run abi/update-baseline.sh $lib" ;;
    incompatible)
        echo "FAIL: incompatible ABI change against ABI $header: keep the old layout and"
        echo "      append instead (a new major needs a new SONAME)" ;;
esac
exit 1
