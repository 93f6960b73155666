#!/bin/bash
# SPDX-License-Identifier: Apache-2.0

# System calls of the stack thread per new TCP connection through the fast
# path (not part of the test run; docs/tcp-fast-path.md "The cost of a new
# connection"). The benchmark's connection-rate test, counted instead of
# timed: inside rknp-rel-driver a client makes CONN_N connections to an
# echo server on the host's 127.0.0.1 (connect to 10.0.2.2, 1-byte echo,
# abortive close), bracketed by a connection to a marker port before and
# after. strace -ff records each thread apart; the stack thread's calls
# between its two connect()s to the marker port (the first marker
# connection's end and the second's start make one more connection),
# divided by CONN_N + 1, are printed by name. System calls are counted,
# so the figure does not depend on the machine's load (idle-loop wake-ups
# inside the window add a few hundredths).
#
#   flock /tmp/rknp-e2e.lock tests/bench/conn_syscalls.sh [BUILD_DIR]
#   CONN_N (500)  CONN_PEEK (offset|discard; unset: auto)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(readlink -f "${1:-$ROOT/build}")
N=${CONN_N:-500}
# shellcheck source=tests/lib/common.sh
source "$ROOT/tests/lib/common.sh"
driver_bench_start conn-syscalls strace
PORT=$(free_port 127.0.0.1)
MARK=$(free_port 127.0.0.1)
for p in "$PORT" "$MARK"; do
    "$PY" "$ROOT/tests/bench/echo_server.py" 127.0.0.1 "$p" >"$SCRATCH/logs/echo-$p.log" 2>&1 &
    track_bg $!
    wait_tcp 127.0.0.1 "$p"
done
cat >"$SCRATCH/client.py" <<'EOF'
import socket, struct, sys
port, mark, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
linger = struct.pack("ii", 1, 0)
def one(p):
    s = socket.socket()
    s.settimeout(5)
    s.connect(("10.0.2.2", p))
    s.sendall(b"c")
    assert s.recv(1) == b"c"
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
    s.close()
for _ in range(20):  # warm-up: first ARP, libslirp's DHCP-free start
    one(port)
one(mark)
for _ in range(n):
    one(port)
one(mark)
EOF
chmod 0644 "$SCRATCH/client.py"
mkdir "$SCRATCH/trace"
peek=()
[ -n "${CONN_PEEK:-}" ] && peek=(--tcp-peek "$CONN_PEEK")
user_argv "$DRIVER" --log "$SCRATCH/logs/plugin.log" --settle-ms 1000 --tcp-path fast "${peek[@]}" -- \
    "$PY" "$SCRATCH/client.py" "$PORT" "$MARK" "$N"
strace -qq -ff -o "$SCRATCH/trace/t" "${ARGV[@]}" 2>"$SCRATCH/driver.err" ||
    { tail -n 20 "$SCRATCH/driver.err" >&2; exit 1; }
# The stack thread: the one that connect()s to the marker port on the
# host's loopback (the client connects to it at the gateway's address).
m="htons($MARK), sin_addr=inet_addr(\"127.0.0.1\")"
stack=$(grep -lF "$m" "$SCRATCH/trace"/t.* | head -n 1)
[ -n "$stack" ] || { echo "no thread connected to the marker port" >&2; exit 1; }
awk -v mark="$m" -v n="$((N + 1))" '
    /^connect\(/ && index($0, mark) { seen++; next }
    seen == 1 && /^[a-z_0-9]+\(/ { name = $0; sub(/\(.*/, "", name); c[name]++; total++ }
    END {
        if (seen < 2) { print "marker seen " seen " times" > "/dev/stderr"; exit 1 }
        printf "%-14s %8s\n", "system call", "per conn"
        for (k in c) printf "%-14s %8.2f\n", k, c[k] / n | "sort -k2 -rn"
        close("sort -k2 -rn")
        printf "%-14s %8.2f  (%d connections)\n", "total", total / n, n - 1
    }' "$stack"
