#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The whole reliability suite (as root): ABI misuse, frame-guard and
# concurrent-caller tests, fault tests, integrity under load (512
# connections, 3 GiB + 1 GiB transfer) and valgrind. Builds first unless
# NO_BUILD=1. About 1-2 min.
#   BUILD_DIR (default <repo>/build); REL_* knobs: see load.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces and a test user)"; exit 1; }
if [ "${NO_BUILD:-0}" != 1 ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja >/dev/null
    cmake --build "$BUILD"
fi
rc=0
step() {
    echo "== $1"
    shift
    local t0=$SECONDS
    "$@" || rc=1
    echo "   ($((SECONDS - t0)) s)"
}
step "ABI misuse and hostile hand-over peers" "$BUILD/bin/rknp-rel-abi-tests"
step "frame guard" "$BUILD/bin/rknp-rel-unit-tests"
step "stack thread against concurrent callers and close" "$BUILD/bin/rknp-rel-thread-tests"
step "fuzz corpus replay" ctest --test-dir "$BUILD" -L fuzz --output-on-failure
step "faults" "$ROOT/tests/reliability/faults.sh" "$BUILD"
step "integrity under load" "$ROOT/tests/reliability/load.sh" "$BUILD"
step "valgrind" "$ROOT/tests/reliability/valgrind.sh" "$BUILD"
[ "$rc" = 0 ] && echo "== reliability suite passed" || echo "== reliability suite FAILED"
exit "$rc"
