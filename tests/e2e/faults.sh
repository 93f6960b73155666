#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Faults in the middle of transfers (issue 38, part 5): what a user sees
# when the stack's process dies, when the guest's namespace goes, and when
# rknp-slirp4netns runs out of memory. Every transfer carries a known byte
# stream (fault_helper.py): a fault may cut it short, never change a byte.
#   parent_killed  rootlesskit --net=plugin --pidns (this build's) with a
#       guest download and upload towards a test host in a veth netns and
#       a client of a published port (--port-driver=plugin) on 127.0.0.1;
#       rootlesskit's parent gets SIGKILL mid-transfer. The host's ends see
#       a reset or an early end within 5 s, the container dies with it
#       (its init, rootlesskit's child, by its parent-death signal), no
#       guest transfer waits for its timeout, no process of the run and no
#       socket of the transfers held by a process is left.
#   netns_gone     the same transfers; every process in the child's
#       network namespace gets SIGKILL, so the namespace and the tap go.
#       rootlesskit ends within 5 s, the host's ends fail within 5 s,
#       nothing is left.
#   memory_limit   rknp-slirp4netns under RLIMIT_AS of 16, 24, ... MiB
#       until it starts: each start it cannot make ends with exit 1 and
#       "out of memory" (or the thread it could not start) on stderr,
#       never a signal nor an empty message; under the first limit that
#       works (where allocations at start fail: the seccomp filter is left
#       off with a warning), 8 parallel downloads have the file's sha256,
#       and again with its limit lowered to its size (no new mapping can
#       succeed: the data path allocates nothing).
#
#   sudo tests/e2e/faults.sh                   # BUILD_DIR (default build/)
#   FAULT_CASES=memory_limit sudo -E tests/e2e/faults.sh
#
# Needs $BUILD_DIR/bin/rootlesskit, rknp-slirp4netns, lib/librknp.so.1,
# uidmap, iproute2, util-linux (prlimit, nsenter), python3. Traffic goes
# only to loopback and to the netns this script creates. One PASS/FAIL
# line per case; exits non-zero if any failed; bounded by E2E_TIMEOUT
# seconds (default 150).
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 150 "creates a user and namespaces" "build first: tests/lib/build.sh build_all" \
    "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1"

NETNS_HOST=rknp-fault-host
VETH_HOST=rknp-fault-h
VETH_NS=rknp-fault-n
BOUND=5                 # seconds a host's end may take to see the fault
RATE=$((4 << 20))       # bytes/s of each transfer: slow enough to be cut
TOTAL=$((1 << 30))      # bytes of each: never done before the fault
USER_TIMEOUT=60

e2e_scratch faults
e2e_copy_build rootlesskit rknp-slirp4netns
install -m 0755 "$E2E_DIR/fault_helper.py" "$SCRATCH/bin/fault_helper.py"
HELPER=$SCRATCH/bin/fault_helper.py
RK=$SCRATCH/bin/rootlesskit
S4N=$SCRATCH/bin/rknp-slirp4netns
e2e_test_user
setup_netns_host
NS_PORT=$(free_port 198.18.0.1)
ip netns exec "$NETNS_HOST" "$PY" "$HELPER" server 198.18.0.2 "$NS_PORT" >"$SCRATCH/logs/ns-server.log" 2>&1 &
track_bg $!
wait_tcp 198.18.0.2 "$NS_PORT" "$NETNS_HOST"

now() { date +%s.%N; }

# wait_line FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
wait_line() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        grep -Eq -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no /$2/ in $1 within $3 s:"
    cat "$1" 2>/dev/null || true
    return 1
}

# ended_within LINE T0: LINE (a fault_helper.py summary) ended by a reset,
# an early end or an error, not a timeout nor corrupt bytes, by T0 + BOUND.
ended_within() {
    local line=$1 t0=$2 t end
    end=$(sed -E 's/.* end=([a-z]+).*/\1/' <<<"$line")
    t=$(sed -E 's/.* t=([0-9.]+).*/\1/' <<<"$line")
    case $end in
    reset | eof | error) ;;
    *) echo "transfer ended '$end', not cut: $line"; return 1 ;;
    esac
    awk -v t="$t" -v t0="$t0" -v b="$BOUND" 'BEGIN { exit !(t - t0 <= b) }' ||
        { echo "ended $(awk -v t="$t" -v t0="$t0" 'BEGIN { printf "%.1f", t - t0 }') s after the fault (bound $BOUND s): $line"; return 1; }
    echo "ok cut within $BOUND s ($end): $line"
}

