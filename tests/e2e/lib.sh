# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# The rootlesskit end-to-end scripts' own helpers (sourced after E2E_DIR is
# set; runs as root), on top of tests/lib/common.sh (the test user, servers,
# background processes, the run marker), which this file sources.
# Everything started here is recorded in BG_PIDS / NETNS_CREATED and torn
# down by e2e_cleanup; every process carries this run's RKNP_TEST_RUN
# marker (tests/lib/run_marker.sh), by which run.sh finds leftovers.

# shellcheck source=tests/lib/common.sh
. "$E2E_DIR/../lib/common.sh"
REPO=$(cd "$E2E_DIR/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
E2E_ARGS=("$@") # the script's own arguments (sourced without any)
USER_TIMEOUT=${USER_TIMEOUT:-60} # seconds per command run as the test user
NETNS_CREATED=""
PASSES=0

log() { echo "# $*" >&2; }

# e2e_start SECONDS WHY HINT FILE...: the first thing a script does after
# sourcing this file: e2e_bound SECONDS, then e2e_require WHY HINT FILE...
e2e_start() {
    e2e_bound "$1"
    shift
    e2e_require "$@"
}

# e2e_bound SECONDS: runs the script again under timeout(1) (E2E_TIMEOUT
# overrides SECONDS) unless this is that run already.
e2e_bound() {
    local secs=${E2E_TIMEOUT:-$1}
    [ -n "${_RKNP_E2E_BOUNDED:-}" ] && return 0
    exec env _RKNP_E2E_BOUNDED=1 timeout -k 10 "$secs" bash "$0" "${E2E_ARGS[@]}"
}

# e2e_require WHY HINT FILE...: exits unless run as root (WHY: what for)
# and every FILE exists (HINT: how to get it).
e2e_require() {
    local why=$1 hint=$2 f
    shift 2
    [ "$(id -u)" = 0 ] || { echo "run as root ($why)" >&2; exit 1; }
    for f in "$@"; do
        [ -e "$f" ] || { echo "missing $f ($hint)" >&2; exit 1; }
    done
}

# e2e_scratch NAME [EXIT_COMMANDS]: SCRATCH (make_scratch) with bin/ lib/
# www/ home/ tmp/ besides logs/, removed on exit by e2e_cleanup (after
# EXIT_COMMANDS); home/ and tmp/ are the HOME and TMPDIR of the commands run
# as the test user (the caller chowns them once the user exists).
e2e_scratch() {
    make_scratch "$1"
    # shellcheck disable=SC2064 # expanded now on purpose
    trap "${2:+$2; }e2e_cleanup" EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$SCRATCH"/{bin,lib,www,home,tmp}
    USER_HOME=$SCRATCH/home USER_TMPDIR=$SCRATCH/tmp
}

# e2e_copy_build NAME...: copies of the library (LIB) and of each
# $BUILD_DIR/bin/NAME in SCRATCH, so that a rebuild during the run cannot
# change them; a command finds the library by its $ORIGIN/../lib rpath.
e2e_copy_build() {
    local name
    install -m 0755 "$(readlink -f "$BUILD_DIR/lib/librknp.so.1")" "$SCRATCH/lib/librknp.so.1"
    LIB=$SCRATCH/lib/librknp.so.1
    for name in "$@"; do install -m 0755 "$BUILD_DIR/bin/$name" "$SCRATCH/bin/$name"; done
}

# e2e_test_user [BYTES]: the test user (setup_test_user) with SCRATCH's
# home/ and tmp/, and www/file of BYTES random bytes (default 4 MiB,
# several windows' worth) that it can read; FILE_SHA is its sha256.
# shellcheck disable=SC2120 # BYTES is optional
e2e_test_user() {
    setup_test_user
    chown "$RKNP_TEST_USER" "$SCRATCH/home" "$SCRATCH/tmp"
    head -c "${1:-4194304}" /dev/urandom >"$SCRATCH/www/file"
    chmod -R a+rX "$SCRATCH/www"
    FILE_SHA=$(sha256sum "$SCRATCH/www/file" | cut -d' ' -f1)
}

# e2e_loopback_servers: www/ served on 127.0.0.1:$PORT4 and [::1]:$PORT6,
# and a DNS server on $DNS_ADDR:53 answering $DNS_NAME with $DNS_IP.
e2e_loopback_servers() {
    PORT4=$(free_port 127.0.0.1)
    start_http 127.0.0.1 "$PORT4" "$SCRATCH/www"
    PORT6=$(free_port ::1)
    start_http ::1 "$PORT6" "$SCRATCH/www"
    start_dns "$DNS_NAME=$DNS_IP"
}

# setup_netns_host: a "remote" host in a netns this test owns, reached over
# a veth pair: 198.18.0.1 and fd52:6b6e:2::1 (host side) <-> 198.18.0.2 and
# fd52:6b6e:2::2 (test netns). The host side also has the secondary
# addresses 198.18.0.3 and fd52:6b6e:2::3 for the outbound_addr case; the
# IPv4 default source is the first address added, the IPv6 one (on a tie)
# the last, hence ::3 before ::1. No duplicate address detection, so the
# IPv6 addresses work at once.
setup_netns_host() {
    ip netns del "$NETNS_HOST" 2>/dev/null || true
    ip link del "$VETH_HOST" 2>/dev/null || true
    ip netns add "$NETNS_HOST"
    NETNS_CREATED=$NETNS_HOST
    ip link add "$VETH_HOST" type veth peer name "$VETH_NS"
    ip link set "$VETH_NS" netns "$NETNS_HOST"
    sysctl -qw "net.ipv6.conf.$VETH_HOST.accept_dad=0"
    ip netns exec "$NETNS_HOST" sysctl -qw "net.ipv6.conf.$VETH_NS.accept_dad=0"
    ip addr add 198.18.0.1/24 dev "$VETH_HOST"
    ip addr add 198.18.0.3/24 dev "$VETH_HOST"
    ip addr add fd52:6b6e:2::3/64 dev "$VETH_HOST" nodad
    ip addr add fd52:6b6e:2::1/64 dev "$VETH_HOST" nodad
    ip link set "$VETH_HOST" up
    ip -n "$NETNS_HOST" addr add 198.18.0.2/24 dev "$VETH_NS"
    ip -n "$NETNS_HOST" addr add fd52:6b6e:2::2/64 dev "$VETH_NS" nodad
    ip -n "$NETNS_HOST" link set "$VETH_NS" up
    ip -n "$NETNS_HOST" link set lo up
}

# check_leftovers: after stop_background, one PASS/FAIL line: no process of
# this run may be left (a case that did not end what it started); ends any.
check_leftovers() {
    local left
    if left=$(run_leftovers); then
        echo "PASS no process started by this run is left"
        PASSES=$((PASSES + 1))
        return 0
    fi
    echo "FAIL no process started by this run is left; still running:"
    # shellcheck disable=SC2001 # a prefix on every line: ${//} has no ^
    echo "$left" | sed 's/^/    | /'
    FAILURES=$((FAILURES + 1))
    kill_run_processes >/dev/null
}

e2e_cleanup() {
    # After an early exit check_leftovers has not run: end what is left.
    end_run
    if [ -n "$NETNS_CREATED" ]; then
        ip link del "$VETH_HOST" 2>/dev/null || true
        ip netns del "$NETNS_CREATED" 2>/dev/null || true
    fi
    [ -n "${SCRATCH:-}" ] && [ -z "${E2E_KEEP:-}" ] && rm -rf "$SCRATCH"
    return 0
}

# drv_flags DRIVER: --net flags for a driver under test.
drv_flags() {
    case $1 in
    plugin) echo "--net=plugin --net-plugin=$LIB${E2E_PLUGIN_TCP:+ --plugin-tcp=$E2E_PLUGIN_TCP}${E2E_PLUGIN_TCP_PEEK:+ --plugin-tcp-peek=$E2E_PLUGIN_TCP_PEEK}" ;;
    *) echo "--net=$1" ;;
    esac
}

