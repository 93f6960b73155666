#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# End-to-end tests of rknp-pasta, the pasta-compatible command on the
# public rknp C ABI, as an unprivileged user: its command line as Podman
# and rootlesskit probe it, Podman's argument list against a bound netns
# file (exit 0 once configured, stdout/stderr closed, --pid, a published
# port, exit when the file is deleted; -6 alone; an IPv6 --dns-forward to
# the host's resolver), upstream rootlesskit v3's
# `--net=pasta --pasta-binary=PATH` with the shared cases of cases.sh and
# the implicit port driver, a hostile container reaching back, and the -c
# socket with rknp-pesto (rootlesskit's pesto port driver, the socket's
# rules, Podman's pesto calls, and to a bridge network's container behind
# the namespace, over IPv4 and IPv6), and -T/-U and --host-lo-to-ns-lo (between the
# namespace's loopback and the host's), and -t's loopback clients spliced
# past the tap.
#
#   sudo tests/e2e/compat_pasta.sh          # BUILD_DIR (default build/)
#   PASTA_CASES="cli podman_style" sudo -E tests/e2e/compat_pasta.sh
#
# Needs $BUILD_DIR/bin/rknp-pasta, rknp-pesto, rootlessctl (for
# pesto_rootlesskit) and $BUILD_DIR/lib/librknp.so.1, Go and
# the module proxy (rootlesskit v3), uidmap, iproute2, curl, python3,
# util-linux (tests/install-deps.sh). Traffic goes only to loopback and to
# namespaces this script creates. One PASS/FAIL line per case; exits
# non-zero if any failed; bounded by E2E_TIMEOUT seconds (default 600).
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 600 "creates a user, namespaces and a DNS server on :53" "tests/install-deps.sh; build rknp-pasta first" \
    "$BUILD_DIR/bin/rknp-pasta" "$BUILD_DIR/bin/rknp-pesto" "$BUILD_DIR/lib/librknp.so.1"
# shellcheck source=tests/e2e/cases.sh
. "$E2E_DIR/cases.sh" # the rootlesskit cases below run through drv_flags

NETNS_HOST=rknp-pa-host
VETH_HOST=rknp-pa-h
VETH_NS=rknp-pa-n
DNS_NAME=rknp-pasta.test
DNS_IP=192.0.2.79

e2e_scratch pasta
e2e_copy_build rknp-pasta rknp-pesto
[ -x "$BUILD_DIR/bin/rootlessctl" ] && install -m 0755 "$BUILD_DIR/bin/rootlessctl" "$SCRATCH/bin/"
install -m 0755 "$E2E_DIR/compat_pasta_helper.py" "$SCRATCH/bin/helper.py"
install -m 0755 "$E2E_DIR/reach_back_prober.py" "$SCRATCH/bin/reach_back_prober.py"
PASTA=$SCRATCH/bin/rknp-pasta
PESTO=$SCRATCH/bin/rknp-pesto
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
# and libslirp and exits 0, with --host-lo-to-ns-lo too (rootlesskit then
# passes it); options pasta has but rknp-pasta cannot honour, and
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
    out=$(as_user "$PASTA" --host-lo-to-ns-lo --version)
    expect "--host-lo-to-ns-lo --version exits 0 (rootlesskit's probe)" "^rknp-pasta [0-9.]+ " "$out"
    refused "^rknp-pasta: -U/--udp-ns: address 10\.0\.0\.1: the namespace's side is its loopback" -U 10.0.0.1/53 1
    refused "^rknp-pasta: option '-D' is not supported by rknp-pasta\$" -D 192.0.2.1 1
    refused "^rknp-pasta: --map-guest-addr fd00::5: IPv6 mappings need pasta's IPv6 model" \
        -a 10.0.2.100 --map-guest-addr fd00::5 1
    refused "^rknp-pasta: -4/--ipv4-only and -6/--ipv6-only exclude each other" -4 -6 1
    refused "^rknp-pasta: --splice and --no-splice exclude each other" --splice --no-splice 1
    refused "^rknp-pasta: --host-lo-to-ns-lo is incompatible with --no-splice" --host-lo-to-ns-lo --no-splice 1
    refused "^rknp-pasta: --map-guest-addr 169\.254\.1\.2: needs the namespace on the host's network" \
        -a 10.0.2.100 --map-guest-addr 169.254.1.2 1
    refused "^rknp-pasta: -g/--gateway 10\.0\.2\.50: the namespace's own address" -a 10.0.2.50 -n 24 -g 10.0.2.50 1
    refused "^rknp-pasta: -g/--gateway 10\.0\.3\.1: not a host of the network 10\.0\.2\.0/24" -a 10.0.2.50 -n 24 -g 10.0.3.1 1
    refused "^rknp-pasta: -T/--tcp-ns: 'none' cannot be combined" -T none -T 80 1
    refused "^rknp-pasta: -t/--tcp-ports: invalid port specifier '0'" -t 0 1
    refused "^rknp-pasta: a target is needed" --config-net
    refused "running a command is not supported" --config-net sh
    # rootlesskit's probes for its pesto port driver, and pesto's forms.
    out=$(as_user "$PASTA" --conf-path=/dev/null --version)
    expect "--conf-path=/dev/null --version exits 0" "^rknp-pasta [0-9.]+ " "$out"
    out=$(as_user "$PESTO" --version)
    expect "pesto --version names rknp-pesto and its protocol" \
        "^rknp-pesto [0-9.]+ \(pesto compatible, on rknp; protocol 1\)\$" "$out"
    rc=0
    err=$(as_user "$PESTO" -t 8080 /nonexistent 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "pesto without -A/-D: exit $rc"; return 1; }
    expect "pesto without -A/-D refused" "give -A/--add or -D/--delete before the port specs" "$err"
    rc=0
    err=$(as_user "$PESTO" -A --tcp-ports=0.0.0.0/1:0 /nonexistent 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "pesto with a bad spec: exit $rc"; return 1; }
    expect "pesto's bad spec refused by name" "^rknp-pesto: -t/--tcp-ports: invalid port specifier '0\.0\.0\.0/1:0'" "$err"
}

