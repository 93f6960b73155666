#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# The WAN test bed: a test host in a network namespace of its own, reached
# from the host's network namespace over an emulated wide-area link with a
# one-way delay, a loss rate and reordering. Used by tests/bench/wan.sh;
# sourceable (wan_bed_up / wan_bed_down / wan_bed_sysctls_debian /
# wan_bed_sysctls_restore), and a small CLI:
#
#   wan_bed.sh up [--id N] [--delay-ms D] [--loss PERCENT] [--reorder PERCENT]
#                 [--seed S] [--mtu M] [--engine auto|delay-line|netem]
#                 [--debian-sysctls] [--client-netns NS]
#   wan_bed.sh down [--id N]
#   wan_bed.sh run [up options] -- CMD...   (up, CMD, down, even on failure)
#   wan_bed.sh status [--id N]
#   wan_bed.sh reseed [--id N]   (the delay line's draws start again from
#                                 the seed: runs meet the same losses)
#
# Layout for bed N (0..255; several beds can coexist):
#   netns rkwanN-th (the test host), address 198.19.N.2/24, default route
#   via 198.19.N.1; the host's end 198.19.N.1/24 in the caller's netns, or
#   in the existing netns NS with --client-netns NS (e.g. to measure the
#   bed itself with buffers that must not touch the caller's netns).
#   198.19.0.0/16 is in the benchmarking range (RFC 2544), used by nothing
#   else in this project. Link MTU 1500 unless --mtu.
# Engines: "netem" (a veth pair with a netem qdisc on each end) when the
# kernel has sch_netem, else "delay-line": two taps rkwanNa (host's end)
# and rkwanNb (moved into the test host's netns after the delay line
# opened it) joined by build/bin/rknp-delay-line (tests/lib/delay_line.c),
# whose threads run SCHED_FIFO where allowed (WAN_BED.md, "Scheduling").
# With loss or reordering the delay line turns the taps' offloads off, so
# --loss is per MTU-sized packet (netem: TSO/GSO are turned off on the
# veths for the same reason, if ethtool is there).
#
# --debian-sysctls sets Debian's default socket sysctls for the run
# (net.core.rmem_max/wmem_max 212992, tcp_rmem 4096 131072 6291456,
# tcp_wmem 4096 16384 4194304, cubic) in the caller's netns and the test
# host's; `down` restores the saved values (the initial netns's once no
# other bed holds them). net.core.*mem_max are global (not per netns):
# other tests running meanwhile see them too.
#
# Runs as root. Traffic goes only between the caller's netns and the
# namespace this script creates.

WAN_BED_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WAN_BED_REPO=$(cd "$WAN_BED_LIB/../.." && pwd)
WAN_DELAY_LINE=${WAN_DELAY_LINE:-$WAN_BED_REPO/build/bin/rknp-delay-line}

# wan_bed_names N: sets the names and addresses of bed N.
wan_bed_names() {
    local id=$1
    if ! [[ $id =~ ^[0-9]+$ ]] || [ "$id" -gt 255 ]; then
        echo "wan_bed: bed id must be 0..255, not '$id'" >&2
        return 1
    fi
    WAN_BED_ID=$id
    WAN_NETNS=rkwan$id-th
    WAN_DEV_HOST=rkwan${id}a
    WAN_DEV_TEST=rkwan${id}b
    WAN_HOST_ADDR=198.19.$id.1
    WAN_TEST_HOST=198.19.$id.2
    WAN_STATE=/run/rknp-wan-bed-$id
}

# wan_bed_client NS_COMMAND...: runs it in the host's end's netns (the
# caller's, or --client-netns's).
wan_bed_client() {
    local client
    client=$(cat "$WAN_STATE/client-netns" 2>/dev/null || true)
    if [ -n "$client" ]; then ip netns exec "$client" "$@"; else "$@"; fi
}

wan_bed_client_ip() {
    local client
    client=$(cat "$WAN_STATE/client-netns" 2>/dev/null || true)
    if [ -n "$client" ]; then ip -n "$client" "$@"; else ip "$@"; fi
}

