#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Benchmark suite entry (not part of the test run). Run as root:
#   sudo tests/bench/run.sh [--quick] [--repeat N] [--duration S] [--only NAME]...
#                           [--scenario all|tcp|udp | --udp-only] [--mtu N]...
# Prepares /dev/net/tun and the unprivileged test user, installs what the
# measurement needs, then runs bench.py (all arguments are passed through).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"
bench_prepare
# Everything bench.py starts runs in its process group or in the veth
# namespaces, which an interrupted run may leave.
# shellcheck disable=SC2317 # run by the EXIT trap
bench_cleanup() {
    ip link del rknpp0 2>/dev/null || true
    for ns in rknpb-a rknpb-b rknpb-p; do ip netns del "$ns" 2>/dev/null || true; done
}
bench_run bench "$HERE/bench.py" "$@"
