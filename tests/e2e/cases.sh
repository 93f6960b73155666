# The e2e cases (sourced by run.sh). Each takes the driver name, runs under
# errexit and fails by returning non-zero. Servers are started by run.sh:
#   127.0.0.1:$PORT4 and [::1]:$PORT6 serve $WWW (file: $FILE_SHA)
#   198.18.0.2:$PORT_NS in netns $NETNS_HOST serves the same directory
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
    # shellcheck disable=SC2046
    out=$(timeout -k 5 "$RK_TIMEOUT" unshare -m --propagation private \
        sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$resolv" \
        setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups \
        env -i PATH="$USER_PATH" HOME="$SCRATCH/home" TMPDIR="$SCRATCH/tmp" \
        "$RK" $(drv_flags "$1") --copy-up=/etc -- \
        sh -c "cat /etc/resolv.conf; getent ahostsv4 $DNS_NAME | head -n1")
    expect "nameserver 10.0.2.3 in the child's resolv.conf" "^nameserver 10\.0\.2\.3\$" "$out"
    expect "resolved $DNS_NAME" "^${DNS_IP//./\\.} " "$out"
}

# 3a. --detach-netns: the command stays in the host netns; the detached one
# is at $ROOTLESSKIT_STATE_DIR/netns and holds the configured tap.
case_detach_netns() {
    local out
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

# 3b. --cidr: guest .100, gateway .2 of the given network.
case_cidr() {
    local out
    out=$(rk "$1" --copy-up=/etc --cidr=10.0.135.128/25 -- sh -c "
        ip -o addr show dev tap0; ip route
        echo sha=\$($(fetch_sha "http://10.0.135.130:$PORT4/file"))")
    expect "guest address" "inet 10\.0\.135\.228/25" "$out"
    expect "default route" "^default via 10\.0\.135\.130 dev tap0" "$out"
    expect "fetch via the custom gateway" "^sha=$FILE_SHA\$" "$out"
}

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

# 3e. --ifname: the tap carries the given name.
case_ifname() {
    local out
    out=$(rk "$1" --copy-up=/etc --ifname=eth7 -- sh -c "
        ip -o addr show dev eth7; ip route
        echo sha=\$($(fetch_sha "http://10.0.2.2:$PORT4/file"))")
    expect "address on eth7" "eth7 +inet 10\.0\.2\.100/24" "$out"
    expect "default route via eth7" "^default via 10\.0\.2\.2 dev eth7" "$out"
    expect "fetch" "^sha=$FILE_SHA\$" "$out"
}

# 4. A host outside the gateway: forwarded through the host's stack to a
# server in the netns this test created.
case_netns_host() {
    local sha
    sha=$(rk "$1" --copy-up=/etc --disable-host-loopback -- sh -c "$(fetch_sha "http://198.18.0.2:$PORT_NS/file")")
    expect "file sha256 from 198.18.0.2" "^$FILE_SHA\$" "$sha"
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
    if pgrep -u "$E2E_USER" -f "$RK" >/dev/null; then
        echo "rootlesskit processes left:"; pgrep -a -u "$E2E_USER" -f "$RK"; return 1
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
    if pgrep -u "$E2E_USER" -f "$RK" >/dev/null; then
        echo "rootlesskit survived SIGTERM:"; pgrep -a -u "$E2E_USER" -f "$RK"; return 1
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
