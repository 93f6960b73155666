#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# UDP from a guest that sends with UDP_SEGMENT, as QUIC stacks do (not part
# of the test run; docs/benchmarks.md "UDP GSO senders"): a sender in the
# child pushes runs of SEG-byte datagrams (one send of 65000/SEG of them at
# a time) to a receiver on the host's 127.0.0.1 for S seconds; the
# receiver (UDP_GRO, 8 MiB buffer) prints what arrived. iperf3 sends one
# datagram a call and so never shows this path.
#
#   sudo tests/bench/udp_gso.sh [--driver plugin-fast|plugin-udp-slirp|slirp4netns]
#        [--mtu N] [--seg BYTES] [--seconds S] [--no-gso]
#
# Defaults: plugin-fast, MTU 1500, 1400-byte datagrams, 3 s. --no-gso: one
# datagram a send, for comparison. BUILD_DIR: the build whose rootlesskit
# and library run (default build/); RKNP_LIB: another library to load.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
driver=plugin-fast mtu=1500 seg=1400 seconds=3 mode=gso
while [ $# -gt 0 ]; do
    case $1 in
        --driver) driver=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --seg) seg=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --no-gso) mode=plain; shift ;;
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

cat >"$SCRATCH/receive.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
s.setsockopt(17, 104, 1)  # UDP_GRO: several datagrams a read
s.bind(("127.0.0.1", int(sys.argv[1])))
print("ready", flush=True)
s.settimeout(20)
n, first, last = 0, None, None
try:
    while True:
        d = s.recv(65535)
        last = time.monotonic()
        first = first or last
        n += len(d)
        s.settimeout(1)
except socket.timeout:
    pass
span = (last - first) if first else 0
print("arrived %d bytes in %.2f s: %.2f Gbit/s" % (n, span, n * 8 / span / 1e9 if span else 0))
PY
cat >"$SCRATCH/send.py" <<'PY'
import socket, sys, time
port, seg, secs, gso = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "gso"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("10.0.2.2", port))
if gso:
    s.setsockopt(17, 103, seg)  # UDP_SEGMENT
data = bytes(seg * (65000 // seg if gso else 1))
n, end = 0, time.monotonic() + secs
while time.monotonic() < end:
    for _ in range(50 if gso else 2000):
        try:
            n += s.send(data)
        except OSError:  # a refused or full path: what arrives is what counts
            pass
print("offered %.2f Gbit/s" % (n * 8 / secs / 1e9))
PY
python3 "$SCRATCH/receive.py" "$port" >"$SCRATCH/receiver.out" &
rpid=$!
track_bg "$rpid"
for _ in $(seq 50); do grep -q ready "$SCRATCH/receiver.out" && break; sleep 0.1; done
offered=$(as_user "$BUILD/bin/rootlesskit" "${NET[@]}" --mtu="$mtu" -- \
    python3 "$SCRATCH/send.py" "$port" "$seg" "$seconds" "$mode" 2>"$SCRATCH/logs/rootlesskit.log") ||
    { tail -n 20 "$SCRATCH/logs/rootlesskit.log"; exit 1; }
wait "$rpid" || true
echo "$driver, MTU $mtu, $seg-byte datagrams, $mode sends: $offered, $(grep arrived "$SCRATCH/receiver.out")"