# transfers_start: rootlesskit (this build's, as the test
# user) whose command serves the stream on 8080 (published on
# 127.0.0.1:$HP) and runs the guest's download and upload towards the
# test host; then the host's client of the published port. Returns once
# all three have moved 256 KiB. Sets RKPID, PARENT, CHILD.
transfers_start() {
    local d=$SCRATCH/tmp/$CASE ARGV
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    ST=$d/state RKLOG=$SCRATCH/logs/$CASE-rk.log
    HP=$(free_port 127.0.0.1)
    NS_LINES=$(wc -l <"$SCRATCH/logs/ns-server.log")
    # --pidns: the child is the container's init, so every process of the
    # container dies with it (without it the command's children outlive
    # the network: docs/tests.md, "Faults").
    user_argv "$RK" --debug --net=plugin --net-plugin="$LIB" --port-driver=plugin --pidns \
        --copy-up=/etc --state-dir="$ST" -p "127.0.0.1:$HP:8080/tcp" -- sh -c "
        '$PY' '$HELPER' server 0.0.0.0 8080 >'$d/guest-server.log' 2>&1 &
        '$PY' '$HELPER' client 198.18.0.2 $NS_PORT down $TOTAL $RATE 30 >'$d/guest-down.log' 2>&1 &
        '$PY' '$HELPER' client 198.18.0.2 $NS_PORT up $TOTAL $RATE 30 >'$d/guest-up.log' 2>&1 &
        wait"
    "${ARGV[@]}" >"$RKLOG" 2>&1 &
    RKPID=$!
    wait_line "$d/guest-server.log" "server ready" 20
    "$PY" "$HELPER" client 127.0.0.1 "$HP" down "$TOTAL" "$RATE" 30 >"$d/host-client.log" 2>&1 &
    HOSTPID=$!
    wait_line "$d/guest-down.log" "client started" 20
    wait_line "$d/guest-up.log" "client started" 20
    wait_line "$d/host-client.log" "client started" 20
    PARENT=$(pgrep -P "$RKPID" -x rootlesskit | head -n1)
    [ -n "$PARENT" ] || PARENT=$(pgrep -P "$(pgrep -P "$RKPID" | head -n1)" -x rootlesskit | head -n1)
    CHILD=$(cat "$ST/child_pid")
    echo "parent $PARENT, child $CHILD; transfers running"
}

# transfers_cut T0: each host's end (the test host's two, the published
# port's client) saw its transfer end without a timeout, by T0 + BOUND.
transfers_cut() {
    local t0=$1 d=$SCRATCH/tmp/$CASE line mode
    for mode in down up; do
        for _ in $(seq $(((BOUND + 2) * 10))); do
            line=$(tail -n +$((NS_LINES + 1)) "$SCRATCH/logs/ns-server.log" | grep -m1 "^server $mode") && break
            sleep 0.1
        done
        [ -n "$line" ] || { echo "the test host's $mode transfer did not end within $((BOUND + 2)) s"; return 1; }
        ended_within "$line" "$t0"
    done
    wait "$HOSTPID" || true
    line=$(grep "^client down" "$d/host-client.log") || { cat "$d/host-client.log"; return 1; }
    ended_within "$line" "$t0"
}

# nothing_left: no process of the run but the test host's server, and no
# TCP connection of the transfers open in the test host's netns or on the
# published port.
nothing_left() {
    local i left
    for i in $(seq 30); do
        # Sockets a process still holds (the dead parent's own, orphaned
        # in FIN_WAIT or TIME_WAIT, hold no fd).
        left=$(ip netns exec "$NETNS_HOST" ss -Htn state established state close-wait "( sport = :$NS_PORT )"
            ss -Htn state established state close-wait "( sport = :$HP or dport = :$HP )")
        [ -z "$left" ] && break
        sleep 0.1
    done
    [ -z "$left" ] || { echo "connections left:"; echo "$left"; return 1; }
    echo "ok no connection of the transfers left"
    if pgrep -af -- "--state-dir=$ST"; then
        echo "a rootlesskit process of this case is left"; return 1
    fi
    echo "ok no rootlesskit process left"
}

case_parent_killed() {
    CASE=parent_killed
    transfers_start
    local t0 rc=0
    t0=$(now)
    kill -KILL "$PARENT"
    wait "$RKPID" || rc=$?
    echo "rootlesskit exit $rc"
    transfers_cut "$t0"
    # The guest's command died with the parent (rootlesskit's parent-death
    # signal): its transfers ended with it, not by a timeout.
    local d=$SCRATCH/tmp/$CASE
    if grep -h "^client" "$d/guest-down.log" "$d/guest-up.log" | grep "end=timeout"; then
        echo "a guest transfer waited for its timeout"; return 1
    fi
    nothing_left
}

