#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Rootless Docker on rknp, end to end: Debian's docker.io (20.10) started
# with its own dockerd-rootless.sh as the unprivileged test user, once per
# route a user can take:
#   fork   DOCKERD_ROOTLESS_ROOTLESSKIT_NET=plugin; the script finds this
#          repository's rootlesskit installed as `docker-rootlesskit` first
#          on PATH and the plugin comes from --net-plugin in
#          DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS;
#   stock  Debian's rootlesskit 1.1.0 with NET=slirp4netns and
#          DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS=--slirp4netns-binary=rknp-slirp4netns.
# In each: a busybox image imported from Debian's busybox-static (nothing is
# pulled), a container fetching a file from a test host behind a veth pair,
# a container publishing a file to the host's 127.0.0.1 with `-p` (both
# compared by sha256), the network that is really in use, then dockerd
# stopped and nothing of it left (no process in its user namespace, none
# carrying this run's marker, no state dir, the port closed).
#
#   sudo tests/e2e/docker_rootless.sh          # BUILD_DIR (default build/)
#   DOCKER_ROUTES=stock sudo -E tests/e2e/docker_rootless.sh
#
# Needs $BUILD_DIR/bin/{rootlesskit,rootlessctl,rknp-slirp4netns} and
# $BUILD_DIR/lib/librknp.so.1, docker.io, rootlesskit, busybox-static,
# uidmap, iproute2, curl, python3 (tests/install-deps.sh). Traffic goes only
# to loopback and to the network namespace this script creates. One
# PASS/FAIL line per case and route; exits non-zero if any failed; bounded
# by E2E_TIMEOUT seconds (default 300).
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 300 "creates a user, namespaces and a veth pair" "tests/install-deps.sh; tests/lib/build.sh build_all" \
    "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/bin/rootlessctl" "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1" \
    /usr/share/docker.io/contrib/dockerd-rootless.sh /usr/sbin/dockerd /usr/bin/docker /usr/bin/rootlesskit \
    /usr/bin/rootlesskit-docker-proxy /bin/busybox
E2E_RKNP_DRIVERS="fork stock" # both routes are rknp's: no reference driver

NETNS_HOST=rknp-dk-host
TEST_HOST_PORT=8080
DOCKERD_TIMEOUT=150 # seconds a dockerd may live (the whole route)
IMAGE=rknp-busybox:local
e2e_scratch docker docker_cleanup
mkdir -p "$SCRATCH"/{fork-bin,image}
# shellcheck source=tests/e2e/docker_lib.sh
. "$E2E_DIR/docker_lib.sh"
TEST_HOST=$DOCKER_TEST_NET.2
install_route_binaries
install -m 0755 "$BUILD_DIR/bin/rootlessctl" "$SCRATCH/bin/rootlessctl"

e2e_test_user 2097152

# The image: Debian's static busybox, imported into each dockerd.
make_image "$SCRATCH/image/busybox.tar"

# The test host: a namespace behind a veth pair, serving the file.
setup_docker_test_host "$NETNS_HOST"
start_http "$TEST_HOST" "$TEST_HOST_PORT" "$SCRATCH/www" "$NETNS_HOST"

log "docker: $(/usr/sbin/dockerd --version); stock rootlesskit: $(/usr/bin/rootlesskit --version)"
log "fork: $("$SCRATCH/fork-bin/docker-rootlesskit" --version --net-plugin="$LIB" | tr '\n' ' ')"
log "rknp-slirp4netns: $("$S4N" --version | head -n1)"

# 1. A container fetches the file from the test host behind the veth pair:
# container -> docker0 (NAT) -> tap0 -> rknp -> host socket -> veth.
case_fetch_test_host() {
    local out
    out=$(dk "$1" run --rm --pull=never "$IMAGE" sh -c \
        "wget -q -O - http://$TEST_HOST:$TEST_HOST_PORT/file | sha256sum")
    expect "container fetched the file from $TEST_HOST" "^$FILE_SHA " "$out"
}

# 2. `docker run -p 127.0.0.1:PORT:80`: busybox httpd inside serves the file
# to the host's 127.0.0.1 through rootlesskit's port driver.
case_publish() {
    local port sha="" i rc=0
    port=$(free_port 127.0.0.1)
    dk "$1" run -d --name web --pull=never -p "127.0.0.1:$port:80" \
        -v "$SCRATCH/www:/www:ro" "$IMAGE" httpd -f -p 80 -h /www >/dev/null
    for i in $(seq 50); do
        sha=$(curl -sSf --max-time 10 "http://127.0.0.1:$port/file" 2>/dev/null | sha256sum | cut -d' ' -f1) || true
        [ "$sha" = "$FILE_SHA" ] && break
        sleep 0.2
    done
    dk "$1" rm -f web >/dev/null || rc=1
    [ "$sha" = "$FILE_SHA" ] || { echo "host fetch via 127.0.0.1:$port: sha $sha"; return 1; }
    echo "ok host fetched the file from the container through 127.0.0.1:$port"
    [ "$rc" = 0 ] || { echo "docker rm -f failed"; return 1; }
    echo "$port" >"$SCRATCH/$1/published-port"
}

