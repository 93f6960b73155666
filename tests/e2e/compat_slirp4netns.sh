#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# End-to-end tests of rknp-slirp4netns, the slirp4netns-compatible command
# on the public rknp C ABI, behind Debian's stock rootlesskit 1.1.0
# (`--net=slirp4netns --slirp4netns-binary=PATH`) as an unprivileged user.
# Every rootlesskit case runs twice: with rknp-slirp4netns (driver label
# "plugin", as in run.sh) and with the real /usr/bin/slirp4netns 1.2.0
# ("slirp4netns", the reference: a failure there is an environment problem). The API case sends the same
# requests to both over --api-socket and diffs the replies.
#
#   sudo tests/e2e/compat_slirp4netns.sh          # BUILD_DIR (default build/)
#   S4N_CASES="api sandbox" S4N_DRIVERS=plugin sudo -E tests/e2e/compat_slirp4netns.sh
#
# Needs $BUILD_DIR/bin/rknp-slirp4netns and $BUILD_DIR/lib/librknp.so.1,
# rootlesskit, slirp4netns, uidmap, iproute2, curl, python3, util-linux
# (tests/install-deps.sh). Traffic goes only to loopback and to namespaces
# this script creates. One PASS/FAIL line per case and driver; exits
# non-zero if any failed; bounded by E2E_TIMEOUT seconds (default 900).
set -euo pipefail
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$E2E_DIR/lib.sh"
e2e_start 900 "creates a user, namespaces and a DNS server on :53" "tests/install-deps.sh; build rknp-slirp4netns first" \
    "$BUILD_DIR/bin/rknp-slirp4netns" "$BUILD_DIR/lib/librknp.so.1" /usr/bin/rootlesskit /usr/bin/slirp4netns
# shellcheck source=tests/e2e/cases.sh
. "$E2E_DIR/cases.sh" # http_disable_host_loopback, dns, cidr, mtu_*, ipv6, detach_netns (v3); same-named cases below replace its

DNS_NAME=rknp-s4n.test
DNS_IP=192.0.2.78

e2e_scratch s4n
e2e_copy_build rknp-slirp4netns
install -m 0755 "$E2E_DIR/compat_slirp4netns_helper.py" "$SCRATCH/bin/helper.py"
install -m 0755 "$E2E_DIR/reach_back_prober.py" "$SCRATCH/bin/reach_back_prober.py"
S4N=$SCRATCH/bin/rknp-slirp4netns
RK=/usr/bin/rootlesskit
HELPER=$SCRATCH/bin/helper.py

e2e_test_user
e2e_loopback_servers
log "rootlesskit: $("$RK" --version); reference: $(/usr/bin/slirp4netns --version | head -n1)"
log "rknp-slirp4netns: $("$S4N" --version | head -n2 | tr '\n' ' ')"
log "servers: 127.0.0.1:$PORT4 [::1]:$PORT6 dns $DNS_ADDR:53"

# drv_flags DRIVER (replaces lib.sh's): stock rootlesskit's slirp4netns
# network with our binary or the real one, sandbox and seccomp "auto" as
# dockerd-rootless.sh passes them (rootlesskit probes `--help` for them).
drv_flags() {
    local sb="--slirp4netns-sandbox=${S4N_SANDBOX:-auto} --slirp4netns-seccomp=${S4N_SECCOMP:-auto}"
    case $1 in
    plugin) echo "--net=slirp4netns --slirp4netns-binary=$S4N $sb" ;;
    *) echo "--net=slirp4netns $sb" ;;
    esac
}

# The driver's binary, for cases that run it directly.
drv_bin() { [ "$1" = plugin ] && echo "$S4N" || echo /usr/bin/slirp4netns; }

