#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Benchmark suite entry (not part of the test run). Run as root:
#   sudo tests/bench/run.sh [--quick] [--repeat N] [--duration S] [--only NAME]...
#                           [--scenario all|tcp|udp | --udp-only] [--mtu N]...
# Prepares /dev/net/tun and the unprivileged test user, installs what the
# measurement needs, then runs bench.py (all arguments are passed through).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

need=()
for p in python3-matplotlib iperf3 slirp4netns passt uidmap iproute2; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

setup_test_user
# The test user must reach the binaries, the plugin and the bench scripts.
for d in "$ROOT" "$ROOT/tests" "$HERE" "$ROOT/build" "$ROOT/build/bin" "$ROOT/build/lib"; do
    [ -d "$d" ] && chmod o+rx "$d"
done

# Everything bench.py starts runs in its process group or in the veth
# namespaces; the trap removes what an interrupted run may leave.
BENCH_PID=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    [ -n "$BENCH_PID" ] && kill "$BENCH_PID" 2>/dev/null && wait "$BENCH_PID" 2>/dev/null
    for ns in rknpb-a rknpb-b; do ip netns del "$ns" 2>/dev/null || true; done
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
/usr/bin/python3 "$HERE/bench.py" "$@" &
BENCH_PID=$!
rc=0
wait "$BENCH_PID" || rc=$?
BENCH_PID=
echo "bench wall time: $(( $(date +%s) - start )) s"
exit $rc
