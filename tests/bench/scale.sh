#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# Scale benchmark (issue 38, part 4; not in the test command): many TCP
# flows through one stack at once, and what each costs in memory.
#   active: N flows (default 10,000) from the guest to a server on the
#       host's loopback (the gateway), every flow a 64-byte echo round
#       after round for SECONDS: exchanges a second, p50/p99.
#   idle:   N flows (default 100,000) opened and held, --plugin-max-flows
#       raised above N, rootlesskit's fd limit above 2 N.
# For each, through this build's rootlesskit --net=plugin and --net=
# slirp4netns (/usr/bin/slirp4netns), and the host kernel alone (the same
# clients on the host, no stack): the stack process's RSS growth per flow
# (KiB; rknp sizes its flow tables at start for --plugin-max-flows, so its
# growth is small and its whole RSS over N, the next column, is the bound)
# and the kernel's (Slab + TCP buffer pages, /proc/meminfo and
# /proc/net/sockstat; the whole machine's, so other load is noise: run it
# on a quiet machine). Traffic stays on loopback. Without CAP_SYS_RESOURCE
# the fd limit cannot be raised past the hard one: N stops there.
#
#   sudo tests/bench/scale.sh                       # 10,000 active, 100,000 idle
#   sudo tests/bench/scale.sh --active 200 --idle 1000 --seconds 5   # a small run
#   options: --drivers "plugin slirp4netns kernel", --out FILE (the table, appended)
#
# Needs $BUILD_DIR/bin/rootlesskit, lib/librknp.so.1, /usr/bin/slirp4netns,
# uidmap, util-linux (prlimit), python3. Run under flock /tmp/rknp-e2e.lock
# when other suites share the machine.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$REPO/build}
# shellcheck source=tests/lib/common.sh
. "$BENCH_DIR/../lib/common.sh"

ACTIVE=10000 IDLE=100000 SECONDS_ACTIVE=20 DRIVERS="plugin slirp4netns kernel" OUT=""
while [ $# -gt 0 ]; do
    case $1 in
    --active) ACTIVE=$2; shift 2 ;;
    --idle) IDLE=$2; shift 2 ;;
    --seconds) SECONDS_ACTIVE=$2; shift 2 ;;
    --drivers) DRIVERS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "run as root (creates a user and namespaces)" >&2; exit 1; }
for f in "$BUILD_DIR/bin/rootlesskit" "$BUILD_DIR/lib/librknp.so.1"; do
    [ -e "$f" ] || { echo "missing $f (build first)" >&2; exit 1; }
done

HARD_NOFILE=$(ulimit -Hn)
[ "$HARD_NOFILE" = unlimited ] && HARD_NOFILE=1048576
make_scratch scale
trap 'end_run; rm -rf "$SCRATCH"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$SCRATCH"/{bin,lib,tmp}
install -m 0755 "$BUILD_DIR/bin/rootlesskit" "$SCRATCH/bin/rootlesskit"
install -m 0755 "$(readlink -f "$BUILD_DIR/lib/librknp.so.1")" "$SCRATCH/lib/librknp.so.1"
install -m 0755 "$BENCH_DIR/scale_flows.py" "$SCRATCH/bin/scale_flows.py"
setup_test_user
chown "$RKNP_TEST_USER" "$SCRATCH/tmp"
USER_TMPDIR=$SCRATCH/tmp
FLOWS=$SCRATCH/bin/scale_flows.py

