#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The soak test (issue 38): network stacks under hours (or minutes) of
# mixed traffic, every byte checked, their process sampled every 10 s; once
# the traffic stops, its flows and fds must be back where they started.
# Stacks, run at the same time (--stacks):
#   plugin        rootlesskit --net=plugin (this build), --port-driver=plugin
#   plugin-slirp  the same with --plugin-tcp=slirp: guest TCP through
#                 libslirp (its FIN_WAIT2 and TIME_WAIT handling)
#   s4n           Debian's stock rootlesskit with rknp-slirp4netns
#                 (--slirp4netns-binary), --port-driver=slirp4netns
# Each guest runs four processes (tests/soak/traffic.py): clients towards
# the host's loopback (10.0.2.2) and towards a test host behind a veth pair
# (198.18.0.2), servers on published ports, and ping + DNS. Traffic: bulk
# TCP both ways, short connections at a steady rate, UDP request/response
# and bulk both ways, ping, DNS to the test's DNS server, published-port
# clients on the host's 127.0.0.1 and in the test host, either end of a
# transfer killed mid-way (SIGKILL: FIN or RST), half-closed connections
# held open 5-100 s (the guest's FIN with the host writing on, the guest
# gone with the host silent (FIN_WAIT2), the host's FIN with the guest
# writing on).
#
#   sudo tests/soak/run.sh                           # 6 minutes in all
#   sudo tests/soak/run.sh --duration 60m --plot     # the long run
#   flags: --duration N[s|m|h] (the whole run, default 360 s)
#          --stacks "plugin plugin-slirp s4n" --interval 10 --out DIR
#          --full-drain / --no-full-drain (default: on from 20 minutes)
#          --plot (soak.png, python3-matplotlib)
#   env: BUILD_DIR (default build/); load knobs SOAK_BULK_RATE (bytes/s
#   of each bulk stream, default 2000000), SOAK_SHORT_RATE (connections/s
#   per client, 10), SOAK_HOLDS (held connections per client, 6) and the
#   others in soak_config; SOAK_DRAIN (s, 60); SOAK_RSS_BOUND_MIB (8);
#   SOAK_SLIRP_MALLOC=heap (see stack_env); SOAK_STACK_ENV="VAR=VALUE
#   ..." for every stack's process; SOAK_LEAK=fd:N|mem:KIB (a deliberately
#   broken stack, see below).
#
# Phases: the stacks start; baseline 0 (idle); the long-lived flows open
# (four UDP request/response flows and a UDP pull flow per client, an ICMP
# echo flow per ping target: they carry on to the end) and baseline 1 is
# taken; the churn runs; at stop-churn nothing new starts, held
# connections end and running transfers finish; then within SOAK_DRAIN
# seconds the stack's process must hold exactly what it held at baseline 1
# (fds, and sockets by protocol and TCP state: the churn's UDP flows were
# never answered and expire after 30 s, libslirp's DNS sockets after 10 s).
# With --full-drain the long-lived flows then stop and, within 260 s (the
# UDP fast path keeps an answered flow 180 s, the ICMP echo path 60 s), it
# must hold exactly what it held at baseline 0.
#
# Out (DIR, default $BUILD_DIR/soak): samples-STACK.csv (a row per
# interval, tests/soak/procstat.py), STACK/ (the traffic's counters and
# errors, baselines and drains), summary.txt (tests/soak/report.py: figures
# and one PASS/FAIL line per check), soak.png with --plot.
#
# SOAK_LEAK (test-only): the named stacks (SOAK_LEAK_STACKS, default all)
# run with tests/soak/leak_close.c preloaded: fd:N leaves every Nth TCP
# socket the stack closes open, mem:KIB leaks KIB of heap per TCP socket
# closed. The run must then fail (that is how the checks were shown to
# catch a leak; docs/soak.md).
#
# Needs $BUILD_DIR/bin/{rootlesskit,rknp-slirp4netns}, lib/librknp.so.1,
# /usr/bin/rootlesskit, uidmap, iproute2, python3, util-linux, a C compiler
# for SOAK_LEAK (tests/install-deps.sh). Traffic goes only to loopback and
# to the network namespace this script creates; DNS only to its own server.
# net.ipv4.ping_group_range is set to the test user's gid for the run (the
# plugin's ping sockets; restored at exit). Exits non-zero if any check
# failed.
set -euo pipefail
SOAK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_DIR=$SOAK_DIR/../e2e

