#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Fault tests (run as root; the plugin runs as the unprivileged test user):
# the child killed mid-transfer, the parent closed with connections active,
# host peers resetting connections, foreign hand-over peers, and the IPv4
# fragments that crashed libslirp. rknp-rel-driver checks after each that no
# thread, fd (socket, eventfd, tap) or state dir is left. Traffic goes only
# to 127.0.0.1 (the host side) and the test's own namespaces.
set -euo pipefail
# shellcheck source=tests/reliability/common.sh
source "$(dirname "$0")/common.sh"
PORT=$(free_port 127.0.0.1)
RPORT=$(free_port 127.0.0.1)
HPORT=$(free_port 127.0.0.1)
serve "$PORT"
serve "$RPORT" --reset-after 1000000
serve "$HPORT" --reset-after 200000 --half-close 1

kill_child_case() {
    drive --kill-child-after 30000000 --expect-exit killed -- \
        "$STREAM" client 10.0.2.2 "$PORT" --conns 8 --up 400000000 --down 400000000
}
check "child killed mid-transfer: no thread, fd or tap left in the parent" kill_child_case

close_parent_case() {
    # The client's connections die with the tap; it gives up after 10 s.
    drive --close-after 30000000 --expect-exit any --child-timeout 60 -- \
        "$STREAM" client 10.0.2.2 "$PORT" --conns 8 --up 400000000 --down 400000000 --timeout 10
}
check "parent closed with connections active: clean close, the child ends" close_parent_case

resets_case() {
    # The host aborts every upload (RST after 1 MB), or closes it (after
    # 200 kB) while the guest keeps sending: libslirp then writes into
    # closed sockets, which raises SIGPIPE unless the stack thread blocks
    # it (without the block the driver dies here with status 141). Then a
    # normal transfer proves the stack still works.
    drive -- sh -c "'$STREAM' client 10.0.2.2 $RPORT --conns 32 --up 50000000 --down 1000 \
            --expect-reset --timeout 60 &&
        '$STREAM' client 10.0.2.2 $HPORT --conns 64 --up 20000000 --down 1000 \
            --expect-reset --timeout 60 &&
        '$STREAM' client 10.0.2.2 $PORT --conns 4 --up 4000000 --down 4000000 --timeout 60"
}
check "host peers reset connections mid-transfer: no SIGPIPE death, stack keeps working" resets_case

foreign_case() {
    local out=$SCRATCH/foreign.out sock rc=0
    rm -f "$SCRATCH/go"
    drive --hold "$SCRATCH/go" --expect-refused 2 -- \
        "$STREAM" client 10.0.2.2 "$PORT" --conns 1 --up 1000 --down 1000 >"$out" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do grep -q '^socket ' "$out" && break; sleep 0.05; done
    sock=$(sed -n 's/^socket //p' "$out")
    [ -n "$sock" ] || { cat "$out"; return 1; }
    # Another uid (root) and another process of the same uid.
    python3 "$SCRATCH/foreign_peer.py" "$sock" || rc=1
    as_user python3 "$SCRATCH/foreign_peer.py" "$sock" || rc=1
    touch "$SCRATCH/go"
    wait "$pid" || rc=1
    cat "$out"
    grep -q 'hand-over refused: peer pid' "$SCRATCH/plugin.log" || { echo "refusal not logged"; rc=1; }
    return $rc
}
check "hand-over from other processes (other uid, same uid) refused and logged" foreign_case

fragment_case() {
    local out
    out=$(drive -- sh -c "python3 '$SCRATCH/send_fragment.py' &&
        '$STREAM' client 10.0.2.2 $PORT --conns 2 --up 1000000 --down 1000000" 2>&1) || {
        echo "$out"
        return 1
    }
    echo "$out"
    grep -q 'dropped=[1-9]' <<<"$out"
}
check "lone and contradicting IPv4 fragments from the guest are dropped, not a crash of the parent" fragment_case

sleep 0.2
check "no driver, client or state directory left behind" no_leftovers
finish
