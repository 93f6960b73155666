#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Where a UDP benchmark run loses its datagrams (not part of the test run;
# docs/benchmarks.md "UDP on loopback"): one iperf3 -u run between the
# child and the host's 127.0.0.1 through a driver, and the kernel's drop
# counters of both network namespaces around it: the receiving socket's
# buffer (UdpRcvbufErrors), the sending socket's (UdpSndbufErrors), IP
# discards, and the tap's own drops in the child. iperf3's "lost" is what
# the receiver missed; these say at which hop.
#
#   sudo tests/bench/udp_drops.sh [--driver plugin-fast|plugin-udp-slirp|slirp4netns]
#        [--mtu N] [--len BYTES] [--rate 10G] [--reverse] [--seconds S]
#        [--buffer SIZE]   # iperf3 -w on both ends (default: the system's)
#
# Defaults: plugin-fast, MTU 1500, 1472-byte datagrams, 10G offered,
# child -> host (--reverse: host -> child), 4 s. BUILD_DIR: the build whose
# rootlesskit and library run (default build/).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
driver=plugin-fast mtu=1500 len=1472 rate=10G reverse=() seconds=4 buffer=()
while [ $# -gt 0 ]; do
    case $1 in
        --driver) driver=$2; shift 2 ;;
        --mtu) mtu=$2; shift 2 ;;
        --len) len=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --reverse) reverse=(-R); shift ;;
        --seconds) seconds=$2; shift 2 ;;
        --buffer) buffer=(-w "$2"); shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
BUILD=${BUILD_DIR:-$ROOT/build}
udp_bench_net "$driver" "$BUILD/lib/librknp.so.1"
setup_test_user
make_scratch udp-drops
trap 'end_run; rm -rf "$SCRATCH"' EXIT
chmod 0777 "$SCRATCH"
port=$(free_port 127.0.0.1)
iperf3 -s -B 127.0.0.1 -p "$port" >"$SCRATCH/logs/server.log" 2>&1 &
track_bg $!
wait_tcp 127.0.0.1 "$port"

# COUNTERS: prints the drop counters of the current network namespace, one
# "Name value" a line, from /proc/net/snmp (a header line, then its
# values) and /proc/net/snmp6.
# shellcheck disable=SC2016 # awk's own $ fields, run by eval and sh -c
COUNTERS='awk '\''FILENAME ~ /snmp$/ && /^(Udp|Ip):/ {
        if (!($1 in names)) { for (i = 2; i <= NF; i++) h[$1, i] = $i; names[$1] = 1 }
        else for (i = 2; i <= NF; i++) print substr($1, 1, length($1) - 1) h[$1, i], $i
        next }
    FILENAME ~ /snmp6$/ {print $1, $2}'\'' /proc/net/snmp /proc/net/snmp6 |
    grep -E "RcvbufErrors|SndbufErrors|OutDiscards|InDiscards|InErrors" | grep -v Lite'
eval "$COUNTERS" >"$SCRATCH/host.before"
# The child: counters and tap statistics around the run, iperf3's JSON.
as_user "$BUILD/bin/rootlesskit" "${NET[@]}" --mtu="$mtu" --copy-up=/etc -- sh -c "
    $COUNTERS >'$SCRATCH/child.before'
    ip -s -s link show tap0 >'$SCRATCH/tap.before'
    iperf3 -u -c 10.0.2.2 -p $port -b $rate -l $len -t $seconds ${reverse[*]} ${buffer[*]} -J >'$SCRATCH/iperf3.json'
    $COUNTERS >'$SCRATCH/child.after'
    ip -s -s link show tap0 >'$SCRATCH/tap.after'" 2>"$SCRATCH/logs/rootlesskit.log" ||
    { tail -n 20 "$SCRATCH/logs/rootlesskit.log"; exit 1; }
eval "$COUNTERS" >"$SCRATCH/host.after"

python3 - "$SCRATCH" "$driver" "$mtu" "$len" "$rate" "${reverse[*]}" <<'EOF'
import json, re, sys
d, driver, mtu, length, rate, rev = sys.argv[1:7]

def counters(name):
    out = {}
    for line in open("%s/%s" % (d, name)):
        k, v = line.split()
        out[k] = int(v)
    return out

def delta(ns):
    a, b = counters(ns + ".before"), counters(ns + ".after")
    return {k: b[k] - a.get(k, 0) for k in b if b[k] != a.get(k, 0)}

def tap_drops(name):
    # ip -s -s: the RX and TX lines of numbers follow their headers.
    lines = open("%s/%s" % (d, name)).read().splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"\s*(RX|TX):\s+bytes\s+packets\s+errors\s+dropped", line)
        if m and i + 1 < len(lines):
            nums = lines[i + 1].split()
            out[m.group(1)] = int(nums[3])
    return out

end = json.load(open(d + "/iperf3.json"))["end"]
got = end.get("sum_received", end["sum"])
sent = end.get("sum_sent", end["sum"])
way = "host -> child" if rev else "child -> host"
print("%s, %s, MTU %s, %s-byte datagrams at %s offered" % (driver, way, mtu, length, rate))
print("  sent %d datagrams, %.2f Gbit/s arrived, lost %s (%.1f%%)" % (
    sent.get("packets", 0), got["bits_per_second"] / 1e9, got.get("lost_packets"),
    got.get("lost_percent", 0.0)))
tb, ta = tap_drops("tap.before"), tap_drops("tap.after")
print("  tap0 drops (child): RX %d, TX %d" % (ta.get("RX", 0) - tb.get("RX", 0),
                                            ta.get("TX", 0) - tb.get("TX", 0)))
for ns in ("host", "child"):
    dl = delta(ns)
    print("  %s namespace: %s" % (ns, ", ".join("%s %d" % kv for kv in sorted(dl.items()))
                                  or "no drop counted"))
EOF