# 0. What rootlesskit and Podman probe: `--help` lists every option and
# exits 0; an unknown option is refused as slirp4netns refuses it.
case_cli() {
    local bin out rc=0 err
    bin=$(drv_bin "$1")
    out=$(as_user "$bin" --help)
    local o
    for o in --configure --mtu --cidr --disable-host-loopback --enable-ipv6 \
        --outbound-addr --outbound-addr6 --disable-dns --macaddress \
        --api-socket --ready-fd --exit-fd --netns-type --userns-path \
        --enable-sandbox --enable-seccomp --version --help; do
        grep -q -- "$o" <<<"$out" || { echo "--help lacks $o"; return 1; }
    done
    echo "ok --help lists every option"
    err=$(as_user "$bin" --no-such-flag 1 tap0 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 1 ] || { echo "unknown flag: exit $rc, want 1"; return 1; }
    expect "slirp4netns' wording" "^$bin: unrecognized option '--no-such-flag'\$" "$err"
    rc=0
    err=$(as_user "$bin" --mtu=70000 1 tap0 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 1 ] || { echo "bad MTU: exit $rc, want 1"; return 1; }
    expect "MTU message" "^MTU must be a positive integer \(< 65522\)\$" "$err"
    rc=0
    err=$(as_user "$bin" notapid tap0 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 1 ] || { echo "bad PID: exit $rc, want 1"; return 1; }
    expect "PID message" "^PID must be a positive integer\$" "$err"
    rc=0
    err=$(as_user "$bin" --cidr=10.0.2.100/24 1 tap0 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 1 ] || { echo "bad CIDR: exit $rc, want 1"; return 1; }
    expect "CIDR message" "^CIDR needs to be a network address" "$err"
    rc=0
    err=$(as_user "$bin" 1 tap0 2>&1 >/dev/null) || rc=$?
    [ "$rc" = 1 ] || { echo "child failure: exit $rc, want 1"; return 1; }
    expect "child failure reported as slirp4netns does" "^child failed\(1\)\$" "$err"
    if [ "$1" = plugin ]; then
        out=$(as_user "$bin" --version)
        expect "version names rknp and libslirp" "^rknp: [0-9.]+ \(libslirp [0-9.]+\)\$" "$out"
        rc=0
        err=$(as_user "$bin" --netns-type=tapfd 3 tap0 2>&1 >/dev/null) || rc=$?
        [ "$rc" = 1 ] || { echo "--netns-type=tapfd: exit $rc, want 1"; return 1; }
        expect "an unknown netns type named" '^--netns-type must be either "pid" or "path", not "tapfd"$' "$err"
    fi
}

# 1. Fetch from the host's 127.0.0.1 through the gateway 10.0.2.2.
case_http_host_loopback() { link_case "$1" tap0 10.0.2.100/24 10.0.2.2; }

