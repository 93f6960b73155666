#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Integration tests: the real plugin, real namespaces and taps, no
# rootlesskit. Run as root; the namespaced cases run as an unprivileged
# test user through rknp-harness (tests/integration/rknp_harness.c).
# Traffic goes only to loopback and to a test host in a netns made here.
#   run.sh [BUILD_DIR [slirp|fast]]: fast runs every case with the TCP fast
#   path (RKNP_TCP_PATH_FAST), slirp (the default here) with libslirp's TCP
#   (RKNP_TCP_PATH_SLIRP; the library's own default is the fast path).
#   IT_CASES=REGEX runs only the checks whose name matches (grep -Ei), e.g.
#   IT_CASES='DNS|IPv6' tests/integration/run.sh build fast; the others
#   print SKIP (set-up and the final leftover check always run).
set -euo pipefail
BUILD=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build}
TCP_PATH=${2:-slirp}
case $TCP_PATH in
slirp) TCP_FLAGS=(--tcp-slirp) ;;
fast) TCP_FLAGS=(--tcp-fast) ;;
*) echo "unknown TCP path $TCP_PATH (slirp|fast)"; exit 2 ;;
esac
# shellcheck source=tests/lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
CHECK_ONLY=${IT_CASES:-}
HARNESS=$BUILD/bin/rknp-harness
[ -x "$HARNESS" ] || { echo "missing $HARNESS (build first)"; exit 1; }
# ctest treats 77 as a skip (SKIP_RETURN_CODE): a non-root package build.
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (namespaces and a test user)"; exit 77; }

HOSTNS=rknp-it-host
DETNS=rknp-it-detached
cleanup() {
    end_run
    ip netns del "$HOSTNS" 2>/dev/null || true
    ip link del rknp-it-veth0 2>/dev/null || true
    ip netns del "$DETNS" 2>/dev/null || true
    rm -rf "$SCRATCH"
}
trap cleanup EXIT

setup_test_user
make_scratch integration
# The harness and library must be reachable by the test user.
chmod o+rx "$BUILD" "$BUILD/bin" "$BUILD/lib"
touch "$SCRATCH/plugin.log" && chown "$RKNP_TEST_USER" "$SCRATCH/plugin.log"
head -c 4194304 /dev/urandom >"$SCRATCH/payload"
WANT=$(sha256sum <"$SCRATCH/payload" | cut -d' ' -f1)
PORT=$(free_port 127.0.0.1)
start_http 127.0.0.1 "$PORT" "$SCRATCH"
start_http ::1 "$PORT" "$SCRATCH"

harness_state() { find /tmp -maxdepth 1 -name 'rknp-harness.*' | sort; }
STATE_BEFORE=$(harness_state)
run() { as_user timeout 60 "$HARNESS" --log "$SCRATCH/plugin.log" "${TCP_FLAGS[@]}" "$@"; }
# fetch_ok URL [harness options]: the payload arrives intact.
fetch_ok() {
    local url=$1
    shift
    local got
    got=$(run "$@" -- sh -c "curl -fsS -m 20 -g '$url' | sha256sum | cut -d' ' -f1")
    [ "$got" = "$WANT" ] || { echo "sha256 $got, want $WANT"; return 1; }
}

check "http fetch from host 127.0.0.1 via 10.0.2.2, bytes compared" \
    fetch_ok "http://10.0.2.2:$PORT/payload"

# fails_inside OPTS -- CMD: the network is up (tap configured) but CMD
# fails with 42, which tells that apart from a harness failure.
fails_inside() {
    local rc=0
    run "$@" || rc=$?
    [ "$rc" = 42 ] || { echo "exit code $rc, want 42 (network up, command failed)"; return 1; }
}
check "disable-host-loopback makes 10.0.2.2 unreachable" \
    fails_inside --disable-host-loopback -- sh -c \
    "ip -o addr show tap0 | grep -q 10.0.2.100 || exit 1
     curl -fsS -m 5 -o /dev/null http://10.0.2.2:$PORT/payload && exit 0 || exit 42"

