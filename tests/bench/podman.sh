#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Benchmark scenario `podman` (not part of the test run): rootless Podman
# 6.1 containers with `--network pasta` inside the Debian sid tree
# (tests/sid: the tree, its user, the world and test host namespaces),
# the real pasta 2026-10 (podman-real) against rknp-pasta from BUILD_DIR
# (podman-rknp), with the kernel's own veth pair as the reference. The
# agent (agent.py) runs in the container, the servers on the test host a
# veth away (198.18.5.2) and, for podman-real-wan and podman-rknp-wan, on
# a test host behind the WAN bed (tests/lib/wan_bed.sh: 20 ms each way,
# 40 ms RTT, no loss, a 1500-MTU link, joined to the world's namespace):
# TCP download and upload, 64 B ping-pong, new connections/s, ping-pong
# with 4000 idle connections, stack CPU per GB (pasta's process), peak
# RSS; and a published port (`podman run -p`, not the -wan twins): iperf3
# both ways from the world's loopback and from the test host (a
# non-loopback client), 64 B UDP request/response through a published UDP
# port. Every run is listed; the ratios are to podman-real. bench.py's
# options pass through (default here: --scenario tcp, the MTUs 1500 and
# 65520, 3 repeats; --scenario publish: the published-port tests only).
#
#   sudo tests/bench/podman.sh [--quick] [--repeat N] [--duration S] [--mtu N]...
#        [--scenario publish]
#   env: BUILD_DIR (default build-sid/), SID_TREE, SID_TIMEOUT (default
#   3600 s), BENCH_PODMAN_RTT_MS (default 40; 0: no WAN targets)
#
# Results: tests/bench/results/podman-DATE/ (results.md, results.json,
# bench.log). Runs wait for the sid suites (/run/lock/rknp-sid.lock).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/sid/lib.sh
. "$BENCH_DIR/../sid/lib.sh"
sid_locked "${SID_TIMEOUT:-3600}" "$@"
sid_rknp_built || exit 1
RTT=${BENCH_PODMAN_RTT_MS:-40}
WAN_DELAY_LINE=$BUILD_DIR/bin/rknp-delay-line
# shellcheck source=tests/lib/wan_bed.sh
. "$SID_REPO/tests/lib/wan_bed.sh"
"$SID_DIR/tree.sh" >/dev/null
sid_install_rknp
# The published-port tests' UDP request/response tool, in the tree (the
# host's end) and mounted into the containers (their end).
if [ -x "$BUILD_DIR/bin/rknp-udp-rr" ]; then
    install -D -m 0755 "$BUILD_DIR/bin/rknp-udp-rr" "$SID_TREE/usr/local/bin/rknp-udp-rr"
fi
RESULTS=$SID_REPO/tests/bench/results/podman-$(date +%Y-%m-%d_%H%M%S)
mkdir -p "$RESULTS"
chmod 0755 "$RESULTS"
echo "# bench podman: results in $RESULTS" >&2

sid_world_up
wan=()
if [ "$RTT" != 0 ]; then
    # shellcheck disable=SC2317 # run by sid_cleanup
    sid_cleanup_hook() { wan_bed_down --id 7 || true; }
    wan_bed_down --id 7 2>/dev/null || true
    wan_bed_up --id 7 --delay-ms $((RTT / 2)) --client-netns "$SID_WORLD"
    wan=(--bind "/run/netns/$WAN_NETNS:/rknp/wan.netns" --env "BENCH_PODMAN_WAN=$WAN_TEST_HOST")
fi
sid_run_cases bench/podman_inside.sh --bind "$RESULTS:/rknp/results" "${wan[@]}" --env "BENCH_ARGS=$*"
