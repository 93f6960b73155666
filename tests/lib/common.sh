# Shared helpers for the integration and e2e scripts (sourced, run as root).
# Provides: test user set-up, loopback servers, PASS/FAIL bookkeeping.

RKNP_TEST_USER=${RKNP_TEST_USER:-rknptest}
TESTS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FAILURES=0
BG_PIDS=()

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
    BG_PIDS+=($!)
    wait_port "$1" "$2"
}

# start_dns ADDR NAME=IP...: DNS responder on ADDR:53.
start_dns() {
    local addr=$1
    shift
    python3 "$TESTS_LIB/dns_server.py" "$addr" 53 "$@" >/dev/null 2>&1 &
    BG_PIDS+=($!)
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

stop_background() {
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    BG_PIDS=()
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

finish() {
    if [ "$FAILURES" -ne 0 ]; then
        echo "$FAILURES check(s) failed"
        return 1
    fi
    echo "all checks passed"
}
