#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# End-to-end tests of rknp-pasta, the pasta-compatible command on the
# public rknp C ABI, as an unprivileged user: its command line as Podman
# and rootlesskit probe it, Podman's argument list against a bound netns
# file (exit 0 once configured, stdout/stderr closed, --pid, a published
# port, exit when the file is deleted), upstream rootlesskit v3's
# `--net=pasta --pasta-binary=PATH` with the shared cases of cases.sh and
# the implicit port driver, and a hostile container reaching back.
#
#   sudo tests/e2e/compat_pasta.sh          # BUILD_DIR (default build/)
#   PASTA_CASES="cli podman_style" sudo -E tests/e2e/compat_pasta.sh
#
# Needs $BUILD_DIR/bin/rknp-pasta and $BUILD_DIR/lib/librknp.so.1, Go and
# the module proxy (rootlesskit v3), uidmap, iproute2, curl, python3,
# util-linux (tests/install-deps.sh). Traffic goes only to loopback and to
# namespaces this script creates. One PASS/FAIL line per case; exits
# non-zero if any failed; bounded by E2E_TIMEOUT seconds (default 600).
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 600 "creates a user, namespaces and a DNS server on :53" "tests/install-deps.sh; build rknp-pasta first" \
    "$BUILD_DIR/bin/rknp-pasta" "$BUILD_DIR/lib/librknp.so.1"
# shellcheck source=tests/e2e/cases.sh
. "$E2E_DIR/cases.sh" # the rootlesskit cases below run through drv_flags

NETNS_HOST=rknp-pa-host
VETH_HOST=rknp-pa-h
VETH_NS=rknp-pa-n
DNS_NAME=rknp-pasta.test
DNS_IP=192.0.2.79

e2e_scratch pasta
e2e_copy_build rknp-pasta
install -m 0755 "$E2E_DIR/compat_pasta_helper.py" "$SCRATCH/bin/helper.py"
install -m 0755 "$E2E_DIR/reach_back_prober.py" "$SCRATCH/bin/reach_back_prober.py"
PASTA=$SCRATCH/bin/rknp-pasta
HELPER=$SCRATCH/bin/helper.py

e2e_test_user
e2e_loopback_servers
setup_netns_host
PORT_NS=18080
start_http 198.18.0.2 "$PORT_NS" "$SCRATCH/www" "$NETNS_HOST"
log "rknp-pasta: $("$PASTA" --version | head -n2 | tr '\n' ' ')"
log "servers: 127.0.0.1:$PORT4 [::1]:$PORT6 dns $DNS_ADDR:53"

# drv_flags (replaces lib.sh's): rootlesskit's pasta network with our
# binary; the implicit port driver, as dockerd-rootless.sh picks for pasta.
drv_flags() { echo "--net=pasta --pasta-binary=$PASTA --port-driver=implicit"; }

# 0. What Podman and rootlesskit probe and rely on: --version names rknp
# and libslirp and exits 0; --host-lo-to-ns-lo is unknown (rootlesskit then
# leaves it out); options pasta has but rknp-pasta cannot honour, and
# values it cannot take, are refused by name with exit 1.
case_cli() {
    local out rc err
    out=$(as_user "$PASTA" --version)
    expect "version names rknp-pasta" "^rknp-pasta [0-9.]+ \(pasta compatible, on rknp\)\$" "$out"
    expect "version names rknp and libslirp" "^rknp: [0-9.]+ \(libslirp [0-9.]+\)\$" "$out"
    refused() { # WANT_TEXT ARGS...
        local want=$1
        shift
        rc=0
        err=$(as_user "$PASTA" "$@" 2>&1 >/dev/null) || rc=$?
        [ "$rc" = 1 ] || { echo "$*: exit $rc, want 1 ($err)"; return 1; }
        expect "$* refused" "$want" "$err"
    }
    refused "unrecognized option '--host-lo-to-ns-lo'" --host-lo-to-ns-lo --version
    refused "^rknp-pasta: option '-D' is not supported by rknp-pasta\$" -D 192.0.2.1 1
    refused "^rknp-pasta: --map-guest-addr fd00::5: IPv6 mappings are not supported yet" --map-guest-addr fd00::5 1
    refused "^rknp-pasta: --map-guest-addr 169\.254\.1\.2: needs the namespace on the host's network" \
        -a 10.0.2.100 --map-guest-addr 169.254.1.2 1
    refused "^rknp-pasta: -g/--gateway 10\.0\.2\.50: the namespace's own address" -a 10.0.2.50 -n 24 -g 10.0.2.50 1
    refused "^rknp-pasta: -g/--gateway 10\.0\.3\.1: not a host of the network 10\.0\.2\.0/24" -a 10.0.2.50 -n 24 -g 10.0.3.1 1
    refused "^rknp-pasta: -T/--tcp-ns auto: " -T auto 1
    refused "^rknp-pasta: -t/--tcp-ports: invalid port specifier '0'" -t 0 1
    refused "^rknp-pasta: a target is needed" --config-net
    refused "running a command is not supported" --config-net sh
}