# 1. Podman 6.1's argument list (createPastaArgs) against a netns file,
# from inside a user namespace as Podman runs it, in pasta's address model:
# the namespace gets the host's upstream address, prefix and gateway. The
# "host" is a world netns whose upstream is 198.19.0.5/24 via 198.19.0.1
# and fd19::5/64 via fe80::1 (link-local, as routers mostly are) on a veth
# to a LAN netns holding the gateways, a neighbour (.7, fd19::7), a host
# behind the gateway (203.0.113.9, fd13::9) and the resolver
# (198.19.0.1:53, named by the world's /etc/netns resolv.conf).
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
    ip -n "$WORLD" addr add fd19::5/64 dev up0 nodad
    ip -n "$WORLD" -6 route add default via fe80::1 dev up0
    ip -n "$LAN" addr add 198.19.0.1/24 dev lan0
    ip -n "$LAN" addr add 198.19.0.7/24 dev lan0
    ip -n "$LAN" addr add 203.0.113.9/32 dev lo
    ip -n "$LAN" addr add fe80::1/64 dev lan0 nodad
    ip -n "$LAN" addr add fd19::1/64 dev lan0 nodad
    ip -n "$LAN" addr add fd19::7/64 dev lan0 nodad
    ip -n "$LAN" addr add fd13::9/128 dev lo
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
    start_http fd19::7 "$lp" "$SCRATCH/www" "$LAN"
    start_http fd13::9 "$lp" "$SCRATCH/www" "$LAN"
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
    expect "the host's IPv6 address and prefix" "^addr6=[0-9]+: up0 inet6 fd19::5/64 " "$out"
    expect "no other global IPv6 address" "^addr6_count=1\$" "$out"
    expect "the host's IPv6 gateway" "^route6=default via fe80::1 dev up0 " "$out"
    expect "an IPv6 LAN neighbour reached" "^neighbour6_sha=$FILE_SHA\$" "$out"
    expect "an IPv6 host behind the link-local gateway reached" "^outside6_sha=$FILE_SHA\$" "$out"
    expect "the host reached at an IPv6 --map-guest-addr" "^host6_sha=$FILE_SHA\$" "$out"
    expect "a LAN neighbour reached" "^neighbour_sha=$FILE_SHA\$" "$out"
    expect "a host behind the gateway reached" "^outside_sha=$FILE_SHA\$" "$out"
    expect "the host reached at --map-guest-addr" "^host_sha=$FILE_SHA\$" "$out"
    expect "DNS through --dns-forward 169.254.1.1 to the host's resolver" "^dns=$DNS_IP\$" "$out"
    expect "published port: the host fetched the file served inside" "^sha=$FILE_SHA\$" "$out"
    expect "exits once the netns file is deleted" "^exited_after_delete=True\$" "$out"
}

