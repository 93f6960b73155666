#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The Podman 6.1 cases of tests/sid/podman.sh, run inside the sid tree as
# root (enter.sh) in the test's "world" network namespace: its upstream is
# eth0, a veth to the test host (another namespace of the test, the default
# gateway). Rootless Podman runs as the tree's user with `--network pasta`,
# once per ENGINE: `real` (the tree's pasta, the reference) and `rknp`
# (rknp-pasta), each found as `pasta` through containers.conf's
# helper_binaries_dir, where a wrapper logs the argv Podman passes.
#
# Set by podman.sh: SID_CASES, SID_ENGINES, SID_RKNP_EXPECT (the rknp cases
# that must pass; the others are reported as XFAIL/XPASS and do not fail
# the run). Mounted: /rknp/tests (tests/, read-only), /rknp/out (results),
# /rknp/remote.netns (the test host's network namespace).
set -euo pipefail

T=/rknp/tests
OUT=/rknp/out
REMOTE_NS=/rknp/remote.netns
WORLD_ADDR=198.18.5.1   # the world's eth0: what pasta copies
REMOTE_ADDR=198.18.5.2  # the test host, also the world's default gateway
WORLD_ADDR6=fd52:5::1
REMOTE_ADDR6=fd52:5::2
REMOTE_PORT=8080        # its web server
LO_PORT=18090           # a web server on the world's 127.0.0.1
HOST_PORT=18091         # one on the world's WORLD_ADDR
LOOPBACK_MAP=169.254.1.3 # case host_loopback's --map-host-loopback
DNS_NAME=rknp-sid.test  # the test DNS server's name, -> REMOTE_ADDR
SID_CASES=${SID_CASES:-addresses download download6 publish client_addr host_address host_loopback dns network network_pesto info}
SID_ENGINES=${SID_ENGINES:-real rknp}
SID_RKNP_EXPECT=${SID_RKNP_EXPECT:-}
# shellcheck source=tests/sid/cases_lib.sh
. "$T/sid/cases_lib.sh"
# shellcheck source=tests/sid/podman_lib.sh
. "$T/sid/podman_lib.sh"

# pod_run ARGS...: `podman run ARGS`, its stderr kept in $PODMAN_ERR too
# (for podman_failed) and passed on to the case's log.
PODMAN_ERR=/tmp/podman.err
pod_run() {
    local rc=0
    pod run "$@" 2>"$PODMAN_ERR" || rc=$?
    cat "$PODMAN_ERR" >&2
    return $rc
}

# podman_failed WHAT: fails the case with Podman's error (the "Error:" line
# and the one after it, where Podman puts pasta's output).
podman_failed() {
    local err
    err=$(grep -A1 '^Error:' "$PODMAN_ERR" | paste -sd' ') || true
    fail "$1 failed: ${err:-$(tail -n1 "$PODMAN_ERR")}"
}

# ---------------------------------------------------------------- set-up