# 3. The network in use is rknp's: the plugin in rootlesskit (its start log
# line and `rootlessctl info`), or rknp-slirp4netns as rootlesskit's
# network process.
case_network() {
    local state rk info
    route_env "$1"
    state=$(dirname "$(ls "$R_DIR"/tmp/rootlesskit*/api.sock)")
    # Upstream's v3 client (build_all builds it): Debian's 1.1.0 predates
    # the port driver's extra details and drops them.
    info=$(as_user "$SCRATCH/bin/rootlessctl" --socket="$state/api.sock" info --json)
    echo "$info"
    if [ "$1" = fork ]; then
        expect "rootlesskit found as docker-rootlesskit" "exec docker-rootlesskit --net=plugin --mtu=65520 " \
            "$(cat "$SCRATCH/logs/dockerd.$1.log")"
        expect "plugin start log: path and versions" \
            "network/plugin: started ${LIB//./\\.}: rknp [0-9.]+ \(libslirp [0-9.]+\), ABI 1\.[0-9]+" \
            "$(cat "$SCRATCH/logs/dockerd.$1.log")"
        expect "rootlessctl info: plugin driver" '"driver": "plugin"' "$info"
        expect "rootlessctl info: the plugin path" "\"rknp\\.plugin\": \"${LIB//./\\.}\"" "$info"
        expect "rootlessctl info: rknp version" '"rknp\.version": "[0-9]+\.[0-9]+\.[0-9]+"' "$info"
        expect "rootlessctl info: libslirp version" '"rknp\.libslirp": "[0-9]+\.[0-9]+\.[0-9]+"' "$info"
        expect "--version names the plugin and its versions" \
            "^plugin: ${LIB//./\\.}: rknp [0-9.]+ \(libslirp [0-9.]+\), ABI 1\.[0-9]+\$" \
            "$(as_user "$SCRATCH/fork-bin/docker-rootlesskit" --version --net-plugin="$LIB")"
    else
        expect "rootlessctl info: slirp4netns driver" '"driver": "slirp4netns"' "$info"
        rk=$(pgrep -P "${DOCKERD_PID[$1]}" | head -n1 || true)
        local p found=""
        for p in $(pgrep -P "${rk:-0}" || true); do
            [ "$(readlink "/proc/$p/exe")" = "$S4N" ] && found=$p
        done
        [ -n "$found" ] || { echo "no rknp-slirp4netns under rootlesskit ${rk:-?}"; return 1; }
        echo "ok rootlesskit's network process $found is $S4N: $(tr '\0' ' ' <"/proc/$found/cmdline")"
    fi
}

# 4. dockerd stopped: exit status 0 and nothing left: no process in its
# user namespace (containers included), none carrying this run's marker,
# rootlesskit's state dir gone, the published port closed.
case_stop() {
    local rc left ns
    route_env "$1"
    ns=$(tail -n1 "$USERNS_FILE")
    rc=$(cat "$R_DIR/exit-status")
    [ "$rc" = 0 ] || { echo "dockerd-rootless.sh exit status $rc, want 0"; tail -n 20 "$SCRATCH/logs/dockerd.$1.log"; return 1; }
    echo "ok exit status 0"
    local i
    for i in $(seq 30); do
        left=$(userns_procs "$ns")
        [ -z "$left" ] && break
        sleep 0.1
    done
    [ -z "$left" ] || { echo "left in dockerd's user namespace $ns:"; echo "$left"; return 1; }
    echo "ok no process left in $ns"
    # The marker's processes but the test host's server.
    left=$(run_leftovers) || true
    left=$(grep -Ev "^(${BG_PIDS[*]// /|}) " <<<"$left" || true)
    [ -z "$left" ] || { echo "left running:"; echo "$left"; return 1; }
    echo "ok no process of this run left"
    if ls -d "$R_DIR"/tmp/rootlesskit* 2>/dev/null; then
        echo "rootlesskit's state dir left behind"; return 1
    fi
    echo "ok state dir removed"
    if [ -s "$R_DIR/published-port" ]; then
        local port
        port=$(cat "$R_DIR/published-port")
        if curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$port/"; then
            echo "127.0.0.1:$port still answers"; return 1
        fi
        echo "ok 127.0.0.1:$port closed"
    fi
}

for r in ${DOCKER_ROUTES:-fork stock}; do
    if ! start_dockerd "$r" "$SCRATCH/image/busybox.tar" >"$SCRATCH/logs/start.$r.log" 2>&1; then
        echo "FAIL start [$r]"
        sed 's/^/    | /' "$SCRATCH/logs/start.$r.log"
        FAILURES=$((FAILURES + 1))
        kill -TERM "${DOCKERD_PID[$r]}" 2>/dev/null || true
        wait "${DOCKERD_PID[$r]}" 2>/dev/null || true
        continue
    fi
    echo "PASS start [$r]"
    PASSES=$((PASSES + 1))
    for c in fetch_test_host publish network; do
        run_case "$c" "$r" "case_$c"
    done
    stop_dockerd "$r"
    run_case stop "$r" case_stop
done

stop_background
check_leftovers
echo "docker_rootless: $PASSES passed, $FAILURES failed in ${SECONDS}s"
[ "$FAILURES" = 0 ]
