#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Benchmark of the TCP fast path's two peek modes (not part of the test
# run; docs/tcp-fast-path.md "Peek modes"): one iperf3 stream host ->
# child (-R: the direction that peeks at host sockets) and child -> host
# through rknp-rel-driver --tcp-path fast --tcp-peek offset|discard (MTU
# 65520), the modes alternating run by run against one iperf3 server on
# the host's 127.0.0.1. Prints every run's Gbit/s and the driver's CPU
# seconds (its stack thread) per GB moved, their medians, and the median
# of the ratios discard/offset of each pair of runs (the two modes back
# to back: the ratio least disturbed by a busy machine).
# Offset needs Linux >= 6.9.
#
#   sudo tests/bench/peek_modes.sh [BUILD_DIR]
#   PEEK_REPEAT (3 per mode and direction)  PEEK_SECONDS (iperf3 -t, 4)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-$ROOT/build}")
REPEAT=${PEEK_REPEAT:-3}
SECONDS_PER_RUN=${PEEK_SECONDS:-4}
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
driver_bench_start peek-bench iperf3
PORT=$(free_port 127.0.0.1)
iperf3 -s -B 127.0.0.1 -p "$PORT" >"$SCRATCH/logs/iperf3-server.log" 2>&1 &
track_bg $!
wait_tcp 127.0.0.1 "$PORT"

# run MODE DIRECTION: one iperf3 run; prints the Gbit/s the receiver
# counted and the driver's CPU seconds (stack thread, nearly all of it)
# per GB moved.
run() {
    local mode=$1 dir=$2 rev=() cpu
    [ "$dir" = down ] && rev=(-R)
    as_user "$DRIVER" --log "$SCRATCH/logs/plugin.log" --tcp-path fast --tcp-peek "$mode" -- \
        iperf3 -c 10.0.2.2 -p "$PORT" -t "$SECONDS_PER_RUN" -J "${rev[@]}" \
        2>"$SCRATCH/driver.err" >"$SCRATCH/out.json" ||
        { tail -n 20 "$SCRATCH/driver.err" >&2; return 1; }
    cat "$SCRATCH/driver.err" >>"$SCRATCH/logs/driver.log"
    cpu=$(awk '/^rknp-rel-driver: cpu / {c = $3} END {print c}' "$SCRATCH/driver.err")
    python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print("%.2f %.3f" % (r["bits_per_second"] / 1e9, float(sys.argv[2]) / (r["bytes"] / 1e9)))' \
        "$SCRATCH/out.json" "$cpu"
}

declare -A runs
for ((i = 1; i <= REPEAT; i++)); do
    for dir in down up; do
        for mode in offset discard; do
            out=$(run "$mode" "$dir")
            read -r g c <<<"$out"
            echo "run $i $dir $mode: $g Gbit/s, $c CPU s/GB"
            runs[$dir.$mode]+="$g "
            runs[$dir.$mode.cpu]+="$c "
        done
        for m in "" .cpu; do
            o=${runs[$dir.offset$m]% }
            d=${runs[$dir.discard$m]% }
            runs[$dir.ratio$m]+="$(awk -v o="${o##* }" -v d="${d##* }" 'BEGIN {print d / o}') "
        done
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for dir in down up; do
    label="host -> child (-R)"
    [ "$dir" = up ] && label="child -> host"
    awk -v l="$label" -v n="$REPEAT" \
        -v o="$(median <<<"${runs[$dir.offset]}")" -v d="$(median <<<"${runs[$dir.discard]}")" \
        -v r="$(median <<<"${runs[$dir.ratio]}")" \
        -v oc="$(median <<<"${runs[$dir.offset.cpu]}")" -v dc="$(median <<<"${runs[$dir.discard.cpu]}")" \
        -v rc="$(median <<<"${runs[$dir.ratio.cpu]}")" \
        'BEGIN {printf "%s, medians of %d: offset %.2f, discard %.2f Gbit/s (discard/offset per pair %.2f); CPU offset %.3f, discard %.3f s/GB (discard/offset per pair %.2f)\n", l, n, o, d, r, oc, dc, rc}'
done
