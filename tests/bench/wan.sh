#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Benchmark scenario `wan` (not part of the test run): one TCP stream
# between a rootless child and a test host behind the WAN bed
# (tests/lib/wan_bed.sh: RTT, loss, a 1500-MTU link, Debian's socket
# sysctls set for the run and restored), for the plugin's fast path, the
# plugin via libslirp, rknp-slirp4netns behind stock rootlesskit,
# slirp4netns, pasta, and the host kernel's own iperf3 as the reference.
# Every run's figure is reported (wan.md, wan.png; see wan.py, wan_report.py).
#
#   sudo tests/bench/wan.sh [--rtt MS]... [--loss PERCENT]... [--mtu N]...
#        [--driver NAME]... [--direction download|upload]... [--repeat N]
#        [--seconds S] [--no-debian-sysctls] [--bed-id N] [--ref-lib PATH]
#        [--results DIR]
#   sudo tests/bench/wan.sh --quick    # RTT 40, loss 0, MTU 65520, host +
#                                      # slirp4netns + plugin-fast, 2 repeats, -t 4
#
# Defaults: RTT 10 40 100 ms, loss 0 and 0.5 %, MTU 1500 and 65520, every
# driver, both directions, 3 repeats, iperf3 -t 6 (about 70 minutes).
# Needs the build (tests/lib/build.sh build_all, or at least the targets
# rknp, rknp-slirp4netns, rknp-delay-line and build/bin/rootlesskit).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

args=()
bed_id=40
while [ $# -gt 0 ]; do
    case $1 in
        --quick)
            args+=(--rtt 40 --loss 0 --mtu 65520 --driver host --driver slirp4netns
                --driver plugin-fast --repeat 2 --seconds 4)
            shift ;;
        --bed-id) bed_id=$2; args+=("$1" "$2"); shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done

bench_prepare
[ -x "$ROOT/build/bin/rknp-delay-line" ] ||
    { echo "build first: cmake --build build --target rknp-delay-line" >&2; exit 1; }
# wan.py brings the bed up and down per cell: an interrupted run may leave
# one (the sysctls it saved are restored with it).
# shellcheck disable=SC2317 # run by the EXIT trap
bench_cleanup() { "$ROOT/tests/lib/wan_bed.sh" down --id "$bed_id" 2>/dev/null || true; }
bench_run "wan bench" "$HERE/wan.py" "${args[@]}"
