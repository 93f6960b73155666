#!/bin/bash
# The whole test suite: build, unit + ABI + integration tests (ctest), Go
# tests and the rootlesskit end-to-end tests. Run as root on a fresh
# machine (it installs the Debian packages it needs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
[ "$(id -u)" = 0 ] || { echo "run as root (tests create namespaces and a test user)"; exit 1; }
source "$ROOT/tests/lib/build.sh"
"$ROOT/tests/install-deps.sh"
build_all "$BUILD"
ctest --test-dir "$BUILD" --output-on-failure
echo "== all tests passed"
