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
# The driver's state directories go to this run's own TMPDIR (drive), so
# another suite running on the machine never shows up in the checks.
mkdir "$SCRATCH/tmp" && chown "$RKNP_TEST_USER" "$SCRATCH/tmp"
rel_state() { find "$SCRATCH/tmp" -mindepth 1 -maxdepth 1 -name 'rknp-rel.*' | sort; }
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
    USER_TMPDIR=$SCRATCH/tmp as_user "$DRIVER" --log "$SCRATCH/plugin.log" \
        --tcp-path "$TCP_PATH" "${peek[@]}" "$@"
}

# This run's drivers and stream clients are gone (its stream servers run
# on until the end), and so are the state directories its drivers made.
no_leftovers() {
    local clients
    run_leftovers_named rknp-rel-driver || return 1
    clients=$(python3 "$RUN_PROCS" list "$RKNP_TEST_RUN" --comm rknp-rel-stream |
        grep -v ' serve ' || true)
    [ -z "$clients" ] || { echo "$clients"; return 1; }
    [ -z "$(rel_state)" ] || { rel_state; return 1; }
}