# 1b. -6 in the same world: the host's IPv6 address, prefix and link-local
# gateway, no IPv4 address or route; IPv6 hosts reached, IPv4 ones not.
case_ipv6_only() {
    local d="$SCRATCH/tmp/ipv6only" lp=18082 out ARGV
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    setup_world
    start_http 198.19.0.7 "$lp" "$SCRATCH/www" "$LAN"
    start_http fd19::7 "$lp" "$SCRATCH/www" "$LAN"
    start_http fd13::9 "$lp" "$SCRATCH/www" "$LAN"
    user_argv unshare -rm python3 "$HELPER" ipv6-only "$PASTA" "$d" "$lp"
    out=$(ip netns exec "$WORLD" "${ARGV[@]}") || true
    teardown_world
    echo "$out"
    expect "exit 0" "^exit=0\$" "$out"
    expect "no IPv4 address" "^addr4_count=0\$" "$out"
    expect "no IPv4 default route" "^route4_count=0\$" "$out"
    expect "the host's IPv6 address and prefix" "^addr6=[0-9]+: [a-z0-9]+ +inet6 fd19::5/64 " "$out"
    expect "the host's IPv6 gateway" "^route6=default via fe80::1 " "$out"
    expect "an IPv6 LAN neighbour reached" "^neighbour6_sha=$FILE_SHA\$" "$out"
    expect "an IPv6 host behind the gateway reached" "^outside6_sha=$FILE_SHA\$" "$out"
    expect "no IPv4 host reached" "^neighbour4_sha=none\$" "$out"
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

# 5. rootlesskit v3.3's pesto port driver: rknp-pasta started with
# --conf-path=$ST/.pasta.sock, and each port rootlessctl adds or removes is
# one rknp-pesto run against it. A TCP and a UDP port reach a server in the
# child from the host's loopback and from the test host behind the veth
# pair, which keeps its address; the host sockets are rknp-pasta's; a
# refusal (a host port in use) comes back through rootlessctl; removing
# the ports closes them.
case_pesto_rootlesskit() {
    local tp up cp=18090 done_file="$SCRATCH/tmp/pesto-done" pid out rc id_t id_u ARGV
    ST="$SCRATCH/tmp/state-pesto"
    [ -x "$SCRATCH/bin/rootlessctl" ] || {
        echo "missing $BUILD_DIR/bin/rootlessctl (tests/lib/build.sh builds it)"
        return 1
    }
    tp=$(free_port 0.0.0.0)
    up=$(free_udp_port 0.0.0.0)
    rm -rf "$ST" "$done_file"
    user_argv "$RK" --net=pasta --pasta-binary="$PASTA" --port-driver=pesto \
        --pesto-binary="$PESTO" --state-dir="$ST" --copy-up=/etc -- \
        python3 "$HELPER" peer-echo "$cp" "$done_file"
    "${ARGV[@]}" >"$SCRATCH/logs/pesto-rk.log" 2>&1 &
    pid=$!
    # shellcheck disable=SC2064 # expanded now on purpose
    trap "touch '$done_file'; wait $pid 2>/dev/null || true" EXIT
    for _ in $(seq 100); do
        [ -S "$ST/api.sock" ] && [ -S "$ST/.pasta.sock" ] && break
        kill -0 "$pid" 2>/dev/null || { echo "rootlesskit exited:"; cat "$SCRATCH/logs/pesto-rk.log"; return 1; }
        sleep 0.1
    done
    expect "rknp-pasta's -c socket, mode 0600" "^600 socket\$" "$(stat -c '%a %F' "$ST/.pasta.sock")"
    id_t=$(ctl add-ports "0.0.0.0:$tp:$cp/tcp")
    id_u=$(ctl add-ports "0.0.0.0:$up:$cp/udp")
    expect "the TCP host socket is rknp-pasta's" '"rknp-pasta"' "$(ss -Hltnp "sport = :$tp")"
    expect "the UDP host socket is rknp-pasta's" '"rknp-pasta"' "$(ss -Hlunp "sport = :$up")"
    out=$("$PY" "$HELPER" ask 127.0.0.1 "$tp" "$up")
    echo "$out"
    expect "TCP from the host's loopback reached the child" "^tcp=[0-9]" "$out"
    expect "UDP from the host's loopback reached the child" "^udp=[0-9]" "$out"
    out=$(ip netns exec "$NETNS_HOST" "$PY" "$HELPER" ask 198.18.0.1 "$tp" "$up")
    echo "$out"
    expect "TCP: the child saw the test host's address" "^tcp=198\.18\.0\.2\$" "$out"
    expect "UDP: the child saw the test host's address" "^udp=198\.18\.0\.2\$" "$out"
    rc=0
    out=$(ctl add-ports "127.0.0.1:$PORT4:$cp/tcp" 2>&1) || rc=$?
    [ "$rc" != 0 ] || { echo "a busy host port was accepted: $out"; return 1; }
    expect "rknp-pesto's failure reported by rootlesskit" "pesto failed" "$out"
    expect "with rknp-pasta's message" "cannot forward tcp 127\.0\.0\.1 port $PORT4 to port $cp: .*[Aa]ddress already in use" "$out"
    ctl remove-ports "$id_t" "$id_u"
    [ -z "$(ss -Hltn "sport = :$tp")$(ss -Hlun "sport = :$up")" ] ||
        { echo "host ports still open after remove-ports:"; ss -Hltunp "( sport = :$tp or sport = :$up )"; return 1; }
    echo "ok remove-ports closed 0.0.0.0:$tp/tcp and 0.0.0.0:$up/udp"
}

# 6. The -c socket's rules, with rknp-pasta run as the test user in a user
# and network namespace of its own under umask 000: a stale socket at the
# path is replaced; the socket is mode 0600 and the user's; the user's
# rknp-pesto is served; another uid is stopped by the mode, and past it
# (CAP_DAC_OVERRIDE) by SO_PEERCRED: closed unanswered, rknp-pesto exits
# 1, nothing changes, the refusal logged; a second start on the live
# socket fails and the first keeps serving it; a regular file at the path
# is refused and kept; a forward of the command line (-t) and one of -u
# auto are deleted through the socket, the auto one not made again.
case_pesto_socket() {
    local d="$SCRATCH/tmp/pesto-sock" sock hp cp up out rc t pid
    local other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    sock=$d/ctl.sock
    hp=$(free_port 127.0.0.1)
    cp=$(free_port 127.0.0.1) # a forward of the command line
    up=$(free_port 127.0.0.1) # one of "auto": a UDP port the namespace binds
    as_user "$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$sock"
    [ -S "$sock" ] || { echo "no stale socket made"; return 1; }
    # shellcheck disable=SC2016 # expanded by the shell inside
    as_user bash -c '
        pasta=$1 d=$2 py=$3 cp=$4 up=$5
        umask 000
        unshare -r -n "$py" -c "import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((\"0.0.0.0\", int(sys.argv[1])))
time.sleep(300)" "$up" & t=$!
        for _ in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        echo "$t" >"$d/target"
        "$pasta" --config-net -4 -t "127.0.0.1/$cp" -u auto -c "$d/ctl.sock" -l "$d/pasta.log" -P "$d/pid" "$t"
        echo "start=$?"
    ' _ "$PASTA" "$d" "$PY" "$cp" "$up" >"$d/start.out" 2>&1
    t=$(cat "$d/target")
    pid=$(cat "$d/pid" 2>/dev/null || true)
    # shellcheck disable=SC2064 # expanded now on purpose
    trap "kill $t ${pid:-} 2>/dev/null || true" EXIT
    expect "started over a stale socket" "^start=0\$" "$(cat "$d/start.out")"
    expect "mode 0600 under umask 000, the user's" "^600 $RKNP_TEST_USER socket\$" "$(stat -c '%a %U %F' "$sock")"
    as_user "$PESTO" --add -t "127.0.0.1/$hp:8080" "$sock"
    expect "the user's rknp-pesto is served" '"rknp-pasta"' "$(ss -Hltnp "sport = :$hp")"
    rc=0
    out=$("${other[@]}" "$PESTO" -D -t "127.0.0.1/$hp:8080" "$sock" 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "another uid: exit $rc ($out)"; return 1; }
    expect "another uid stopped by the mode" "Permission denied \(the socket is mode 0600" "$out"
    rc=0
    out=$("${other[@]}" --inh-caps=+dac_override --ambient-caps=+dac_override \
        "$PESTO" -D -t "127.0.0.1/$hp:8080" "$sock" 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "another uid past the mode: exit $rc ($out)"; return 1; }
    expect "another uid past the mode: closed unanswered" "no reply: the socket closed the connection unanswered" "$out"
    expect "the refusal logged" "refused a client of uid [0-9]+" "$(cat "$d/pasta.log")"
    expect "the forward still in force" '"rknp-pasta"' "$(ss -Hltnp "sport = :$hp")"
    rc=0
    out=$(as_user "$PASTA" --config-net -4 -t none -u none -I tap9 -c "$sock" "$t" 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "a second start on the live socket: exit $rc ($out)"; return 1; }
    expect "a second start refused" "-c/--conf-path: .*ctl\.sock is in use: another process listens on it \(left as it is\)" "$out"
    as_user "$PESTO" --delete -t "127.0.0.1/$hp:8080" "$sock"
    [ -z "$(ss -Hltn "sport = :$hp")" ] || { echo "the first rknp-pasta did not delete 127.0.0.1:$hp"; return 1; }
    echo "ok the first rknp-pasta still serves its socket"
    # shellcheck disable=SC2016 # expanded by the shell inside
    as_user sh -c 'echo precious >"$1"' _ "$d/file"
    rc=0
    out=$(as_user "$PASTA" --config-net -4 -t none -u none -I tap9 -c "$d/file" "$t" 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "a regular file as the socket: exit $rc ($out)"; return 1; }
    expect "a regular file refused" "-c/--conf-path: .*/file exists and is not a socket \(left as it is\)" "$out"
    expect "and kept" "^precious\$" "$(cat "$d/file")"
    # The command line's and "auto"'s forwards are rknp-pesto's to delete
    # too; an "auto" one deleted stays away while the port is listened on.
    expect "the command line's forward in force" '"rknp-pasta"' "$(ss -Hltnp "sport = :$cp")"
    for _ in $(seq 50); do [ -n "$(ss -Hlun "sport = :$up")" ] && break; sleep 0.1; done
    expect "auto's forward in force" '"rknp-pasta"' "$(ss -Hlunp "sport = :$up")"
    as_user "$PESTO" --delete -t "127.0.0.1/$cp" "$sock" ||
        { echo "pesto --delete of the command line's forward failed"; return 1; }
    [ -z "$(ss -Hltn "sport = :$cp")" ] || { echo "127.0.0.1:$cp still forwarded"; return 1; }
    echo "ok the command line's forward deleted"
    as_user "$PESTO" --delete -u "0.0.0.0/$up" "$sock" ||
        { echo "pesto --delete of auto's forward failed"; return 1; }
    sleep 2.5 # two rescans
    [ -z "$(ss -Hlun "sport = :$up")" ] || { echo "0.0.0.0:$up forwarded again"; return 1; }
    echo "ok auto's forward deleted, not made again by the rescans"
    rc=0
    out=$(as_user "$PESTO" --delete -t "127.0.0.1/$cp" "$sock" 2>&1) || rc=$?
    [ "$rc" = 1 ] || { echo "deleting it again: exit $rc ($out)"; return 1; }
    expect "deleting it again: not forwarded" "tcp 127\.0\.0\.1 port $cp is not forwarded\$" "$out"
}

# 7. Podman 6's rootless network namespace with rootless_port_forwarder=
# "pasta": rknp-pasta with Podman's argument list and -c, then Podman's
# pesto calls (--add/--delete -t 0.0.0.0/PORT -t [::]/PORT, -u likewise),
# in the world netns of case 1. The file served inside arrives through
# 127.0.0.1 and [::1], UDP is echoed; the same port again, a host port in
# use and an unknown delete exit 1 with rknp-pasta's message; after
# --delete nothing answers; a request in another protocol version is
# answered naming both versions.
case_pesto_podman() {
    local d="$SCRATCH/tmp/pesto-podman" out ARGV
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    setup_world
    user_argv unshare -rm python3 "$HELPER" podman-pesto "$PASTA" "$PESTO" "$d" "$SCRATCH/www" \
        18180 18181 18182
    out=$(ip netns exec "$WORLD" "${ARGV[@]}") || true
    teardown_world
    echo "$out"
    expect "exit 0" "^exit=0\$" "$out"
    expect "pesto --add -t 0.0.0.0/P -t [::]/P: exit 0" "^add=0 \$" "$out"
    expect "pesto --add -u 0.0.0.0/P -u [::]/P: exit 0" "^add_udp=0 \$" "$out"
    expect "the file through 127.0.0.1" "^sha4=$FILE_SHA\$" "$out"
    expect "the file through [::1]" "^sha6=$FILE_SHA\$" "$out"
    expect "UDP echoed through 127.0.0.1" "^udp4=[0-9]" "$out"
    expect "UDP echoed through [::1]" "^udp6=[0-9]" "$out"
    expect "the same port again: exit 1, rknp-pasta's message" \
        "^again=1 rknp-pesto: .*: tcp 0\.0\.0\.0 port 18180 is forwarded already \(to port 18180\)\$" "$out"
    expect "a host port in use: exit 1, the bind's error" \
        "^busy=1 rknp-pesto: .*: cannot forward tcp 127\.0\.0\.1 port 18182 to port 18182: .*[Aa]ddress already in use" "$out"
    expect "pesto --delete: exit 0" "^delete=0 \$" "$out"
    expect "pesto --delete -u: exit 0" "^delete_udp=0 \$" "$out"
    expect "no TCP once deleted" "^after_sha4=\$" "$out"
    expect "no UDP once deleted" "^after_udp=\$" "$out"
    expect "an unknown delete: exit 1" "^delete_again=1 rknp-pesto: .*: tcp 0\.0\.0\.0 port 18180 is not forwarded" "$out"
    expect "another protocol version answered, naming both" \
        "^mismatch='rknp-pesto 1 error bad request: protocol version 2 is not supported: this rknp-pasta speaks version 1" "$out"
    expect "exits once the netns file is deleted" "^exited_after_delete=True\$" "$out"
}

# 7. Podman 6's bridge network with pasta as the port forwarder: pesto
# --add -t 0.0.0.0/P:10.89.0.2/8000, the container's address on a veth
# behind the namespace (as netavark's bridge). The file through the
# host's loopback, the client's address as the container sees it: a
# loopback client as the gateway (198.19.0.1, --no-map-gw's model), a
# LAN host (198.19.0.7) as itself, over TCP and UDP; nothing once deleted.
# bridge_run MODE PORT ASK_HOST ASK_SRC: the helper's MODE in the world
# while the LAN asks ASK_HOST:PORT from ASK_SRC; its output in $out, the
# LAN's answers in $lan (the caller's locals).
bridge_run() {
    local mode=$1 port=$2 ask_host=$3 ask_src=$4 d="$SCRATCH/tmp/$1" pid ARGV
    out="$SCRATCH/tmp/$mode.out"
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    setup_world
    user_argv unshare -rm python3 "$HELPER" "$mode" "$PASTA" "$PESTO" "$d" "$SCRATCH/www" \
        "$((port - 1))" "$port"
    ip netns exec "$WORLD" "${ARGV[@]}" >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 150); do
        grep -q '^ready$' "$out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    lan=$(ip netns exec "$LAN" "$PY" "$HELPER" ask "$ask_host" "$port" "$port" "$ask_src" 2>&1) || true
    touch "$d/done"
    wait "$pid" || true
    teardown_world
    out=$(cat "$out")
    echo "$out"
    echo "$lan"
}
case_pesto_bridge() {
    local out lan
    bridge_run podman-bridge 18191 198.19.0.5 198.19.0.7
    expect "exit 0" "^exit=0\$" "$out"
    expect "pesto --add -t 0.0.0.0/P:10.89.0.2/8000: exit 0" "^add=0 \$" "$out"
    expect "the file from the container through 127.0.0.1" "^sha=$FILE_SHA\$" "$out"
    expect "a loopback client seen as the gateway (TCP)" "^tcp_peer=198\.19\.0\.1\$" "$out"
    expect "a loopback client seen as the gateway (UDP)" "^udp_peer=198\.19\.0\.1\$" "$out"
    expect "a LAN client keeps its address (TCP)" "^tcp=198\.19\.0\.7\$" "$lan"
    expect "a LAN client keeps its address (UDP)" "^udp=198\.19\.0\.7\$" "$lan"
    expect "pesto --delete: exit 0" "^delete=0 \$" "$out"
    expect "nothing once deleted" "^after_sha=\$" "$out"
    expect "exits once the netns file is deleted" "^exited_after_delete=True\$" "$out"
}

