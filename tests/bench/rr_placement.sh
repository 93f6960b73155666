#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Small request/response latency by placement (not part of the test run;
# tests/bench/README.md): a 64 B UDP request/response (rknp-udp-rr) and a
# 64 B TCP ping-pong (agent.py's) between the child and servers on the
# host's 127.0.0.1, with the stack, the client and the servers pinned to
# chosen CPUs. Unpinned, a session's p50 is drawn by where the scheduler
# puts the three tasks: on this kind of VM every wake-up of a task on the
# other vCPU costs about 25 us, more than any stack's own work, so a few
# unpinned sessions compare luck. Pinned, each placement compares the
# stacks alone.
#
#   sudo tests/bench/rr_placement.sh [--rounds N] [--places LIST] DRIVER...
#
# DRIVER: plugin-fast, plugin-udp-slirp, plugin-fast=LIB (another build of
# the library), slirp4netns, pasta. LIST: comma-separated placements, each
# three CPU numbers "SCH" (stack, client, servers) or "x" for unpinned;
# default 000,001,010,011,x. Rounds (default 3) interleave every
# (placement, driver); at the end, per placement and driver, the medians
# of the sessions' p50 and p99. BUILD_DIR: the build whose rootlesskit,
# library and rknp-udp-rr run (default build/). About 8 s a session.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
rounds=3 places=000,001,010,011,x
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --places) places=$2; shift 2 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--rounds N] [--places LIST] DRIVER..." >&2; exit 2; }
BUILD=${BUILD_DIR:-$ROOT/build}
ncpu=$(nproc)
for p in ${places//,/ }; do
    [ "$p" = x ] && continue
    [[ $p =~ ^[0-9]{3}$ ]] || { echo "bad placement $p" >&2; exit 2; }
    for c in "${p:0:1}" "${p:1:1}" "${p:2:1}"; do
        [ "$c" -lt "$ncpu" ] || { echo "placement $p: no CPU $c" >&2; exit 2; }
    done
done
setup_test_user
make_scratch rr-placement
trap 'end_run; rm -rf "$SCRATCH"' EXIT
chmod 0777 "$SCRATCH"

# session DRIVER[=LIB] PLACEMENT: one session; appends "PLACEMENT DRIVER
# udp_p50 udp_p99 tcp_p50 tcp_p99" to $SCRATCH/results.
session() {
    local spec=$1 place=$2 driver lib="$BUILD/lib/librknp.so.1" uport tport us ts
    local stack=() client='' host=() NET
    driver=${spec%%=*}
    [ "$driver" = "$spec" ] || lib=${spec#*=}
    case $driver in
        plugin-fast) NET=(--net=plugin "--net-plugin=$lib" --plugin-tcp=fast --plugin-udp=fast) ;;
        plugin-udp-slirp) NET=(--net=plugin "--net-plugin=$lib" --plugin-tcp=fast --plugin-udp=slirp) ;;
        slirp4netns | pasta) NET=("--net=$driver") ;;
        *) echo "unknown driver $driver" >&2; exit 2 ;;
    esac
    # rootlesskit, its stack thread or helper and the child start on the
    # stack's CPU; the child pins the clients to theirs.
    if [ "$place" != x ]; then
        stack=(taskset -c "${place:0:1}")
        client="taskset -c ${place:1:1}"
        host=(taskset -c "${place:2:1}")
    fi
    uport=$(free_udp_port 127.0.0.1)
    tport=$(free_port 127.0.0.1)
    "${host[@]}" "$BUILD/bin/rknp-udp-rr" server 127.0.0.1 "$uport" &
    us=$!
    "${host[@]}" "$PY" "$ROOT/tests/bench/echo_server.py" 127.0.0.1 "$tport" &
    ts=$!
    track_bg "$us"
    track_bg "$ts"
    wait_tcp 127.0.0.1 "$tport"
    user_argv "$BUILD/bin/rootlesskit"
    if ! "${stack[@]}" "${ARGV[@]}" "${NET[@]}" --mtu=1500 -- sh -c "
        $client $BUILD/bin/rknp-udp-rr client 10.0.2.2 $uport --seconds 3 --count 20000 &&
        $client python3 -c 'import json, sys; sys.path.insert(0, sys.argv[1]); import agent
print(json.dumps(agent.pingpong(\"10.0.2.2\", int(sys.argv[2]), 20000, 64, 3)))' \
            $ROOT/tests/bench $tport" >"$SCRATCH/out" 2>"$SCRATCH/logs/$driver.$place.log"; then
        echo "$spec $place: the session failed:" >&2
        tail -n 5 "$SCRATCH/logs/$driver.$place.log" >&2
    else
        "$PY" - "$place" "$spec" "$SCRATCH/out" >>"$SCRATCH/results" <<'EOF'
import json, sys
place, spec, out = sys.argv[1:4]
u, t = [json.loads(l) for l in open(out).read().split("\n") if l.startswith("{")][-2:]
print(place, spec, u["p50_us"], u["p99_us"], t["p50_us"], t["p99_us"])
EOF
        tail -n 1 "$SCRATCH/results"
    fi
    kill "$us" "$ts" 2>/dev/null || true
    wait "$us" "$ts" 2>/dev/null || true
}

for ((i = 0; i < rounds; i++)); do
    for p in ${places//,/ }; do
        for d in "$@"; do session "$d" "$p"; done
    done
done
[ -s "$SCRATCH/results" ] || { echo "no session completed" >&2; exit 1; }
"$PY" - "$SCRATCH/results" <<'EOF'
import collections, statistics as st, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    place, spec, *v = line.split()
    rows[(place, spec)].append([float(x) for x in v])
print("\nplacement (stack client servers), driver: medians of %s sessions, us"
      % "/".join(sorted({str(len(r)) for r in rows.values()})))
print("%-9s %-28s %9s %9s %9s %9s" % ("place", "driver", "udp p50", "udp p99", "tcp p50", "tcp p99"))
for (place, spec), r in rows.items():
    print("%-9s %-28s %9.1f %9.1f %9.1f %9.1f" % ((place, spec[:28]) +
          tuple(st.median(x[k] for x in r) for k in range(4))))
EOF
