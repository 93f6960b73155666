#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Rewrites the abigail baseline (abi/librknp.so.1.abi and its .version)
# from a built library, after an ABI minor bump in rknp.h:
#   abi/update-baseline.sh build/lib/librknp.so.1
# Refuses an incompatible change, and additions without a new
# RKNP_ABI_MINOR (FORCE=1 overrides, e.g. after a libabigail upgrade that
# only changed the representation).
set -euo pipefail
# shellcheck source=abi/abi-lib.sh
source "$(dirname "$0")/abi-lib.sh"
lib=${1:-$ABI_DIR/../build/lib/librknp.so.1}
abi_arch_supported || { echo "the baseline is written on x86_64"; exit 1; }
header=$(header_abi_version)
old=$(cat "$BASELINE_VERSION" 2>/dev/null || echo none)
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
abi_dump "$lib" >"$tmp"
if [ -e "$BASELINE" ] && [ "${FORCE:-0}" != 1 ]; then
    verdict=$(abi_diff "$BASELINE" "$tmp" | tail -n1)
    case $verdict in
        incompatible) echo "refused: incompatible change against ABI $old (FORCE=1 overrides)"; exit 1 ;;
        additions) [ "$header" != "$old" ] ||
            { echo "refused: additions but rknp.h still says ABI $old: bump RKNP_ABI_MINOR"; exit 1; } ;;
    esac
fi
cp "$tmp" "$BASELINE"
echo "$header" >"$BASELINE_VERSION"
echo "baseline written for ABI $header ($(wc -l <"$BASELINE") lines): commit abi/librknp.so.1.abi{,.version}"