# 7b. The same over IPv6, a dual-stack bridge network's IPv6 side: pesto
# --add -t [::]/P:[fd00:aaaa::2]/8000 (and -u), the container at
# fd00:aaaa::2 routed behind the namespace (fd19::5/64 via the link-local
# fe80::1). From the host's ::1 (seen as --map-host-loopback fd19::99,
# which the container can answer; the link-local gateway it could not) and
# from a LAN host (fd19::7), which keeps its address, over TCP and UDP;
# nothing once deleted.
case_pesto_bridge6() {
    local out lan
    bridge_run podman-bridge6 18193 fd19::5 fd19::7
    expect "exit 0" "^exit=0\$" "$out"
    expect "pesto --add -t [::]/P:[fd00:aaaa::2]/8000 (and -u): exit 0" "^add=0 \$" "$out"
    expect "the file from the container through [::1]" "^sha=$FILE_SHA\$" "$out"
    expect "a loopback client seen as --map-host-loopback (TCP)" "^tcp_peer=fd19::99\$" "$out"
    expect "a loopback client seen as --map-host-loopback (UDP)" "^udp_peer=fd19::99\$" "$out"
    expect "a LAN client keeps its address (TCP)" "^tcp=fd19::7\$" "$lan"
    expect "a LAN client keeps its address (UDP)" "^udp=fd19::7\$" "$lan"
    expect "pesto --delete: exit 0" "^delete=0 \$" "$out"
    expect "no TCP once deleted" "^after_sha=\$" "$out"
    expect "no UDP once deleted" "^after_udp=\$" "$out"
    expect "exits once the netns file is deleted" "^exited_after_delete=True\$" "$out"
}