# 1b. The same without sandbox and seccomp.
case_no_sandbox() {
    local out
    out=$(S4N_SANDBOX=false S4N_SECCOMP=false rk "$1" --copy-up=/etc -- sh -c "
        echo sha=\$($(fetch_sha "http://10.0.2.2:$PORT4/file"))")
    expect "fetch via 10.0.2.2" "^sha=$FILE_SHA\$" "$out"
}

# 1c. http_disable_host_loopback and 2. dns: cases.sh's; with the sandbox,
# dns also proves the sandbox keeps /etc/resolv.conf.

# 6. The command's exit status comes back through rootlesskit, and nothing
# of the network is left: no process, no state dir.
case_exit_code() {
    local rc=0
    rk "$1" --copy-up=/etc -- sh -c 'exit 7' || rc=$?
    [ "$rc" = 7 ] || { echo "exit status $rc, want 7"; return 1; }
    echo "ok exit status 7"
    local comm left
    comm=$(basename "$(drv_bin "$1")" | cut -c1-15)
    if ! left=$(run_leftovers_named "$comm"); then
        echo "left running:"; echo "$left"; return 1
    fi
    if ls -d "$SCRATCH"/tmp/rknp-slirp4netns.* 2>/dev/null; then
        echo "state dirs left behind"; return 1
    fi
    echo "ok nothing left"
}

# 7. --port-driver=slirp4netns -p: rootlesskit publishes a port through the
# API socket; a server inside on :80 serves the file to the host's
# 127.0.0.1:PORT (bytes compared).
case_port_driver() {
    local port
    port=$(free_port 127.0.0.1)
    serve_and_fetch "$1" "port.$1" "$port" 80 --copy-up=/etc \
        --port-driver=slirp4netns -p "127.0.0.1:$port:80/tcp"
}

# 8. The sandbox and seccomp rootlesskit asks for ("auto") are in force: the
# process has an almost empty root, no new privileges, seccomp filter mode,
# only CAP_NET_BIND_SERVICE, and cannot see the host's files.
case_sandbox() {
    local flag="$SCRATCH/tmp/sbx-ready-$1" done_file="$SCRATCH/tmp/sbx-done-$1" pid rkpid spid i st root
    rm -f "$flag" "$done_file"
    local ARGV
    rk_argv "$1" --copy-up=/etc -- sh -c "
        touch '$flag'
        for i in \$(seq 300); do [ -e '$done_file' ] && break; sleep 0.1; done
        echo sha=\$($(fetch_sha "http://10.0.2.2:$PORT4/file"))"
    "${ARGV[@]}" >"$SCRATCH/logs/sandbox.$1.log" 2>&1 &
    pid=$!
    for i in $(seq 100); do [ -e "$flag" ] && break; sleep 0.1; done
    # timeout -> setpriv/env/rootlesskit (exec'd) -> the network process
    # (rootlesskit may run it by its bare name: match the executable).
    rkpid=$(pgrep -P "$pid" | head -n1 || true)
    spid=""
    for i in $(pgrep -P "${rkpid:-0}" || true); do
        [ "$(readlink "/proc/$i/exe")" = "$(drv_bin "$1")" ] && spid=$i
    done
    if [ -z "$spid" ]; then
        echo "no network process under rootlesskit ${rkpid:-?}"
        touch "$done_file"
        wait "$pid" || true
        return 1
    fi
    st=$(cat "/proc/$spid/status")
    root=$(find "/proc/$spid/root/" -mindepth 1 -maxdepth 1 -printf '%f ')
    local www_visible=no
    [ -e "/proc/$spid/root$SCRATCH/www/file" ] && www_visible=yes
    touch "$done_file"
    local rc=0 out
    wait "$pid" || rc=$?
    out=$(cat "$SCRATCH/logs/sandbox.$1.log")
    echo "root of $spid: $root"
    expect "seccomp filter" "^Seccomp:[[:space:]]+2\$" "$st"
    expect "one filter or more" "^Seccomp_filters:[[:space:]]+[1-9]" "$st"
    expect "no new privileges" "^NoNewPrivs:[[:space:]]+1\$" "$st"
    expect "only CAP_NET_BIND_SERVICE" "^CapEff:[[:space:]]+0000000000000400\$" "$st"
    expect "only CAP_NET_BIND_SERVICE bounding" "^CapBnd:[[:space:]]+0000000000000400\$" "$st"
    for e in $root; do
        case $e in etc | run | tmp) ;; *) echo "unexpected /$e in the sandbox root"; return 1 ;; esac
    done
    [ "$www_visible" = no ] || { echo "host files visible in the sandbox"; return 1; }
    echo "ok host files not visible"
    expect "network still works in the sandbox" "^sha=$FILE_SHA\$" "$out"
    [ "$rc" = 0 ] || { echo "rootlesskit exit $rc"; return 1; }
}