case_netns_gone() {
    CASE=netns_gone
    transfers_start
    local t0 rc=0 pids
    # Every process in the child's network namespace: then the namespace,
    # and with it the tap, is gone.
    pids=$(for p in /proc/[0-9]*; do
        if [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$(readlink "/proc/$CHILD/ns/net")" ]; then echo "${p#/proc/}"; fi
    done)
    t0=$(now)
    # shellcheck disable=SC2086 # a pid list
    kill -KILL $pids
    wait "$RKPID" || rc=$?
    local took
    took=$(awk -v t0="$t0" -v t="$(now)" 'BEGIN { printf "%.1f", t - t0 }')
    echo "rootlesskit exit $rc after $took s"
    awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t <= b) }' ||
        { echo "rootlesskit took $took s to end (bound $BOUND s)"; return 1; }
    transfers_cut "$t0"
    # The stack either read the tap's end first or was closed by
    # rootlesskit, whose child exited: both end every flow at once.
    grep -E "tap detached|stack stopped|closed" "$RKLOG" | tail -n 3 || true
    nothing_left
}

# s4n_limits: as the test user, rknp-slirp4netns started under RLIMIT_AS
# of 16, 24, ... MiB until one starts; for each that does not, one line
# "limit N exit=RC: LAST LOG LINE". The first that runs: DOWNLOADS
# parallel downloads through it ("sha=..." each), then its limit lowered
# to its size now (no new mapping can succeed) and the downloads again,
# then SIGTERM; "limit N ran, exit=RC".
# shellcheck disable=SC2016 # expanded by the shell inside
S4N_LIMITS='
    s4n=$1 port=$2 dir=$3 n=$4
    downloads() {
        local pids=() i
        for i in $(seq "$n"); do
            nsenter -t "$t" -U -n --preserve-credentials sh -c \
                "echo sha=\$(curl -sS --max-time 30 http://10.0.2.2:$port/file | sha256sum | cut -d\" \" -f1)" &
            pids+=($!)
        done
        wait "${pids[@]}"
    }
    for lim in 16 24 32 40 48 64 96 128; do
        unshare -rn sleep 120 & t=$!
        for i in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        log=$dir/s4n-$lim.log
        prlimit --as=$((lim << 20)) "$s4n" -c "$t" tap0 >"$log" 2>&1 & p=$!
        for i in $(seq 100); do grep -q "^Starting slirp" "$log" && break; kill -0 $p 2>/dev/null || break; sleep 0.05; done
        if ! grep -q "^Starting slirp" "$log"; then
            rc=0; kill $p 2>/dev/null; wait $p || rc=$?
            echo "limit $lim exit=$rc: $(tail -n 1 "$log")"
            kill $t; wait $t 2>/dev/null
            continue
        fi
        echo "limit $lim runs; hit at start: $(grep -c "Cannot allocate memory" "$log")"
        grep "Cannot allocate memory" "$log" || true
        downloads
        size=$(awk "/^VmSize:/ {print \$2}" /proc/$p/status)
        prlimit --pid $p --as=$((size << 10))
        echo "limit lowered to its size, $size KiB"
        downloads
        echo "alive=$(kill -0 $p 2>/dev/null && echo yes || echo no)"
        rc=0; kill $p; wait $p || rc=$?
        echo "limit $lim ran, exit=$rc"
        kill $t; wait $t 2>/dev/null
        break
    done'

case_memory_limit() {
    local d=$SCRATCH/tmp/memory out n=8 line
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    PORT4=$(free_port 127.0.0.1)
    start_http 127.0.0.1 "$PORT4" "$SCRATCH/www"
    out=$(as_user bash -c "$S4N_LIMITS" _ "$S4N" "$PORT4" "$d" "$n")
    echo "$out"
    # Each limit it could not start under: exit 1 and the reason, never a
    # signal (an abort or a crash) nor an empty message.
    expect "a limit it hit" "^limit [0-9]+ exit=" "$out"
    if line=$(grep -E "^limit [0-9]+ exit=" <<<"$out" | grep -vE "exit=1: rknp_parent_start: (out of memory|starting the (stack|logger) thread: .+)\$"); then
        echo "not a clear failure: $line"; return 1
    fi
    echo "ok every failed start: exit 1, out of memory named"
    expect "one that runs" "^limit [0-9]+ runs" "$out"
    [ "$(grep -c "^sha=$FILE_SHA\$" <<<"$out")" = $((2 * n)) ] ||
        { echo "not all $((2 * n)) downloads had the file's sha256"; return 1; }
    echo "ok $((2 * n)) downloads verified, $n of them with no memory left to map"
    expect "still running" "^alive=yes\$" "$out"
    # SIGTERM ends it as slirp4netns ends: status 128 + 15, no crash.
    expect "an orderly end on SIGTERM" "^limit [0-9]+ ran, exit=(0|143)\$" "$out"
}

for c in ${FAULT_CASES:-parent_killed netns_gone memory_limit}; do
    run_case "$c" plugin "case_$c"
done

stop_background
check_leftovers
echo "faults: $PASSES passed, $FAILURES failed"
[ "$FAILURES" = 0 ]
