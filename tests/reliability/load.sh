#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Integrity under load (run as root; the plugin runs as the test user):
# 512 concurrent TCP connections from the namespace to host 127.0.0.1,
# every byte of both directions compared and hashed, then one long
# transfer (default 3 GiB down, 1 GiB up). rknp-rel-driver requires the
# parent's fds back to tap + eventfd once the connections are done, and
# nothing left after close. With the fast path both again in its discard
# peek mode (kernels before 6.9; REL_PEEK_DISCARD_DOWN, 1 GiB, down then).
#   REL_CONNS (512)  REL_LONG_DOWN (3 GiB)  REL_LONG_UP (1 GiB)
set -euo pipefail
# shellcheck source=tests/reliability/common.sh
source "$(dirname "$0")/common.sh"
CONNS=${REL_CONNS:-512}
LONG_DOWN=${REL_LONG_DOWN:-3221225472}
LONG_UP=${REL_LONG_UP:-1073741824}
PORT=$(free_port 127.0.0.1)
serve "$PORT"

concurrent_case() {
    # 512 sockets in the parent plus libslirp's own: above the usual 1024
    # soft limit only with headroom, so raise it for the test user's run.
    drive --settle-ms 20000 -- sh -c "ulimit -n 4096 2>/dev/null;
        exec '$STREAM' client 10.0.2.2 $PORT --conns $CONNS --up 131072 --down 262144 --timeout 120"
}
check "$CONNS concurrent connections, every byte verified both ways, no fd growth" concurrent_case

long_case() {
    drive --settle-ms 20000 -- "$STREAM" client 10.0.2.2 "$PORT" --conns 1 \
        --down "$LONG_DOWN" --up "$LONG_UP" --timeout 240
}
check "long transfer ($LONG_DOWN bytes down, $LONG_UP up), verified and hashed" long_case

if [ "$TCP_PATH" = fast ]; then
    PEEK=discard
    LONG_DOWN=${REL_PEEK_DISCARD_DOWN:-$((LONG_DOWN < 1073741824 ? LONG_DOWN : 1073741824))}
    check "discard peek mode: $CONNS concurrent connections, every byte verified" concurrent_case
    check "discard peek mode: long transfer ($LONG_DOWN bytes down, $LONG_UP up)" long_case
    PEEK=
fi

sleep 0.2
check "no driver, client or state directory left behind" no_leftovers
finish