# 9. The JSON API on --api-socket, straight to the binary (no rootlesskit):
# the same requests to slirp4netns 1.2.0 and to rknp-slirp4netns, the
# replies diffed; then requests slirp4netns itself cannot survive (rknp
# only); the process must answer and survive all, and end on SIGTERM as
# slirp4netns does (killed by it).
api_run() { # BIN OUT MODE ARGS...
    local bin=$1 out=$2 mode=$3
    shift 3
    # shellcheck disable=SC2016 # expanded by the shell inside
    as_user bash -c '
        bin=$1 out=$2 mode=$3 helper=$4 dir=$5; shift 5
        unshare -rn sleep 60 & t=$!
        for i in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        "$bin" -c -a "$dir/api.sock" "$t" tap0 >"$dir/server.log" 2>&1 & p=$!
        for i in $(seq 100); do [ -S "$dir/api.sock" ] && break; sleep 0.05; done
        python3 "$helper" api "$dir/api.sock" "$mode" "$@" >"$out"
        if kill -0 "$p" 2>/dev/null; then echo alive >>"$out"; else echo DEAD >>"$out"; fi
        kill "$p"; wait "$p"; echo "exit=$?" >>"$out"
        kill "$t"; wait "$t" 2>/dev/null || true
    ' _ "$bin" "$out" "$mode" "$HELPER" "$(dirname "$out")" "$@"
}
case_api() {
    [ "$1" = plugin ] || { echo "(compared inside the plugin run)"; return 0; }
    local d="$SCRATCH/tmp/api" pa pb busy bpid
    mkdir -p "$d/ref" "$d/rknp" "$d/extra"
    chown -R "$RKNP_TEST_USER" "$d"
    pa=$(free_port 127.0.0.1)
    pb=$(free_port 127.0.0.1)
    busy=$(free_port 127.0.0.1)
    "$PY" -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(120)' "$busy" &
    bpid=$!
    api_run /usr/bin/slirp4netns "$d/ref/out" common "$pa" "$pb" "$busy"
    api_run "$S4N" "$d/rknp/out" common "$pa" "$pb" "$busy"
    api_run "$S4N" "$d/extra/out" extra "$pa"
    kill "$bpid"
    wait "$bpid" 2>/dev/null || true
    echo "--- slirp4netns 1.2.0 replies:"
    cat "$d/ref/out"
    if ! diff -u "$d/ref/out" "$d/rknp/out"; then
        echo "replies differ from slirp4netns'"; cat "$d/rknp/server.log"; return 1
    fi
    echo "ok rknp-slirp4netns answered all $(wc -l <"$d/ref/out") lines exactly as slirp4netns"
    expect "reference: forward added" '^add_tcp	\{"return":\{"id":1\}\}$' "$(cat "$d/ref/out")"
    expect "reference: in-use port refused" '^add_busy_tcp	\{"error":\{"desc":"bad request: add_hostfwd: slirp_add_hostfwd failed"\}\}$' "$(cat "$d/ref/out")"
    expect "reference survived" "^alive\$" "$(cat "$d/ref/out")"
    expect "reference ends killed by SIGTERM" "^exit=143\$" "$(cat "$d/ref/out")"
    local x
    x=$(cat "$d/extra/out")
    echo "--- rknp only:"
    echo "$x"
    expect "missing proto (slirp4netns crashes)" '^add_missing_proto	\{"error":\{"desc":"bad request: add_hostfwd: bad arguments.proto"\}\}$' "$x"
    expect "no arguments" '^add_no_arguments	\{"error":\{"desc":"bad request: add_hostfwd: bad arguments.proto"\}\}$' "$x"
    expect "host port out of range" '^add_port_too_big	\{"error":\{"desc":"bad request: add_hostfwd: slirp_add_hostfwd failed"\}\}$' "$x"
    expect "guest port out of range" '^add_guest_port_too_big	\{"error":\{"desc":"bad request: add_hostfwd: slirp_add_hostfwd failed"\}\}$' "$x"
    expect "nothing added" '^list	\{"entries":\[\]\}$' "$x"
    expect "300 random requests each answered with a JSON object" '^fuzz	0 malformed replies' "$x"
    expect "an idle client delays nobody" '^idle_client	\{"entries":.* after 0\.[0-4]s$' "$x"
    expect "still answering" '^list_after	\{"entries":' "$x"
    expect "survived" "^alive\$" "$x"
}

