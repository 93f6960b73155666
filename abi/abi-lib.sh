# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# Shared by check-abi.sh and update-baseline.sh (sourced): how the abigail
# baseline of librknp.so.1 is written, and how a difference is classified.
ABI_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # BASELINE* are for the scripts that source this
BASELINE=$ABI_DIR/librknp.so.1.abi
# shellcheck disable=SC2034
BASELINE_VERSION=$ABI_DIR/librknp.so.1.abi.version
SUPPRESSIONS=$ABI_DIR/librknp.so.1.suppr

# The ABI version rknp.h declares, "MAJOR.MINOR".
header_abi_version() {
    local major minor
    major=$(sed -n 's/^#define RKNP_ABI_MAJOR \([0-9]*\)$/\1/p' "$ABI_DIR/rknp.h")
    minor=$(sed -n 's/^#define RKNP_ABI_MINOR \([0-9]*\)$/\1/p' "$ABI_DIR/rknp.h")
    echo "$major.$minor"
}

# abidw LIB > stdout, reproducibly: no paths, locations, architecture or
# DT_NEEDED, hash type ids, only what the exported functions reach.
abi_dump() {
    abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
        --no-architecture --type-id-style hash --drop-undefined-syms \
        --exported-interfaces-only --suppressions "$SUPPRESSIONS" "$1"
}

# The baseline is for LP64 x86_64 (struct layouts are per architecture).
abi_arch_supported() { [ "$(uname -m)" = x86_64 ]; }

# abi_diff OLD.abi NEW.abi: prints abidiff's report, then one of
#   same          no difference
#   additions     only added functions, struct members appended after the
#                 existing ones (the size grown) or new enumerators
#   incompatible  anything else (removed or changed functions, members
#                 removed, retyped, moved or inserted before the end)
abi_diff() {
    local report rc=0
    report=$(abidiff --no-show-locs "$1" "$2") || rc=$?
    [ -n "$report" ] && echo "$report"
    if (( rc & 1 || rc & 2 )); then echo "abidiff failed (exit $rc)" >&2; return 2; fi
    if [ "$rc" = 0 ]; then echo same; return 0; fi
    if (( rc & 8 )) || grep -Eq 'deletion|data member change|type name changed|offset changed|[1-9][0-9]* Removed|[1-9][0-9]* Changed variable|\[D\]|return type changed|parameter [0-9]+ of type .* changed:|enumerator change|name changed' <<<"$report"; then
        echo incompatible; return 0
    fi
    # A type that shrank. (Members may start inside the old tail padding:
    # the library reads callers' structs only up to each minor's frozen
    # size, offsetof + sizeof of its last member, plugin/struct_versions.hpp;
    # a member inserted before others shows as their "offset changed".)
    if awk '/type size changed from/ { if ($7 + 0 < $5 + 0) bad = 1 }
            END { exit bad ? 0 : 1 }' <<<"$report"; then
        echo incompatible; return 0
    fi
    echo additions
}