# 7c. An IPv6 --dns-forward in pasta's IPv6 model: DNS sent to fd99::53
# from inside reaches the host's resolver as its resolv.conf names it,
# this test's own DNS server on the world's loopback: ::1, then 127.0.0.1
# (an IPv4 nameserver, reached from the IPv6 flow).
case_dns_forward6() {
    local d="$SCRATCH/tmp/dns6" out ns ARGV
    install -m 0755 "$TESTS_LIB/dns_query.py" "$SCRATCH/bin/dns_query.py"
    for ns in ::1 127.0.0.1; do
        rm -rf "$d"
        mkdir -p "$d"
        chown "$RKNP_TEST_USER" "$d"
        setup_world
        echo "nameserver $ns" >"/etc/netns/$WORLD/resolv.conf"
        ip netns exec "$WORLD" "$PY" "$TESTS_LIB/dns_server.py" "$ns" 53 "$DNS_NAME=$DNS_IP" \
            >"$SCRATCH/logs/dns6-$ns.log" 2>&1 &
        track_bg $!
        user_argv unshare -rm python3 "$HELPER" dns6 "$PASTA" "$d" "$SCRATCH/bin/dns_query.py" \
            "$DNS_NAME"
        out=$(ip netns exec "$WORLD" "${ARGV[@]}") || true
        teardown_world
        echo "$out"
        expect "exit 0 (nameserver $ns)" "^exit=0\$" "$out"
        expect "resolved through --dns-forward fd99::53 (nameserver $ns)" "^dns6=$DNS_IP\$" "$out"
        expect "exits once the netns file is deleted" "^exited_after_delete=True\$" "$out"
    done
}

