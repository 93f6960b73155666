#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# UDP from senders that batch: UDP_SEGMENT, as QUIC stacks do, or (--mmsg)
# plain datagrams 64 a call (not part of the test run; docs/benchmarks.md
# "GSO senders", "Ends that batch"): a sender in the
# child pushes runs of SEG-byte datagrams (one send of 65000/SEG of them at
# a time) to a receiver on the host's 127.0.0.1 for S seconds (--reverse:
# a sender there to a receiver in the child, iperf3 -R's way); the
# receiver (UDP_GRO, 8 MiB buffer) prints what arrived. iperf3 sends one
# datagram a call and so never shows this path (tests/bench/udp_gso_peer.py
# is both ends).
#
#   sudo tests/bench/udp_gso.sh [--driver plugin-fast|plugin-udp-slirp|slirp4netns]
#        [--mtu N] [--seg BYTES] [--seconds S] [--no-gso|--mmsg] [--reverse]
#
# Defaults: plugin-fast, MTU 1500, 1400-byte datagrams, 3 s. --no-gso: one
# datagram a send, for comparison. --mmsg: plain datagrams again, but
# both ends are rknp-udp-flood (64 a sendmmsg/recvmmsg call, no UDP_GRO),
# so that the stack, not the tool, is the bound. BUILD_DIR: the build whose rootlesskit
# and library run (default build/); RKNP_LIB: another library to load.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
driver=plugin-fast mtu=1500 seg=1400 seconds=3 mode=gso reverse=0
while [ $# -gt 0 ]; do
    case $1 in
        --driver) driver=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --seg) seg=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --no-gso) mode=plain; shift ;;
        --mmsg) mode=mmsg; shift ;;
        --reverse) reverse=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
BUILD=${BUILD_DIR:-$ROOT/build}
udp_bench_net "$driver" "${RKNP_LIB:-$BUILD/lib/librknp.so.1}"
setup_test_user
make_scratch udp-gso
trap 'end_run; rm -rf "$SCRATCH"' EXIT
chmod 0777 "$SCRATCH"
port=$(free_udp_port 127.0.0.1)

if [ "$mode" = mmsg ]; then
    install -m 0755 "$BUILD/bin/rknp-udp-flood" "$SCRATCH/peer"
    peer=("$SCRATCH/peer") how=()
else
    install -m 0755 "$ROOT/tests/bench/udp_gso_peer.py" "$SCRATCH/peer.py"
    peer=(python3 "$SCRATCH/peer.py") how=("$mode")
fi
if [ "$reverse" = 0 ]; then # child -> host
    "${peer[@]}" sink 127.0.0.1 "$port" >"$SCRATCH/host.out" &
    child=(source 10.0.2.2 "$port" "$seg" "$seconds" "${how[@]}")
else # host -> child, to the address the child's hello came from
    "${peer[@]}" source 127.0.0.1 "$port" "$seg" "$seconds" "${how[@]}" --wait-hello >"$SCRATCH/host.out" &
    child=(sink 0.0.0.0 0 --hello "10.0.2.2:$port")
fi
hpid=$!
track_bg "$hpid"
for _ in $(seq 50); do grep -q ready "$SCRATCH/host.out" && break; sleep 0.1; done
as_user "$BUILD/bin/rootlesskit" "${NET[@]}" --mtu="$mtu" -- \
    "${peer[@]}" "${child[@]}" >"$SCRATCH/child.out" 2>"$SCRATCH/logs/rootlesskit.log" ||
    { tail -n 20 "$SCRATCH/logs/rootlesskit.log"; exit 1; }
wait "$hpid" || true
way=$([ "$reverse" = 0 ] && echo "child -> host" || echo "host -> child")
echo "$driver, $way, MTU $mtu, $seg-byte datagrams, $mode sends:" \
    "$(cat "$SCRATCH/host.out" "$SCRATCH/child.out" | grep -v ready | paste -sd, -)"