cidr_case() {
    run --cidr 10.0.135.128/25 --mtu 1500 -- sh -c "
        ip -o addr show tap0 | grep -q 'inet 10.0.135.228/25' &&
        ip link show tap0 | grep -q 'mtu 1500' &&
        ip route show default | grep -q 'via 10.0.135.130 dev tap0' &&
        curl -fsS -m 20 http://10.0.135.130:$PORT/payload | sha256sum | grep -q $WANT"
}
check "non-default CIDR and MTU on the interface, fetch through the new gateway" cidr_case

# At MTU 1500 libslirp sends 1460-byte segments; the coalescer merges them
# into GSO frames and rknp_stats says how many (ABI 1.2 counters). The fast
# path sends GSO frames of up to 64 KiB itself, bypassing libslirp and the
# coalescer (nothing merged): 4 MiB in far fewer frames than 1460-byte
# segments (2873) would take.
gso_stats_case() {
    local out merged to_tap
    out=$(run --mtu 1500 --stats -- sh -c \
        "curl -fsS -m 20 http://10.0.2.2:$PORT/payload | sha256sum" 2>&1) || return 1
    echo "$out" | grep -q "$WANT" || { echo "payload differs: $out"; return 1; }
    merged=$(echo "$out" | sed -n 's/^stats: .* merged=\([0-9]*\) .*/\1/p')
    to_tap=$(echo "$out" | sed -n 's/^stats: .* to_tap=\([0-9]*\) .*/\1/p')
    if [ "$TCP_PATH" = fast ]; then
        [ "${merged:-1}" = 0 ] || { echo "libslirp carried the download: $out"; return 1; }
        [ "${to_tap:-99999}" -lt 512 ] || { echo "4 MiB took $to_tap frames: $out"; return 1; }
    else
        [ "${merged:-0}" -gt 0 ] || { echo "no merged segments counted: $out"; return 1; }
    fi
}
check "guest-bound data leaves in GSO frames at MTU 1500 (counted in rknp_stats)" gso_stats_case

name_mac_case() {
    run --ifname eth7 --mac 02:00:5e:00:53:07 -- sh -c "
        ip link show eth7 | grep -q 'link/ether 02:00:5e:00:53:07' &&
        ip -o addr show eth7 | grep -q 'inet 10.0.2.100/24' &&
        ! ip link show tap0 2>/dev/null"
}
check "interface name and MAC address" name_mac_case

check "IPv6 fetch from host ::1 via fd00::2 (SLAAC)" \
    fetch_ok "http://[fd00::2]:$PORT/payload" --ipv6

ipv6_static_case() {
    run --ipv6 --ipv6-address fd00::64 -- sh -c "
        ip -o -6 addr show tap0 | grep -q 'inet6 fd00::64/64' &&
        ip -6 route show default | grep -q 'via fd00::2' &&
        curl -fsS -m 20 -g 'http://[fd00::2]:$PORT/payload' | sha256sum | grep -q $WANT"
}
check "IPv6 with an explicit guest address" ipv6_static_case

# Uploads from the guest leave as TSO super-frames; libslirp refuses IPv6
# packets over its MTU, so both directions are checked at 1500 and 65520.
STREAM=$BUILD/bin/rknp-rel-stream
STREAM_PORT=$(free_port 127.0.0.1)
"$STREAM" serve ::1 "$STREAM_PORT" --ready-file "$SCRATCH/stream.ready" \
    >/dev/null 2>&1 &
track_bg $!
ipv6_stream_case() {
    for _ in $(seq 100); do [ -e "$SCRATCH/stream.ready" ] && break; sleep 0.05; done
    local mtu
    for mtu in 1500 65520; do
        run --ipv6 --mtu "$mtu" -- "$STREAM" client fd00::2 "$STREAM_PORT" \
            --conns 2 --up 20000000 --down 20000000 --timeout 30 ||
            { echo "IPv6 stream at MTU $mtu failed"; return 1; }
    done
}
check "IPv6 upload and download, bytes verified, at MTU 1500 and 65520" ipv6_stream_case

dns_case() {
    start_dns rknp-test.example=192.0.2.77 127.0.0.77
    echo "nameserver $DNS_ADDR" >"$SCRATCH/resolv.conf"
    # libslirp forwards 10.0.2.3 to the host resolver: give it ours in a
    # private mount namespace.
    local ARGV
    user_argv timeout 60 "$HARNESS" -- python3 "$TESTS_LIB/dns_query.py" 10.0.2.3 rknp-test.example
    # shellcheck disable=SC2016 # $0 and $@ belong to the inner sh
    unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' \
        "$SCRATCH/resolv.conf" "${ARGV[@]}" | grep -qx 192.0.2.77
}
check "DNS through 10.0.2.3 against a loopback DNS server" dns_case