# 9b. What the API socket guarantees beyond slirp4netns (rknp only; the
# helper runs as root, the binary as the test user): mode 0600 under umask
# 002; SO_PEERCRED (another uid closed unanswered); clients served at once
# (three idle ones delay nobody, the seventeenth is closed); a request no
# byte can fix answered without waiting, a valid prefix not; accept(2) out
# of fds does not spin (CPU over 2 s) and answers once fds are back; 4096
# forwards at most, listed whole (~450 KB); fewer than 64 fds left refuses
# add_hostfwd; -a at a regular file and bad -r/-e exit 1 at start.
case_api_hardening() {
    [ "$1" = plugin ] || { echo "(rknp only)"; return 0; }
    local d="$SCRATCH/tmp/api-hardening" x
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    chmod 0755 "$d"
    x=$("$PY" "$HELPER" hardening "$S4N" "$RKNP_TEST_USER" "$d") || { echo "$x"; return 1; }
    echo "$x"
    local t='after 0\.[0-4]s$' perr='\{"error":\{"desc":"bad request: cannot parse JSON"\}\}'
    expect "socket mode 0600 under umask 002" '^socket_mode	0600$' "$x"
    expect "another uid closed unanswered" '^foreign_uid	<closed>$' "$x"
    expect "and logged" '^foreign_uid_logged	True$' "$x"
    expect "three idle clients delay nobody" '^idle3	\{"entries":\[\]\} '"$t" "$x"
    expect "1e400 answered at once" "^early_1e400	$perr $t" "$x"
    expect "invalid UTF-8 answered at once" "^early_utf8	$perr $t" "$x"
    expect "not JSON answered at once" "^early_not_json	$perr $t" "$x"
    expect "a valid prefix waits for the rest" '^prefix	quiet=True then \{"entries":\[\]\}$' "$x"
    expect "the 17th client closed at once" "^client_cap	<closed> $t" "$x"
    expect "served again after" '^after_cap	\{"entries":\[\]\}$' "$x"
    expect "no fd for accept: no spinning, all answered" '^flood	cpu=0\.[0-2][0-9]s answered=10/10 accept_log_lines=[1-4]$' "$x"
    expect "served after the flood" '^after_flood	\{"entries":\[\]\}$' "$x"
    expect "4096 forwards added" '^added	4096$' "$x"
    expect "the 4097th refused" '^cap	\{"error":\{"desc":"bad request: add_hostfwd: too many forwards \(max 4096\)"\}\}$' "$x"
    expect "4096 forwards listed whole" '^list	whole entries=4096 bytes=[0-9]{6}$' "$x"
    expect "removed one" '^remove	\{"return":\{\}\}$' "$x"
    expect "refused with fewer than 64 fds left" '^reserve	\{"error":\{"desc":"bad request: add_hostfwd: too few file descriptors left"\}\}$' "$x"
    expect "accepted with fds back" '^reserve_restored	\{"return":\{"id":[0-9]+\}\}$' "$x"
    expect "served to the end" '^alive	True$' "$x"
    expect "-a at a regular file: exit 1" '^regular_file	exit=1 api socket: .*/precious\.txt exists and is not a socket \(left as it is\)$' "$x"
    expect "the file intact" '^regular_file_intact	True$' "$x"
    expect "-r not open: exit 1" '^fd_unopened	exit=1 ready-fd 77 is not an open file descriptor$' "$x"
    expect "-r = -e: exit 1" '^fd_same	exit=1 ready-fd and exit-fd must be different file descriptors$' "$x"
    expect "-r 2: exit 1" '^fd_stdio	exit=1 ready-fd must not be 0, 1 or 2' "$x"
}

# 10. Direct use with -c (configure), --ready-fd, --exit-fd,
# --netns-type=path with --userns-path, --macaddress, --mtu; the tap is
# configured, a fetch works, closing the exit fd ends it with status 0.
# rknp also with --enable-sandbox --enable-seccomp --enable-ipv6 (slirp4netns
# 1.2 cannot sandbox in path mode without being root: it has no user
# namespace to enter, slirp4netns#317).
case_direct_configure() {
    local extra=() out
    [ "$1" = plugin ] && extra=(--enable-sandbox --enable-seccomp --enable-ipv6)
    out=$(as_user python3 "$HELPER" direct "$(drv_bin "$1")" "http://10.0.2.2:$PORT4/file" \
        --mtu=1500 --macaddress=02:42:ac:11:00:07 "${extra[@]}" 2>"$SCRATCH/logs/direct.$1.stderr")
    echo "$out"
    expect "ready byte" "^ready='1'\$" "$out"
    expect "MTU and MAC" "tap0: .* mtu 1500 .*link/ether 02:42:ac:11:00:07" "$out"
    expect "guest address" "tap0 +inet 10\.0\.2\.100/24" "$out"
    expect "default route" "^default via 10\.0\.2\.2 dev tap0" "$out"
    expect "fetch" "^sha=$FILE_SHA\$" "$out"
    expect "running until the exit fd closes" "^alive=True\$" "$out"
    expect "exit status 0" "^exit=0\$" "$out"
}