# 1. Podman 6.1's argument list (createPastaArgs) against a netns file,
# from inside a user namespace as Podman runs it, in pasta's address model:
# the namespace gets the host's upstream address, prefix and gateway. The
# "host" is a world netns whose upstream is 198.19.0.5/24 via 198.19.0.1
# on a veth to a LAN netns holding the gateway, a neighbour (.7), a host
# behind the gateway (203.0.113.9) and the resolver (198.19.0.1:53, named
# by the world's /etc/netns resolv.conf).
WORLD=rknp-pa-world LAN=rknp-pa-lan
teardown_world() {
    ip netns del "$WORLD" 2>/dev/null || true
    ip netns del "$LAN" 2>/dev/null || true
    rm -rf "/etc/netns/$WORLD"
}
setup_world() {
    teardown_world
    ip netns add "$WORLD"
    ip netns add "$LAN"
    ip -n "$WORLD" link add up0 type veth peer name lan0 netns "$LAN"
    ip -n "$WORLD" addr add 198.19.0.5/24 dev up0
    ip -n "$WORLD" link set up0 up
    ip -n "$WORLD" link set lo up
    ip -n "$WORLD" route add default via 198.19.0.1
    ip -n "$LAN" addr add 198.19.0.1/24 dev lan0
    ip -n "$LAN" addr add 198.19.0.7/24 dev lan0
    ip -n "$LAN" addr add 203.0.113.9/32 dev lo
    ip -n "$LAN" link set lan0 up
    ip -n "$LAN" link set lo up
    ip -n "$LAN" route add 169.254.0.0/16 dev lan0 # a reply to nowhere else
    mkdir -p "/etc/netns/$WORLD"
    echo "nameserver 198.19.0.1" >"/etc/netns/$WORLD/resolv.conf"
}
case_podman_style() {
    local d="$SCRATCH/tmp/podman" hp lp out ARGV
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    install -m 0755 "$TESTS_LIB/dns_query.py" "$SCRATCH/bin/dns_query.py"
    setup_world
    hp=$(free_port 127.0.0.1)
    lp=18081
    start_http 198.19.0.7 "$lp" "$SCRATCH/www" "$LAN"
    start_http 203.0.113.9 "$lp" "$SCRATCH/www" "$LAN"
    ip netns exec "$LAN" "$PY" "$TESTS_LIB/dns_server.py" 198.19.0.1 53 "$DNS_NAME=$DNS_IP" \
        >"$SCRATCH/logs/dns-lan.log" 2>&1 &
    track_bg $!
    user_argv unshare -rm python3 "$HELPER" podman "$PASTA" "$d" "$SCRATCH/www" "$hp" "$lp" \
        "$SCRATCH/bin/dns_query.py" "$DNS_NAME"
    out=$(ip netns exec "$WORLD" "${ARGV[@]}") || true
    teardown_world
    echo "$out"
    expect "exit 0" "^exit=0\$" "$out"
    expect "returned, stdout and stderr at EOF, within 10 s" "^returned_in=[0-9]\." "$out"
    expect "--quiet: warnings at most, no informational message" \
        "^output='(rknp-pasta: warning: [^\\]*\\\\n)*'\$" "$out"
    expect "--pid names the background process" "^pid_comm=rknp-pasta\$" "$out"
    expect "the host's upstream address and prefix" "^addr=[0-9]+: up0 inet 198\.19\.0\.5/24 " "$out"
    expect "the host's gateway" "^route=default via 198\.19\.0\.1 " "$out"
    expect "a LAN neighbour reached" "^neighbour_sha=$FILE_SHA\$" "$out"
    expect "a host behind the gateway reached" "^outside_sha=$FILE_SHA\$" "$out"
    expect "the host reached at --map-guest-addr" "^host_sha=$FILE_SHA\$" "$out"
    expect "DNS through --dns-forward 169.254.1.1 to the host's resolver" "^dns=$DNS_IP\$" "$out"
    expect "published port: the host fetched the file served inside" "^sha=$FILE_SHA\$" "$out"
    expect "exits once the netns file is deleted" "^exited_after_delete=True\$" "$out"
}