setup() {
    podman_setup
    mkdir -p /tmp/www
    head -c 4194304 /dev/urandom >/tmp/www/file
    chmod -R a+rX /tmp/www
    FILE_SHA=$(sha256sum /tmp/www/file | cut -d' ' -f1)

    # Servers: DNS on the world's 127.0.0.1:53 (the tree's resolv.conf),
    # a web server on the world's loopback and one on the test host.
    "$PY" "$T/lib/dns_server.py" 127.0.0.1 53 "$DNS_NAME=$REMOTE_ADDR" >/tmp/dns.log 2>&1 &
    BG+=($!)
    "$PY" -m http.server --bind 127.0.0.1 --directory /tmp/www "$LO_PORT" >/tmp/http-lo.log 2>&1 &
    BG+=($!)
    "$PY" -m http.server --bind "$WORLD_ADDR" --directory /tmp/www "$HOST_PORT" >/tmp/http-host.log 2>&1 &
    BG+=($!)
    nsenter --net="$REMOTE_NS" "$PY" -m http.server --bind :: --directory /tmp/www \
        "$REMOTE_PORT" >/tmp/http-remote.log 2>&1 &
    BG+=($!)
    for _ in $(seq 50); do
        grep -q ready /tmp/dns.log && [ -n "$(fetch_once "http://127.0.0.1:$LO_PORT/file")" ] &&
            [ -n "$(fetch_once "http://$WORLD_ADDR:$HOST_PORT/file")" ] &&
            [ -n "$(nsenter --net="$REMOTE_NS" curl -sf -o /dev/null -w ok "http://$REMOTE_ADDR:$REMOTE_PORT/file")" ] &&
            [ -n "$(nsenter --net="$REMOTE_NS" curl -sf -o /dev/null -w ok "http://[$REMOTE_ADDR6]:$REMOTE_PORT/file")" ] &&
            return 0
        sleep 0.2
    done
    echo "the test servers did not start" >&2
    cat /tmp/dns.log /tmp/http-lo.log /tmp/http-host.log /tmp/http-remote.log >&2
    return 1
}
fetch_once() { curl -sf -o /dev/null -w ok "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- cases

# (a) A download from the test host behind the world's upstream veth; the
# container's addresses and routes are logged.
case_download() {
    local out
    out=$(pod_run --rm --network pasta "$IMG" sh -c \
        "ip -o addr; ip route; wget -q -O - http://$REMOTE_ADDR:$REMOTE_PORT/file | sha256sum") ||
        { echo "$out"; podman_failed "podman run"; }
    echo "$out"
    sha_is "download from the test host $REMOTE_ADDR:$REMOTE_PORT" "$(tail -n1 <<<"$out")"
}

# (a') The same over IPv6.
case_download6() {
    local out
    out=$(pod_run --rm --network pasta "$IMG" sh -c \
        "wget -q -O - http://[$REMOTE_ADDR6]:$REMOTE_PORT/file | sha256sum") ||
        { echo "$out"; podman_failed "podman run"; }
    echo "$out"
    sha_is "download from the test host [$REMOTE_ADDR6]:$REMOTE_PORT" "$(tail -n1 <<<"$out")"
}

# (a'') pasta's address model: the container has the world's upstream
# addresses (IPv4 and IPv6, same prefix lengths) and default routes via the
# world's gateways, and no other global address.
case_addresses() {
    local out a rc=0
    out=$(pod_run --rm --network pasta "$IMG" sh -c \
        "ip -o addr show scope global; ip route show default; ip -6 route show default") ||
        { echo "$out"; podman_failed "podman run"; }
    echo "$out"
    for a in "inet $WORLD_ADDR/24 " "inet6 $WORLD_ADDR6/64 " "^default via $REMOTE_ADDR " "^default via $REMOTE_ADDR6 "; do
        grep -Eq -- "$a" <<<"$out" || { echo "REASON: no '$a' in the container"; rc=1; }
    done
    a=$(grep -Eo 'inet6? [^ ]+' <<<"$out" | grep -Ev "^inet $WORLD_ADDR/|^inet6 $WORLD_ADDR6/" || true)
    [ -z "$a" ] || { echo "REASON: other global addresses in the container: ${a//$'\n'/, }"; rc=1; }
    [ "$rc" = 0 ] && echo "ok the world's addresses and gateways, nothing else"
    return $rc
}

# (b) -p TCP and UDP published, reached from the world's loopback.
case_publish() {
    local cid sha udp rc=0
    cid=$(pod_run -d --network pasta -p 18080:8080 -p 18081:9000/udp -v /tmp/www:/www:ro "$IMG" \
        sh -c 'python3 -m http.server -d /www 8080 >/dev/null 2>&1 & exec python3 /usr/local/bin/sid_helper.py udp 9000') ||
        podman_failed "podman run -d"
    sha=$(fetch_sha_retry "http://127.0.0.1:18080/file")
    sha_is "TCP: 127.0.0.1:18080 -> container :8080" "$sha" || rc=1
    if udp=$("$PY" "$HELPER" udp-echo 127.0.0.1 18081 64 1400 2>&1); then
        echo "$udp"
        if [ "$(awk '{print $2}' <<<"$udp")" = "$(awk '{print $4}' <<<"$udp")" ]; then
            echo "ok UDP: 127.0.0.1:18081 -> container :9000, 64 x 1400 bytes echoed"
        else
            echo "REASON: UDP: echoed bytes differ"; rc=1
        fi
    else
        echo "REASON: UDP: 127.0.0.1:18081: $udp"; rc=1
    fi
    pod rm -f -t 0 "$cid" >/dev/null || true
    return $rc
}

# (c) A client on the test host connects to the world's published ports:
# the container must see the client's own address, over TCP and UDP.
case_client_addr() {
    local cid got rc=0
    cid=$(pod_run -d --network pasta -p 18082:8082 -p 18083:8083/udp "$IMG" \
        sh -c 'python3 /usr/local/bin/sid_helper.py tcp-peer 8082 & exec python3 /usr/local/bin/sid_helper.py udp 8083') ||
        podman_failed "podman run -d"
    got=$(nsenter --net="$REMOTE_NS" "$PY" "$HELPER" tcp-peer "$WORLD_ADDR" 18082 2>&1) || true
    if [ "$got" = "PEER $REMOTE_ADDR" ]; then echo "ok TCP: the container saw $REMOTE_ADDR"; else
        echo "REASON: TCP: the container saw '${got}', not $REMOTE_ADDR"; rc=1
    fi
    got=$(nsenter --net="$REMOTE_NS" "$PY" "$HELPER" udp-peer "$WORLD_ADDR" 18083 2>&1) || true
    if [ "$got" = "PEER $REMOTE_ADDR" ]; then echo "ok UDP: the container saw $REMOTE_ADDR"; else
        echo "REASON: UDP: the container saw '${got}', not $REMOTE_ADDR"; rc=1
    fi
    pod rm -f -t 0 "$cid" >/dev/null || true
    return $rc
}

# (d) host.containers.internal: Podman's /etc/hosts entry for the address
# it passes as --map-guest-addr, which pasta maps to the host's own
# upstream address (not to its loopback): a server listening on the
# world's eth0 address only.
case_host_address() {
    local out
    out=$(pod_run --rm --network pasta "$IMG" sh -c \
        "grep host.containers.internal /etc/hosts; wget -q -O - http://host.containers.internal:$HOST_PORT/file | sha256sum") ||
        { echo "$out"; podman_failed "podman run"; }
    echo "$out"
    sha_is "host.containers.internal:$HOST_PORT -> the world's $WORLD_ADDR:$HOST_PORT" "$(tail -n1 <<<"$out")"
}

# (d') The host's loopback: a server on the world's 127.0.0.1 only,
# reached through an address the user maps to it with pasta's own option
# (`--network pasta:--map-host-loopback,ADDR`; Podman passes --no-map-gw,
# so the gateway does not reach it).
case_host_loopback() {
    local out
    out=$(pod_run --rm --network "pasta:--map-host-loopback,$LOOPBACK_MAP" "$IMG" sh -c \
        "wget -q -O - http://$LOOPBACK_MAP:$LO_PORT/file | sha256sum") ||
        { echo "$out"; podman_failed "podman run"; }
    echo "$out"
    sha_is "$LOOPBACK_MAP:$LO_PORT -> the world's 127.0.0.1:$LO_PORT" "$(tail -n1 <<<"$out")"
}

# (e) DNS: the container's resolver is Podman's --dns-forward address,
# which the engine forwards to the world's resolver (127.0.0.1, the test's
# DNS server, the only one that knows DNS_NAME); then a download by name.
case_dns() {
    local out name_ip
    out=$(pod_run --rm --network pasta "$IMG" sh -c \
        "cat /etc/resolv.conf; python3 /usr/local/bin/sid_helper.py resolve $DNS_NAME; wget -q -O - http://$DNS_NAME:$REMOTE_PORT/file | sha256sum") ||
        { echo "$out"; podman_failed "podman run"; }
    echo "$out"
    name_ip=$(tail -n2 <<<"$out" | head -n1)
    [ "$name_ip" = "$REMOTE_ADDR" ] || fail "$DNS_NAME resolved to '$name_ip', not $REMOTE_ADDR"
    echo "ok $DNS_NAME resolved to $REMOTE_ADDR"
    sha_is "download by name" "$(tail -n1 <<<"$out")"
}

# (g) Podman's rootless network namespace: a bridge network of the user's
# own (`podman network create`, netavark and aardvark-dns), for which
# Podman runs pasta once, for the namespace every such container joins.
# Two containers talk by name, one publishes a port to the world's
# loopback, both reach the test host; once the last container is gone,
# so is the namespace's pasta. network_pesto: the same with pasta as the
# port forwarder (Podman asks pesto to add and delete the published port
# through the namespace pasta's control socket).
case_network() { network_case ""; }
case_network_pesto() { network_case -pesto; }
network_case() {
    CONF_VARIANT=$1
    local net=rknp-net-$ENGINE web=web-$ENGINE cid out sha rc=0
    pod network rm -f "$net" >/dev/null 2>&1 || true # a failed case's
    pod network create "$net" >/dev/null || fail "podman network create failed"
    cid=$(pod_run -d --name "$web" --network "$net" -p 18092:8000 -v /tmp/www:/www:ro "$IMG" \
        python3 -m http.server -d /www 8000) || podman_failed "podman run -d --network $net"
    sha=$(fetch_sha_retry "http://127.0.0.1:18092/file")
    sha_is "published: 127.0.0.1:18092 -> $web:8000" "$sha" || rc=1
    out=$(pod_run --rm --network "$net" "$IMG" sh -c \
        "ip -o addr show scope global; for _ in 1 2 3 4 5 6 7 8 9 10; do wget -q -O /dev/null http://$web:8000/file && break; sleep 0.3; done
         wget -q -O - http://$web:8000/file | sha256sum; wget -q -O - http://$REMOTE_ADDR:$REMOTE_PORT/file | sha256sum") ||
        { echo "$out"; podman_failed "podman run --network $net"; rc=1; }
    echo "$out"
    if [ "$rc" = 0 ]; then
        sha_is "container to container by name ($web:8000)" "$(tail -n2 <<<"$out" | head -n1)" || rc=1
        sha_is "download from the test host $REMOTE_ADDR:$REMOTE_PORT" "$(tail -n1 <<<"$out")" || rc=1
    fi
    pod rm -f -t 0 "$cid" >/dev/null || true
    pod network rm -f "$net" >/dev/null || true
    for _ in $(seq 25); do
        out=$(pgrep -u "$USER_NAME" -a -f 'pasta' || true)
        [ -z "$out" ] && break
        sleep 0.2
    done
    [ -z "$out" ] || { echo "REASON: a pasta outlived the network's last container: $out"; rc=1; }
    return $rc
}

# (f) podman info names the pasta in use: our wrapper, and the version of
# the engine behind it (rknp-pasta's names rknp).
case_info() {
    local out want
    out=$(pod info --format '{{.Host.Pasta.Executable}}|{{.Host.Pasta.Version}}') ||
        { echo "$out"; fail "podman info failed"; }
    echo "$out"
    [ "${out%%|*}" = "$WRAP_DIR/helpers-$ENGINE/pasta" ] ||
        fail "podman info's pasta is '${out%%|*}', not $WRAP_DIR/helpers-$ENGINE/pasta"
    case $ENGINE in
    real) want='^\|?pasta 0\.0~git' ;;
    rknp) want='rknp' ;;
    esac
    grep -Eq "$want" <<<"${out#*|}" || fail "podman info's pasta version does not match /$want/"
    echo "ok podman info: ${out%%|*}, version $(head -n1 <<<"${out#*|}")"
}

# ---------------------------------------------------------------- driver

versions() { echo "$(podman --version), $(pasta --version | head -n1), $(/usr/local/bin/rknp-pasta --version | head -n1)"; }
case_end() { :; }

run_all
