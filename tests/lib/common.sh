# SPDX-License-Identifier: Apache-2.0

# Shared helpers for the integration, reliability and demo scripts
# (sourced, run as root). Provides: test user set-up, loopback servers,
# PASS/FAIL bookkeeping, and the end-of-suite check that nothing started is
# left.

RKNP_TEST_USER=${RKNP_TEST_USER:-rknptest}
TESTS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FAILURES=0
BG_PIDS=()
# shellcheck source=tests/lib/run_marker.sh
source "$TESTS_LIB/run_marker.sh"
# `check` runs each case in a command substitution, where BG_PIDS+=(...)
# is lost: track_bg also notes the pid in this file, which stop_background
# reads.
BG_PID_FILE=/tmp/rknp-bg.$RKNP_TEST_RUN

# track_bg PID: stop_background ends PID (also from inside a case).
track_bg() {
    BG_PIDS+=("$1")
    echo "$1" >>"$BG_PID_FILE"
}

# /dev/net/tun as distros ship it, and an unprivileged user with subids.
setup_test_user() {
    chmod 0666 /dev/net/tun
    if ! id "$RKNP_TEST_USER" >/dev/null 2>&1; then
        useradd --create-home --shell /bin/bash "$RKNP_TEST_USER"
    fi
    for f in /etc/subuid /etc/subgid; do
        touch "$f"
        grep -q "^$RKNP_TEST_USER:" "$f" || echo "$RKNP_TEST_USER:200000:65536" >>"$f"
    done
}

# Runs a command as the test user (keeps the environment minimal).
as_user() {
    runuser -u "$RKNP_TEST_USER" -- "$@"
}

# A world-readable scratch directory, removed on exit.
make_scratch() {
    SCRATCH=$(mktemp -d /tmp/rknp-test.XXXXXX)
    chmod 0755 "$SCRATCH"
}

# free_port: prints a free TCP port on loopback.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_http ADDR PORT DIR: python http.server in the background.
start_http() {
    python3 -m http.server --bind "$1" --directory "$3" "$2" >/dev/null 2>&1 &
    track_bg $!
    wait_port "$1" "$2"
}

# start_dns ADDR NAME=IP...: DNS responder on ADDR:53.
start_dns() {
    local addr=$1
    shift
    python3 "$TESTS_LIB/dns_server.py" "$addr" 53 "$@" >/dev/null 2>&1 &
    track_bg $!
    for _ in $(seq 50); do
        python3 "$TESTS_LIB/dns_query.py" "$addr" "${1%%=*}" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "DNS server on $addr did not start" >&2
    return 1
}

wait_port() {
    for _ in $(seq 100); do
        if python3 -c "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)" "$1" "$2" 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "nothing listens on $1:$2" >&2
    return 1
}

# stop_background: ends what track_bg (or BG_PIDS+=) recorded. Pids from
# the file may belong to no child of this shell: they are ended only while
# they still carry this run's marker (a reused pid does not), and awaited
# by polling.
stop_background() {
    local p others=()
    if [ -f "$BG_PID_FILE" ]; then
        while read -r p; do
            [[ " ${BG_PIDS[*]} " == *" $p "* ]] && continue
            grep -qzx "RKNP_TEST_RUN=$RKNP_TEST_RUN" "/proc/$p/environ" 2>/dev/null &&
                others+=("$p")
        done <"$BG_PID_FILE"
        rm -f "$BG_PID_FILE"
    fi
    for p in "${BG_PIDS[@]}" "${others[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for p in "${others[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
    BG_PIDS=()
}

# end_run: for an EXIT trap; stop_background, then whatever else of this
# run still runs (after a failure, finish's check may not have run).
end_run() {
    stop_background
    kill_run_processes >&2
}

# check NAME CMD...: runs CMD, records PASS/FAIL.
check() {
    local name=$1
    shift
    local out
    if out=$("$@" 2>&1); then
        echo "PASS $name"
    else
        echo "FAIL $name"
        echo "$out" | sed 's/^/    /' | tail -n 30
        FAILURES=$((FAILURES + 1))
    fi
}

# check_fails NAME CMD...: CMD must fail.
check_fails() {
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then
        echo "FAIL $name (succeeded, expected failure)"
        FAILURES=$((FAILURES + 1))
    else
        echo "PASS $name"
    fi
}

# finish: the suite's last call. Ends the background servers, then fails
# the suite if any process it started is still running (a case that did
# not end what it started), and ends those.
finish() {
    stop_background
    local left
    if left=$(run_leftovers); then
        echo "PASS no process started by this run is left"
    else
        echo "FAIL no process started by this run is left; still running:"
        echo "$left" | sed 's/^/    /'
        FAILURES=$((FAILURES + 1))
        kill_run_processes >/dev/null
    fi
    if [ "$FAILURES" -ne 0 ]; then
        echo "$FAILURES check(s) failed"
        return 1
    fi
    echo "all checks passed"
}
