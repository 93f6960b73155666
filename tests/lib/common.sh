# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# The one shell library of the test suites (sourced, run as root): the test
# user and commands run as it, a scratch directory, loopback servers,
# background processes and their teardown, PASS/FAIL bookkeeping and the
# end-of-suite check that nothing started is left. Sourced by the
# integration, reliability, demo, bench and sanitizer scripts, and by
# tests/e2e/lib.sh, which adds what only the rootlesskit end-to-end scripts
# need.

RKNP_TEST_USER=${RKNP_TEST_USER:-rknptest}
TESTS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-/usr/bin/python3} # not a pyenv shim: the test user runs it too
USER_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
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

# setup_test_user: /dev/net/tun usable by anyone (as distros ship it), and
# the unprivileged test user with subordinate id ranges for
# newuidmap/newgidmap. Every suite creates the user here, the same way; a
# user of that name that exists already is used as it is (another suite,
# or a concurrent run, may be using it): only a missing range is added.
# The lock keeps two suites starting at once from both creating it.
setup_test_user() {
    chmod 0666 /dev/net/tun
    (
        flock 9
        id "$RKNP_TEST_USER" >/dev/null 2>&1 ||
            useradd --create-home --shell /usr/sbin/nologin "$RKNP_TEST_USER"
        local f
        for f in /etc/subuid /etc/subgid; do
            touch "$f"
            grep -q "^$RKNP_TEST_USER:" "$f" || echo "$RKNP_TEST_USER:200000:65536" >>"$f"
        done
    ) 9>/run/lock/rknp-test-user.lock
}

# user_argv CMD...: sets ARGV to CMD run as the test user with a clean
# environment: PATH, HOME (USER_HOME, else the user's home), TMPDIR
# (USER_TMPDIR, else /tmp), this run's marker and the sanitizers' options
# (a sanitizer preset sets them through ctest; the canary checks they
# arrive), bounded by USER_TIMEOUT seconds when that is set. setpriv and
# env exec, so signals sent to the timeout process reach CMD.
user_argv() {
    local home=${USER_HOME:-} keep=() v
    [ -n "$home" ] || home=$(getent passwd "$RKNP_TEST_USER" | cut -d: -f6)
    for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do
        [ -n "${!v+set}" ] && keep+=("$v=${!v}")
    done
    ARGV=(setpriv --reuid="$RKNP_TEST_USER" --regid="$RKNP_TEST_USER" --init-groups
        env -i PATH="$USER_PATH" HOME="$home" TMPDIR="${USER_TMPDIR:-/tmp}"
        RKNP_TEST_RUN="$RKNP_TEST_RUN" "${keep[@]}" "$@")
    if [ -n "${USER_TIMEOUT:-}" ]; then
        ARGV=(timeout -k 5 "$USER_TIMEOUT" "${ARGV[@]}")
    fi
}

# as_user CMD...: runs CMD as the test user (see user_argv).
as_user() {
    local ARGV
    user_argv "$@"
    "${ARGV[@]}"
}

# make_scratch NAME: SCRATCH, a fresh world-readable directory
# /tmp/rknp-NAME.*, with logs/ for the background servers' output. The
# caller removes it.
make_scratch() {
    SCRATCH=$(mktemp -d "/tmp/rknp-$1.XXXXXX")
    chmod 0755 "$SCRATCH"
    mkdir "$SCRATCH/logs"
}

