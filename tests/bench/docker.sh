#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Benchmark scenario: a container inside rootless Docker (Debian's
# docker.io 20.10 started with its dockerd-rootless.sh as shipped, docker0
# at MTU 1500, rootlesskit's MTU 65520) running iperf3 against a test host
# behind a veth pair, download (-R) and upload, for each route of
# tests/e2e/docker_lib.sh: fork (rknp, TCP fast path), fork-slirp (rknp,
# TCP through libslirp), stock (Debian's rootlesskit with rknp-slirp4netns)
# and slirp4netns (Debian's rootlesskit and slirp4netns: the reference).
# UDP too: iperf3 -u both ways at each --udp-rate (default 1G and 10G
# offered), datagrams of 1472 bytes (docker0's MTU 1500); the receiver's
# arrived rate and loss. All dockerds run at once; runs go round-robin
# (repeat 1 of every route and direction, then repeat 2, ...) so drifts of
# the machine hit all routes alike. Not a test: no threshold;
# docker_report.py writes medians and ratios to slirp4netns.
#
#   sudo tests/bench/docker.sh [--repeat N] [--duration S] [--route R]... [--results DIR]
#        [--udp-rate RATE]... [--no-udp | --udp-only]
#        [--wan-rtt MS [--wan-loss PERCENT] [--debian-sysctls]]
#
# --wan-rtt puts the test host behind the WAN bed (tests/lib/wan_bed.sh,
# bed 41: RTT/2 each way, 1500-MTU link, --wan-loss per packet) instead of
# a plain veth pair; --debian-sysctls sets Debian's socket sysctls for the
# run (restored at the end).
# Needs the build (tests/lib/build.sh build_all) and tests/install-deps.sh's
# packages plus iperf3. Traffic goes only to the namespace this script
# creates (and the host's loopback for the docker API).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
E2E_DIR=$REPO/tests/e2e
BUILD_DIR=${BUILD_DIR:-$REPO/build}

REPEAT=3
DURATION=5
ROUTES=()
WAN_RTT=
WAN_LOSS=0
WAN_DEBIAN=()
UDP_RATES=()
PROTOS=(tcp udp)
RESULTS=$REPO/tests/bench/results/docker-$(date -u +%Y%m%d_%H%M%S)
while [ $# -gt 0 ]; do
    case $1 in
    --repeat) REPEAT=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --route) ROUTES+=("$2"); shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    --wan-rtt) WAN_RTT=$2; shift 2 ;;
    --wan-loss) WAN_LOSS=$2; shift 2 ;;
    --debian-sysctls) WAN_DEBIAN=(--debian-sysctls); shift ;;
    --udp-rate) UDP_RATES+=("$2"); shift 2 ;;
    --no-udp) PROTOS=(tcp); shift ;;
    --udp-only) PROTOS=(udp); shift ;;
    *) echo "usage: $0 [--repeat N] [--duration S] [--route fork|fork-slirp|stock|slirp4netns]... [--results DIR] [--udp-rate RATE]... [--no-udp | --udp-only] [--wan-rtt MS [--wan-loss PERCENT] [--debian-sysctls]]" >&2; exit 2 ;;
    esac
