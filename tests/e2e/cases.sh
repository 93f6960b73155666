# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash

# The e2e cases (sourced by run.sh). Each takes the driver name, runs under
# errexit and fails by returning non-zero. Servers are started by run.sh:
#   127.0.0.1:$PORT4 and [::1]:$PORT6 serve $WWW (file: $FILE_SHA)
#   198.18.0.2:$PORT_NS and [$NS_IP6]:$PORT_NS in netns $NETNS_HOST serve
#   the same directory (logs: $NS_LOG4, $NS_LOG6); the host reaches them
#   from 198.18.0.1 / fd52:6b6e:2::1, or its secondary .3 / ::3
#   $DNS_ADDR:53 answers $DNS_NAME -> $DNS_IP

# 1. A file from the host's loopback through the gateway, bytes compared.
case_http_host_loopback() {
    local sha
    sha=$(rk "$1" --copy-up=/etc -- sh -c "$(fetch_sha "http://10.0.2.2:$PORT4/file")")
    expect "file sha256" "^$FILE_SHA\$" "$sha"
}

# 1b. --disable-host-loopback: the gateway no longer reaches host lo.
case_http_disable_host_loopback() {
    local out
    out=$(rk "$1" --copy-up=/etc --disable-host-loopback -- \
        sh -c "if curl -sSf --max-time 5 -o /dev/null http://10.0.2.2:$PORT4/file; then echo REACHED; else echo BLOCKED; fi")
    expect "fetch refused" "^BLOCKED\$" "$out"
}

# 2. DNS through 10.0.2.3, forwarded to the nameserver of the parent's
# /etc/resolv.conf: a private mount namespace bind-mounts a test resolv.conf
# pointing at our responder before switching to the test user.
case_dns() {
    local resolv="$SCRATCH/resolv.conf" out
    echo "nameserver $DNS_ADDR" >"$resolv"
    chmod 0644 "$resolv"
    # shellcheck disable=SC2046,SC2016 # drv_flags is a word list; $0 and $@ are sh's
    out=$(timeout -k 5 "$USER_TIMEOUT" unshare -m --propagation private \
        sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$resolv" \
        setpriv --reuid="$RKNP_TEST_USER" --regid="$RKNP_TEST_USER" --init-groups \
        env -i PATH="$USER_PATH" HOME="$SCRATCH/home" TMPDIR="$SCRATCH/tmp" \
        RKNP_TEST_RUN="$RKNP_TEST_RUN" "$RK" $(drv_flags "$1") --copy-up=/etc -- \
        sh -c "cat /etc/resolv.conf; getent ahostsv4 $DNS_NAME | head -n1")
    expect "nameserver 10.0.2.3 in the child's resolv.conf" "^nameserver 10\.0\.2\.3\$" "$out"
    expect "resolved $DNS_NAME" "^${DNS_IP//./\\.} " "$out"
}

# 3a. --detach-netns: the command stays in the host netns; the detached one
# is at $ROOTLESSKIT_STATE_DIR/netns and holds the configured tap.
case_detach_netns() {
    local out
    # shellcheck disable=SC2016 # expanded by the shell inside
    out=$(rk "$1" --copy-up=/etc --detach-netns -- sh -c '
        n="$ROOTLESSKIT_STATE_DIR/netns"
        ip -o link show tap0 >/dev/null 2>&1 && echo TAP_IN_COMMAND_NETNS || echo COMMAND_NETNS_CLEAN
        nsenter --net="$n" ip -o addr show dev tap0
        nsenter --net="$n" ip route
        echo "sha=$(nsenter --net="$n" sh -c "'"$(fetch_sha "http://10.0.2.2:$PORT4/file")"'")"')
    expect "no tap in the command's netns" "^COMMAND_NETNS_CLEAN\$" "$out"
    expect "guest address in the detached netns" "inet 10\.0\.2\.100/24" "$out"
    expect "default route" "^default via 10\.0\.2\.2 dev tap0" "$out"
    expect "fetch from the detached netns" "^sha=$FILE_SHA\$" "$out"
}

# link_case DRIVER DEV ADDR GATEWAY RK_ARGS...: inside rootlesskit (with
# RK_ARGS) DEV has the guest address ADDR (a.b.c.d/prefix), the default
# route goes through GATEWAY on DEV, and the host's file comes through it.
link_case() {
    local drv=$1 dev=$2 addr=$3 gw=$4 out
    shift 4
    out=$(rk "$drv" --copy-up=/etc "$@" -- sh -c "
        ip -o addr show dev $dev; ip route
        echo sha=\$($(fetch_sha "http://$gw:$PORT4/file"))")
    expect "guest address on $dev" "$dev +inet ${addr//./\\.}" "$out"
    expect "default route" "^default via ${gw//./\\.} dev $dev" "$out"
    expect "fetch via $gw" "^sha=$FILE_SHA\$" "$out"
}

# 3b. --cidr: guest .100, gateway .2 of the given network.
case_cidr() { link_case "$1" tap0 10.0.135.228/25 10.0.135.130 --cidr=10.0.135.128/25; }

# 3c. --mtu: the link MTU, and a transfer that uses full-size frames.
mtu_case() {
    local out
    out=$(rk "$1" --copy-up=/etc --mtu="$2" -- sh -c "
        ip -o link show dev tap0
        echo sha=\$($(fetch_sha "http://10.0.2.2:$PORT4/file"))")
    expect "mtu $2" " mtu $2 " "$out"
    expect "fetch" "^sha=$FILE_SHA\$" "$out"
}
case_mtu_1500() { mtu_case "$1" 1500; }
case_mtu_65520() { mtu_case "$1" 65520; }

# 3c'. UDP GSO sends from the container (UDP_SEGMENT, as QUIC stacks send),
# MTU 1500: the host gets every datagram at its size, bytes compared. On
# Linux >= 6.2 the plugin's tap takes them whole (USO) and the parent
# splits them; before, the guest's kernel splits them; its log says which.
case_udp_gso() {
    local port out want spid
    port=$(free_udp_port 127.0.0.1)
    "$PY" "$SCRATCH/bin/udp_gso_helper.py" sink "$port" >"$SCRATCH/tmp/udp-gso-sink.$1" &
    spid=$!
    track_bg "$spid"
    for _ in $(seq 50); do grep -q ready "$SCRATCH/tmp/udp-gso-sink.$1" && break; sleep 0.1; done
    out=$(rk "$1" --copy-up=/etc --mtu=1500 --debug -- \
        "$PY" "$SCRATCH/bin/udp_gso_helper.py" send 10.0.2.2 "$port" 1400 64400 20 2>&1)
    want=$(grep -E "^got " <<<"$out")
    expect "the guest's sends" "^got 920 datagrams 920x1400 sha=" "$want"
    wait "$spid" || true
    expect "the host got them all, in order" "^${want}\$" "$(cat "$SCRATCH/tmp/udp-gso-sink.$1")"
    if [ "$1" = plugin ]; then
        if kernel_at_least 6 2; then
            expect "the tap takes UDP GSO frames" "tap offloads: TCP and UDP segmentation \(USO\)" "$out"
        else
            expect "no USO before Linux 6.2" "tap offloads: TCP segmentation \(no USO" "$out"
        fi
    fi
}

# 3d. --ipv6: a server on the host's [::1] reached through [fd00::2]. The
# guest address may come from SLAAC, so wait for it first.
case_ipv6() {
    local out
    out=$(rk "$1" --copy-up=/etc --ipv6 -- sh -c "
        for i in \$(seq 100); do
            ip -6 -o addr show dev tap0 scope global | grep -v tentative | grep -q 'inet6 fd00::' && break
            sleep 0.1
        done
        ip -6 -o addr show dev tap0
        echo sha=\$($(fetch_sha "http://[fd00::2]:$PORT6/file"))")
    expect "guest IPv6 address" "inet6 fd00::" "$out"
    expect "fetch over IPv6" "^sha=$FILE_SHA\$" "$out"
}

# 3d'. ICMP echo from the container (busybox ping, a raw socket in the
# child): the gateway, IPv4 and IPv6, the DNS address and the test netns's
# host. Where net.ipv4.ping_group_range refuses the user, libslirp answers
# the gateway and DNS itself (TTL 255) and nothing reaches other hosts (its
# raw-socket fallback is refused, its UDP-port-7 one gets no echo reply;
# it forwards no IPv6 echo at all). Where the range allows the user's gid,
# the plugin sends echo on ping sockets, the gateway meaning the host's
# 127.0.0.1 / ::1, and its own replies carry TTL 64; DNS stays libslirp's.
# The plugin logs which (--debug). The sysctl is set for each run and
# restored at once.
ping_run() {
    rk "$1" --copy-up=/etc --ipv6 --debug -- sh -c "
        for i in \$(seq 100); do
            ip -6 -o addr show dev tap0 scope global | grep -v tentative | grep -q 'inet6 fd00::' && break
            sleep 0.1
        done
        for a in 10.0.2.2 fd00::2 10.0.2.3 198.18.0.2 $NS_IP6; do
            busybox ping -c 1 -W 3 \$a || echo \"NO REPLY from \$a\"
        done" 2>&1
}

case_ping() {
    local range gid out
    range=$(sysctl -n net.ipv4.ping_group_range | tr -s '\t' ' ')
    gid=$(id -g "$RKNP_TEST_USER")
    # shellcheck disable=SC2064 # the range to restore is the one read now
    trap "sysctl -qw net.ipv4.ping_group_range='$range'" EXIT
    sysctl -qw net.ipv4.ping_group_range="1 0"
    out=$(ping_run "$1") || true
    sysctl -qw net.ipv4.ping_group_range="$range"
    expect "IPv4 echo reply from libslirp" "bytes from 10\.0\.2\.2: seq=0 ttl=255 " "$out"
    expect "IPv6 echo reply" "bytes from fd00::2: seq=0 " "$out"
    expect "DNS address echo reply from libslirp" "bytes from 10\.0\.2\.3: seq=0 ttl=255 " "$out"
    [ "$1" = plugin ] || return 0
    expect "the plugin says libslirp answers" "ICMP echo: libslirp \(ping sockets refused: " "$out"
    expect "no echo to other hosts without ping sockets" "^NO REPLY from 198\.18\.0\.2\$" "$out"
    expect "no IPv6 echo to other hosts without ping sockets" "^NO REPLY from $NS_IP6\$" "$out"

    sysctl -qw net.ipv4.ping_group_range="$gid $gid"
    out=$(ping_run "$1") || true
    sysctl -qw net.ipv4.ping_group_range="$range"
    expect "the plugin says ping sockets" "ICMP echo: ping sockets \(net\.ipv4\.ping_group_range $gid $gid allows gid $gid\)" "$out"
    expect "ping sockets under the stack thread's seccomp filter" "sandbox on the stack thread: seccomp on" "$out"
    expect "IPv4 echo reply through the host's 127.0.0.1" "bytes from 10\.0\.2\.2: seq=0 ttl=64 " "$out"
    expect "IPv6 echo reply through the host's ::1" "bytes from fd00::2: seq=0 ttl=64 " "$out"
    expect "DNS address echo still libslirp's" "bytes from 10\.0\.2\.3: seq=0 ttl=255 " "$out"
    expect "IPv4 echo reply from the test netns" "bytes from 198\.18\.0\.2: seq=0 ttl=64 " "$out"
    expect "IPv6 echo reply from the test netns" "bytes from $NS_IP6: seq=0 ttl=64 " "$out"
}

# 3e. --ifname: the tap carries the given name.
case_ifname() { link_case "$1" eth7 10.0.2.100/24 10.0.2.2 --ifname=eth7; }

# 4. A host outside the gateway: forwarded through the host's stack to a
# server in the netns this test created.
case_netns_host() {
    local sha
    sha=$(rk "$1" --copy-up=/etc --disable-host-loopback -- sh -c "$(fetch_sha "http://198.18.0.2:$PORT_NS/file")")
    expect "file sha256 from 198.18.0.2" "^$FILE_SHA\$" "$sha"
}

# 4b. The host address outbound connections leave from, as the test host
# sees it (its server logs each client). The plugin is given the host's
# secondary addresses (--plugin-outbound-addr{,6}); slirp4netns, which
# rootlesskit passes no outbound address, shows the defaults 198.18.0.1 and
# fd52:6b6e:2::1 that the plugin's must differ from.
case_outbound_addr() {
    local want4=198.18.0.1 want6=fd52:6b6e:2::1 flags=() tag out
    if [ "$1" = plugin ]; then
        want4=198.18.0.3 want6=fd52:6b6e:2::3
        flags=(--plugin-outbound-addr="$want4" --plugin-outbound-addr6="$want6")
    fi
    tag=outbound-$1-$RANDOM
    out=$(rk "$1" --copy-up=/etc --ipv6 "${flags[@]}" -- sh -c "
        for i in \$(seq 100); do
            ip -6 -o addr show dev tap0 scope global | grep -v tentative | grep -q 'inet6 fd00::' && break
            sleep 0.1
        done
        echo sha4=\$($(fetch_sha "http://198.18.0.2:$PORT_NS/file?$tag"))
        echo sha6=\$($(fetch_sha "http://[$NS_IP6]:$PORT_NS/file?$tag"))")
    expect "fetch over IPv4" "^sha4=$FILE_SHA\$" "$out"
    expect "the test host saw IPv4 source $want4" "^${want4//./\\.} - - .*\"GET /file\\?$tag " "$(cat "$NS_LOG4")"
    expect "fetch over IPv6" "^sha6=$FILE_SHA\$" "$out"
    expect "the test host saw IPv6 source $want6" "^$want6 - - .*\"GET /file\\?$tag " "$(cat "$NS_LOG6")"
}

# 5. The child's exit status propagates; afterwards no rootlesskit process,
# no network namespace of the child and no hand-over socket remain.
case_exit_code() {
    local st="$SCRATCH/tmp/state-exit-$1" rc=0 nsid p out
    out=$(rk "$1" --copy-up=/etc --state-dir="$st" -- sh -c 'readlink /proc/self/ns/net; exit 7') || rc=$?
    [ "$rc" = 7 ] || { echo "exit status $rc, want 7"; return 1; }
    nsid=$out
    expect "a netns id" "^net:\[[0-9]+\]\$" "$nsid"
    sleep 0.2
    if pgrep -u "$RKNP_TEST_USER" -f "$RK" >/dev/null; then
        echo "rootlesskit processes left:"; pgrep -a -u "$RKNP_TEST_USER" -f "$RK"; return 1
    fi
    for p in /proc/[0-9]*/ns/net; do
        if [ "$(readlink "$p" 2>/dev/null)" = "$nsid" ]; then
            echo "the child's netns $nsid is still held by $p"; return 1
        fi
    done
    [ ! -e "$st/rknp.sock" ] || { echo "hand-over socket left in $st"; return 1; }
}

# 6. rootlesskit's API reports the network driver while running.
case_api_info() {
    local st="$SCRATCH/tmp/state-api-$1" pid info rc=0 ARGV
    rk_argv "$1" --copy-up=/etc --state-dir="$st" -- sleep 30
    "${ARGV[@]}" >"$SCRATCH/logs/api-rk.$1.log" 2>&1 &
    pid=$! # the timeout process: it forwards SIGTERM to rootlesskit
    for _ in $(seq 100); do
        [ -S "$st/api.sock" ] && [ -e "$st/child_pid" ] && break
        sleep 0.1
    done
    info=$(as_user curl -sS --max-time 5 --unix-socket "$st/api.sock" http://rootlesskit/v1/info) || rc=$?
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if pgrep -u "$RKNP_TEST_USER" -f "$RK" >/dev/null; then
        echo "rootlesskit survived SIGTERM:"; pgrep -a -u "$RKNP_TEST_USER" -f "$RK"; return 1
    fi
    [ "$rc" = 0 ] || { echo "API request failed ($rc)"; cat "$SCRATCH/logs/api-rk.$1.log"; return 1; }
    echo "$info"
    expect "driver $1" "\"networkDriver\":\{\"driver\":\"$1\"" "$info"
    expect "child IP" "\"childIP\":\"10\.0\.2\.100\"" "$info"
}

# 7. rootlesskit's builtin port driver on top of the plugin: a host port
# (loopback) forwarded to a server inside the child.
case_port_builtin() {
    local hp pid sha rc=0 ARGV
    hp=$(free_port 127.0.0.1)
    rk_argv "$1" --copy-up=/etc --disable-host-loopback --port-driver=builtin -p "127.0.0.1:$hp:8080/tcp" -- \
        "$PY" -m http.server --bind 0.0.0.0 --directory "$SCRATCH/www" 8080
    "${ARGV[@]}" >"$SCRATCH/logs/port-rk.$1.log" 2>&1 &
    pid=$!
    sha=$(for _ in $(seq 100); do
        if curl -sSf --max-time 20 "http://127.0.0.1:$hp/file" 2>/dev/null | sha256sum | cut -d' ' -f1; then break; fi
        sleep 0.1
    done | grep -m1 "^$FILE_SHA\$") || rc=$?
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ "$rc" = 0 ] || { echo "no file through the published port"; cat "$SCRATCH/logs/port-rk.$1.log"; return 1; }
    expect "file through 127.0.0.1:$hp -> child :8080" "^$FILE_SHA\$" "$sha"
}

# 8. Port drivers through -p and rootlesskit's API (rootlessctl), run by
# port_case NETDRIVER PORTDRIVER: a TCP server and a UDP echo inside the
# child (port_helper.py) reached from the host's 127.0.0.1 and, through
# ports published on 0.0.0.0, from the test netns ($NETNS_HOST, client
# 198.18.0.2); list-ports; publishing a spec twice and a host port in use
# fail cleanly while rootlesskit keeps serving; a port added through the
# API works; remove-ports closes the host ports.
# Not --disable-host-loopback: with it libslirp drops UDP replies to
# loopback clients (the gateway is then unreachable), for the slirp4netns
# and plugin port drivers alike; ports_plugin_dhl (8b) covers that setup.
#   ports_plugin   --port-driver=plugin (with --net=slirp4netns: refused)
#   ports_builtin  --port-driver=builtin
case_ports_plugin() {
    if [ "$1" != plugin ]; then
        port_driver_refused "$1" plugin
        return
    fi
    port_case "$1" plugin
}
case_ports_builtin() { port_case "$1" builtin; }

# port_driver_refused NETDRIVER PORTDRIVER: rootlesskit exits with a clear
# message before starting anything.
port_driver_refused() {
    local out rc=0
    out=$(rk "$1" --copy-up=/etc --port-driver="$2" -p "127.0.0.1:$(free_port 127.0.0.1):80/tcp" -- echo STARTED 2>&1) || rc=$?
    echo "$out"
    [ "$rc" != 0 ] || { echo "--port-driver=$2 with --net=$1 was accepted"; return 1; }
    if grep -q '^STARTED$' <<<"$out"; then echo "the command ran"; return 1; fi
    expect "refusal" "port driver \"$2\" requires --net=plugin \(got --net=$1\)" "$out"
}

# http_sha PORT: sha256 of /file through 127.0.0.1:PORT (empty on failure).
http_sha() {
    curl -sSf --max-time 20 "http://127.0.0.1:$1/file" | sha256sum | cut -d' ' -f1
}

# ctl ARGS...: rootlessctl against the case's API socket, as the test user.
ctl() { as_user "$SCRATCH/bin/rootlessctl" --socket="$ST/api.sock" "$@"; }

# start_port_helper: runs "${ARGV[@]}" (port_helper.py serve under
# rootlesskit) in the background, output in $RKLOG, and waits until the
# helper serves and $ST/api.sock exists. RKPID (the timeout process, which
# forwards SIGTERM to rootlesskit) is stopped when the case's shell exits.
start_port_helper() {
    "${ARGV[@]}" >"$RKLOG" 2>&1 &
    RKPID=$!
    trap 'kill -TERM "$RKPID" 2>/dev/null || true; wait "$RKPID" 2>/dev/null || true' EXIT
    for _ in $(seq 100); do
        grep -q "port_helper ready" "$RKLOG" && [ -S "$ST/api.sock" ] && return 0
        kill -0 "$RKPID" 2>/dev/null || { echo "rootlesskit exited:"; cat "$RKLOG"; return 1; }
        sleep 0.1
    done
}

# http_sha_eventually PORT: like http_sha, retried for ~10 s until the
# published port serves the file.
http_sha_eventually() {
    local sha=""
    for _ in $(seq 50); do
        sha=$(http_sha "$1" 2>/dev/null) && [ "$sha" = "$FILE_SHA" ] && break
        sleep 0.2
    done
    echo "$sha"
}

port_case() {
    local net=$1 pd=$2 tp up tp2 rp ru out sha rc id id2 ARGV
    ST="$SCRATCH/tmp/state-ports-$pd-$net"
    RKLOG="$SCRATCH/logs/ports-rk.$pd.$net.log"
    [ -x "$SCRATCH/bin/rootlessctl" ] || {
        echo "missing $BUILD_DIR/bin/rootlessctl; build it from go-bindings:"
        echo "  go build -o ../build/bin/rootlessctl github.com/rootless-containers/rootlesskit/v3/cmd/rootlessctl"
        return 1
    }
    tp=$(free_port 127.0.0.1)
    up=$(free_udp_port 127.0.0.1)
    tp2=$(free_port 127.0.0.1)
    rp=$(free_port 0.0.0.0)
    ru=$(free_udp_port 0.0.0.0)
    # Unless --plugin-tcp=slirp the TCP ports are the fast path's, the UDP
    # ones the UDP fast path's (the default): the library's log lines
    # (debug output for rootlesskit) say so.
    local fastlog=()
    [ "$pd" = plugin ] && fastlog=(--debug)
    rk_argv "$net" "${fastlog[@]}" --copy-up=/etc --port-driver="$pd" --state-dir="$ST" \
        -p "127.0.0.1:$tp:8080/tcp" -p "127.0.0.1:$up:5353/udp" \
        -p "0.0.0.0:$rp:8080/tcp" -p "0.0.0.0:$ru:5353/udp" -- \
        "$PY" "$SCRATCH/bin/port_helper.py" serve "$SCRATCH/www" 8080 5353
    start_port_helper || return 1

    # TCP: the file through the published port, bytes compared.
    sha=$(http_sha_eventually "$tp")
    expect "file through 127.0.0.1:$tp -> child :8080" "^$FILE_SHA\$" "$sha"
    if [ ${#fastlog[@]} -gt 0 ] && [ "${E2E_PLUGIN_TCP:-}" != slirp ]; then
        out=$(grep -F "tcp 127.0.0.1:$tp -> " "$RKLOG" | grep -c "(TCP fast path)" || true)
        expect "the TCP forward of 127.0.0.1:$tp is on the fast path" "^1\$" "$out"
    fi

    # UDP echo through the published UDP port.
    out=$("$PY" "$SCRATCH/bin/port_helper.py" udp-echo 127.0.0.1 "$up")
    expect "udp echo through 127.0.0.1:$up -> child :5353" "^udp-echo-ok 1200\$" "$out"
    if [ ${#fastlog[@]} -gt 0 ]; then
        out=$(grep -F "udp 127.0.0.1:$up -> " "$RKLOG" | grep -c "(UDP fast path)" || true)
        expect "the UDP forward of 127.0.0.1:$up is on the fast path" "^1\$" "$out"
    fi

    # From another host (the test netns) through the 0.0.0.0 ports.
    out=$(ip netns exec "$NETNS_HOST" curl -sSf --max-time 20 "http://198.18.0.1:$rp/file" | sha256sum | cut -d' ' -f1)
    expect "file from 198.18.0.2 through 198.18.0.1:$rp" "^$FILE_SHA\$" "$out"
    out=$(ip netns exec "$NETNS_HOST" "$PY" "$SCRATCH/bin/port_helper.py" udp-echo 198.18.0.1 "$ru")
    expect "udp echo from 198.18.0.2 through 198.18.0.1:$ru" "^udp-echo-ok 1200\$" "$out"
    if [ "$pd" = plugin ]; then
        # A client on 127.0.0.1 connect()ed to another of the host's
        # addresses hears the 0.0.0.0 forward's replies only if they come
        # from that address (the kernel's own pick would be 127.0.0.1).
        out=$("$PY" "$SCRATCH/bin/port_helper.py" udp-echo 127.0.0.2 "$ru" --from-loopback)
        expect "udp echo from 127.0.0.1 through 127.0.0.2:$ru, replies from 127.0.0.2" \
            "^udp-echo-ok 1200\$" "$out"
    fi

    # The API reports the port driver. With the plugin, libslirp shows
    # loopback clients as the gateway and others with their own address.
    out=$(as_user curl -sS --max-time 5 --unix-socket "$ST/api.sock" http://rootlesskit/v1/info)
    echo "$out"
    expect "port driver $pd" "\"portDriver\":\{\"driver\":\"$pd\"" "$out"
    if [ "$net" = plugin ]; then
        expect "the plugin named in the port driver's extra" \
            "\"extra\":\\{[^}]*\"rknp\\.plugin\":\"${LIB//./\\.}\",(\"rknp\\.tcp_peek\":\"[a-z]+\",)?\"rknp\\.udp_path\":\"[a-z]+\",\"rknp\\.version\":\"[0-9.]+\"" "$out"
        # The UDP path: the fast path unless the tap has no offloads.
        expect "the UDP fast path in force (rknp.udp_path)" '"extra":\{[^}]*"rknp\.udp_path":"fast"' "$out"
        # The fast path's peek mode in force: the forced one, else either;
        # none without the fast path.
        case ${E2E_PLUGIN_TCP:-}:${E2E_PLUGIN_TCP_PEEK:-} in
        slirp:*) if grep -q '"rknp\.tcp_peek"' <<<"$out"; then
            echo "rknp.tcp_peek reported with --plugin-tcp=slirp"; return 1
        fi ;;
        *:offset | *:discard)
            expect "peek mode $E2E_PLUGIN_TCP_PEEK in force (rknp.tcp_peek)" \
                "\"extra\":\\{[^}]*\"rknp\\.tcp_peek\":\"$E2E_PLUGIN_TCP_PEEK\"" "$out" ;;
        *) expect "a peek mode in force (rknp.tcp_peek)" '"extra":\{[^}]*"rknp\.tcp_peek":"(offset|discard)"' "$out" ;;
        esac
    fi
    if [ "$pd" = plugin ]; then
        expect "sourceIPPropagated reported" '"extra":\{[^}]*"sourceIPPropagated":"false"' "$out"
        expect "127.0.0.1 client seen as the gateway" "^tcp-peer 10\.0\.2\.2 " "$(cat "$RKLOG")"
        expect "netns client seen as itself" "^tcp-peer 198\.18\.0\.2 " "$(cat "$RKLOG")"
    fi

    # list-ports shows both.
    out=$(ctl list-ports --json)
    echo "$out"
    expect "listed tcp port" "\"proto\":\"tcp\",\"parentIP\":\"127\.0\.0\.1\",\"parentPort\":$tp,\"childPort\":8080" "$out"
    expect "listed udp port" "\"proto\":\"udp\",\"parentIP\":\"127\.0\.0\.1\",\"parentPort\":$up,\"childPort\":5353" "$out"
    id=$(grep "\"parentPort\":$tp," <<<"$out" | sed -E 's/^\{"id":([0-9]+),.*/\1/')

    # The same spec twice: refused with the conflicting ID.
    rc=0
    out=$(ctl add-ports "127.0.0.1:$tp:8080/tcp" 2>&1) || rc=$?
    [ "$rc" != 0 ] || { echo "duplicate accepted: $out"; return 1; }
    expect "duplicate refused" "conflict with ID $id" "$out"
    # A host port another process holds (run.sh's server on $PORT4).
    rc=0
    out=$(ctl add-ports "127.0.0.1:$PORT4:8080/tcp" 2>&1) || rc=$?
    [ "$rc" != 0 ] || { echo "busy port accepted: $out"; return 1; }
    expect "busy host port refused" "[Aa]ddress already in use" "$out"
    # ...and rootlesskit keeps serving.
    kill -0 "$RKPID" 2>/dev/null || { echo "rootlesskit died:"; cat "$RKLOG"; return 1; }
    expect "still serving after the refusals" "^$FILE_SHA\$" "$(http_sha "$tp")"

    # A port added through the API.
    id2=$(ctl add-ports "127.0.0.1:$tp2:8080/tcp")
    expect "new port id" "^[0-9]+\$" "$id2"
    expect "file through the added port $tp2" "^$FILE_SHA\$" "$(http_sha "$tp2")"

    # remove-ports closes the host ports.
    ctl remove-ports "$id" "$id2"
    for p in "$tp" "$tp2"; do
        rc=0
        out=$(curl -sS --max-time 5 -o /dev/null "http://127.0.0.1:$p/file" 2>&1) || rc=$?
        [ "$rc" != 0 ] || { echo "127.0.0.1:$p still answers after remove-ports"; return 1; }
        expect "connect to removed 127.0.0.1:$p fails" "Failed to connect|Connection refused|Couldn't connect" "$out"
    done
    out=$(ctl list-ports --json)
    echo "$out"
    if grep -Eq "\"parentPort\":($tp|$tp2)," <<<"$out"; then echo "removed ports still listed"; return 1; fi
    expect "udp port still listed" "\"parentPort\":$up," "$out"
    if ctl remove-ports "$id" 2>/dev/null; then echo "removing an unknown id succeeded"; return 1; fi

    # Shutdown: rootlesskit exits on SIGTERM and leaves nothing behind.
    kill -TERM "$RKPID" 2>/dev/null || true
    wait "$RKPID" 2>/dev/null || true
    trap - EXIT
    sleep 0.2
    if pgrep -u "$RKNP_TEST_USER" -f "$RK" >/dev/null; then
        echo "rootlesskit survived SIGTERM:"; pgrep -a -u "$RKNP_TEST_USER" -f "$RK"; return 1
    fi
    out=$("$PY" "$SCRATCH/bin/port_helper.py" udp-echo 127.0.0.1 "$up" 2>&1) && { echo "udp port open after exit"; return 1; }
    echo "ok nothing left: $out"
}

# 8b. The plugin port driver with --disable-host-loopback (rootless
# Docker's setup): TCP from the host's 127.0.0.1 and UDP from the test
# netns work; UDP replies to 127.0.0.1 clients are dropped by libslirp, so
# that is tested only with the plugin, whose UDP fast path passes them as
# for TCP. With --net=slirp4netns the same checks run against
# --port-driver=slirp4netns (the same libslirp forwarding) as reference.
case_ports_plugin_dhl() {
    local pd=plugin tp ru out sha ARGV
    [ "$1" = plugin ] || pd=slirp4netns
    ST="$SCRATCH/tmp/state-ports-dhl-$1"
    RKLOG="$SCRATCH/logs/ports-dhl-rk.$1.log"
    tp=$(free_port 127.0.0.1)
    ru=$(free_udp_port 0.0.0.0)
    rk_argv "$1" --copy-up=/etc --disable-host-loopback --port-driver="$pd" --state-dir="$ST" \
        -p "127.0.0.1:$tp:8080/tcp" -p "0.0.0.0:$ru:5353/udp" -- \
        "$PY" "$SCRATCH/bin/port_helper.py" serve "$SCRATCH/www" 8080 5353
    start_port_helper || return 1
    sha=$(http_sha_eventually "$tp")
    expect "file through 127.0.0.1:$tp ($pd, --disable-host-loopback)" "^$FILE_SHA\$" "$sha"
    out=$(ip netns exec "$NETNS_HOST" "$PY" "$SCRATCH/bin/port_helper.py" udp-echo 198.18.0.1 "$ru")
    expect "udp echo from 198.18.0.2 through 198.18.0.1:$ru" "^udp-echo-ok 1200\$" "$out"
    if [ "$pd" = plugin ]; then
        out=$("$PY" "$SCRATCH/bin/port_helper.py" udp-echo 127.0.0.1 "$ru")
        expect "udp echo from 127.0.0.1 through :$ru (UDP fast path, --disable-host-loopback)" \
            "^udp-echo-ok 1200\$" "$out"
    fi
}
