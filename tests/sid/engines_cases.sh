#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# The cases of tests/sid/engines.sh, run inside the sid tree as root
# (enter.sh) in the test's "world" network namespace (its upstream: eth0,
# a veth to the test host, the default gateway). The engines that take
# pasta or slirp4netns from Debian's packages, run as the tree's user,
# once per ENGINE: `real` (the tree's /usr/bin/pasta and slirp4netns, the
# reference) and `rknp` (rknp-pasta and rknp-slirp4netns through the
# helpers directory /usr/local/libexec/rknp/helpers, as installed):
#   rootlesskit_*      rootlesskit 2.0.2 --net=pasta --pasta-binary=PASTA
#                      --port-driver=implicit;
#   docker_pasta       docker.io 28.5's dockerd-rootless.sh with
#                      DOCKERD_ROOTLESS_ROOTLESSKIT_NET=pasta, `pasta` from
#                      PATH;
#   docker_slirp4netns the same with no NET: the script picks slirp4netns
#                      itself (`slirp4netns --help` lists --netns-type);
#   k3s_builtin,       a k3s-style program (k3slike/) embedding rootlesskit
#   k3s_slirp4netns    v2.3.6's slirp4netns driver, `slirp4netns` from PATH,
#                      with the builtin or the slirp4netns port driver.
# PATH starts with a directory of wrappers (pasta, slirp4netns,
# rootlesskit) that log the argv they are run with and exec the engine's
# binary (for rknp, the helpers directory's links); the argv lines of a
# case are printed under its result.
#
# Set by engines.sh: SID_CASES, SID_ENGINES, SID_RKNP_EXPECT (the rknp
# cases that must pass; the others are XFAIL/XPASS and do not fail the
# run), SID_VERBOSE. Mounted: /rknp/tests (read-only), /rknp/out
# (results), /rknp/remote.netns (the test host's network namespace),
# /rknp/k3slike (the k3s-style program, built by engines.sh).
set -euo pipefail

T=/rknp/tests
OUT=/rknp/out
REMOTE_NS=/rknp/remote.netns
K3SLIKE=/rknp/k3slike
REMOTE_ADDR=198.18.5.2  # the test host, also the world's default gateway
REMOTE_PORT=8080        # its web server
DNS_NAME=rknp-sid.test  # the test DNS server's name, -> REMOTE_ADDR
HELPERS=/usr/local/libexec/rknp/helpers
USER_NAME=rknp
WORK=/tmp/rknp-eng      # per-case homes, state, docker data
WRAP_DIR=/run/rknp-eng  # the wrappers, per engine
ARGV_DIR=/tmp/rknp-argv
SYNC=/tmp/rknp-sync     # files a workload and the case wait on
PY=/usr/bin/python3
HELPER=$T/sid/sid_helper.py
IMG=rknp-sid-busybox:1
CASE_TIMEOUT=${SID_CASE_TIMEOUT:-120}
ALL_CASES="rootlesskit_download rootlesskit_publish rootlesskit_dns rootlesskit_exit docker_pasta docker_slirp4netns k3s_builtin k3s_slirp4netns"
SID_CASES=${SID_CASES:-$ALL_CASES}
SID_ENGINES=${SID_ENGINES:-real rknp}
SID_RKNP_EXPECT=${SID_RKNP_EXPECT:-}
# shellcheck source=tests/sid/cases_lib.sh
. "$T/sid/cases_lib.sh"

# wait_file PATH SECONDS PID: PATH exists within SECONDS, while PID runs.
wait_file() {
    local _
    for _ in $(seq "$(($2 * 10))"); do
        [ -e "$1" ] && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# engine_path ENGINE: the PATH the engine's cases run with: the wrappers,
# then (rknp) the helpers directory, then the tree's own.
engine_path() {
    case $1 in
    real) echo "$WRAP_DIR/bin-real:/usr/sbin:/usr/bin:/sbin:/bin" ;;
    rknp) echo "$WRAP_DIR/bin-rknp:$HELPERS:/usr/sbin:/usr/bin:/sbin:/bin" ;;
    esac
}

# engine_exes ENGINE: the binaries that are the engine's network processes.
engine_exes() {
    case $1 in
    real) echo "/usr/bin/pasta /usr/bin/pasta.avx2 /usr/bin/slirp4netns" ;;
    rknp) echo "/usr/local/bin/rknp-pasta /usr/local/bin/rknp-slirp4netns" ;;
    esac
}

