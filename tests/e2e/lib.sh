# SPDX-License-Identifier: Apache-2.0

# Helpers for tests/e2e/run.sh (sourced; runs as root).
# Everything started here is recorded in BG_PIDS / NETNS_CREATED and torn
# down by e2e_cleanup; every process carries this run's RKNP_TEST_RUN
# marker (tests/lib/run_marker.sh), by which run.sh finds leftovers.

E2E_USER=${E2E_USER:-rknptest}
PY=${PYTHON:-/usr/bin/python3} # not a pyenv shim: the test user runs it too
RK_TIMEOUT=${RK_TIMEOUT:-60}   # seconds per rootlesskit run
USER_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BG_PIDS=()
NETNS_CREATED=""
FAILURES=0
PASSES=0
# shellcheck source=tests/lib/run_marker.sh
. "$E2E_DIR/../lib/run_marker.sh"

log() { echo "# $*" >&2; }

# e2e_bound SECONDS "$@": the first thing a script does after sourcing this
# file: runs the script again under timeout(1) (E2E_TIMEOUT overrides
# SECONDS) unless this is that run already.
e2e_bound() {
    local secs=${E2E_TIMEOUT:-$1}
    shift
    [ -n "${_RKNP_E2E_BOUNDED:-}" ] && return 0
    exec env _RKNP_E2E_BOUNDED=1 timeout -k 10 "$secs" bash "$0" "$@"
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

# e2e_scratch NAME [EXIT_COMMANDS]: SCRATCH, a fresh directory the test user
# can read with bin/ lib/ www/ logs/ home/ tmp/, removed on exit by
# e2e_cleanup (after EXIT_COMMANDS).
e2e_scratch() {
    SCRATCH=$(mktemp -d "/tmp/rknp-$1.XXXXXX")
    # shellcheck disable=SC2064 # expanded now on purpose
    trap "${2:+$2; }e2e_cleanup" EXIT
    trap 'exit 130' INT TERM
    chmod 0755 "$SCRATCH"
    mkdir -p "$SCRATCH"/{bin,lib,www,logs,home,tmp}
}

# setup_user: /dev/net/tun usable by anyone, and an unprivileged user with
# subordinate id ranges for newuidmap/newgidmap.
setup_user() {
    chmod 0666 /dev/net/tun
    id "$E2E_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$E2E_USER"
    local f
    for f in /etc/subuid /etc/subgid; do
        touch "$f"
        grep -q "^$E2E_USER:" "$f" || echo "$E2E_USER:300000:65536" >>"$f"
    done
}

# free_port ADDR: a currently unused TCP port on ADDR.
free_port() {
    "$PY" -c 'import socket,sys; s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"
}

# free_udp_port ADDR: a currently unused UDP port on ADDR.
free_udp_port() {
    "$PY" -c 'import socket,sys; s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"
}

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

# start_http ADDR PORT DIR [NETNS]: python http.server in the background.
start_http() {
    local pre=()
    [ -n "${4:-}" ] && pre=(ip netns exec "$4")
    "${pre[@]}" "$PY" -m http.server --bind "$1" --directory "$3" "$2" >"$SCRATCH/logs/http-$1-$2.log" 2>&1 &
    BG_PIDS+=($!)
    wait_tcp "$1" "$2" "${4:-}"
}

# start_dns: the e2e DNS responder on the first free ADDR:53 among a few
# loopback addresses (another test suite may hold 127.0.0.1:53); sets DNS_ADDR.
start_dns() {
    local a
    for a in 127.0.0.1 127.0.53.1 127.0.53.2; do
        "$PY" "$E2E_DIR/../lib/dns_server.py" "$a" 53 "$DNS_NAME=$DNS_IP" >"$SCRATCH/logs/dns-$a.log" 2>&1 &
        local pid=$!
        for _ in $(seq 50); do
            grep -q ready "$SCRATCH/logs/dns-$a.log" 2>/dev/null && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if grep -q ready "$SCRATCH/logs/dns-$a.log" 2>/dev/null; then
            BG_PIDS+=("$pid")
            DNS_ADDR=$a
            return 0
        fi
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "could not start the DNS responder" >&2
    return 1
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

# stop_background: ends the servers run.sh started.
stop_background() {
    local p
    for p in "${BG_PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${BG_PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    BG_PIDS=()
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
    echo "$left" | sed 's/^/    | /'
    FAILURES=$((FAILURES + 1))
    kill_run_processes >/dev/null
}

e2e_cleanup() {
    stop_background
    # After an early exit check_leftovers has not run: end what is left.
    kill_run_processes >&2
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
    plugin) echo "--net=plugin --net-plugin=$LIB${E2E_PLUGIN_TCP:+ --plugin-tcp=$E2E_PLUGIN_TCP}" ;;
    *) echo "--net=$1" ;;
    esac
}

# user_argv CMD...: sets ARGV to CMD run as the test user with a clean
# environment (but this run's marker), bounded in time. setpriv and env
# exec, so signals sent to the timeout process reach CMD.
user_argv() {
    ARGV=(timeout -k 5 "$RK_TIMEOUT" setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups
        env -i PATH="$USER_PATH" HOME="$SCRATCH/home" TMPDIR="$SCRATCH/tmp"
        RKNP_TEST_RUN="$RKNP_TEST_RUN" "$@")
}

# rk_argv DRIVER FLAGS... -- CMD...: sets ARGV to rootlesskit as the user.
rk_argv() {
    local drv=$1
    shift
    # shellcheck disable=SC2046 # drv_flags is a word list
    user_argv "$RK" $(drv_flags "$drv") "$@"
}

as_user() {
    local ARGV
    user_argv "$@"
    "${ARGV[@]}"
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
