#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Builds a Go program the way a user of the module would: in a temporary
# directory outside the repository, with its own go.mod requiring
# github.com/rknp/rknp/go-bindings (a replace directive points at this
# checkout), then runs it against a built library and checks the versions
# it prints. A second build from `go mod vendor` sees only the module's own
# files, so it fails if the bindings reach outside the module root (for
# example a cgo include path into ../../abi).
#
#   tests/go-external/run.sh [LIBRARY]   # default: $BUILD_DIR/lib/librknp.so.1
#
# Needs go and the Go module proxy (for the module's dependencies).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LIB=${1:-${BUILD_DIR:-$ROOT/build}/lib/librknp.so.1}
# A path is made absolute (the program runs from another directory); a bare
# name such as librknp.so.1 is left to the dynamic loader.
fail() { echo "FAIL go-external: $*" >&2; exit 1; }
case "$LIB" in
*/*) [ -e "$LIB" ] || fail "no library at $LIB (cmake --build build --target rknp)"
    LIB=$(realpath "$LIB") ;;
esac
export GOFLAGS=-mod=mod

header_define() { sed -n "s/^#define $1 \([0-9]*\)$/\1/p" "$ROOT/abi/rknp.h"; }
abi_major=$(header_define RKNP_ABI_MAJOR)
abi_minor=$(header_define RKNP_ABI_MINOR)
project_version=$(sed -n 's/^project(rknp VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
if [ -z "$abi_major" ] || [ -z "$abi_minor" ] || [ -z "$project_version" ]; then
    fail "cannot read the ABI version from abi/rknp.h or the project version from CMakeLists.txt"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rknp-go-external.XXXXXX")
trap 'rm -rf "$work"' EXIT
case "$work/" in "$ROOT/"*) fail "temporary directory $work is inside the repository" ;; esac

go_line=$(sed -n 's/^go \(.*\)/\1/p' "$ROOT/go-bindings/go.mod")
cat >"$work/go.mod" <<MOD
module example.com/rknp-external

go $go_line

require github.com/rknp/rknp/go-bindings v0.0.0-00010101000000-000000000000

replace github.com/rknp/rknp/go-bindings => $ROOT/go-bindings
MOD
cp "$ROOT/tests/go-external/main.go" "$work/main.go"

check_output() { # $1: how it was built, $2: its output
    local want_head="bindings ABI $abi_major.$abi_minor"
    local got_abi got_version
    [ "$(sed -n 1p <<<"$2")" = "$want_head" ] || fail "$1: want '$want_head', got: $2"
    got_abi=$(sed -n 's/^library ABI \([0-9]*\)\.\([0-9]*\)$/\1 \2/p' <<<"$2")
    read -r lib_major lib_minor <<<"$got_abi" || fail "$1: no library ABI line in: $2"
    if [ "$lib_major" != "$abi_major" ] || [ "$lib_minor" -lt "$abi_minor" ]; then
        fail "$1: library ABI $lib_major.$lib_minor, bindings need $abi_major.>=$abi_minor"
    fi
    got_version=$(sed -n 's/^library version //p' <<<"$2")
    case "$got_version" in
    "$project_version "*) ;;
    *) fail "$1: library version '$got_version' does not start with the project version $project_version" ;;
    esac
    echo "PASS go-external ($1): $(tr '\n' ';' <<<"$2")"
}

(cd "$work" && go mod tidy && go build -o rknp-external .) ||
    fail "building the external program against the module (-mod=mod)"
out=$("$work/rknp-external" "$LIB") || fail "running the external program: $out"
check_output "module build" "$out"

rm -f "$work/rknp-external"
(cd "$work" && go mod vendor && GOFLAGS=-mod=vendor go build -o rknp-external .) ||
    fail "building from the vendored module: the module needs a file outside its root"
out=$("$work/rknp-external" "$LIB") || fail "running the vendored build: $out"
check_output "vendored build" "$out"