# The namespaces of cases 8 and 9, in directory $d (the caller's local):
# ns_start TAG ARGS... makes one (its process's pid in $d/TAG.target)
# served by rknp-pasta ARGS (its pid in $d/TAG.pid); ns_inside TAG
# COMMAND... runs there as the user; ns_stops TAG checks that rknp-pasta
# exits once the namespace's process is gone. NS_TARGETS: the case's
# namespaces' processes, killed when it ends.
NS_TARGETS=""
ns_start() {
    local tag=$1
    shift
    # shellcheck disable=SC2016 # expanded by the shell inside
    as_user bash -c '
        pasta=$1 d=$2 tag=$3
        shift 3
        unshare -r -n sleep 300 & t=$!
        for _ in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        echo "$t" >"$d/$tag.target"
        "$pasta" --config-net -l "$d/$tag.log" -P "$d/$tag.pid" "$@" "$t"
        echo "start=$?"
    ' _ "$PASTA" "$d" "$tag" "$@" >"$d/$tag.out" 2>&1
    # The case runs in a subshell: whatever ends it ends the namespaces,
    # and their rknp-pastas follow.
    NS_TARGETS+=" $(cat "$d/$tag.target")"
    # shellcheck disable=SC2064 # expanded now on purpose
    trap "kill $NS_TARGETS 2>/dev/null || true" EXIT
    expect "$tag: started" "^start=0\$" "$(cat "$d/$tag.out")"
}
ns_inside() { # as the namespace's owner: no setgroups there
    as_user nsenter -t "$(cat "$d/$1.target")" -U -n --preserve-credentials "${@:2}"
}
ns_stops() {
    local t pid
    t=$(cat "$d/$1.target")
    pid=$(cat "$d/$1.pid")
    kill "$t"
    for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    [ ! -d "/proc/$pid" ] || { echo "$1: rknp-pasta $pid still running"; return 1; }
    echo "ok $1: rknp-pasta exited with its namespace"
}

