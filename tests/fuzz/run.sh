#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Builds the libFuzzer targets with clang (installing clang-14 from Debian
# if missing) in a separate build directory and runs each for a bounded
# time. Fails on any crash, sanitizer report, leak, timeout or violated
# property. New inputs go to a scratch corpus; the committed seeds in
# corpus/<target>/ are only read.
#   FUZZ_SECONDS  seconds per target (default 30)
#   FUZZ_TARGETS  space-separated subset (default: all)
#   BUILD_DIR     (default: <repo>/build-fuzz)
#   FUZZ_OUT      where crash artifacts and the grown corpus go
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-30}
TARGETS=${FUZZ_TARGETS:-config opaque handover frames reassembly tcp udp}
OUT=${FUZZ_OUT:-$(mktemp -d /tmp/rknp-fuzz.XXXXXX)}

if ! command -v clang++-14 >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "clang-14 missing; run as root to install it"; exit 1; }
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        clang-14 libclang-rt-14-dev
fi
CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRKNP_FUZZ=ON -DRKNP_WERROR=OFF >/dev/null
cmake --build "$BUILD" --target rknp-fuzz-all

# Frames up to the 64 KiB + 1 KiB tap buffer plus record headers; tcp's and
# udp's records describe segments and datagrams (payloads are generated), 256
# records at most.
declare -A MAX_LEN=([config]=512 [opaque]=2048 [handover]=512 [frames]=140000
    [reassembly]=140000 [tcp]=4096 [udp]=4096)
failed=0
for t in $TARGETS; do
    mkdir -p "$OUT/$t/corpus" "$OUT/$t/artifacts"
    echo "== fuzz $t for ${SECONDS_EACH}s"
    rc=0
    # The target isolates its own network (a private netns, see
    # net_isolation.hpp) before the first input.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$BUILD/bin/rknp-fuzz-$t" -max_total_time="$SECONDS_EACH" -timeout=10 \
        -rss_limit_mb=2048 -max_len="${MAX_LEN[$t]}" -print_final_stats=1 \
        -artifact_prefix="$OUT/$t/artifacts/" \
        "$OUT/$t/corpus" "$ROOT/tests/fuzz/corpus/$t" >"$OUT/$t/log" 2>&1 || rc=$?
    grep -E '^stat::(number_of_executed_units|new_units_added)|cov:' "$OUT/$t/log" | tail -n 3
    if [ "$rc" != 0 ] || [ -n "$(ls -A "$OUT/$t/artifacts")" ]; then
        echo "FAIL fuzz $t (exit $rc); reproducers in $OUT/$t/artifacts:"
        ls "$OUT/$t/artifacts"
        tail -n 40 "$OUT/$t/log"
        failed=1
    else
        echo "PASS fuzz $t"
    fi
done
[ "$failed" = 0 ] && echo "all fuzz targets passed (logs in $OUT)"
exit "$failed"