# engine_procs ENGINE: "pid exe" of every running process of the engine's
# binaries (of either engine: none may be left from another case).
engine_procs() {
    local p exe
    for p in /proc/[0-9]*; do
        exe=$(readlink "$p/exe" 2>/dev/null) || continue
        case " $(engine_exes real) $(engine_exes rknp) " in
        *" $exe "*) echo "${p#/proc/} $exe" ;;
        esac
    done
    return 0
}

# no_leftovers WHAT: within 5 s no process of an engine's binaries runs.
no_leftovers() {
    local left
    for _ in $(seq 50); do
        left=$(engine_procs)
        [ -z "$left" ] && { echo "ok $1: no pasta/slirp4netns process left"; return 0; }
        sleep 0.1
    done
    fail "$1: left running: ${left//$'\n'/, }"
}

# as_user ENV... -- CMD...: CMD as the tree's user with the engine's PATH,
# the case's HOME and XDG_RUNTIME_DIR, and ENV, bounded by CASE_TIMEOUT.
as_user() {
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    timeout -k 5 "$CASE_TIMEOUT" setpriv --reuid="$USER_NAME" --regid="$USER_NAME" --init-groups \
        env -i PATH="$(engine_path "$ENGINE")" HOME="$CASE_DIR/home" \
        XDG_RUNTIME_DIR="$CASE_DIR/run" TMPDIR="$CASE_DIR/tmp" LANG=C.UTF-8 "${envs[@]}" "$@"
}

# case_dir: a fresh directory for the case (home, run, tmp, state) and an
# empty sync directory, owned by the user.
case_dir() {
    CASE_DIR=$WORK/$CASE.$ENGINE
    rm -rf "$CASE_DIR" "$SYNC"
    mkdir -p "$CASE_DIR"/{home,run,tmp} "$SYNC"
    chmod 0700 "$CASE_DIR/run"
    chown -R "$USER_NAME:" "$CASE_DIR" "$SYNC"
}

# engine_output LOG: the lines rootlesskit logged of its network process
# (it runs with --debug), for a failure's reason.
engine_output() {
    grep -oE 'network/pasta: .*|slirp4netns: .*' "$1" 2>/dev/null | sed 's/"$//; s/\\n/ /g' |
        cut -c1-300 | tail -n 3 | paste -sd' ' || true
}

# ---------------------------------------------------------------- set-up