# 2. rootlesskit's implicit port driver: a port the container binds is
# forwarded from the same host port ("auto", rescanned every second).
case_implicit_port() {
    local port
    port=$(free_port 127.0.0.1)
    serve_and_fetch "$1" implicit "$port" "$port" --copy-up=/etc
}

# 2b. A client on another host (the test host behind a veth pair) keeps
# its own address inside the container, over TCP and UDP, as with pasta
# (rootlesskit's docs list it among pasta's pros): both through "auto".
case_client_address() {
    local port done_file="$SCRATCH/tmp/peer-done" pid out
    port=$(free_port 127.0.0.1)
    rm -f "$done_file"
    local ARGV
    rk_argv "$1" --copy-up=/etc -- python3 "$HELPER" peer-echo "$port" "$done_file"
    "${ARGV[@]}" >"$SCRATCH/logs/client_address.log" 2>&1 &
    pid=$!
    out=$(ip netns exec "$NETNS_HOST" "$PY" "$HELPER" ask 198.18.0.1 "$port")
    touch "$done_file"
    wait "$pid" || true
    echo "$out"
    expect "TCP: the container saw the test host's address" "^tcp=198\.18\.0\.2\$" "$out"
    expect "UDP: the container saw the test host's address" "^udp=198\.18\.0\.2\$" "$out"
}

# 3. rootlesskit exits: rknp-pasta follows (its target is gone), and no
# state dir is left.
case_nothing_left() {
    rk "$1" --copy-up=/etc -- true
    local left
    if ! left=$(run_leftovers_named rknp-pasta); then
        echo "left running:"; echo "$left"; return 1
    fi
    if ls -d "$SCRATCH"/tmp/rknp-pasta.* 2>/dev/null; then
        echo "state dirs left behind"; return 1
    fi
    echo "ok nothing left"
}

# 4. A container's root that sees the host's pids cannot reach back into
# any rknp-pasta process for the whole run: the caller's ("main"), the
# background and the hand-over child ("child": their parent is an
# rknp-pasta too). The background runs sandboxed, as pasta's.
case_no_reach_back() {
    local d="$SCRATCH/tmp/reach" out prober="$SCRATCH/bin/reach_back_prober.py"
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    # shellcheck disable=SC2016 # expanded by the shell inside
    as_user bash -c '
        bin=$1 prober=$2 d=$3
        touch "$d/seen"
        unshare -r -n python3 "$prober" probe rknp-pasta "$d/stop" "$d/report.json" "$d/seen" & t=$!
        for i in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        for i in 1 2 3 4 5; do
            "$bin" --config-net -q -t none -u none -I "tap$i" -P "$d/pid.$i" "$t" >"$d/run.$i.log" 2>&1 & p=$!
            echo "$p default" >>"$d/mains"
            wait "$p"
            sleep 0.3
            kill "$(cat "$d/pid.$i")"
            for j in $(seq 50); do kill -0 "$(cat "$d/pid.$i")" 2>/dev/null || break; sleep 0.05; done
        done
        touch "$d/stop"; wait "$t"
    ' _ "$PASTA" "$prober" "$d"
    out=$("$PY" "$prober" summary "$d/report.json" "$d/mains")
    echo "$out"
    expect_not_reached "$out" default
}

RK3_CASES="http_host_loopback http_disable_host_loopback dns cidr mtu_1500 mtu_65520 ipv6 ifname detach_netns netns_host implicit_port client_address nothing_left"
ALL_CASES="cli podman_style no_reach_back $RK3_CASES"
CASES=${PASTA_CASES:-$ALL_CASES}
RK=${PASTA_RK3:-}
[ -z "$RK" ] && [ -n "$(comm -12 <(tr ' ' '\n' <<<"$CASES" | sort) <(tr ' ' '\n' <<<"$RK3_CASES" | sort))" ] &&
    RK=$(build_rootlesskit_v3)
[ -n "$RK" ] && log "rootlesskit v3: $("$RK" --version)"

for c in $CASES; do
    if [[ " $RK3_CASES " == *" $c "* ]] && [ -z "$RK" ]; then
        echo "SKIP $c (no rootlesskit v3: set PASTA_RK3 or install Go)"
        continue
    fi
    run_case "$c" plugin "case_$c"
done

stop_background
check_leftovers
echo "compat_pasta: $PASSES passed, $FAILURES failed"
[ "$FAILURES" = 0 ]