# kernel_at_least MAJOR MINOR: the running kernel is that release or later.
kernel_at_least() {
    local v major minor
    v=$(uname -r)
    major=${v%%.*}
    minor=${v#*.}
    minor=${minor%%[!0-9]*}
    [ "$major" -gt "$1" ] || { [ "$major" -eq "$1" ] && [ "$minor" -ge "$2" ]; }
}

# rk_argv DRIVER FLAGS... -- CMD...: sets ARGV to rootlesskit as the user.
rk_argv() {
    local drv=$1
    shift
    # shellcheck disable=SC2046 # drv_flags is a word list
    user_argv "$RK" $(drv_flags "$drv") "$@"
}

rk() {
    local ARGV
    rk_argv "$@"
    "${ARGV[@]}"
}

# fetch_sha URL: the sha256 of URL fetched inside rootlesskit (a shell
# snippet for `sh -c`).
fetch_sha() {
    echo "curl -sSf --max-time 20 -g '$1' | sha256sum | cut -d' ' -f1"
}

# expect WHAT PATTERN TEXT: grep -E PATTERN in TEXT or fail with WHAT; the
# matching line is logged as evidence.
expect() {
    local m
    if ! m=$(grep -Em1 -- "$2" <<<"$3"); then
        echo "expected $1 (/$2/) in:" >&2
        echo "$3" >&2
        return 1
    fi
    echo "ok $1: $m"
}

# run_case NAME DRIVER FUNC: runs FUNC DRIVER with errexit in a subshell,
# logs to a file, prints one PASS/FAIL line.
run_case() {
    local name=$1 drv=$2 fn=$3 rc log="$SCRATCH/logs/$1.$2.log"
    set +e
    (
        set -euo pipefail
        "$fn" "$drv"
    ) >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" = 0 ]; then
        echo "PASS $name [$drv]"
        PASSES=$((PASSES + 1))
        return 0
    fi
    local note=""
    [[ " ${E2E_RKNP_DRIVERS:-plugin} " != *" $drv "* ]] && note=" (reference driver: environment problem)"
    echo "FAIL $name [$drv] rc=$rc$note"
    tail -n 25 "$log" | sed 's/^/    | /'
    FAILURES=$((FAILURES + 1))
}

# build_rootlesskit_v3: upstream rootlesskit (pinned) built from the Go
# module proxy into $SCRATCH/gobin; prints its path, or nothing (with the
# reason on stderr) when Go or the proxy is missing.
RK3_VERSION=v3.3.0
build_rootlesskit_v3() {
    command -v go >/dev/null || { log "no Go: rootlesskit v3 not built"; return 0; }
    log "building rootlesskit $RK3_VERSION from the Go module proxy"
    if GOBIN="$SCRATCH/gobin" GOFLAGS=-mod=mod go install \
        "github.com/rootless-containers/rootlesskit/v3/cmd/rootlesskit@$RK3_VERSION" \
        >"$SCRATCH/logs/go-install.log" 2>&1; then
        chmod -R a+rX "$SCRATCH/gobin"
        echo "$SCRATCH/gobin/rootlesskit"
    else
        log "go install failed (see below)"
        tail -n 5 "$SCRATCH/logs/go-install.log" >&2
    fi
}

# expect_probed SUMMARY MODE...: reach_back_prober.py's summary shows it
# probed a main and a child process in every MODE.
expect_probed() {
    local out=$1 mode role
    shift
    for mode in "$@"; do
        for role in main child; do
            expect "the prober saw the $role process ($mode)" "^$mode $role: [1-9][0-9]* processes" "$out"
        done
    done
}

# expect_not_reached SUMMARY MODE...: probed in every MODE, and no probe
# reached any process.
expect_not_reached() {
    expect_probed "$@"
    if grep -v "reached root 0, environ 0, ptrace 0\$" <<<"$1"; then
        echo "a container reached into the command's processes"; return 1
    fi
    echo "ok nothing reached"
}

# serve_and_fetch DRIVER NAME HOST_PORT INNER_PORT RK_ARGS...: rootlesskit
# (DRIVER's flags and RK_ARGS) runs a web server on INNER_PORT inside until
# the host has fetched WWW/file from 127.0.0.1:HOST_PORT (retried for 20
# s); fails unless the bytes match $FILE_SHA and rootlesskit exits 0. Its
# output goes to logs/NAME.log.
serve_and_fetch() {
    local drv=$1 name=$2 port=$3 inner=$4 done_file="$SCRATCH/tmp/$2-done" pid sha=""
    shift 4
    rm -f "$done_file"
    local ARGV
    rk_argv "$drv" "$@" -- sh -c "
        python3 -m http.server --bind 0.0.0.0 --directory '$SCRATCH/www' $inner >/dev/null 2>&1 &
        for i in \$(seq 300); do [ -e '$done_file' ] && break; sleep 0.1; done
        kill \$!"
    "${ARGV[@]}" >"$SCRATCH/logs/$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        sha=$(curl -sSf --max-time 10 "http://127.0.0.1:$port/file" 2>/dev/null | sha256sum | cut -d' ' -f1) || true
        [ "$sha" = "$FILE_SHA" ] && break
        sleep 0.2
    done
    touch "$done_file"
    local rc=0
    wait "$pid" || rc=$?
    [ "$sha" = "$FILE_SHA" ] || { echo "host fetch via 127.0.0.1:$port: sha $sha"; cat "$SCRATCH/logs/$name.log"; return 1; }
    echo "ok host fetched the file served inside on port $inner through 127.0.0.1:$port"
    [ "$rc" = 0 ] || { echo "rootlesskit exit $rc"; cat "$SCRATCH/logs/$name.log"; return 1; }
}