check "disable-dns: nothing answers on 10.0.2.3" \
    fails_inside --disable-dns -- sh -c \
    "ip -o addr show tap0 | grep -q 10.0.2.100 || exit 1
     python3 '$TESTS_LIB/dns_query.py' 10.0.2.3 rknp-test.example && exit 0 || exit 42"

# A test host in a netns made here, behind a veth pair. The host's end has
# a primary and a secondary address of each family, so the test host's
# servers (which log each client's address) tell whether outbound_addr
# picked the source. IPv4 takes the first address added as the default
# source, IPv6 (on a tie) the last one: ::3 goes first so that ::1 is the
# default. No duplicate address detection, so the addresses work at once.
TH4=198.18.1.2
TH6=fd52:6b6e:1::2
setup_test_host() {
    ip netns add "$HOSTNS"
    ip link add rknp-it-veth0 type veth peer name rknp-it-veth1
    ip link set rknp-it-veth1 netns "$HOSTNS"
    sysctl -qw net.ipv6.conf.rknp-it-veth0.accept_dad=0
    ip netns exec "$HOSTNS" sysctl -qw net.ipv6.conf.rknp-it-veth1.accept_dad=0
    ip addr add 198.18.1.1/24 dev rknp-it-veth0
    ip addr add 198.18.1.3/24 dev rknp-it-veth0
    ip addr add fd52:6b6e:1::3/64 dev rknp-it-veth0 nodad
    ip addr add fd52:6b6e:1::1/64 dev rknp-it-veth0 nodad
    ip link set rknp-it-veth0 up
    ip -n "$HOSTNS" addr add "$TH4/24" dev rknp-it-veth1
    ip -n "$HOSTNS" addr add "$TH6/64" dev rknp-it-veth1 nodad
    ip -n "$HOSTNS" link set rknp-it-veth1 up
    ip -n "$HOSTNS" link set lo up
    start_http "$TH4" "$PORT" "$SCRATCH" "$HOSTNS"
    start_http "$TH6" "$PORT" "$SCRATCH" "$HOSTNS"
}
setup_test_host

