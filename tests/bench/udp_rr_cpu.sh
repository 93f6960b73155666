#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The stack's CPU per UDP round trip, for differences of a microsecond that
# unpinned latencies cannot show (not part of the test run;
# docs/udp-fast-path.md "What the measurements decided"). rknp-udp-rr between
# the child and a server on the host's 127.0.0.1, every task of a session
# pinned to one CPU, so a round trip is the sum of the three tasks' CPU
# time; two sessions at once, one per CPU, the CPUs swapped each round, so
# both drivers meet the same moments of a noisy machine. Per session: the
# stack's CPU (its threads' schedstat) over the round trips the child's
# namespace counted, and the client's p50/p99; at the end the medians and
# the median of the per-pair ratios B/A.
#
#   sudo tests/bench/udp_rr_cpu.sh [--rounds N] [--seconds S] A B
#
# A, B: plugin-fast, plugin-udp-slirp, slirp4netns, or plugin-fast=LIB for
# another build of the library (an A/B of two libraries). Defaults: 10
# rounds (20 pairs), 6 s sessions of which the middle 3.5 s are counted.
# BUILD_DIR: the build whose rootlesskit, library and rknp-udp-rr run
# (default build/). Needs 2 CPUs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
rounds=10 seconds=6
while [ $# -gt 2 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ $# = 2 ] || { echo "usage: $0 [--rounds N] [--seconds S] A B" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs" >&2; exit 1; }
[ "$seconds" -ge 5 ] || { echo "--seconds must be at least 5" >&2; exit 2; }
BUILD=${BUILD_DIR:-$ROOT/build}
setup_test_user
make_scratch udp-rr-cpu
trap 'end_run; rm -rf "$SCRATCH"' EXIT
chmod 0777 "$SCRATCH"

# session NAME DRIVER[=LIB] CPU OUT: one pinned session; appends
# "NAME cpu_us p50_us p99_us" to OUT.
session() {
    local name=$1 spec=$2 cpu=$3 out=$4 lib="$BUILD/lib/librknp.so.1" driver port server rk stack client
    driver=${spec%%=*}
    [ "$driver" = "$spec" ] || lib=${spec#*=}
    local NET
    udp_bench_net "$driver" "$lib"
    port=$(free_udp_port 127.0.0.1)
    taskset -c "$cpu" "$BUILD/bin/rknp-udp-rr" server 127.0.0.1 "$port" &
    server=$!
    track_bg "$server"
    user_argv "$BUILD/bin/rootlesskit"
    taskset -c "$cpu" "${ARGV[@]}" "${NET[@]}" --mtu=1500 -- \
        "$BUILD/bin/rknp-udp-rr" client 10.0.2.2 "$port" --seconds "$seconds" \
        --count 10000000 >"$SCRATCH/$name.$cpu.json" 2>"$SCRATCH/logs/$name.$cpu.log" &
    rk=$!
    # The stack: rootlesskit's own threads for the plugin, slirp4netns's
    # (rootlesskit's child); the client, once it runs.
    stack='' client=''
    for _ in $(seq 100); do
        sleep 0.1
        stack=$rk
        [ "$driver" = slirp4netns ] && stack=$(pgrep -P "$rk" -x slirp4netns || true)
        client=$(pgrep -f "^$BUILD/bin/rknp-udp-rr client 10.0.2.2 $port " || true)
        [ -n "$stack" ] && [ -n "$client" ] && break
    done
    if [ -z "$stack" ] || [ -z "$client" ]; then
        echo "$spec: the session did not start:" >&2
        tail -n 5 "$SCRATCH/logs/$name.$cpu.log" >&2
        return 1
    fi
    sleep 1 # past the client's warm-up
    "$PY" - "$stack" "$client" "$name" "$out" "$SCRATCH/$name.$cpu.json" "$rk" <<'EOF'
import glob, json, os, sys, time
stack, client, name, out, res, rk = sys.argv[1:7]

def cpu_ns():
    total = 0
    for f in glob.glob("/proc/%s/task/*/schedstat" % stack):
        try:
            total += int(open(f).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total

def requests():  # the client's namespace: UDP datagrams sent
    lines = [l.split() for l in open("/proc/%s/net/snmp" % client) if l.startswith("Udp:")]
    return int(lines[1][lines[0].index("OutDatagrams")])

try:
    c0, r0 = cpu_ns(), requests()
    time.sleep(3.5)
    c1, r1 = cpu_ns(), requests()
except OSError as e:  # the client ended early: no figure from this session
    sys.exit("%s: the client ended before the measurement did (%s)" % (name, e))
while os.path.exists("/proc/" + rk):  # the session ends with the client
    time.sleep(0.1)
d = json.load(open(res))
with open(out, "a") as f:
    f.write("%s %.3f %.1f %.1f\n" % (name, (c1 - c0) / 1e3 / (r1 - r0), d["p50_us"], d["p99_us"]))
EOF
    kill "$server" 2>/dev/null || true
}

results=$SCRATCH/results
for ((i = 0; i < rounds; i++)); do
    for swap in 0 1; do
        # A pair with a failed session is left out (the report counts pairs).
        session A "$1" "$swap" "$results.$i.$swap" &
        a=$!
        session B "$2" "$((1 - swap))" "$results.$i.$swap" || true
        wait "$a" || true
    done
done
"$PY" - "$1" "$2" "$results".* <<'EOF'
import statistics as st, sys
a_name, b_name = sys.argv[1:3]
a, b = [], []
for path in sys.argv[3:]:  # one file a pair
    rows = {r[0]: r for r in (l.split() for l in open(path))}
    if "A" in rows and "B" in rows:
        a.append(rows["A"])
        b.append(rows["B"])
if not a:
    sys.exit("no pair of sessions completed")
med = lambda rs, k: st.median(float(r[k]) for r in rs)
for name, rs in ((a_name, a), (b_name, b)):
    print("%-30s stack CPU per round trip %.2f us, p50 %.1f us, p99 %.1f us (medians of %d)"
          % (name, med(rs, 1), med(rs, 2), med(rs, 3), len(rs)))
ratio = lambda k: st.median(float(y[k]) / float(x[k]) for x, y in zip(a, b))
print("B/A per pair, median: CPU x%.3f, p50 x%.3f, p99 x%.3f" % (ratio(1), ratio(2), ratio(3)))
EOF