DURATION=360 STACKS="plugin plugin-slirp s4n" INTERVAL=10 OUT="" FULL_DRAIN="" PLOT=""
ARGS=("$@")
while [ $# -gt 0 ]; do
    case $1 in
    --duration) DURATION=$2; shift ;;
    --duration=*) DURATION=${1#*=} ;;
    --stacks) STACKS=$2; shift ;;
    --stacks=*) STACKS=${1#*=} ;;
    --interval) INTERVAL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --out=*) OUT=${1#*=} ;;
    --full-drain) FULL_DRAIN=1 ;;
    --no-full-drain) FULL_DRAIN=0 ;;
    --plot) PLOT=1 ;;
    -h | --help) sed -n '4,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done
case $DURATION in
*h) DURATION=$((${DURATION%h} * 3600)) ;;
*m) DURATION=$((${DURATION%m} * 60)) ;;
*s) DURATION=${DURATION%s} ;;
esac
[[ $DURATION =~ ^[0-9]+$ ]] || { echo "bad --duration" >&2; exit 2; }
for s in $STACKS; do
    case $s in plugin | plugin-slirp | s4n) ;; *) echo "unknown stack $s" >&2; exit 2 ;; esac
done
[ -n "$FULL_DRAIN" ] || FULL_DRAIN=$((DURATION >= 1200 ? 1 : 0))
DRAIN=${SOAK_DRAIN:-60}
FULL_DRAIN_S=260

set -- "${ARGS[@]}"
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
BUILD_DIR=${BUILD_DIR:-$(cd "$SOAK_DIR/../.." && pwd)/build}
# The whole run, bounded: its duration and 10 minutes to set up and report.
E2E_TIMEOUT=$((DURATION + 600)) e2e_bound $((DURATION + 600)) "$@"
e2e_require "creates a user, namespaces and a DNS server on :53" "build first: tests/lib/build.sh build_all" \
    "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1" \
    /usr/bin/rootlesskit
T0=$SECONDS
OUT=${OUT:-$BUILD_DIR/soak}
mkdir -p "$OUT"
rm -rf "${OUT:?}"/samples-*.csv "$OUT/summary.txt" "$OUT/soak.png"

NETNS_HOST=rknp-soak-host
VETH_HOST=rknp-soak-h
VETH_NS=rknp-soak-n
DNS_NAME=rknp-soak.test
DNS_IP=192.0.2.79
PING_RANGE=$(sysctl -n net.ipv4.ping_group_range | tr -s '\t' ' ')
e2e_scratch soak "sysctl -qw net.ipv4.ping_group_range='$PING_RANGE'"

# Copies of what runs (a rebuild during the run cannot change them).
install -m 0755 "$(readlink -f "$BUILD_DIR/lib/librknp.so.1")" "$SCRATCH/lib/librknp.so.1"
LIB=$SCRATCH/lib/librknp.so.1
install -m 0755 "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/bin/rknp-slirp4netns" "$SCRATCH/bin/"
install -m 0755 "$SOAK_DIR/traffic.py" "$SOAK_DIR/procstat.py" "$SCRATCH/bin/"
RK=$SCRATCH/bin/rootlesskit
S4N=$SCRATCH/bin/rknp-slirp4netns
TRAFFIC=$SCRATCH/bin/traffic.py
PROCSTAT=$SCRATCH/bin/procstat.py

setup_test_user
chown "$RKNP_TEST_USER" "$SCRATCH/home" "$SCRATCH/tmp"
setup_netns_host
start_dns "$DNS_NAME=$DNS_IP"
echo "nameserver $DNS_ADDR" >"$SCRATCH/resolv.conf"
chmod 0644 "$SCRATCH/resolv.conf"
GID=$(id -g "$RKNP_TEST_USER")
PING_TARGETS='"10.0.2.2", "198.18.0.2"'
if sysctl -qw net.ipv4.ping_group_range="$GID $GID"; then
    PING_NOTE="ping sockets allowed for gid $GID (net.ipv4.ping_group_range, restored at exit)"
else
    PING_NOTE="ping sockets refused (net.ipv4.ping_group_range not settable): libslirp answers the gateway, no echo to the test host"
    PING_TARGETS='"10.0.2.2"'