# wan_bed_netem_works: whether `tc ... netem` is available (probed in a
# scratch namespace, on a dummy device).
wan_bed_netem_works() {
    local probe=rkwan-probe-$$ ok=1
    ip netns add "$probe" || return 1
    if ip -n "$probe" link add rkwanprobe type dummy 2>/dev/null &&
        tc -n "$probe" qdisc add dev rkwanprobe root netem delay 1ms 2>/dev/null; then
        ok=0
    fi
    ip netns del "$probe"
    return $ok
}

# The socket sysctls of a Debian install (the machine's own may be tuned).
WAN_DEBIAN_SYSCTLS=(
    "net.core.rmem_max=212992"
    "net.core.wmem_max=212992"
    "net.ipv4.tcp_rmem=4096 131072 6291456"
    "net.ipv4.tcp_wmem=4096 16384 4194304"
    "net.ipv4.tcp_congestion_control=cubic"
)

# wan_bed_sysctl ARGS... KEY[=VALUE]: sysctl in the host's end's netns;
# net.core.* only exist for writing in the initial netns (they are
# global), so those go to the caller's.
wan_bed_sysctl() {
    local key=${*: -1}
    if [[ $key == net.core.* ]]; then sysctl "$@"; else wan_bed_client sysctl "$@"; fi
}

# The initial netns's values (net.core.* are global, and the host's end
# is usually there) are shared by every bed that sets Debian's: the first
# one saves the originals, each bed is a holder, the last one to go puts
# the originals back. So beds (of this or another session) can come and go
# in any order without one saving another's Debian values as "originals".
WAN_SYSCTL_SHARED=/run/rknp-wan-sysctls

wan_bed_sysctl_lock() {
    mkdir -p "$WAN_SYSCTL_SHARED/holders"
    exec {WAN_SYSCTL_LOCK_FD}>"$WAN_SYSCTL_SHARED/lock"
    flock "$WAN_SYSCTL_LOCK_FD"
}

wan_bed_sysctl_unlock() {
    exec {WAN_SYSCTL_LOCK_FD}>&-
}

# wan_bed_sysctls_debian: sets Debian's socket sysctls in the host's end's
# netns and, if it exists, the test host's, saving what they replace:
# the initial netns's values in $WAN_SYSCTL_SHARED (first holder only), a
# --client-netns's tcp_* in $WAN_STATE/sysctls.
wan_bed_sysctls_debian() {
    local entry key client
    client=$(cat "$WAN_STATE/client-netns" 2>/dev/null || true)
    mkdir -p "$WAN_STATE"
    wan_bed_sysctl_lock
    if [ -z "$(ls -A "$WAN_SYSCTL_SHARED/holders")" ]; then
        for entry in "${WAN_DEBIAN_SYSCTLS[@]}"; do
            key=${entry%%=*}
            printf '%s=%s\n' "$key" "$(sysctl -n "$key" | tr '\t' ' ')"
        done >"$WAN_SYSCTL_SHARED/saved.tmp"
        mv "$WAN_SYSCTL_SHARED/saved.tmp" "$WAN_SYSCTL_SHARED/saved"
    fi
    touch "$WAN_SYSCTL_SHARED/holders/$WAN_BED_ID"
    if [ -n "$client" ] && [ ! -s "$WAN_STATE/sysctls" ]; then
        for entry in "${WAN_DEBIAN_SYSCTLS[@]}"; do
            key=${entry%%=*}
            [[ $key == net.core.* ]] && continue
            printf '%s=%s\n' "$key" "$(ip netns exec "$client" sysctl -n "$key" | tr '\t' ' ')"
        done >"$WAN_STATE/sysctls"
    fi
    for entry in "${WAN_DEBIAN_SYSCTLS[@]}"; do
        wan_bed_sysctl -q -w "$entry"
        if [ -e "/run/netns/$WAN_NETNS" ] && [[ $entry != net.core.* ]]; then
            ip netns exec "$WAN_NETNS" sysctl -q -w "$entry"
        fi
    done
    wan_bed_sysctl_unlock
}

