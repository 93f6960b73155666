# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# Shared set-up of faults.sh and load.sh (sourced, as root): the test user,
# the tools, a scratch dir, and helpers that run the driver as that user.
# Arguments of the sourcing script: [BUILD_DIR [slirp|fast]], the second
# choosing which stack carries TCP (the fast path or libslirp).
BUILD=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build}
TCP_PATH=${2:-slirp}
REL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/common.sh
source "$REL_DIR/../lib/common.sh"
DRIVER=$BUILD/bin/rknp-rel-driver
STREAM=$BUILD/bin/rknp-rel-stream
for t in "$DRIVER" "$STREAM"; do
    [ -x "$t" ] || { echo "missing $t (build first)"; exit 1; }
done
# 77: ctest skips (SKIP_RETURN_CODE), as in a non-root package build.
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (namespaces and a test user)"; exit 77; }

setup_test_user
make_scratch reliability
chmod o+rx "$BUILD" "$BUILD/bin" "$BUILD/lib"
cp "$REL_DIR"/*.py "$SCRATCH/" && chmod 0644 "$SCRATCH"/*.py
touch "$SCRATCH/plugin.log" && chown "$RKNP_TEST_USER" "$SCRATCH/plugin.log"
rel_state() { find /tmp -maxdepth 1 -name 'rknp-rel.*' | sort; }
STATE_BEFORE=$(rel_state)
trap 'end_run; rm -rf "$SCRATCH"' EXIT

# serve PORT [server options]: a stream server on host 127.0.0.1.
serve() {
    local port=$1
    shift
    rm -f "$SCRATCH/ready.$port"
    "$STREAM" serve 127.0.0.1 "$port" --ready-file "$SCRATCH/ready.$port" "$@" \
        2>>"$SCRATCH/server.log" &
    track_bg $!
    for _ in $(seq 100); do [ -e "$SCRATCH/ready.$port" ] && return 0; sleep 0.05; done
    echo "stream server on $port did not start"
    return 1
}

# drive [driver options] -- COMMAND: the driver as the test user; its
# checks (threads, fds, exit status) decide. Output goes to the caller.
# PEEK=offset|discard forces the fast path's peek mode (--tcp-peek).
drive() {
    local peek=()
    [ -n "${PEEK:-}" ] && peek=(--tcp-peek "$PEEK")
    as_user "$DRIVER" --log "$SCRATCH/plugin.log" --tcp-path "$TCP_PATH" "${peek[@]}" "$@"
}

no_leftovers() {
    ! pgrep -u "$RKNP_TEST_USER" -x rknp-rel-driver >/dev/null &&
        ! pgrep -u "$RKNP_TEST_USER" -x rknp-rel-stream >/dev/null &&
        [ "$(rel_state)" = "$STATE_BEFORE" ]
}
