#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The flood test (issue 12, resource exhaustion): a guest floods
# `rootlesskit --net=plugin` with new flows, 100k TCP SYNs and 100k UDP
# datagrams from its own address and ever new source ports (64512 UDP
# sources), while rootlesskit runs as the test user with a real fd limit
# (prlimit, 4096). Once through libslirp (--plugin-tcp=slirp
# --plugin-udp=slirp) and once through the fast paths (TCP and UDP; the
# UDP fast path holds a host socket per source for 30 s):
#   - the parent's fd count (/proc/PID/fd) stays under the fds it had
#     before plus the effective max_flows it logs, below its limit, and its
#     RSS grows by less than 320 KiB per allowed host socket (what libslirp
#     can hold for one: a TCP socket's two 128 KiB buffers, a UDP source's
#     last datagram in a 64 KiB mbuf at MTU 65520);
#   - `rootlessctl info` answers throughout and after;
#   - a port published with the builtin port driver serves a file
#     byte-exact after the flood, and so does a download by the guest
#     through the gateway (sha256);
#   - the log reports flows refused at the cap (and over the rate, set to
#     5000 a second with --plugin-max-new-flows-per-sec: the flood sends
#     about 6000 SYNs and 6000 datagrams a second; the cap is checked
#     first, so while it is full nothing is counted as rate-limited).
# Without the limits libslirp opens a host socket per UDP source (kept
# 240 s) until the parent hits its fd limit: the API socket and the port
# driver stop accepting and the guest's download fails.
#
#   sudo tests/e2e/flood.sh                 # BUILD_DIR (default build/)
#   FLOOD_PATHS=slirp FLOOD_COUNT=20000 sudo -E tests/e2e/flood.sh
#
# Needs $BUILD_DIR/bin/rootlesskit, rootlessctl, lib/librknp.so.1, uidmap,
# util-linux (prlimit, nsenter), curl, python3. Traffic goes only to
# loopback. One PASS/FAIL line per path; exits non-zero if any failed.
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 300 "creates a user and namespaces" "build first: tests/lib/build.sh build_all" \
    "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/bin/rootlessctl" "$BUILD_DIR/lib/librknp.so.1"
# shellcheck source=tests/e2e/cases.sh
. "$E2E_DIR/cases.sh" # ctl, start_port_helper, http_sha_eventually

NOFILE=${FLOOD_NOFILE:-4096}
COUNT=${FLOOD_COUNT:-100000} # SYNs, and as many UDP sources
RATE=${FLOOD_RATE:-12000}    # frames a second (SYNs + datagrams)
USER_TIMEOUT=120

e2e_scratch flood
e2e_copy_build rootlesskit rootlessctl
install -m 0755 "$E2E_DIR/port_helper.py" "$SCRATCH/bin/port_helper.py"
install -m 0755 "$E2E_DIR/../lib/flood.py" "$E2E_DIR/../lib/spoof_udp.py" "$SCRATCH/bin/"
RK=$SCRATCH/bin/rootlesskit

e2e_test_user
PORT4=$(free_port 127.0.0.1)
start_http 127.0.0.1 "$PORT4" "$SCRATCH/www"

# The flood's targets on the host's loopback (the guest reaches them as
# the gateway, 10.0.2.2): SYNs to a listener that accepts and closes (so
# the guest's own kernel resets each half-open flow: TCP costs sockets
# only briefly), datagrams to a socket that never reads (each source keeps
# its libslirp socket for 240 s).
SINK_TCP=$(free_port 127.0.0.1)
SINK_UDP=$(free_udp_port 127.0.0.1)
"$PY" "$SCRATCH/bin/flood.py" sink "$SINK_TCP" "$SINK_UDP" >"$SCRATCH/logs/sink.log" 2>&1 &
BG_PIDS+=($!)
wait_tcp 127.0.0.1 "$SINK_TCP"