# driver_bench_start NAME TOOL: the start of a benchmark that runs
# rknp-rel-driver from $BUILD (peek_modes.sh, conn_syscalls.sh): as root,
# with DRIVER (set here) built and TOOL on PATH; the test user, SCRATCH
# (removed on exit, with what the run started), BUILD readable by the
# user and $SCRATCH/logs/plugin.log writable by it.
driver_bench_start() {
    [ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
    DRIVER=$BUILD/bin/rknp-rel-driver
    [ -x "$DRIVER" ] || { echo "missing $DRIVER (build first)" >&2; exit 1; }
    command -v "$2" >/dev/null || { echo "missing $2" >&2; exit 1; }
    setup_test_user
    make_scratch "$1"
    trap 'end_run; rm -rf "$SCRATCH"' EXIT
    chmod o+rx "$BUILD" "$BUILD/bin" "$BUILD/lib"
    touch "$SCRATCH/logs/plugin.log" && chown "$RKNP_TEST_USER" "$SCRATCH/logs/plugin.log"
}

# udp_bench_net DRIVER LIB: sets NET to rootlesskit's network flags for one
# of the UDP benchmark drivers (plugin-fast, plugin-udp-slirp: the plugin
# LIB with that UDP path; slirp4netns); exits 2 on any other.
# shellcheck disable=SC2034 # NET is the caller's
udp_bench_net() {
    case $1 in
    plugin-fast) NET=(--net=plugin "--net-plugin=$2" --plugin-udp=fast) ;;
    plugin-udp-slirp) NET=(--net=plugin "--net-plugin=$2" --plugin-udp=slirp) ;;
    slirp4netns) NET=(--net=slirp4netns) ;;
    *) echo "unknown driver $1" >&2; exit 2 ;;
    esac
}

# free_port ADDR / free_udp_port ADDR: a currently unused TCP / UDP port
# on ADDR, never one handed out before to this suite (free_port.py says
# why; the list is kept in the scratch directory).
free_port() { "$PY" "$TESTS_LIB/free_port.py" tcp "$1" "${SCRATCH:?make_scratch first}/ports"; }
free_udp_port() { "$PY" "$TESTS_LIB/free_port.py" udp "$1" "${SCRATCH:?make_scratch first}/ports"; }

# wait_tcp ADDR PORT [NETNS]: until something listens (10 s at most).
wait_tcp() {
    local pre=()
    [ -n "${3:-}" ] && pre=(ip netns exec "$3")
    for _ in $(seq 100); do
        "${pre[@]}" "$PY" -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)' "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on $1:$2" >&2
    return 1
}

# start_http ADDR PORT DIR [NETNS]: python's http.server for DIR on
# ADDR:PORT (in NETNS if given) in the background, logging to
# $SCRATCH/logs; returns once it listens.
start_http() {
    local pre=()
    [ -n "${4:-}" ] && pre=(ip netns exec "$4")
    "${pre[@]}" "$PY" -m http.server --bind "$1" --directory "$3" "$2" \
        >"$SCRATCH/logs/http-$1-$2.log" 2>&1 &
    track_bg $!
    wait_tcp "$1" "$2" "${4:-}"
}

# start_dns NAME=IP [ADDR...]: the test DNS responder (answering NAME with
# IP) on the first ADDR:53 it can bind, of ADDR... (default: a few loopback
# addresses, as another suite may hold 127.0.0.1:53); sets DNS_ADDR.
start_dns() {
    local record=$1 a pid log
    shift
    [ $# -gt 0 ] || set -- 127.0.0.1 127.0.53.1 127.0.53.2
    for a in "$@"; do
        log=$SCRATCH/logs/dns-$a.log
        "$PY" "$TESTS_LIB/dns_server.py" "$a" 53 "$record" >"$log" 2>&1 &
        pid=$!
        for _ in $(seq 50); do
            grep -q ready "$log" 2>/dev/null && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if grep -q ready "$log" 2>/dev/null; then
            track_bg "$pid"
            # shellcheck disable=SC2034 # the caller's result
            DNS_ADDR=$a
            return 0
        fi
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "could not start the DNS responder on any of: $*" >&2
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

# selected NAME: whether a check named NAME runs: every check unless
# CHECK_ONLY (an extended regular expression, case-insensitive; the
# integration suite takes it from IT_CASES) is set and NAME does not match.
# A check left out prints one SKIP line.
selected() {
    [ -z "${CHECK_ONLY:-}" ] && return 0
    grep -Eiq -- "$CHECK_ONLY" <<<"$1" && return 0
    echo "SKIP $1"
    return 1
}

# check NAME CMD...: runs CMD, records PASS/FAIL.
check() {
    local name=$1
    shift
    selected "$name" || return 0
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
    selected "$name" || return 0
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
        # shellcheck disable=SC2001 # a prefix on every line: ${//} has no ^
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