# 8. -T/-U: the namespace's loopback reaches the host's. lo-echo serves on
# the host's 127.0.0.1 and ::1 (TCP and UDP); from inside a namespace
# served with -T NP:HP -U NU:HU (mapped ports), lo-client sends 1 MiB up
# and gets it back reversed, compared both ways, over two TCP connections
# in turn, and three datagrams, to 127.0.0.1 and ::1. Then -T auto: a
# host port that starts listening after rknp-pasta is reached within two
# rescans. Each rknp-pasta exits once its namespace's process is gone.
case_loopback_ns() {
    local d="$SCRATCH/tmp/loopback-ns" hp hu np nu ap out
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    hp=$(free_port 127.0.0.1)
    hu=$(free_udp_port 127.0.0.1)
    np=$(free_port 127.0.0.1)
    nu=$(free_udp_port 127.0.0.1)
    ap=$(free_port 127.0.0.1)
    "$PY" "$HELPER" lo-echo "$hp" "$hu" "$d/done" >"$SCRATCH/logs/lo-echo.log" 2>&1 &
    track_bg $!
    wait_tcp 127.0.0.1 "$hp"
    ns_start mapped -t none -u none -T "$np:$hp" -U "$nu:$hu"
    out=$(ns_inside mapped ss -Hltun)
    expect "mapped: TCP on the namespace's 127.0.0.1" "^tcp .* 127\.0\.0\.1:$np " "$out"
    expect "mapped: TCP on its ::1" "^tcp .* \[::1\]:$np " "$out"
    expect "mapped: UDP on its 127.0.0.1" "^udp .* 127\.0\.0\.1:$nu " "$out"
    expect "mapped: UDP on its ::1" "^udp .* \[::1\]:$nu " "$out"
    out=$(ns_inside mapped "$PY" "$HELPER" lo-client "$np" "$nu")
    echo "$out"
    local k
    for k in tcp4_1 tcp4_2 udp4 tcp6_1 tcp6_2 udp6; do
        expect "-T/-U: $k bytes compared both ways" "^$k=ok\$" "$out"
    done
    ns_stops mapped
    ns_start auto -t none -u none -T auto -U none
    "$PY" "$HELPER" lo-echo "$ap" "$(free_udp_port 127.0.0.1)" "$d/done" \
        >"$SCRATCH/logs/lo-echo-auto.log" 2>&1 &
    track_bg $!
    wait_tcp 127.0.0.1 "$ap"
    sleep 2.5 # two rescans
    out=$(ns_inside auto "$PY" "$HELPER" lo-client "$ap" 9)
    echo "$out"
    expect "-T auto: a host port bound after the start reached over 127.0.0.1" "^tcp4_2=ok\$" "$out"
    expect "-T auto: and over ::1" "^tcp6_2=ok\$" "$out"
    expect "-U none: no UDP" "^udp4=error" "$out"
    ns_stops auto
    touch "$d/done"
}