# from_test_host URL WANT [harness options]: the guest fetches URL from
# the test host (payload intact); the test host logged WANT as the
# connection's source address.
from_test_host() {
    local url=$1 want=$2 tag got addr
    shift 2
    tag=req$RANDOM$RANDOM
    addr=${url#http://}
    addr=${addr%:*}
    addr=${addr#[}
    addr=${addr%]}
    fetch_ok "$url?$tag" "$@" || return 1
    got=$(sed -n "s|^\([^ ]*\) - - .*\"GET /[^ ?]*?$tag HTTP.*|\1|p" "$SCRATCH/logs/http-$addr-$PORT.log")
    [ "$got" = "$want" ] || { echo "the test host saw the connection from '$got', want $want"; return 1; }
    echo "ok: the test host saw $got"
}

check "test host behind a veth pair: payload intact, source the host's primary 198.18.1.1" \
    from_test_host "http://$TH4:$PORT/payload" 198.18.1.1
check "outbound_addr: the test host sees the configured secondary 198.18.1.3" \
    from_test_host "http://$TH4:$PORT/payload" 198.18.1.3 --outbound-addr 198.18.1.3
check "IPv6 test host behind the veth pair: source the host's default fd52:6b6e:1::1" \
    from_test_host "http://[$TH6]:$PORT/payload" fd52:6b6e:1::1 --ipv6
check "outbound_addr6: the test host sees the configured fd52:6b6e:1::3" \
    from_test_host "http://[$TH6]:$PORT/payload" fd52:6b6e:1::3 --ipv6 --outbound-addr6 fd52:6b6e:1::3

detached_case() {
    ip netns add "$DETNS"
    timeout 60 "$HARNESS" "${TCP_FLAGS[@]}" --detach-netns "/run/netns/$DETNS" -- sh -c "
        ! ip link show tap0 2>/dev/null &&
        ip -n $DETNS -o addr show tap0 | grep -q 'inet 10.0.2.100/24' &&
        ip netns exec $DETNS curl -fsS -m 20 http://10.0.2.2:$PORT/payload | sha256sum | grep -q $WANT"
}
check "detached netns: tap made there, caller's namespace untouched (root)" detached_case

# forward_case [--disable-offload|--udp-slirp]: without offloads (no vnet
# headers) the fast paths cannot reach the guest and hand their forwards to
# libslirp.
forward_case() {
    local hp up
    hp=$(free_port 127.0.0.1)
    up=$(free_udp_port 127.0.0.1)
    rm -f "$SCRATCH/fwd.done" "$SCRATCH/fwd.out"
    # The servers inside stop when the host side touches fwd.done.
    run "$@" --forward "tcp,127.0.0.1,$hp,8080" --forward "udp,127.0.0.1,$up,5353" -- sh -c "
        python3 '$TESTS_LIB/udp_echo.py' 0.0.0.0 5353 & e=\$!
        python3 -m http.server --bind 0.0.0.0 --directory '$SCRATCH' 8080 & h=\$!
        for i in \$(seq 300); do [ -e '$SCRATCH/fwd.done' ] && break; sleep 0.1; done
        kill \$e \$h" >/dev/null 2>&1 &
    local pid=$!
    local ok=1
    for _ in $(seq 100); do
        curl -fsS -m 20 "http://127.0.0.1:$hp/payload" -o "$SCRATCH/fwd.out" 2>/dev/null && break
        sleep 0.1
    done
    [ "$(sha256sum <"$SCRATCH/fwd.out" | cut -d' ' -f1)" = "$WANT" ] || { echo "tcp forward: payload differs"; ok=0; }
    python3 "$TESTS_LIB/udp_echo.py" --client 127.0.0.1 "$up" || { echo "udp forward: no echo"; ok=0; }
    touch "$SCRATCH/fwd.done"
    wait "$pid" || true
    # With the fast path its own listener accepted the TCP connection (so
    # libslirp never saw it); likewise the UDP fast path's socket got the
    # datagrams (it is on unless --udp-slirp).
    local line="tcp 127.0.0.1:$hp -> 10.0.2.100:8080" log="$SCRATCH/plugin.log"
    local uline="udp 127.0.0.1:$up -> 10.0.2.100:5353"
    if [ "$TCP_PATH" != fast ]; then
        ! grep -qF "$line (TCP fast path)" "$log" || { echo "tcp forward on the fast path without --tcp-fast"; ok=0; }
    elif [ "${1:-}" = --disable-offload ]; then
        # Added before or after the tap came: on libslirp either way.
        grep -qF "forward tcp 127.0.0.1:$hp moved to libslirp" "$log" ||
            ! grep -qF "$line (TCP fast path)" "$log" || { echo "tcp forward left on the fast path"; ok=0; }
    else
        grep -qF "$line (TCP fast path)" "$log" || { echo "tcp forward not on the fast path"; ok=0; }
        ! grep -qF "forward tcp 127.0.0.1:$hp moved" "$log" || { echo "tcp forward moved to libslirp"; ok=0; }
    fi
    if [ "${1:-}" = --udp-slirp ]; then
        ! grep -qF "$uline (UDP fast path)" "$log" || { echo "udp forward on the fast path with --udp-slirp"; ok=0; }
    elif [ "${1:-}" = --disable-offload ]; then
        grep -qF "forward udp 127.0.0.1:$up moved to libslirp" "$log" ||
            ! grep -qF "$uline (UDP fast path)" "$log" || { echo "udp forward left on the fast path"; ok=0; }
    else
        grep -qF "$uline (UDP fast path)" "$log" || { echo "udp forward not on the fast path"; ok=0; }
        ! grep -qF "forward udp 127.0.0.1:$up moved" "$log" || { echo "udp forward moved to libslirp"; ok=0; }
    fi
    [ "$ok" = 1 ]
}
check "host 127.0.0.1 reaches servers inside through TCP and UDP forwards" forward_case
check "without offloads the fast paths' forwards move to libslirp and work" forward_case --disable-offload
check "with --udp-slirp the UDP forward is libslirp's and works" forward_case --udp-slirp

# forward_reuse_case: clients of a TCP forward reconnecting from a few
# source ports (a client reset by the server's late write frees its port
# at once): every connection arrives whole, and once they are done the
# parent holds no socket of theirs. libslirp 4.7.0 kept the old connection
# (it stops watching a socket after its EOF) and took the guest's segments
# of both for one: sockets held for minutes, bytes lost
# (plugin/slirp/forward_reaper.hpp).
forward_reuse_case() {
    local hp lo hpid base now ok=1
    hp=$(free_port 127.0.0.1)
    lo=$((40000 + RANDOM % 20000))
    rm -f "$SCRATCH"/reuse.*
    touch "$SCRATCH/reuse.log" && chown "$RKNP_TEST_USER" "$SCRATCH/reuse.log"
    run --forward "tcp,127.0.0.1,$hp,8080" -- sh -c "
        python3 '$TESTS_LIB/forward_reuse.py' server 8080 '$SCRATCH/reuse.log' & s=\$!
        for i in \$(seq 450); do [ -e '$SCRATCH/reuse.done' ] && break; sleep 0.1; done
        kill \$s" >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do grep -q listening "$SCRATCH/reuse.log" && break; sleep 0.1; done
    hpid=$(pgrep -u "$RKNP_TEST_USER" -x rknp-harness | head -n1)
    socks() { find "/proc/$hpid/fd" -lname 'socket:*' 2>/dev/null | wc -l; }
    base=$(socks)
    if ! grep -q listening "$SCRATCH/reuse.log" || [ -z "$hpid" ]; then
        echo "the server inside did not start"
        ok=0
    else
        python3 "$TESTS_LIB/forward_reuse.py" client "$hp" 200 "$lo-$((lo + 9))" "$SCRATCH/reuse.sent"
        for _ in $(seq 100); do # 10 s: libslirp held them for minutes
            now=$(socks)
            [ "$now" -le "$base" ] && python3 "$TESTS_LIB/forward_reuse.py" compare \
                "$SCRATCH/reuse.sent" "$SCRATCH/reuse.log" >/dev/null && break
            sleep 0.1
        done
        echo "$(wc -l <"$SCRATCH/reuse.sent") connections made from 10 ports; the parent's sockets: $base before, $now 10 s after at most"
        [ "$now" -le "$base" ] || { echo "the parent still holds $((now - base)) sockets of finished connections"; ok=0; }
        python3 "$TESTS_LIB/forward_reuse.py" compare "$SCRATCH/reuse.sent" "$SCRATCH/reuse.log" | head -n 5
        python3 "$TESTS_LIB/forward_reuse.py" compare "$SCRATCH/reuse.sent" "$SCRATCH/reuse.log" >/dev/null || ok=0
        [ "$(wc -l <"$SCRATCH/reuse.sent")" -ge 100 ] || { echo "too few connections made"; ok=0; }
    fi
    touch "$SCRATCH/reuse.done"
    wait "$pid" || true
    [ "$ok" = 1 ]
}
check "TCP forward: clients reusing their ports all arrive, no socket left held" forward_reuse_case

# A guest forging source addresses (each would cost libslirp a host socket)
# gets nothing through; its own address still works. A sink on the host's
# loopback logs what arrives through the gateway.
SINK_PORT=$(free_udp_port 127.0.0.1)
python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        log.write(s.recv(2048).decode(errors="replace") + "\n")
' "$SINK_PORT" "$SCRATCH/sink.log" >/dev/null 2>&1 &
track_bg $!
for _ in $(seq 100); do ss -Hul "sport = :$SINK_PORT" | grep -q . && break; sleep 0.05; done
spoof_case() {
    : >"$SCRATCH/sink.log"
    run --stats -- sh -c "
        python3 '$TESTS_LIB/spoof_udp.py' 10.9.9.9 10.0.2.2 $SINK_PORT 50 forged &&
        python3 '$TESTS_LIB/spoof_udp.py' 10.0.2.100 10.0.2.2 $SINK_PORT 5 own &&
        sleep 1" 2>"$SCRATCH/spoof.err" || { cat "$SCRATCH/spoof.err"; return 1; }
    local own forged
    own=$(grep -c '^own ' "$SCRATCH/sink.log" || true)
    forged=$(grep -c '^forged ' "$SCRATCH/sink.log" || true)
    [ "$forged" = 0 ] || { echo "$forged forged datagrams reached the host"; return 1; }
    [ "$own" -ge 1 ] || { echo "the guest's own datagrams were lost too"; cat "$SCRATCH/spoof.err"; return 1; }
    grep -q "dropped=[1-9]" "$SCRATCH/spoof.err" || { echo "drops not counted"; cat "$SCRATCH/spoof.err"; return 1; }
}
check "datagrams with forged source addresses are dropped and counted" spoof_case

# rknp_config.max_flows through the ABI: with max_flows 8, UDP sources get
# half (4), so of 10 sources 4 reach the host and 6 are refused; then 4 TCP
# connections fill the cap and the 5th connect fails (dropped SYN on the
# libslirp path: a timeout; RST on the fast path). rknp_stats counts the
# refusals and the host sockets still held (the UDP fast path's flows live
# 30 s unanswered, libslirp's UDP sockets 240 s).
max_flows_case() {
    : >"$SCRATCH/sink.log"
    run --max-flows 8 --stats -- sh -c "
        python3 '$TESTS_LIB/spoof_udp.py' 10.0.2.100 10.0.2.2 $SINK_PORT 10 capped &&
        python3 -c '
import socket, sys
held = [socket.create_connection((\"10.0.2.2\", $PORT), 5) for _ in range(4)]
try:
    socket.create_connection((\"10.0.2.2\", $PORT), 2)
    print(\"fifth connection opened\")
    sys.exit(1)
except OSError as e:
    print(\"fifth connection refused:\", e)
'" 2>"$SCRATCH/max_flows.err" || { cat "$SCRATCH/max_flows.err"; return 1; }
    local got
    sleep 0.5
    got=$(grep -c '^capped ' "$SCRATCH/sink.log" || true)
    [ "$got" = 4 ] || { echo "$got of 10 UDP sources reached the host, want 4"; return 1; }
    grep -Eq "flows_refused=([7-9]|[1-9][0-9]+) " "$SCRATCH/max_flows.err" ||
        { echo "refusals not counted (want 6 UDP + at least 1 SYN)"; cat "$SCRATCH/max_flows.err"; return 1; }
    grep -Eq "host_sockets=[4-8] " "$SCRATCH/max_flows.err" ||
        { echo "host_sockets is not between the 4 UDP sockets libslirp still holds and the cap"; cat "$SCRATCH/max_flows.err"; return 1; }
    grep -h "stats:" "$SCRATCH/max_flows.err"
}
check "max_flows caps guest UDP sources and TCP connections, counted in rknp_stats" max_flows_case

# The echo server starts here, not inside check's command substitution
# (which would wait for it to close its output).
UDP_PORT=$(free_udp_port 127.0.0.1)
python3 "$TESTS_LIB/udp_echo.py" 127.0.0.1 "$UDP_PORT" >/dev/null 2>&1 &
track_bg $!
UDP6_PORT=$(free_udp_port ::1)
python3 "$TESTS_LIB/udp_echo.py" ::1 "$UDP6_PORT" >/dev/null 2>&1 &
track_bg $!
# Datagrams over the MTU leave the guest as IPv4 fragments, which rknp
# reassembles (libslirp 4.7.0's own reassembly crashes: plugin/reassembly.hpp);
# the replies come back fragmented, by the UDP fast path (the default) or
# by libslirp (--udp-slirp); the counters say which carried them.
fragmented_udp_case() {
    local flows=$1
    shift
    run --mtu 1500 --stats "$@" -- sh -c "
        python3 '$TESTS_LIB/udp_echo.py' --client 10.0.2.2 $UDP_PORT 6000 &&
        python3 '$TESTS_LIB/udp_echo.py' --client 10.0.2.2 $UDP_PORT 65507 &&
        python3 '$TESTS_LIB/udp_echo.py' --client 10.0.2.2 $UDP_PORT 1000" \
        2>"$SCRATCH/udp.err" || { cat "$SCRATCH/udp.err"; return 1; }
    grep -q "udp_fast_flows=$flows " "$SCRATCH/udp.err" ||
        { echo "want udp_fast_flows=$flows"; grep stats: "$SCRATCH/udp.err"; return 1; }
}
check "UDP datagrams over the MTU (up to 65507 bytes) reach the host and come back (UDP fast path)" \
    fragmented_udp_case 3
check "UDP datagrams over the MTU (up to 65507 bytes) reach the host and come back (--udp-slirp)" \
    fragmented_udp_case 0 --udp-slirp
# The same over IPv6: the guest's fragments (a Fragment header after the
# fixed one) are reassembled by rknp (libslirp 4.7.0 drops IPv6
# fragments), the UDP fast path carries the datagram to ::1 and fragments
# the reply.
fragmented_udp6_case() {
    run --ipv6 --mtu 1500 --stats -- sh -c "
        python3 '$TESTS_LIB/udp_echo.py' --client fd00::2 $UDP6_PORT 6000 &&
        python3 '$TESTS_LIB/udp_echo.py' --client fd00::2 $UDP6_PORT 65527 &&
        python3 '$TESTS_LIB/udp_echo.py' --client fd00::2 $UDP6_PORT 1000" \
        2>"$SCRATCH/udp6.err" || { cat "$SCRATCH/udp6.err"; return 1; }
    grep -q "udp_fast_flows=3 " "$SCRATCH/udp6.err" ||
        { echo "want udp_fast_flows=3"; grep stats: "$SCRATCH/udp6.err"; return 1; }
}
check "IPv6 UDP datagrams over the MTU (up to 65527 bytes) reach the host and come back" \
    fragmented_udp6_case

# The sandbox (docs/security.md): the parent's stack thread, and only it,
# runs under a seccomp filter (mode 2 in /proc) and Landlock where the
# kernel has it; every case above ran with it on (DNS, IPv6, forwards).
landlock_abi() {
    python3 -c 'import ctypes; print(max(ctypes.CDLL(None).syscall(444, None, 0, 1), 0))'
}
# Seccomp modes of the harness's threads (the command's parent), one a line.
# shellcheck disable=SC2016 # $PPID is the command's (run by the guest's sh)
SECCOMP_MODES='grep -h "^Seccomp:" /proc/$PPID/task/*/status | tr -d " \t"'
sandbox_case() {
    local out want=1 filtered
    [ "$(landlock_abi)" -ge 1 ] && want=3
    out=$(run --stats -- sh -c "$SECCOMP_MODES" 2>&1) || { echo "$out"; return 1; }
    echo "$out" | grep -Eq "(^| )sandbox=$want( |\$)" ||
        { echo "stats.sandbox is not $want: $out"; return 1; }
    filtered=$(echo "$out" | grep -c '^Seccomp:2$' || true)
    [ "$filtered" = 1 ] || { echo "$filtered filtered threads, want 1 (the stack thread): $out"; return 1; }
    echo "$out" | grep -q '^Seccomp:0$' ||
        { echo "no unfiltered thread: the filter leaked to the caller's threads: $out"; return 1; }
    grep -q "sandbox on the stack thread: seccomp on, Landlock $([ $want = 3 ] && echo on || echo off)" \
        "$SCRATCH/plugin.log" || { echo "the log does not say what is in force"; return 1; }
    out=$(run --stats --disable-sandbox -- sh -c "$SECCOMP_MODES" 2>&1) || { echo "$out"; return 1; }
    echo "$out" | grep -Eq '(^| )sandbox=0( |$)' || { echo "disable_sandbox left bits set: $out"; return 1; }
    ! echo "$out" | grep -q '^Seccomp:2$' || { echo "disable_sandbox left a filter: $out"; return 1; }
}
check "the stack thread alone is sandboxed (seccomp, Landlock where the kernel has it); disable_sandbox turns it off" \
    sandbox_case

exit_code_case() {
    local rc=0
    run -- sh -c 'exit 7' || rc=$?
    [ "$rc" = 7 ] || { echo "exit code $rc, want 7"; return 1; }
}
check "the command's exit code propagates" exit_code_case

# By this run's marker, not by name: a concurrent run's harness is not ours.
no_leftovers() {
    run_leftovers_named rknp-harness && [ "$(harness_state)" = "$STATE_BEFORE" ]
}
check "no harness process or state directory left behind" no_leftovers

bad_mtu_case() {
    local out rc=0
    out=$(run --mtu 99999 -- true 2>&1) || rc=$?
    [ "$rc" = 2 ] && grep -q 'invalid mtu "99999": must be 68..65520' <<<"$out"
}
check "bad MTU is refused with a clear error" bad_mtu_case

finish