setup() {
    local engine name target r f
    mkdir -p "$WORK" "$ARGV_DIR" /tmp/www
    chmod 0755 "$WORK"
    chmod 1777 "$ARGV_DIR"
    # Per engine: wrappers logging their argv (one line, shell-quoted)
    # before exec'ing the engine's binary; rootlesskit is the tree's.
    for engine in real rknp; do
        touch "$ARGV_DIR/$engine.log"
        chmod 0666 "$ARGV_DIR/$engine.log"
        mkdir -p "$WRAP_DIR/bin-$engine"
        for name in pasta slirp4netns rootlesskit; do
            case $engine/$name in
            */rootlesskit) target=/usr/bin/rootlesskit ;;
            real/*) target=/usr/bin/$name ;;
            rknp/*) target=$HELPERS/$name ;;
            esac
            cat >"$WRAP_DIR/bin-$engine/$name" <<EOF
#!/bin/bash
{ printf '$name'; printf ' %q' "\$@"; echo; } >>$ARGV_DIR/$engine.log
exec $target "\$@"
EOF
            chmod 0755 "$WRAP_DIR/bin-$engine/$name"
        done
    done
    cat >"$WORK/carrier.sh" <<'EOF'
for i in $(seq 50); do ip -o link show tap0 | grep -q LOWER_UP && break; sleep 0.1; done
ip -o link show tap0 | grep -q LOWER_UP || { echo "tap0 has no carrier: no engine attached to it" >&2; exit 3; }
EOF
    head -c 4194304 /dev/urandom >/tmp/www/file
    chmod -R a+rX /tmp/www
    FILE_SHA=$(sha256sum /tmp/www/file | cut -d' ' -f1)

    # The image for docker: Debian's static busybox, an applet link each.
    r=/tmp/image
    mkdir -p "$r/bin" "$r/tmp" "$r/etc"
    chmod 1777 "$r/tmp"
    cp /usr/bin/busybox "$r/bin/busybox"
    for f in $(busybox --list); do
        [ -e "$r/bin/$f" ] || ln -s busybox "$r/bin/$f"
    done
    tar --numeric-owner --owner=0 --group=0 -C "$r" -cf /tmp/image.tar .
    chmod a+r /tmp/image.tar
    rm -rf "$r"

    # Servers: DNS on the world's 127.0.0.1:53 (the tree's resolv.conf),
    # a web server on the test host.
    "$PY" "$T/lib/dns_server.py" 127.0.0.1 53 "$DNS_NAME=$REMOTE_ADDR" >/tmp/dns.log 2>&1 &
    BG+=($!)
    nsenter --net="$REMOTE_NS" "$PY" -m http.server --bind :: --directory /tmp/www \
        "$REMOTE_PORT" >/tmp/http-remote.log 2>&1 &
    BG+=($!)
    for _ in $(seq 50); do
        grep -q ready /tmp/dns.log &&
            [ -n "$(nsenter --net="$REMOTE_NS" curl -sf -o /dev/null -w ok "http://$REMOTE_ADDR:$REMOTE_PORT/file")" ] &&
            return 0
        sleep 0.2
    done
    echo "the test servers did not start" >&2
    cat /tmp/dns.log /tmp/http-remote.log >&2
    return 1
}

# ---------------------------------------------------------------- rootlesskit 2.0

# CARRIER: what the command run inside starts with: wait (up to 5 s) for
# tap0's carrier, the engine attached to the tap rootlesskit made
# (rootlesskit 2.0 does not wait for it); exit 3 without
# (carrier.sh, written by setup).
CARRIER=". $WORK/carrier.sh"

# rk CMD: `sh -c CMD` under rootlesskit 2.0.2 --net=pasta with the
# engine's pasta (the wrapper) as --pasta-binary and the implicit port
# driver, as the tree's user, once tap0 has its carrier; rootlesskit's log
# in $CASE_DIR/rootlesskit.log, the command's stdout in $CASE_DIR/out.
# Then no pasta may be left.
rk() {
    local rc=0
    as_user -- rootlesskit --debug --state-dir="$CASE_DIR/run/rk" --net=pasta \
        --pasta-binary="$WRAP_DIR/bin-$ENGINE/pasta" --port-driver=implicit \
        --disable-host-loopback --copy-up=/etc -- sh -c "$CARRIER; $1" >"$CASE_DIR/out" 2>"$CASE_DIR/rootlesskit.log" || rc=$?
    cat "$CASE_DIR/out"
    grep -v 'level=debug' "$CASE_DIR/rootlesskit.log" || true
    if [ "$rc" != 0 ]; then
        echo "REASON: rootlesskit exited $rc: $(grep -E '\] error: ' "$CASE_DIR/rootlesskit.log" | tail -n1 | cut -c1-200); pasta's output: $(engine_output "$CASE_DIR/rootlesskit.log")"
    fi
    no_leftovers "rootlesskit exited" || rc=1
    return $rc
}

# A download from the test host behind the world's upstream veth.
case_rootlesskit_download() {
    local rc=0
    case_dir
    rk "ip -o addr show tap0; ip route; curl -sS --max-time 30 http://$REMOTE_ADDR:$REMOTE_PORT/file | sha256sum" || rc=1
    sha_is "download from the test host $REMOTE_ADDR:$REMOTE_PORT" "$(tail -n1 "$CASE_DIR/out")" || rc=1
    return $rc
}

# The implicit port driver: a TCP server and a UDP echo server bound in the
# namespace, reached from the world's loopback at the same ports (pasta's
# --tcp-ports=auto/--udp-ports=auto pick them up by scanning).
case_rootlesskit_publish() {
    local pid sha udp rc=0
    case_dir
    rk "python3 -m http.server --bind 0.0.0.0 -d /tmp/www 18100 >/dev/null 2>&1 & a=\$!
        python3 $HELPER udp 18101 & b=\$!
        touch $SYNC/ready
        for i in \$(seq 600); do [ -e $SYNC/done ] && break; sleep 0.1; done
        kill \$a \$b" &
    pid=$!
    wait_file "$SYNC/ready" 30 "$pid" || {
        kill "$pid" 2>/dev/null || true; wait "$pid" || true
        fail "the namespace's servers did not start"
    }
    sha=$(fetch_sha_retry "http://127.0.0.1:18100/file" 20)
    sha_is "TCP: 127.0.0.1:18100 -> the namespace's :18100" "$sha" || rc=1
    if udp=$("$PY" "$HELPER" udp-echo 127.0.0.1 18101 64 1400 2>&1); then
        echo "$udp"
        if [ "$(awk '{print $2}' <<<"$udp")" = "$(awk '{print $4}' <<<"$udp")" ]; then
            echo "ok UDP: 127.0.0.1:18101 -> the namespace's :18101, 64 x 1400 bytes echoed"
        else
            echo "REASON: UDP: echoed bytes differ"; rc=1
        fi
    else
        echo "REASON: UDP: 127.0.0.1:18101: $udp"; rc=1
    fi
    touch "$SYNC/done"
    wait "$pid" || rc=1
    return $rc
}

# DNS: rootlesskit's resolv.conf names --dns-forward's 10.0.2.3, which the
# engine forwards to the world's resolver (the test's DNS server on
# 127.0.0.1, the only one that knows DNS_NAME); then a download by name.
case_rootlesskit_dns() {
    local out name_ip rc=0
    case_dir
    rk "cat /etc/resolv.conf; python3 $HELPER resolve $DNS_NAME; curl -sS --max-time 30 http://$DNS_NAME:$REMOTE_PORT/file | sha256sum" || rc=1
    out=$(cat "$CASE_DIR/out")
    grep -q '^nameserver 10\.0\.2\.3$' <<<"$out" || fail "resolv.conf does not name 10.0.2.3"
    name_ip=$(tail -n2 <<<"$out" | head -n1)
    [ "$name_ip" = "$REMOTE_ADDR" ] || fail "$DNS_NAME resolved to '$name_ip', not $REMOTE_ADDR"
    echo "ok $DNS_NAME resolved to $REMOTE_ADDR through 10.0.2.3"
    sha_is "download by name" "$(tail -n1 <<<"$out")" || rc=1
    return $rc
}

# rootlesskit stopped by SIGTERM while its command runs (as systemd stops
# it): it exits, and its pasta with it.
case_rootlesskit_exit() {
    local pid rkpid rc=0 procs
    case_dir
    as_user -- rootlesskit --debug --state-dir="$CASE_DIR/run/rk" --net=pasta \
        --pasta-binary="$WRAP_DIR/bin-$ENGINE/pasta" --port-driver=implicit \
        --disable-host-loopback --copy-up=/etc -- sh -c "$CARRIER; touch $SYNC/ready; exec sleep 600" \
        2>"$CASE_DIR/rootlesskit.log" &
    pid=$!
    wait_file "$SYNC/ready" 30 "$pid" || {
        kill "$pid" 2>/dev/null || true; wait "$pid" || true
        fail "rootlesskit's command did not start: $(grep -v 'level=debug' "$CASE_DIR/rootlesskit.log" | tail -n1); pasta's output: $(engine_output "$CASE_DIR/rootlesskit.log")"
    }
    procs=$(engine_procs)
    [ -n "$procs" ] || echo "REASON: no pasta running under rootlesskit; its output: $(engine_output "$CASE_DIR/rootlesskit.log")"
    echo "running: ${procs//$'\n'/, }"
    rkpid=$(pgrep -o -x -u "$USER_NAME" rootlesskit) || true
    [ -n "$rkpid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" || true; fail "no rootlesskit process"; }
    kill -TERM "$rkpid"
    wait "$pid" || rc=$?
    echo "rootlesskit exited $rc after SIGTERM"
    grep -v 'level=debug' "$CASE_DIR/rootlesskit.log" | tail -n 3 || true
    [ "$rc" != 124 ] || fail "rootlesskit did not exit after SIGTERM"
    no_leftovers "rootlesskit stopped by SIGTERM"
    [ -n "$procs" ]
}

# ---------------------------------------------------------------- docker 28.5

DOCKERD_ROOTLESS=/usr/share/docker.io/contrib/dockerd-rootless.sh

dk() {
    as_user DOCKER_HOST="unix://$CASE_DIR/run/docker.sock" -- docker "$@"
}

# docker_route NET: dockerd-rootless.sh as the tree's user with
# DOCKERD_ROOTLESS_ROOTLESSKIT_NET=NET (empty: unset, the script picks),
# rootlesskit with --debug: the network process must be the engine's and
# carry the container's traffic: a download from the test host, `-p`
# reached from the world's loopback (sha256 compared); then SIGTERM to
# rootlesskit (as systemd's stop): exit 0, nothing left.
docker_route() {
    local net=$1 pid procs rc=0 want
    case_dir
    mkdir -p "$CASE_DIR/data"
    echo '{}' >"$CASE_DIR/daemon.json"
    chown -R "$USER_NAME:" "$CASE_DIR"
    as_user ${net:+DOCKERD_ROOTLESS_ROOTLESSKIT_NET=$net} DOCKERD_ROOTLESS_ROOTLESSKIT_FLAGS=--debug -- \
        sh "$DOCKERD_ROOTLESS" --data-root="$CASE_DIR/data" --storage-driver=vfs \
        --config-file="$CASE_DIR/daemon.json" --exec-opt native.cgroupdriver=cgroupfs \
        >"$CASE_DIR/dockerd.log" 2>&1 &
    pid=$!
    for _ in $(seq 150); do
        dk version >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if ! dk version >/dev/null 2>&1; then
        tail -n 20 "$CASE_DIR/dockerd.log"
        kill "$pid" 2>/dev/null || true; wait "$pid" || true
        fail "dockerd did not come up: $(grep -E 'level=(error|fatal)|error:' "$CASE_DIR/dockerd.log" | tail -n1 | cut -c1-200)"
    fi
    grep -E '^\+ exec rootlesskit ' "$CASE_DIR/dockerd.log" || true
    want=${net:-slirp4netns}
    grep -q -- "^+ exec rootlesskit .* --net=$want " "$CASE_DIR/dockerd.log" ||
        { echo "REASON: dockerd-rootless.sh did not pick --net=$want"; rc=1; }
    # The network process: the engine's binary, alive.
    sleep 0.5
    procs=$(engine_procs)
    echo "network processes: ${procs:-none}"
    case $ENGINE in
    real) grep -qE " /usr/bin/($want|pasta\.avx2)\$" <<<"$procs" ;;
    rknp) grep -q " /usr/local/bin/rknp-$want\$" <<<"$procs" ;;
    esac || { echo "REASON: no $ENGINE $want running under rootlesskit${procs:+ (running: ${procs//$'\n'/, })}; its output: $(engine_output "$CASE_DIR/dockerd.log")"; rc=1; }

    # Without the engine there is no network to try.
    [ "$rc" = 0 ] && docker_traffic || rc=1
    docker_stop "$pid" || rc=1
    return $rc
}

# docker_traffic: the image imported; a container downloads from the test
# host; one publishes its httpd with -p, fetched from the world's loopback.
docker_traffic() {
    local out sha rc=0
    dk import /tmp/image.tar "$IMG" >/dev/null || { echo "REASON: docker import failed"; rc=1; }
    if out=$(dk run --rm "$IMG" sh -c "wget -q -T 20 -O - http://$REMOTE_ADDR:$REMOTE_PORT/file | sha256sum" 2>&1); then
        sha_is "container: download from the test host $REMOTE_ADDR:$REMOTE_PORT" "$(tail -n1 <<<"$out")" || rc=1
    else
        echo "REASON: docker run (download) failed: $(tail -n1 <<<"$out")"; rc=1
    fi
    if dk run -d --name web -p 18110:80 -v /tmp/www:/www:ro "$IMG" httpd -f -p 80 -h /www >/dev/null; then
        sha=$(fetch_sha_retry "http://127.0.0.1:18110/file" 20)
        sha_is "-p 18110:80: 127.0.0.1:18110 -> the container's httpd" "$sha" || rc=1
        dk rm -f web >/dev/null || true
    else
        echo "REASON: docker run -d -p failed"; rc=1
    fi
    return $rc
}

# docker_stop PID: SIGTERM to rootlesskit (not to PID, the background
# job: `timeout` signals its whole group), as systemd's stop does;
# dockerd-rootless.sh (PID) exits 0 and leaves nothing.
docker_stop() {
    local pid=$1 rkpid stop=0 left rc=0
    # The oldest: rootlesskit's child is named rootlesskit too.
    rkpid=$(pgrep -o -x -u "$USER_NAME" rootlesskit) || true
    kill -TERM "${rkpid:-$pid}" 2>/dev/null || true
    wait "$pid" || stop=$?
    [ "$stop" = 0 ] || { echo "REASON: dockerd-rootless.sh exited $stop after SIGTERM to rootlesskit"; rc=1; }
    no_leftovers "dockerd stopped" || rc=1
    left=$(pgrep -u "$USER_NAME" -l || true)
    [ -z "$left" ] || { echo "REASON: the user's processes left: ${left//$'\n'/, }"; rc=1; }
    [ "$rc" = 0 ] && echo "ok dockerd stopped: exit 0, nothing left"
    return $rc
}

case_docker_pasta() { docker_route pasta; }
case_docker_slirp4netns() { docker_route ""; }

# ---------------------------------------------------------------- k3s-style

# k3s PORT_DRIVER: the k3s-style program (rootlesskit v2.3.6's parent,
# child and slirp4netns driver; `slirp4netns` from PATH) runs a workload
# that downloads from the test host, serves the file on :8080 inside and
# publishes 127.0.0.1:18120 through rootlesskit's API (as k3s does for a
# service) with the given port driver; the file is fetched from the world's
# loopback; then the program exits 0 and leaves nothing.
k3s() {
    local pid sha rc=0 procs want
    case_dir
    as_user K3S_ROOTLESS_PORT_DRIVER="$1" K3SLIKE_DEBUG=1 -- "$K3SLIKE" sh -c "
        ip -o addr show tap0; ip route
        curl -sS --max-time 30 http://$REMOTE_ADDR:$REMOTE_PORT/file | sha256sum
        python3 -m http.server --bind 0.0.0.0 -d /tmp/www 8080 >/dev/null 2>&1 & a=\$!
        for i in \$(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8080/ && break; sleep 0.1; done
        $K3SLIKE expose 18120 8080 && touch $SYNC/ready
        for i in \$(seq 600); do [ -e $SYNC/done ] && break; sleep 0.1; done
        kill \$a" >"$CASE_DIR/out" 2>"$CASE_DIR/k3slike.log" &
    pid=$!
    if wait_file "$SYNC/ready" 40 "$pid"; then
        procs=$(engine_procs)
        echo "network processes: ${procs:-none}"
        case $ENGINE in
        real) want=/usr/bin/slirp4netns ;;
        rknp) want=/usr/local/bin/rknp-slirp4netns ;;
        esac
        grep -q " $want\$" <<<"$procs" || { echo "REASON: no $want running"; rc=1; }
        sha=$(fetch_sha_retry "http://127.0.0.1:18120/file" 20)
        sha_is "$1 port driver: 127.0.0.1:18120 -> the namespace's :8080" "$sha" || rc=1
    else
        echo "REASON: the workload did not publish its port: $(grep -vE 'level=debug' "$CASE_DIR/k3slike.log" | tail -n1 | cut -c1-200)"
        rc=1
    fi
    touch "$SYNC/done"
    wait "$pid" || { echo "REASON: k3slike exited $?"; rc=1; }
    cat "$CASE_DIR/out"
    grep -vE 'level=debug' "$CASE_DIR/k3slike.log" | tail -n 5 || true
    sha_is "download from the test host $REMOTE_ADDR:$REMOTE_PORT" "$(grep -E '^[0-9a-f]{64} ' "$CASE_DIR/out" | head -n1)" || rc=1
    no_leftovers "k3slike exited" || rc=1
    return $rc
}

case_k3s_builtin() { k3s builtin; }
case_k3s_slirp4netns() { k3s slirp4netns; }

# ---------------------------------------------------------------- driver


versions() { echo "$(rootlesskit --version), $(dockerd --version), $(pasta --version | head -n1), $(slirp4netns --version | head -n1), $(/usr/local/bin/rknp-pasta --version | head -n1)"; }

# case_end: whatever the case left (a hung engine) must not spoil the next
# one (the PID namespace is this run's: every such process is the case's).
case_end() {
    # shellcheck disable=SC2046
    kill -KILL $(pgrep -u "$USER_NAME") 2>/dev/null || true
}

run_all