# wan_bed_sysctls_restore: undoes wan_bed_sysctls_debian for this bed
# (the initial netns's values only when no other bed holds them).
wan_bed_sysctls_restore() {
    local line
    if [ -s "$WAN_STATE/sysctls" ]; then
        while IFS= read -r line; do
            wan_bed_client sysctl -q -w "$line" || true
        done <"$WAN_STATE/sysctls"
        rm -f "$WAN_STATE/sysctls"
    fi
    [ -e "$WAN_SYSCTL_SHARED/holders/$WAN_BED_ID" ] || return 0
    wan_bed_sysctl_lock
    rm -f "$WAN_SYSCTL_SHARED/holders/$WAN_BED_ID"
    if [ -z "$(ls -A "$WAN_SYSCTL_SHARED/holders")" ] && [ -s "$WAN_SYSCTL_SHARED/saved" ]; then
        while IFS= read -r line; do
            sysctl -q -w "$line"
        done <"$WAN_SYSCTL_SHARED/saved"
        rm -f "$WAN_SYSCTL_SHARED/saved"
    fi
    wan_bed_sysctl_unlock
}

# wan_bed_up [options]: builds bed $WAN_BED_ID (see the header).
wan_bed_up() {
    local delay_ms=0 loss=0 reorder=0 seed=1 mtu=1500 engine=auto debian=0 client=
    while [ $# -gt 0 ]; do
        case $1 in
            --id) wan_bed_names "$2" || return 1; shift 2 ;;
            --delay-ms) delay_ms=$2; shift 2 ;;
            --loss) loss=$2; shift 2 ;;
            --reorder) reorder=$2; shift 2 ;;
            --seed) seed=$2; shift 2 ;;
            --mtu) mtu=$2; shift 2 ;;
            --engine) engine=$2; shift 2 ;;
            --debian-sysctls) debian=1; shift ;;
            --client-netns) client=$2; shift 2 ;;
            *) echo "wan_bed_up: unknown option $1" >&2; return 1 ;;
        esac
    done
    [ -n "${WAN_NETNS:-}" ] || wan_bed_names 0
    if [ -e "/run/netns/$WAN_NETNS" ]; then
        echo "wan_bed_up: bed $WAN_BED_ID is up already (wan_bed.sh down --id $WAN_BED_ID)" >&2
        return 1
    fi
    if [ "$engine" = auto ]; then
        if wan_bed_netem_works; then engine=netem; else engine=delay-line; fi
    fi
    mkdir -p "$WAN_STATE"
    echo "$engine" >"$WAN_STATE/engine"
    echo "$client" >"$WAN_STATE/client-netns"
    ip netns add "$WAN_NETNS"
    ip -n "$WAN_NETNS" link set lo up
    case $engine in
        netem) ip link add "$WAN_DEV_HOST" type veth peer name "$WAN_DEV_TEST" netns "$WAN_NETNS" ;;
        delay-line) wan_bed_up_delay_line "$delay_ms" "$loss" "$reorder" "$seed" || return 1 ;;
        *) echo "wan_bed_up: unknown engine $engine" >&2; return 1 ;;
    esac
    if [ -n "$client" ]; then ip link set "$WAN_DEV_HOST" netns "$client"; fi
    # After the move: moving a device drops its qdiscs.
    if [ "$engine" = netem ]; then wan_bed_netem_qdiscs "$delay_ms" "$loss" "$reorder"; fi
    wan_bed_client_ip link set "$WAN_DEV_HOST" mtu "$mtu" up
    wan_bed_client_ip addr add "$WAN_HOST_ADDR/24" dev "$WAN_DEV_HOST"
    ip -n "$WAN_NETNS" link set "$WAN_DEV_TEST" mtu "$mtu" up
    ip -n "$WAN_NETNS" addr add "$WAN_TEST_HOST/24" dev "$WAN_DEV_TEST"
    ip -n "$WAN_NETNS" route add default via "$WAN_HOST_ADDR"
    if [ "$debian" = 1 ]; then wan_bed_sysctls_debian; fi
    local how=$engine
    # The line's scheduling (WAN_BED.md, "Scheduling"): the last field of
    # its start-up line, e.g. "SCHED_FIFO 10".
    if [ "$engine" = delay-line ]; then
        how+=", $(sed -n '1s/.*, //p' "$WAN_STATE/delay-line.log")"
    fi
    echo "wan bed $WAN_BED_ID up ($how): test host $WAN_TEST_HOST in netns $WAN_NETNS," \
        "host's end $WAN_HOST_ADDR, ${delay_ms} ms each way, loss ${loss}%, reorder ${reorder}%, MTU $mtu" >&2
}

