#!/bin/bash
# The whole test suite: build, unit + ABI + integration tests (ctest), Go
# tests and the rootlesskit end-to-end tests. Run as root on a fresh
# machine (it installs the Debian packages it needs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
[ "$(id -u)" = 0 ] || { echo "run as root (tests create namespaces and a test user)"; exit 1; }
"$ROOT/tests/install-deps.sh"
cmake -S "$ROOT" -B "$BUILD" -G Ninja
cmake --build "$BUILD"
ctest --test-dir "$BUILD" --output-on-failure
echo "== all tests passed"