# 10a. --outbound-addr: host connections leave from the given address (a
# server on 127.0.0.1 sees the client 127.0.0.2).
case_outbound_addr() {
    local port pid out rc=0
    port=$(free_port 127.0.0.1)
    "$PY" -m http.server --bind 127.0.0.1 --directory "$SCRATCH/www" "$port" >"$SCRATCH/logs/outbound.$1.http" 2>&1 &
    pid=$!
    wait_tcp 127.0.0.1 "$port" || rc=1
    out=$(as_user python3 "$HELPER" direct "$(drv_bin "$1")" "http://10.0.2.2:$port/file" \
        --outbound-addr=127.0.0.2 2>"$SCRATCH/logs/outbound.$1.stderr") || rc=1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    [ "$rc" = 0 ] || return 1
    expect "fetch" "^sha=$FILE_SHA\$" "$out"
    expect "client address 127.0.0.2" '^127\.0\.0\.2 - - .*"GET /file' "$(cat "$SCRATCH/logs/outbound.$1.http")"
}

# 10b. The way Podman runs it: from inside its rootless user namespace
# (euid 0 there), --netns-type=path without --userns-path, with -c -r -e
# --mtu=65520 --enable-sandbox --enable-seccomp --enable-ipv6 as Podman
# passes them (not its --disable-host-loopback: the test server is on the
# host's loopback).
case_podman_style() {
    local out
    out=$(as_user unshare -r python3 "$HELPER" podman "$(drv_bin "$1")" "http://10.0.2.2:$PORT4/file" \
        --mtu=65520 --enable-sandbox --enable-seccomp --enable-ipv6 2>"$SCRATCH/logs/podman.$1.stderr")
    echo "$out"
    expect "ready byte" "^ready='1'\$" "$out"
    expect "MTU" "tap0: .* mtu 65520 " "$out"
    expect "guest address" "tap0 +inet 10\.0\.2\.100/24" "$out"
    expect "default route" "^default via 10\.0\.2\.2 dev tap0" "$out"
    expect "fetch" "^sha=$FILE_SHA\$" "$out"
    expect "exit status 0" "^exit=0\$" "$out"
}

# 10c. A container's root that sees the host's pids cannot reach back into
# the command: every process of it (the main one and the hand-over child,
# whose short window the prober races: runs repeat until it has seen two)
# refuses /proc/PID/root, /proc/PID/environ and PTRACE_ATTACH for the whole
# run, with and without the sandbox. The reference slirp4netns has the
# hole: its run must show the prober reaching it (proof that the probe
# works here).
case_no_reach_back() {
    local d="$SCRATCH/tmp/reach-$1" out prober="$SCRATCH/bin/reach_back_prober.py"
    rm -rf "$d"
    mkdir -p "$d"
    chown "$RKNP_TEST_USER" "$d"
    # shellcheck disable=SC2016 # expanded by the shell inside
    as_user bash -c '
        bin=$1 prober=$2 d=$3
        comm=$(basename "$bin" | cut -c1-15)
        touch "$d/seen"
        unshare -r -n python3 "$prober" probe "$comm" "$d/stop" "$d/report.json" "$d/seen" & t=$!
        for i in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        for mode in plain sandbox; do
            opts=()
            [ "$mode" = sandbox ] && opts=(--enable-sandbox --enable-seccomp)
            children=0
            for i in $(seq 20); do
                "$bin" -c "${opts[@]}" "$t" "tap$i" >"$d/$mode.$i.log" 2>&1 & p=$!
                echo "$p $mode" >>"$d/mains"
                for j in $(seq 100); do grep -q "^Starting slirp" "$d/$mode.$i.log" && break; sleep 0.05; done
                sleep 0.3
                kill "$p"; wait "$p" 2>/dev/null
                grep -q " $p\$" "$d/seen" && children=$((children + 1))
                [ "$children" -ge 2 ] && [ "$i" -ge 3 ] && break
            done
        done
        touch "$d/stop"; wait "$t"
    ' _ "$(drv_bin "$1")" "$prober" "$d"
    out=$("$PY" "$prober" summary "$d/report.json" "$d/mains")
    echo "$out"
    if [ "$1" = plugin ]; then
        expect_not_reached "$out" plain sandbox
    else
        expect_probed "$out" plain sandbox
        expect "the probe works: it reaches the reference's hand-over child" \
            "^plain child: .*reached root [1-9]" "$out"
        expect "the probe works: it attaches to the reference's sandboxed main process" \
            "^sandbox main: .*ptrace [1-9]" "$out"
    fi
}

