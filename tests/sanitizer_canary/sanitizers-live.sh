#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Proves that the sanitizers of this build are live: each canary mode of
# rknp-sanitizer-canary must exit non-zero with the sanitizer's report on
# stderr, under the *SAN_OPTIONS the test preset sets (inherited from ctest).
# As root, the leak canary also runs the way faults.sh, load.sh and the
# integration tests run their C binaries (as_user to the test user, in a new
# user+net namespace): a leak there must be reported too. A machine where
# LeakSanitizer cannot run (ptrace, some containers) fails here, loudly.
# Exit 77 (ctest SKIP) in a build without sanitizers: nothing to prove.
#   usage: sanitizers-live.sh CANARY "address;undefined"|thread|none
set -uo pipefail
CANARY=$1
SANITIZERS=";$2;"
if [ "$SANITIZERS" = ";none;" ]; then
    echo "not a sanitizer build: nothing to prove"
    exit 77
fi
echo "ASAN_OPTIONS=${ASAN_OPTIONS-} UBSAN_OPTIONS=${UBSAN_OPTIONS-} TSAN_OPTIONS=${TSAN_OPTIONS-}"
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
FAILED=0

# expect WHAT REPORT CMD...: CMD fails and its stderr contains REPORT.
expect() {
    local what=$1 report=$2 rc=0
    shift 2
    "$@" >/dev/null 2>"$OUT" || rc=$?
    if [ "$rc" -ne 0 ] && grep -qF "$report" "$OUT"; then
        echo "PASS $what: exit $rc, \"$report\""
        return
    fi
    echo "FAIL $what: exit $rc, no \"$report\" on stderr; the sanitizer is not live"
    grep -q "LeakSanitizer has encountered a fatal error" "$OUT" &&
        echo "    LeakSanitizer cannot run here (under ptrace, or ptrace is denied):" \
            "leaks would go unreported"
    sed 's/^/    /' "$OUT" | head -n 20
    FAILED=$((FAILED + 1))
}

if [[ $SANITIZERS == *";address;"* ]]; then
    expect "leak" "ERROR: LeakSanitizer: detected memory leaks" "$CANARY" leak
    expect "heap overflow" "ERROR: AddressSanitizer: heap-buffer-overflow" "$CANARY" overflow
    if [ "$(id -u)" = 0 ]; then
        # shellcheck source=tests/lib/common.sh
        source "$(dirname "$0")/../lib/common.sh"
        setup_test_user
        chmod o+rx "$(dirname "$CANARY")" "$(dirname "$CANARY")/.."
        expect "leak as the test user (as_user)" \
            "ERROR: LeakSanitizer: detected memory leaks" as_user "$CANARY" leak
        expect "leak as the test user in a user+net namespace" \
            "ERROR: LeakSanitizer: detected memory leaks" \
            as_user unshare --user --map-root-user --net "$CANARY" leak
    else
        echo "not root: the test-user runs of the leak canary are not checked"
    fi
fi
if [[ $SANITIZERS == *";undefined;"* ]]; then
    expect "signed overflow" "runtime error: signed integer overflow" "$CANARY" ub
fi
if [[ $SANITIZERS == *";thread;"* ]]; then
    expect "data race" "WARNING: ThreadSanitizer: data race" "$CANARY" race
fi
[ "$FAILED" = 0 ] || { echo "$FAILED sanitizer(s) not live"; exit 1; }
echo "every sanitizer of this build reported its canary"