kernel_kib() { # Slab plus TCP's buffer pages, KiB
    local slab pages
    slab=$(awk '/^Slab:/ {print $2}' /proc/meminfo)
    pages=$(awk '/^TCP:/ {for (i = 1; i < NF; i++) if ($i == "mem") print $(i + 1)}' /proc/net/sockstat)
    echo $((slab + pages * 4))
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
per_flow() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.2f", (b - a) / n }'; }

# measure DRIVER MODE N: one line of the table.
measure() {
    local drv=$1 mode=$2 n=$3 ports=() i nports nof go log spid rk=0 stack=0 r0=0 k0 r1=0 k1 r peak=0 line ARGV
    nports=$((n / 20000 + 1))
    for ((i = 0; i < nports; i++)); do ports+=("$(free_port 127.0.0.1)"); done
    # Each side needs an fd per flow (the stack one per flow too). Without
    # CAP_SYS_RESOURCE the hard limit cannot be raised: ask for no more.
    nof=$((2 * n + 8192))
    ((nof <= HARD_NOFILE)) || nof=$HARD_NOFILE
    if ((n + 1024 > nof)); then
        echo "$drv $mode: $n flows need about $((n + 1024)) fds in one process;" \
            "this machine's hard limit is $HARD_NOFILE (raising it needs CAP_SYS_RESOURCE)"
        return 1
    fi
    go=$SCRATCH/tmp/go-$drv-$mode log=$SCRATCH/tmp/clients-$drv-$mode.log
    rm -f "$go"
    prlimit --nofile="$nof:$nof" "$PY" "$FLOWS" server "${ports[@]}" >"$SCRATCH/logs/server-$drv-$mode.log" 2>&1 &
    spid=$!
    track_bg "$spid"
    wait_tcp 127.0.0.1 "${ports[0]}"
    local plist
    plist=$(IFS=,; echo "${ports[*]}")
    case $drv in
    kernel)
        prlimit --nofile="$nof:$nof" "$PY" "$FLOWS" clients 127.0.0.1 "$plist" "$n" "$mode" "$SECONDS_ACTIVE" "$go" >"$log" 2>&1 &
        rk=$!
        ;;
    plugin | slirp4netns)
        local net=(--net=slirp4netns)
        [ "$drv" = plugin ] && net=(--net=plugin "--net-plugin=$SCRATCH/lib/librknp.so.1"
            "--plugin-max-flows=$((n + 1024))" --plugin-max-new-flows-per-sec=1000000)
        USER_TIMEOUT=$((SECONDS_ACTIVE + 900)) user_argv "$SCRATCH/bin/rootlesskit" "${net[@]}" \
            --copy-up=/etc --state-dir="$SCRATCH/tmp/state-$drv-$mode" -- \
            "$PY" "$FLOWS" clients 10.0.2.2 "$plist" "$n" "$mode" "$SECONDS_ACTIVE" "$go"
        prlimit --nofile="$nof:$nof" "${ARGV[@]}" >"$log" 2>&1 &
        rk=$!
        for _ in $(seq 100); do
            stack=$(pgrep -P "$rk" -x rootlesskit | head -n1 || true)
            [ -n "$stack" ] && [ -e "$SCRATCH/tmp/state-$drv-$mode/child_pid" ] && break
            sleep 0.1
        done
        [ "$drv" = slirp4netns ] && stack=$(pgrep -P "$stack" -x slirp4netns | head -n1)
        ;;
    esac
    sleep 2 # the stack settles before the baseline
    [ "$stack" != 0 ] && r0=$(rss_kib "$stack")
    k0=$(kernel_kib)
    touch "$go"
    for _ in $(seq 6000); do
        grep -q "^open " "$log" && break
        kill -0 "$rk" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "^open " "$log" || { echo "$drv $mode: the flows did not open:"; tail -n 5 "$log"; return 1; }
    # Sampled while they live: the highest RSS, the kernel's at the middle.
    sleep 1
    k1=$(kernel_kib)
    while kill -0 "$rk" 2>/dev/null && ! grep -q "^done" "$log"; do
        if [ "$stack" != 0 ]; then
            r=$(rss_kib "$stack")
            ((r > peak)) && peak=$r
        fi
        sleep 0.5
    done
    wait "$rk" || true
    kill "$spid" 2>/dev/null || true
    r1=$peak
    line="| $drv | $mode | $n | $(grep -m1 '^open' "$log" | sed 's/^open [0-9]* in //') |"
    if [ "$stack" != 0 ]; then
        line+=" $r0 → $r1 | $(per_flow "$r0" "$r1" "$n") | $(per_flow 0 "$r1" "$n") |"
    else
        line+=" – | – | – |"
    fi
    line+=" $(per_flow "$k0" "$k1" "$n") | $(grep -m1 '^active' "$log" | sed 's/^active //' || echo –) |"
    echo "$line"
    [ -n "$OUT" ] && echo "$line" >>"$OUT"
    if [ "$mode" = active ] && ! grep -q '^active' "$log"; then
        echo "$drv active: no round ended:"; tail -n 3 "$log"
    fi
    return 0
}

header="| stack | flows | N | opened in | stack RSS KiB | stack KiB/flow | stack RSS/N KiB | kernel KiB/flow | echo rounds |
|---|---|---|---|---|---|---|---|---|"
echo "# $(date -u +%F\ %H:%M) $(uname -r), $(nproc) CPUs; active $ACTIVE for $SECONDS_ACTIVE s, idle $IDLE"
echo "$header"
[ -n "$OUT" ] && { echo "# $(date -u +%F\ %H:%M) active $ACTIVE, idle $IDLE"; echo "$header"; } >>"$OUT"
rc=0
for d in $DRIVERS; do
    measure "$d" active "$ACTIVE" || rc=1
    measure "$d" idle "$IDLE" || rc=1
done
stop_background
exit "$rc"
