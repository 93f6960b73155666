#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Valgrind memcheck over the ABI tests and a short transfer through
# rknp-harness (the mini rootlesskit of tests/integration). Fails on a
# definite leak or a memory error in the library (vg_report.py); run as
# root (the transfer runs as the test user in its own namespaces, to host
# 127.0.0.1 only).
set -euo pipefail
# shellcheck source=tests/reliability/common.sh
source "$(dirname "$0")/common.sh"
command -v valgrind >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y valgrind >/dev/null
VG=(valgrind --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
    --track-origins=no --num-callers=30 --trace-children=no --child-silent-after-fork=yes)
LOGS=$SCRATCH/vg
mkdir -p "$LOGS" && chmod 0777 "$LOGS"
PORT=$(free_port 127.0.0.1)
serve "$PORT"

abi_case() {
    local t
    for t in rknp-abi-tests rknp-rel-abi-tests; do
        "${VG[@]}" --log-file="$LOGS/$t.%p" "$BUILD/bin/$t" >"$LOGS/$t.out" 2>&1 ||
            { tail -n 20 "$LOGS/$t.out"; return 1; }
    done
    python3 "$REL_DIR/vg_report.py" "$LOGS"/rknp-abi-tests.* "$LOGS"/rknp-rel-abi-tests.[0-9]*
}
check "ABI tests under valgrind: no definite leak or memory error in the library" abi_case

harness_case() {
    as_user "${VG[@]}" --log-file="$LOGS/harness.%p" "$BUILD/bin/rknp-harness" \
        --log "$SCRATCH/plugin.log" -- \
        "$STREAM" client 10.0.2.2 "$PORT" --conns 4 --up 2000000 --down 2000000 --timeout 120
    python3 "$REL_DIR/vg_report.py" "$LOGS"/harness.*
}
check "harness transfer under valgrind: no definite leak or memory error in the library" harness_case
finish