wan_bed_up_delay_line() {
    local delay_ms=$1 loss=$2 reorder=$3 seed=$4 pid
    if [ ! -x "$WAN_DELAY_LINE" ]; then
        echo "wan_bed_up: $WAN_DELAY_LINE missing (cmake --build build --target rknp-delay-line)" >&2
        return 1
    fi
    ip tuntap add mode tap name "$WAN_DEV_HOST"
    ip tuntap add mode tap name "$WAN_DEV_TEST"
    rm -f "$WAN_STATE/ready"
    # setsid: the line outlives a CLI `up` and is not hit by the
    # caller's Ctrl-C; `down` ends it by its recorded pid.
    setsid "$WAN_DELAY_LINE" --tap-a "$WAN_DEV_HOST" --tap-b "$WAN_DEV_TEST" \
        --delay-ms "$delay_ms" --loss "$loss" --reorder "$reorder" --seed "$seed" \
        --ready-file "$WAN_STATE/ready" </dev/null >"$WAN_STATE/delay-line.log" 2>&1 &
    pid=$!
    echo "$pid" >"$WAN_STATE/delay-line.pid"
    for _ in $(seq 100); do
        [ -s "$WAN_STATE/ready" ] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$WAN_STATE/delay-line.log" >&2
            return 1
        fi
        sleep 0.05
    done
    [ -s "$WAN_STATE/ready" ] || { echo "wan_bed_up: delay line not ready" >&2; return 1; }
    # The open fd stays attached across the move.
    ip link set "$WAN_DEV_TEST" netns "$WAN_NETNS"
}

wan_bed_netem_qdiscs() {
    local delay_ms=$1 loss=$2 reorder=$3 args
    args=(delay "${delay_ms}ms" limit 100000)
    if [ "$loss" != 0 ]; then args+=(loss "$loss%"); fi
    if [ "$reorder" != 0 ]; then args+=(reorder "$reorder%" gap 1); fi
    wan_bed_client tc qdisc add dev "$WAN_DEV_HOST" root netem "${args[@]}"
    tc -n "$WAN_NETNS" qdisc add dev "$WAN_DEV_TEST" root netem "${args[@]}"
    if [ "$loss" != 0 ] || [ "$reorder" != 0 ]; then
        if command -v ethtool >/dev/null; then
            wan_bed_client ethtool -K "$WAN_DEV_HOST" tso off gso off >/dev/null
            ip netns exec "$WAN_NETNS" ethtool -K "$WAN_DEV_TEST" tso off gso off >/dev/null
        else
            echo "wan_bed_up: no ethtool: netem loss applies to GSO super-frames" >&2
        fi
    fi
}

# wan_bed_reseed: the delay line draws its losses and reorderings from the
# seed again (SIGUSR2), so that the next run meets the same ones as the
# previous; fails where the bed has no delay line of ours (netem draws its
# own).
wan_bed_reseed() {
    [ -n "${WAN_NETNS:-}" ] || wan_bed_names 0
    local pid_file=$WAN_STATE/delay-line.pid pid
    pid=$(cat "$pid_file" 2>/dev/null) || pid=
    if [ -z "$pid" ] || ! grep -qa rknp-delay-line "/proc/$pid/cmdline" 2>/dev/null; then
        echo "wan_bed_reseed: no delay line for bed $WAN_NETNS (netem, or not up)" >&2
        return 1
    fi
    kill -USR2 "$pid"
}

