#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The Podman benchmark's side inside the sid tree (run by
# tests/bench/podman.sh through tests/sid/enter.sh, as root, in the world
# namespace): rootless Podman set up as the sid cases set it up
# (tests/sid/podman_lib.sh), then bench.py with the targets podman-real,
# podman-rknp, their -wan twins when BENCH_PODMAN_WAN names the WAN bed's
# test host, and veth (targets.py's PodmanPasta reads the BENCH_PODMAN_*
# variables); with `--scenario publish` (only the published-port tests)
# the first two only. BENCH_ARGS: bench.py options from the command line.
# Mounted: /rknp/tests (read-only), /rknp/results, /rknp/remote.netns,
# /rknp/wan.netns (with BENCH_PODMAN_WAN).
set -euo pipefail
T=/rknp/tests
# shellcheck source=tests/sid/podman_lib.sh
. "$T/sid/podman_lib.sh"
podman_setup
export BENCH_PODMAN_HOME=$HOME_DIR BENCH_PODMAN_IMAGE=$IMG BENCH_PODMAN_TESTS=$T
BENCH_PODMAN_RUNTIME_DIR=/run/user/$(id -u "$USER_NAME")
export BENCH_PODMAN_RUNTIME_DIR BENCH_PODMAN_REMOTE=198.18.5.2 BENCH_PODMAN_REMOTE_NS=/rknp/remote.netns
# The published-port tests: the host's address facing the test host, and
# the UDP request/response tool (podman.sh installs it), run in the
# container too.
export BENCH_PODMAN_WORLD=198.18.5.1
udp_rr=()
if [ -x /usr/local/bin/rknp-udp-rr ]; then
    export BENCH_PODMAN_UDP_RR=/usr/local/bin/rknp-udp-rr
    udp_rr=(--udp-rr "$BENCH_PODMAN_UDP_RR")
fi
only=(--only podman-real --only podman-rknp)
case " ${BENCH_ARGS:-} " in
*" --scenario publish "*) ;; # the WAN twins and veth publish nothing
*)
    if [ -n "${BENCH_PODMAN_WAN:-}" ]; then
        export BENCH_PODMAN_WAN BENCH_PODMAN_WAN_NS=/rknp/wan.netns
        only+=(--only podman-real-wan --only podman-rknp-wan)
    fi
    only+=(--only veth)
    ;;
esac
read -r -a args <<<"${BENCH_ARGS:-}"
exec "$PY" "$T/bench/bench.py" --user "$USER_NAME" "${only[@]}" "${udp_rr[@]}" \
    --base podman-real --scenario tcp --results /rknp/results "${args[@]}"