done
[ ${#ROUTES[@]} -gt 0 ] || ROUTES=(fork fork-slirp stock slirp4netns)
[ ${#UDP_RATES[@]} -gt 0 ] || UDP_RATES=(1G 10G)

# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_require "creates a user, namespaces and a veth pair" "tests/install-deps.sh, apt-get install iperf3; tests/lib/build.sh build_all" \
    "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1" \
    /usr/share/docker.io/contrib/dockerd-rootless.sh /usr/sbin/dockerd /usr/bin/docker \
    /usr/bin/rootlesskit /usr/bin/slirp4netns /usr/bin/iperf3 /bin/busybox
NETNS_HOST=rknp-dk-bench
IPERF_PORT=5201
DOCKERD_TIMEOUT=$((600 + REPEAT * ${#ROUTES[@]} * 2 * (1 + ${#UDP_RATES[@]}) * (DURATION + 15)))
# The UDP datagram size: the largest that crosses docker0 (MTU 1500) whole.
UDP_LEN=1472
IMAGE=rknp-iperf3:local
stop_all() {
    local r
    for r in "${!DOCKERD_PID[@]}"; do stop_dockerd "$r" || true; done
}
# shellcheck source=tests/lib/wan_bed.sh
. "$REPO/tests/lib/wan_bed.sh"
wan_bed_names 41
wan_cleanup() {
    if [ -n "$WAN_RTT" ]; then wan_bed_down; fi
}
e2e_scratch docker-bench "stop_all; docker_cleanup; wan_cleanup"
mkdir -p "$SCRATCH"/{fork-bin,image} "$RESULTS"
# shellcheck source=tests/e2e/docker_lib.sh
. "$E2E_DIR/docker_lib.sh"
TEST_HOST=$DOCKER_TEST_NET.2
install_route_binaries
if [ -n "$WAN_RTT" ]; then
    NETNS_HOST=$WAN_NETNS
    TEST_HOST=$WAN_TEST_HOST
fi

setup_test_user
make_image "$SCRATCH/image/iperf3.tar" /usr/bin/iperf3
if [ -n "$WAN_RTT" ]; then
    wan_bed_up --delay-ms "$(awk -v r="$WAN_RTT" 'BEGIN { print r / 2 }')" --loss "$WAN_LOSS" "${WAN_DEBIAN[@]}"
else
    setup_docker_test_host "$NETNS_HOST"
fi
ip netns exec "$NETNS_HOST" iperf3 -s -B "$TEST_HOST" -p "$IPERF_PORT" >"$SCRATCH/logs/iperf3-server.log" 2>&1 &
BG_PIDS+=($!)
wait_tcp "$TEST_HOST" "$IPERF_PORT" "$NETNS_HOST"

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r), $(nproc) CPUs"
    echo "docker: $(/usr/sbin/dockerd --version)"
    echo "rootlesskit (stock): $(/usr/bin/rootlesskit --version)"
    echo "slirp4netns: $(/usr/bin/slirp4netns --version | head -n1)"
    echo "fork: $("$SCRATCH/fork-bin/docker-rootlesskit" --version --net-plugin="$LIB" | tr '\n' ' ')"
    echo "repeat $REPEAT, iperf3 -t $DURATION, routes ${ROUTES[*]}, protocols ${PROTOS[*]}"
    echo "UDP: iperf3 -u -l $UDP_LEN at ${UDP_RATES[*]} offered"
    if [ -n "$WAN_RTT" ]; then
        echo "test host behind the WAN bed: RTT $WAN_RTT ms, loss $WAN_LOSS %, link MTU 1500${WAN_DEBIAN:+, Debian socket sysctls}"
    fi
} | tee "$RESULTS/docker-machine.txt" >&2

for r in "${ROUTES[@]}"; do
    log "starting dockerd [$r]"
    start_dockerd "$r" "$SCRATCH/image/iperf3.tar" >"$SCRATCH/logs/start.$r.log" 2>&1 ||
        { cat "$SCRATCH/logs/start.$r.log" >&2; exit 1; }
    # docker0's MTU as the run sees it, and a warm-up run.
    log "[$r] docker0 mtu $(dk "$r" network inspect bridge -f '{{index .Options "com.docker.network.driver.mtu"}}' 2>/dev/null || echo default)"
    dk "$r" run --rm --pull=never "$IMAGE" iperf3 -c "$TEST_HOST" -p "$IPERF_PORT" -t 1 >/dev/null
done

# One JSON result per (repeat, route, case); a case is a TCP direction
# (download, upload) or a UDP one at an offered rate (udp_download_1G, ...).
# A failed run leaves its stderr next to it and the report counts it as an
# error.
cases=()
for proto in "${PROTOS[@]}"; do
    if [ "$proto" = tcp ]; then
        cases+=(download upload)
    else
        for rate in "${UDP_RATES[@]}"; do cases+=("udp_download_$rate" "udp_upload_$rate"); done
    fi
done
for rep in $(seq "$REPEAT"); do
    for r in "${ROUTES[@]}"; do
        for c in "${cases[@]}"; do
            flags=()
            case $c in *download*) flags=(-R) ;; esac
            case $c in udp_*) flags+=(-u -b "${c##*_}" -l "$UDP_LEN") ;; esac
            out=$RESULTS/docker-$r-$c-$rep.json
            log "repeat $rep [$r] $c"
            dk "$r" run --rm --pull=never "$IMAGE" iperf3 -c "$TEST_HOST" -p "$IPERF_PORT" \
                -t "$DURATION" -J "${flags[@]}" >"$out" 2>"$out.err" || true
        done
    done
done

find "$RESULTS" -name 'docker-*.json.err' -empty -delete
/usr/bin/python3 "$BENCH_DIR/docker_report.py" "$RESULTS" "${ROUTES[@]}" | tee "$RESULTS/docker.md"
