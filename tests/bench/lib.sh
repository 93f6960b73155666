# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# What the benchmark entry scripts run.sh and wan.sh share (sourced after
# HERE, tests/bench, is set): the root check and tests/lib/common.sh on
# sourcing, then bench_prepare and bench_run.

ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }

# bench_prepare: installs what the measurements need, and the unprivileged
# test user, who must reach the binaries, the plugin and the bench scripts.
bench_prepare() {
    local need=() p d
    for p in python3-matplotlib iperf3 slirp4netns passt uidmap iproute2; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
    fi
    setup_test_user
    for d in "$ROOT" "$ROOT/tests" "$HERE" "$ROOT/build" "$ROOT/build/bin" "$ROOT/build/lib"; do
        [ -d "$d" ] && chmod o+rx "$d"
    done
    return 0
}

# bench_run LABEL SCRIPT ARG...: python3 SCRIPT ARG... in the background,
# so that an interrupt reaches the EXIT trap, which ends it and calls the
# caller's bench_cleanup (what an interrupted run may leave); then LABEL's
# wall time, and exit with the script's status.
BENCH_PID=
# shellcheck disable=SC2317 # run by the EXIT trap
bench_stop() {
    [ -n "$BENCH_PID" ] && kill "$BENCH_PID" 2>/dev/null && wait "$BENCH_PID" 2>/dev/null
    bench_cleanup
    return 0
}
bench_run() {
    local label=$1 start=$SECONDS rc=0
    shift
    trap bench_stop EXIT
    trap 'exit 130' INT TERM
    /usr/bin/python3 "$@" &
    BENCH_PID=$!
    wait "$BENCH_PID" || rc=$?
    BENCH_PID=
    echo "$label wall time: $((SECONDS - start)) s"
    exit "$rc"
}