# info: rootlessctl info, given 10 s to answer.
info() { local USER_TIMEOUT=10; ctl info; }
fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# flood_case PATH (slirp|fast): for TCP and UDP alike
flood_case() {
    local path=$1 tp parent cpid base_fds base_rss max_fds=0 max_rss=0 max_flows
    local fpid n=0 info_fail=0 fds rss sha out line refused limited ARGV
    ST="$SCRATCH/tmp/state-flood-$path"
    RKLOG="$SCRATCH/logs/flood-rk.$path.log"
    tp=$(free_port 127.0.0.1)
    # --debug: the plugin's info records (the effective max_flows).
    user_argv prlimit --nofile="$NOFILE:$NOFILE" -- "$RK" --debug --net=plugin --net-plugin="$LIB" \
        --plugin-tcp="$path" --plugin-udp="$path" --plugin-max-new-flows-per-sec=5000 --copy-up=/etc --port-driver=builtin --state-dir="$ST" \
        -p "127.0.0.1:$tp:8080/tcp" -- \
        "$PY" "$SCRATCH/bin/port_helper.py" serve "$SCRATCH/www" 8080 5353
    start_port_helper || return 1
    parent=$(pgrep -P "$RKPID" -f rootlesskit | head -n1)
    cpid=$(cat "$ST/child_pid")
    if [ -z "$parent" ] || [ -z "$cpid" ]; then echo "no rootlesskit parent/child"; return 1; fi
    echo "parent $parent child $cpid, fd limit: $(grep 'open files' "/proc/$parent/limits")"
    line=$(grep -m1 -o 'guest flows: at most [0-9]* host sockets[^"]*' "$RKLOG") ||
        { echo "no effective max_flows in the log:"; cat "$RKLOG"; return 1; }
    echo "$line"
    max_flows=$(sed -E 's/.*at most ([0-9]+) host.*/\1/' <<<"$line")
    sha=$(http_sha_eventually "$tp")
    expect "file through the published port before the flood" "^$FILE_SHA\$" "$sha"
    base_fds=$(fd_count "$parent")
    base_rss=$(rss_kib "$parent")
    echo "before: $base_fds fds, $base_rss KiB RSS"

    nsenter -t "$cpid" -n "$PY" "$SCRATCH/bin/flood.py" send 10.0.2.100 10.0.2.2 \
        "$SINK_TCP" "$SINK_UDP" "$COUNT" "$RATE" >"$SCRATCH/logs/flood.$path.log" 2>&1 &
    fpid=$!
    while kill -0 "$fpid" 2>/dev/null; do
        fds=$(fd_count "$parent")
        rss=$(rss_kib "$parent")
        ((fds > max_fds)) && max_fds=$fds
        ((rss > max_rss)) && max_rss=$rss
        if ((n++ % 10 == 0)); then
            info >/dev/null 2>&1 || { info_fail=$((info_fail + 1)); echo "info failed at $fds fds"; }
        fi
        sleep 0.2
    done
    wait "$fpid" || { echo "flood failed:"; cat "$SCRATCH/logs/flood.$path.log"; return 1; }
    cat "$SCRATCH/logs/flood.$path.log"
    fds=$(fd_count "$parent")
    ((fds > max_fds)) && max_fds=$fds
    echo "during: at most $max_fds fds, $max_rss KiB RSS; after: $fds fds; $info_fail info failures"

    ((max_fds <= base_fds + max_flows + 64)) ||
        { echo "fd count $max_fds above $base_fds + max_flows $max_flows + 64"; return 1; }
    ((max_fds < NOFILE)) || { echo "fd count $max_fds reached the limit $NOFILE"; return 1; }
    ((max_rss <= base_rss + max_flows * 320)) ||
        { echo "RSS $max_rss KiB above $base_rss + 320 KiB x $max_flows"; return 1; }
    [ "$info_fail" = 0 ] || { echo "rootlessctl info failed $info_fail times during the flood"; return 1; }
    out=$(info 2>&1) || { echo "rootlessctl info after the flood: $out"; return 1; }
    expect "rootlessctl info after the flood" "plugin" "$out"
    sha=$(http_sha "$tp" 2>/dev/null || true)
    expect "file through the published port after the flood" "^$FILE_SHA\$" "$sha"
    sha=$(nsenter -t "$cpid" -n curl -sSf --max-time 20 "http://10.0.2.2:$PORT4/file" | sha256sum | cut -d' ' -f1)
    expect "guest's download through the gateway after the flood" "^$FILE_SHA\$" "$sha"
    line=$(grep -o 'guest flows refused: [^"]*' "$RKLOG" | tail -n1)
    expect "refusals logged" "guest flows refused" "$line"
    refused=$(sed -E 's/.*\(totals ([0-9]+), ([0-9]+);.*/\1/' <<<"$line")
    limited=$(sed -E 's/.*\(totals ([0-9]+), ([0-9]+);.*/\2/' <<<"$line")
    echo "refused at max_flows: $refused, rate-limited: $limited"
    ((refused > 0)) || { echo "no flow was refused at max_flows"; return 1; }
}

flood_slirp() { flood_case slirp; }
flood_fast() { flood_case fast; }
for p in ${FLOOD_PATHS:-slirp fast}; do
    run_case "flood_$p" plugin "flood_$p"
done

stop_background
check_leftovers
echo "flood: $PASSES passed, $FAILURES failed"
[ "$FAILURES" = 0 ]