fi
log "$PING_NOTE"

# STACK_ENV: variables for the stacks' processes: SOAK_STACK_ENV (e.g.
# GLIBC_TUNABLES=..., a diagnosis), and SOAK_LEAK's deliberately broken
# variant (leak_close.c preloaded) for the stacks in SOAK_LEAK_STACKS.
STACK_ENV=() LEAK_ENV=()
read -r -a STACK_ENV <<<"${SOAK_STACK_ENV:-}"
if [ -n "${SOAK_LEAK:-}" ]; then
    cc -shared -fPIC -O2 -o "$SCRATCH/lib/soak-leak.so" "$SOAK_DIR/leak_close.c" -ldl
    LEAK_ENV=(LD_PRELOAD="$SCRATCH/lib/soak-leak.so")
    for l in ${SOAK_LEAK//,/ }; do
        case $l in
        fd:*) LEAK_ENV+=(SOAK_LEAK_FD_EVERY="${l#fd:}") ;;
        mem:*) LEAK_ENV+=(SOAK_LEAK_MEM_KIB="${l#mem:}") ;;
        *) echo "bad SOAK_LEAK $l" >&2; exit 2 ;;
        esac
    done
    log "LEAKING on purpose (${SOAK_LEAK_STACKS:-$STACKS}): ${LEAK_ENV[*]}"