# wan_bed_down: ends the delay line and what runs in the test host's
# netns, removes the devices and the netns, restores saved sysctls. Safe to call twice or on a half-built bed.
wan_bed_down() {
    [ -n "${WAN_NETNS:-}" ] || wan_bed_names 0
    local pid_file=$WAN_STATE/delay-line.pid pid
    if [ -s "$pid_file" ]; then
        pid=$(cat "$pid_file")
        # Only our delay line: a reused pid runs something else.
        if grep -qa rknp-delay-line "/proc/$pid/cmdline" 2>/dev/null; then
            kill "$pid"
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            tail -n 2 "$WAN_STATE/delay-line.log" >&2 || true
        fi
        rm -f "$pid_file"
    fi
    if [ -e "/run/netns/$WAN_NETNS" ]; then
        # What still runs in the test host's netns (servers a test started
        # there) would keep it, and its device, alive: only this bed's
        # users enter it, so these are ours to end.
        local pids
        pids=$(ip netns pids "$WAN_NETNS" 2>/dev/null || true)
        if [ -n "$pids" ]; then
            # shellcheck disable=SC2086 # one pid a word
            kill $pids 2>/dev/null || true
            for _ in $(seq 30); do
                [ -z "$(ip netns pids "$WAN_NETNS" 2>/dev/null)" ] && break
                sleep 0.1
            done
        fi
        ip -n "$WAN_NETNS" link del "$WAN_DEV_TEST" 2>/dev/null || true
        ip netns del "$WAN_NETNS"
    fi
    wan_bed_client_ip link del "$WAN_DEV_HOST" 2>/dev/null || true
    wan_bed_sysctls_restore
    rm -rf "$WAN_STATE"
}

wan_bed_status() {
    [ -n "${WAN_NETNS:-}" ] || wan_bed_names 0
    if [ ! -e "/run/netns/$WAN_NETNS" ]; then
        echo "bed $WAN_BED_ID: down"
        return 0
    fi
    echo "bed $WAN_BED_ID: up ($(cat "$WAN_STATE/engine" 2>/dev/null)), test host $WAN_TEST_HOST" \
        "(netns $WAN_NETNS), host's end $WAN_HOST_ADDR"
    if [ -e "$WAN_SYSCTL_SHARED/holders/$WAN_BED_ID" ]; then
        echo "Debian sysctls set (beds holding them: $(cd "$WAN_SYSCTL_SHARED/holders" && echo *));" \
            "the initial netns's originals, restored when the last holder goes:"
        cat "$WAN_SYSCTL_SHARED/saved"
    fi
}

wan_bed_main() {
    set -euo pipefail
    local cmd=${1:-}
    shift || true
    case $cmd in
        up)
            # A half-built bed is taken down again.
            trap wan_bed_down EXIT
            wan_bed_up "$@"
            trap - EXIT
            ;;
        down | status | reseed)
            if [ "${1:-}" = --id ]; then wan_bed_names "$2"; else wan_bed_names 0; fi
            "wan_bed_$cmd"
            ;;
        run)
            local up_args=()
            while [ $# -gt 0 ] && [ "$1" != -- ]; do up_args+=("$1"); shift; done
            [ "${1:-}" = -- ] || { echo "usage: wan_bed.sh run [up options] -- CMD..." >&2; return 2; }
            shift
            wan_bed_names 0
            local i
            for ((i = 0; i < ${#up_args[@]}; i++)); do
                if [ "${up_args[i]}" = --id ]; then wan_bed_names "${up_args[i + 1]}"; fi
            done
            trap wan_bed_down EXIT
            trap 'exit 130' INT TERM
            wan_bed_up "${up_args[@]}"
            export WAN_TEST_HOST WAN_HOST_ADDR WAN_NETNS
            "$@"
            ;;
        *)
            sed -n '/^#   wan_bed.sh/,/^#   wan_bed.sh reseed/p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
            return 2
            ;;
    esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    wan_bed_main "$@"
fi