# 10d. When its target is gone, rknp-slirp4netns exits by itself (exit 0)
# instead of keeping the namespace alive through the tap and holding its
# forwards (slirp4netns 1.2 runs on: not run for it).
case_target_gone() {
    [ "$1" = plugin ] || { echo "(slirp4netns keeps running: not compared)"; return 0; }
    local out
    # shellcheck disable=SC2016 # expanded by the shell inside
    out=$(as_user bash -c '
        bin=$1 log=$2
        unshare -rn sleep 60 & t=$!
        for i in $(seq 50); do [ "$(readlink /proc/$t/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05; done
        "$bin" -c "$t" tap0 >"$log" 2>&1 & p=$!
        for i in $(seq 100); do grep -q "^Starting slirp" "$log" && break; sleep 0.05; done
        kill "$t"; wait "$t" 2>/dev/null
        start=$(date +%s%N)
        rc=0; wait "$p" || rc=$?
        echo "exit=$rc after_ms=$((($(date +%s%N) - start) / 1000000))"
        tail -n 1 "$log"
    ' _ "$S4N" "$SCRATCH/tmp/target_gone.log")
    echo "$out"
    expect "exit 0 within 3 s of the target's end" "^exit=0 after_ms=([0-9]{1,3}|[12][0-9]{3})\$" "$out"
    expect "says why" "the target's namespace is gone" "$out"
}

# 11. Upstream rootlesskit v3 (built from the Go module proxy, pinned):
# the same fetch and port driver, and --detach-netns, where rootlesskit
# passes --netns-type=path with --userns-path (and refuses the sandbox).
case_v3_http() { local RK=$RK3; case_http_host_loopback "$1"; }
case_v3_port_driver() { local RK=$RK3; case_port_driver "$1"; }
case_v3_detach_netns() { local RK=$RK3 S4N_SANDBOX=false; case_detach_netns "$1"; }

V3_CASES="v3_http v3_port_driver v3_detach_netns"
ALL_CASES="cli http_host_loopback no_sandbox http_disable_host_loopback dns cidr mtu_1500 mtu_65520 ipv6 exit_code port_driver sandbox api api_hardening direct_configure outbound_addr podman_style no_reach_back target_gone $V3_CASES"
CASES=${S4N_CASES:-$ALL_CASES}
RK3=${S4N_RK3:-}
[ -z "$RK3" ] && [[ " $CASES" == *" v3_"* ]] && RK3=$(build_rootlesskit_v3)
[ -n "$RK3" ] && log "rootlesskit v3: $("$RK3" --version)"

for c in $CASES; do
    if [ "${c#v3_}" != "$c" ] && [ -z "$RK3" ]; then
        echo "SKIP $c (no rootlesskit v3: set S4N_RK3 or install Go)"
        continue
    fi
    for d in ${S4N_DRIVERS:-plugin slirp4netns}; do
        run_case "$c" "$d" "case_$c"
    done
done

stop_background
check_leftovers
echo "compat_slirp4netns: $PASSES passed, $FAILURES failed"
[ "$FAILURES" = 0 ]
