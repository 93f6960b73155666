#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# What an idle TCP flow through libslirp costs rootlesskit's parent once a
# connection has closed (tests/bench/idle_flows.py, 1000 flows): fails
# above 64 KiB a flow. With the mmap threshold held an idle flow keeps
# about 9 KiB; with glibc's dynamic threshold, libslirp's two buffers are
# copied on the heap, 256 KiB. Memory only, no timing. Loopback and
# rootlesskit's own namespaces only. Needs root, the test user and the
# rootlesskit that build_all makes (else exit 77, a skip).
#   idle_flows_memory.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: idle_flows_memory.sh BUILD_DIR}
TEST_USER=${RKNP_TEST_USER:-rknptest}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
[ -x "$BUILD/bin/rootlesskit" ] || { echo "SKIP: no $BUILD/bin/rootlesskit"; exit 77; }
id "$TEST_USER" >/dev/null 2>&1 || { echo "SKIP: no test user $TEST_USER"; exit 77; }
exec python3 "$(dirname "$0")/../bench/idle_flows.py" --user "$TEST_USER" \
    --flows 1000 --bulk-mb 8 --repeat 1 --count 100 --max-kib-per-flow 64 \
    --rootlesskit "$BUILD/bin/rootlesskit" --plugin-lib "$BUILD/lib/librknp.so.1"