# 9. --host-lo-to-ns-lo with -t/-u auto (rootlesskit's implicit port
# driver passes it): a server inside bound only to the namespace's
# 127.0.0.1 is reached from the host's 127.0.0.1 and sees its client at
# 127.0.0.1, over TCP and UDP (docker -p 127.0.0.1:...); a server bound to
# any address is reached from the veth test host, which keeps its address.
case_host_lo_to_ns_lo() {
    local d="$SCRATCH/tmp/lo-to-lo" lp ap out
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    lp=$(free_port 127.0.0.1)
    ap=$(free_port 127.0.0.1)
    ns_start lo -4 -t auto -u auto --host-lo-to-ns-lo
    ns_inside lo "$PY" "$HELPER" peer-echo "$lp" "$d/done" 127.0.0.1 >"$SCRATCH/logs/lo-peer.log" 2>&1 &
    ns_inside lo "$PY" "$HELPER" peer-echo "$ap" "$d/done" >"$SCRATCH/logs/any-peer.log" 2>&1 &
    sleep 2.5 # two rescans
    out=$("$PY" "$HELPER" ask 127.0.0.1 "$lp")
    echo "$out"
    expect "TCP from the host's loopback seen inside at 127.0.0.1" "^tcp=127\.0\.0\.1\$" "$out"
    expect "UDP from the host's loopback seen inside at 127.0.0.1" "^udp=127\.0\.0\.1\$" "$out"
    out=$(ip netns exec "$NETNS_HOST" "$PY" "$HELPER" ask 198.18.0.1 "$ap")
    echo "$out"
    expect "TCP: the test host's client keeps its address" "^tcp=198\.18\.0\.2\$" "$out"
    expect "UDP: the test host's client keeps its address" "^udp=198\.18\.0\.2\$" "$out"
    touch "$d/done"
    ns_stops lo
}

# peer-bytes inside namespace $1 (ns_start's tag) on port $2 until $d/done,
# waited for until it listens; then the trap that ends it with the case.
splice_server() {
    # A failed expect ends the case: its servers inside end with it.
    # shellcheck disable=SC2064 # expanded now on purpose
    trap "touch '$d/done'; kill $NS_TARGETS 2>/dev/null || true" EXIT
    ns_inside "$1" "$PY" "$HELPER" peer-bytes "$2" "$d/done" >"$SCRATCH/logs/splice-$1.log" 2>&1 &
    for _ in $(seq 50); do ns_inside "$1" ss -Hltn | grep -q ":$2 " && break; sleep 0.1; done
}
# The host's 127.0.0.1 and ::1 clients of port $2: 1 MiB each way intact,
# the server seeing them at $3 (empty: at their own loopback address).
splice_clients() {
    local label=$1 tag out
    for tag in 127.0.0.1 ::1; do
        out=$("$PY" "$HELPER" bytes-client "$tag" "$2")
        echo "$out"
        expect "$label: $tag client: 1 MiB each way intact" "^bytes=ok\$" "$out"
        expect "$label: $tag client: seen at ${3:-$tag}" "^peer=${3:-$tag}\$" "$out"
    done
}
# 10. -t's loopback clients spliced past the tap with --splice (rknp's
# own; pasta's default, not rknp-pasta's): a server
# inside on any address (peer-bytes) gets 1 MiB from the host's 127.0.0.1
# and ::1, intact both ways, and sees its client at the namespace's own
# address (pasta's fwd_nat_from_host; the stack would show the gateway);
# the veth test host's client keeps its address; a forwarded port nothing
# listens on inside resets the client. With --host-lo-to-ns-lo the server
# sees 127.0.0.1 and ::1; without --splice the stack's path (the gateway).
case_splice_loopback() {
    local d="$SCRATCH/tmp/splice" tp np out addr
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    tp=$(free_port 127.0.0.1)
    np=$(free_port 127.0.0.1)
    ns_start sp -t "$tp" -t "$np" -u none --splice
    addr=$(ns_inside sp ip -4 -o addr show scope global | awk '{sub("/.*", "", $4); print $4; exit}')
    [ -n "$addr" ] || { echo "no IPv4 address inside"; return 1; }
    splice_server sp "$tp"
    splice_clients "spliced to the namespace's address" "$tp" "$addr"
    out=$(ip netns exec "$NETNS_HOST" "$PY" "$HELPER" bytes-client 198.18.0.1 "$tp")
    echo "$out"
    expect "veth client: 1 MiB each way intact" "^bytes=ok\$" "$out"
    expect "veth client: keeps its address" "^peer=198\.18\.0\.2\$" "$out"
    out=$("$PY" "$HELPER" first-read 127.0.0.1 "$np")
    echo "$out"
    expect "nothing listening inside: the loopback client is reset" "^read=reset\$" "$out"
    touch "$d/done"
    ns_stops sp
    rm -f "$d/done"
    ns_start lo -t "$tp" -u none --host-lo-to-ns-lo --splice
    splice_server lo "$tp"
    splice_clients "--host-lo-to-ns-lo" "$tp" ""
    touch "$d/done"
    ns_stops lo
    rm -f "$d/done"
    ns_start stack -t "$tp" -u none
    addr=$(ns_inside stack ip -4 route show default | awk '{print $3; exit}')
    splice_server stack "$tp"
    splice_clients "without --splice" "$tp" "$addr"
    touch "$d/done"
    ns_stops stack
}

RK3_CASES="http_host_loopback http_disable_host_loopback dns cidr mtu_1500 mtu_65520 ipv6 ifname detach_netns netns_host implicit_port client_address pesto_rootlesskit nothing_left"
ALL_CASES="cli podman_style ipv6_only dns_forward6 no_reach_back pesto_socket pesto_podman pesto_bridge pesto_bridge6 loopback_ns host_lo_to_ns_lo splice_loopback $RK3_CASES"
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