fi
# stack_env STACK: sets ENV to the variables of STACK's process. Every
# stack runs as shipped: rknp's programs (rootlesskit's parent,
# rknp-slirp4netns) hold glibc's mmap threshold at 128 KiB themselves, so
# that libslirp's 128 KiB socket buffers stay mapped chunks instead of
# heap that glibc keeps (docs/soak.md). SOAK_SLIRP_MALLOC=heap runs the
# libslirp TCP stack (plugin-slirp) with the threshold at 32 MiB
# (GLIBC_TUNABLES; the programs leave a set one alone): the buffers come
# from the heap as they did before the programs held it, and the RSS
# climbs for minutes (31 to 130 MiB in 4 then).
SLIRP_MALLOC=""
[ "${SOAK_SLIRP_MALLOC:-}" = heap ] && SLIRP_MALLOC=GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432
stack_env() {
    ENV=()
    [ "$1" = plugin-slirp ] && [ -n "$SLIRP_MALLOC" ] && ENV+=("$SLIRP_MALLOC")
    ENV+=("${STACK_ENV[@]}")
    [ ${#LEAK_ENV[@]} -gt 0 ] && [[ " ${SOAK_LEAK_STACKS:-$STACKS} " == *" $1 "* ]] && ENV+=("${LEAK_ENV[@]}")
    return 0
}

# ports NAME ADDR TCP ECHO SINK PULL: one JSON address block
ports() { printf '"%s": "%s", "tcp": %s, "udp_echo": %s, "udp_sink": %s, "udp_pull": %s' "$@"; }

# soak_config STACK INDEX: the stack's ports and CONFIG (JSON).
soak_config() {
    local s=$1 i=$2 d=$SCRATCH/run/$1 hp hu1 hu2 hu3 rp lp lu1 lu2 lu3 vp vu1 vu2 vu3
    mkdir -p "$d/ctl" "$d/out"
    chown -R "$RKNP_TEST_USER" "$d"
    chmod 0777 "$d/out"
    hp=$(free_port 127.0.0.1) hu1=$(free_udp_port 127.0.0.1) hu2=$(free_udp_port 127.0.0.1) hu3=$(free_udp_port 127.0.0.1)
    rp=$((19000 + 10 * i))
    lp=$(free_port 127.0.0.1) lu1=$(free_udp_port 127.0.0.1) lu2=$(free_udp_port 127.0.0.1) lu3=$(free_udp_port 127.0.0.1)
    vp=$(free_port 198.18.0.1) vu1=$(free_udp_port 198.18.0.1) vu2=$(free_udp_port 198.18.0.1) vu3=$(free_udp_port 198.18.0.1)
    PORTS=(-p "127.0.0.1:$lp:8080/tcp" -p "127.0.0.1:$lu1:5353/udp" -p "127.0.0.1:$lu2:5354/udp"
        -p "127.0.0.1:$lu3:5355/udp" -p "198.18.0.1:$vp:8080/tcp" -p "198.18.0.1:$vu1:5353/udp"
        -p "198.18.0.1:$vu2:5354/udp" -p "198.18.0.1:$vu3:5355/udp")
    cat >"$d/config.json" <<EOF
{"stack": "$s", "ctl": "$d/ctl", "out": "$d/out",
 "load": {"bulk_rate": ${SOAK_BULK_RATE:-2000000}, "bulk_max": ${SOAK_BULK_MAX:-8388608},
          "short_rate": ${SOAK_SHORT_RATE:-10}, "holds": ${SOAK_HOLDS:-6},
          "hold_max_ms": ${SOAK_HOLD_MAX_MS:-100000}, "kill_every": ${SOAK_KILL_EVERY:-4},
          "udp_rr_flows": 4, "udp_rr_rate": ${SOAK_UDP_RR_RATE:-40},
          "udp_burst": ${SOAK_UDP_BURST:-64}, "udp_burst_every": ${SOAK_UDP_BURST_EVERY:-2},
          "udp_pull_every": ${SOAK_UDP_PULL_EVERY:-1}, "ping_rate": ${SOAK_PING_RATE:-2}},
 "nodes": {
  "host": {"servers": {$(ports bind 127.0.0.1 "$hp" "$hu1" "$hu2" "$hu3")},
           "clients": [{"label": "fwd_lo", $(ports addr 127.0.0.1 "$lp" "$lu1" "$lu2" "$lu3")}]},
  "remote": {"servers": {$(ports bind 198.18.0.2 "$rp" $((rp + 1)) $((rp + 2)) $((rp + 3)))},
             "clients": [{"label": "fwd_veth", $(ports addr 198.18.0.1 "$vp" "$vu1" "$vu2" "$vu3")}]},
  "guest-fwd": {"servers": {$(ports bind 0.0.0.0 8080 5353 5354 5355)}},
  "guest-gw": {"clients": [{"label": "gw", $(ports addr 10.0.2.2 "$hp" "$hu1" "$hu2" "$hu3")}]},
  "guest-veth": {"clients": [{"label": "veth", $(ports addr 198.18.0.2 "$rp" $((rp + 1)) $((rp + 2)) $((rp + 3)))}]},
  "guest-misc": {"ping": [$PING_TARGETS],
                 "dns": {"server": "10.0.2.3", "name": "$DNS_NAME", "ip": "$DNS_IP", "rate": ${SOAK_DNS_RATE:-5}}}
 }}
EOF
}

# wait_files SECONDS FILE...: until every FILE exists; fails naming those
# still missing.
wait_files() {
    local secs=$1 f missing
    shift
    for _ in $(seq $((secs * 5))); do
        missing=()
        for f in "$@"; do [ -e "$f" ] || missing+=("$f"); done
        [ ${#missing[@]} = 0 ] && return 0
        sleep 0.2
    done
    echo "still missing after $secs s: ${missing[*]}" >&2
    return 1
}

NODES="host remote guest-fwd guest-gw guest-veth guest-misc"
node_files() { # STACK SUFFIX
    local n
    for n in $NODES; do echo "$SCRATCH/run/$1/out/$n.$2"; done
}

# start_stack STACK INDEX: the host-side nodes, then rootlesskit running
# the guest nodes; sets LAUNCHER[STACK].
declare -A LAUNCHER STACK_PID CHILD_PID
start_stack() {
    local s=$1 d=$SCRATCH/run/$1 ARGV net=() env=() bin=$S4N ENV
    soak_config "$s" "$2"
    "$PY" "$TRAFFIC" node "$d/config.json" host >"$SCRATCH/logs/host.$s.log" 2>&1 &
    track_bg $!
    ip netns exec "$NETNS_HOST" "$PY" "$TRAFFIC" node "$d/config.json" remote >"$SCRATCH/logs/remote.$s.log" 2>&1 &
    track_bg $!
    stack_env "$s"
    [ ${#ENV[@]} = 0 ] || env=(env "${ENV[@]}")
    case $s in
    plugin) net=("$RK" --net=plugin --net-plugin="$LIB" --port-driver=plugin) ;;
    plugin-slirp) net=("$RK" --net=plugin --net-plugin="$LIB" --plugin-tcp=slirp --port-driver=plugin) ;;
    s4n)
        if [ ${#ENV[@]} -gt 0 ]; then # rootlesskit runs the binary: a wrapper sets ENV
            bin=$SCRATCH/bin/s4n-env
            printf '#!/bin/sh\nexec env %s %s "$@"\n' "${ENV[*]}" "$S4N" >"$bin"
            chmod 0755 "$bin"
            env=()
        fi
        net=(/usr/bin/rootlesskit --net=slirp4netns --slirp4netns-binary="$bin"
            --slirp4netns-sandbox=auto --slirp4netns-seccomp=auto --port-driver=slirp4netns) ;;
    esac
    # rootlesskit as the test user, in a mount namespace whose
    # /etc/resolv.conf names the test's DNS server (the stack forwards
    # 10.0.2.3 there), bounded by the run's own bound.
    local USER_TIMEOUT=$((DURATION + 540))
    user_argv "${env[@]}" "${net[@]}" --copy-up=/etc --state-dir="$d/state" "${PORTS[@]}" -- \
        "$PY" "$TRAFFIC" guest "$d/config.json"
    # shellcheck disable=SC2016 # $0 and $@ are sh's
    unshare -m --propagation private sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' \
        "$SCRATCH/resolv.conf" "${ARGV[@]}" >"$SCRATCH/logs/rk.$s.log" 2>&1 &
    LAUNCHER[$s]=$!
    track_bg $!
}

# snapshot_stable STACK FILE: the stack's process's fds and sockets once
# two snapshots taken 2 s apart agree (at most 30 s).
snapshot_stable() {
    local a b
    a=$("$PY" "$PROCSTAT" snapshot "${STACK_PID[$1]}" --compared)
    for _ in $(seq 15); do
        sleep 2
        b=$("$PY" "$PROCSTAT" snapshot "${STACK_PID[$1]}" --compared)
        [ "$a" = "$b" ] && break
        a=$b
    done
    echo "$b" >"$2"
}

stacks_alive() {
    local s ok=0
    for s in $STACKS; do
        kill -0 "${STACK_PID[$s]}" 2>/dev/null || { echo "stack $s (pid ${STACK_PID[$s]}) ended early:"; tail -n 20 "$SCRATCH/logs/rk.$s.log"; ok=1; }
    done
    return $ok
}

touch_all() { local s; for s in $STACKS; do touch "$SCRATCH/run/$s/ctl/$1"; done; }
all_files() { local s; for s in $STACKS; do node_files "$s" "$1"; done; }

i=0
for s in $STACKS; do
    start_stack "$s" $i
    i=$((i + 1))
done
mapfile -t ready < <(all_files ready)
wait_files 60 "${ready[@]}" || { stacks_alive || true; exit 1; }
for s in $STACKS; do
    exe=$RK
    [ "$s" = s4n ] && exe=$S4N
    STACK_PID[$s]=$("$PY" "$PROCSTAT" find "${LAUNCHER[$s]}" "$exe")
    CHILD_PID[$s]=$(cat "$SCRATCH/run/$s/state/child_pid")
    log "stack $s: process ${STACK_PID[$s]} ($(basename "$exe")), guest netns of ${CHILD_PID[$s]}"
    "$PY" "$PROCSTAT" sample "${STACK_PID[$s]}" "${CHILD_PID[$s]}" "$OUT/samples-$s.csv" \
        "$SCRATCH/run/$s/ctl" "$INTERVAL" 2>"$SCRATCH/logs/sampler.$s.log" &
    track_bg $!
done
for s in $STACKS; do snapshot_stable "$s" "$SCRATCH/run/$s/baseline0.json"; done
touch_all pool
mapfile -t ready < <(all_files pool-ready)
wait_files 60 "${ready[@]}"
for s in $STACKS; do
    snapshot_stable "$s" "$SCRATCH/run/$s/baseline1.json"
    log "stack $s: baseline 0 $(cat "$SCRATCH/run/$s/baseline0.json")"
    log "stack $s: baseline 1 $(cat "$SCRATCH/run/$s/baseline1.json")"
done

# The traffic runs until the time left is what finishing the transfers,
# the drains and the report usually take (45 s: the churn's unanswered UDP
# flows expire after 30 s; 190 s more for a full drain); the bounds
# (SOAK_DRAIN, 150 s for the transfers) may take the run past --duration.
tail_s=45
[ "$FULL_DRAIN" = 1 ] && tail_s=$((tail_s + 190))
traffic_s=$((DURATION - (SECONDS - T0) - tail_s))
[ "$traffic_s" -ge 60 ] || { echo "--duration $DURATION leaves $traffic_s s of traffic (60 at least)" >&2; exit 2; }
touch_all churn
T_CHURN=$SECONDS
log "traffic for $traffic_s s (setup took $((T_CHURN - T0)) s)"
early=0
while [ $((SECONDS - T_CHURN)) -lt "$traffic_s" ]; do
    stacks_alive || { early=1; break; }
    sleep 5
done
touch_all stop-churn
T_STOP=$SECONDS
mapfile -t done_files < <(all_files churn-done)
wait_files 150 "${done_files[@]}" || early=1
T_CHURN_DONE=$SECONDS
log "churn stopped, transfers finished $((T_CHURN_DONE - T_STOP)) s after stop-churn"
pids=()
for s in $STACKS; do
    "$PY" "$PROCSTAT" wait-equal "${STACK_PID[$s]}" "$SCRATCH/run/$s/baseline1.json" "$DRAIN" \
        "$SCRATCH/run/$s/drain1.json" >"$SCRATCH/logs/drain1.$s.log" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
touch_all stop-pool
mapfile -t done_files < <(all_files "done")
wait_files 60 "${done_files[@]}" || true
if [ "$FULL_DRAIN" = 1 ]; then
    pids=()
    for s in $STACKS; do
        "$PY" "$PROCSTAT" wait-equal "${STACK_PID[$s]}" "$SCRATCH/run/$s/baseline0.json" "$FULL_DRAIN_S" \
            "$SCRATCH/run/$s/drain0.json" >"$SCRATCH/logs/drain0.$s.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
fi
touch_all end
touch_all exit
declare -A RK_RC
for s in $STACKS; do
    rc=0
    for _ in $(seq 150); do kill -0 "${LAUNCHER[$s]}" 2>/dev/null || break; sleep 0.2; done
    wait "${LAUNCHER[$s]}" || rc=$?
    RK_RC[$s]=$rc
done

# Results: the stacks' samples are in OUT already; the rest joins them.
for s in $STACKS; do
    rm -rf "${OUT:?}/$s"
    mkdir -p "$OUT/$s"
    cp "$SCRATCH/run/$s"/*.json "$SCRATCH/run/$s/out"/*.json "$OUT/$s/" 2>/dev/null || true
    cp "$SCRATCH/logs/rk.$s.log" "$SCRATCH/logs/host.$s.log" "$SCRATCH/logs/remote.$s.log" "$OUT/$s/"
done
cat >"$OUT/meta.json" <<EOF
{"duration_s": $DURATION, "stacks": "$STACKS", "interval_s": $INTERVAL,
 "setup_s": $((T_CHURN - T0)), "traffic_s": $((T_STOP - T_CHURN)), "planned_traffic_s": $traffic_s,
 "churn_done_s": $((T_CHURN_DONE - T_STOP)), "drain_bound_s": $DRAIN,
 "full_drain": $FULL_DRAIN, "full_drain_bound_s": $FULL_DRAIN_S, "early_end": $early,
 "ping": "$PING_NOTE", "leak": "${SOAK_LEAK:-}", "stack_env": "${SOAK_STACK_ENV:-}", "slirp_malloc": "$SLIRP_MALLOC",
 "exit": {$(for s in $STACKS; do printf '"%s": %s, ' "$s" "${RK_RC[$s]}"; done | sed 's/, $//')},
 "command": "tests/soak/run.sh ${ARGS[*]}",
 "rootlesskit": "$("$RK" --version | head -n1)", "stock_rootlesskit": "$(/usr/bin/rootlesskit --version)",
 "rknp_slirp4netns": "$("$S4N" --version | head -n1)", "kernel": "$(uname -r)"}
EOF
rc=0
"$PY" "$SOAK_DIR/report.py" "$OUT" | tee "$OUT/summary.txt" || rc=1
if [ -n "$PLOT" ]; then
    "$PY" "$SOAK_DIR/plot.py" "$OUT" "$OUT/soak.png" || log "no plot (python3-matplotlib?)"
fi
stop_background
check_leftovers || rc=1
[ "$FAILURES" = 0 ] || rc=1
log "soak: $((SECONDS - T0)) s in all; results in $OUT"
exit $rc
