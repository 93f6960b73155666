#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0

"""Runs inside the network under test; bench.py drives it over stdin/stdout.

Start-up: connects to the echo server until it answers (that moment is the
"first successful TCP connection"), prints a ready line, then reads one JSON
command per line and answers each with one JSON line.  Every line this script
writes for bench.py starts with "@@BENCH " so other output cannot be mistaken
for it.  Only the target address given on the command line is contacted;
the `serve` command runs servers in this network for the published-port
tests, whose clients bench.py runs on the host.
"""
import json
import re
import resource
import socket
import struct
import subprocess
import sys
import time

PREFIX = "@@BENCH "


def emit(obj):
    sys.stdout.write(PREFIX + json.dumps(obj) + "\n")
    sys.stdout.flush()


def default_gateway():
    """The IPv4 default gateway of this netns, from /proc/net/route."""
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[1] == "00000000" and int(cols[3], 16) & 2:
                return socket.inet_ntoa(struct.pack("<I", int(cols[2], 16)))
    return None


def wait_first_connect(target, port, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((target, port), timeout=1):
                return time.monotonic()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)


def run_iperf3(target, port, args, duration, prefix=()):
    # The server may still be closing the previous test (seen after UDP
    # runs that overload it): "the server is busy", tried again up to 5 s.
    for attempt in range(6):
        res = iperf3_once(target, port, args, duration, prefix)
        if "busy" not in res.get("error", ""):
            break
        time.sleep(1)
    if attempt:
        res["busy_retries"] = attempt
    return res


# A text-mode iperf3 server's line of a data connection, as the client
# gets it with --get-server-output.
SERVER_PEER = re.compile(r"local \S+ port \d+ connected to (\S+) port \d+")


def iperf3_once(target, port, args, duration, prefix=()):
    """One iperf3 client run (prefix: how to run it, e.g. in another
    namespace: the published-port tests run the client on the host)."""
    cmd = list(prefix) + ["iperf3", "-c", target, "-p", str(port), "--json",
           "-t", str(duration)] + args
    p = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=duration + 30)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return {"error": "iperf3 rc=%d: %s" % (p.returncode, p.stderr[-300:])}
    if "error" in doc:
        return {"error": doc["error"]}
    end = doc["end"]
    if "-u" in args:
        # sum_sent/sum_received (iperf3 >= 3.11) are the sender's and the
        # receiver's own counts in both directions (with -R the client
        # receives); older iperf3 only has sum, the sender's bytes.
        sent = end.get("sum_sent", end["sum"])
        got = end.get("sum_received", end["sum"])
        return {"bps": got["bits_per_second"], "bytes": got["bytes"],
                "sent_bps": sent["bits_per_second"],
                "packets": got.get("packets"),
                "lost_packets": got.get("lost_packets"),
                "lost_percent": got.get("lost_percent",
                                        end["sum"].get("lost_percent", 0.0))}
    s = end["sum_received"]
    # Per-second rates as the client counts them (received with -R, sent
    # without) show where a total is lost: the first seconds (slow start,
    # buffers growing), the steady state or the end.
    res = {"bps": s["bits_per_second"], "bytes": s["bytes"],
           "sent_bytes": end.get("sum_sent", {}).get("bytes"),
           "interval_bps": [round(i["sum"]["bits_per_second"])
                            for i in doc.get("intervals", [])],
           "retransmits": end.get("sum_sent", {}).get("retransmits")}
    # --get-server-output: the address the server saw the data connection
    # come from (published ports: whether the port driver keeps it).
    peer = SERVER_PEER.search(doc.get("server_output_text", ""))
    if peer:
        res["peer"] = peer.group(1)
    streams = end.get("streams", [])
    if len(streams) > 1:
        # -P N: each stream's receiver rate, for the fairness among them.
        res["stream_bps"] = [round(st["receiver"]["bits_per_second"])
                             for st in streams if "receiver" in st]
    return res


def udp_rr(target, port, tool, count, size, limit, prefix=()):
    """The C ping-pong client (rknp-udp-rr): one datagram outstanding."""
    cmd = list(prefix) + [tool, "client", target, str(port), "--size", str(size),
           "--count", str(count), "--seconds", str(limit)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + 30)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"error": "rknp-udp-rr rc=%d: %s" % (p.returncode, p.stderr[-300:])}


FLOOD_ARRIVED = re.compile(r"arrived (\d+) datagrams, (\d+) bytes in ([0-9.]+) s")
FLOOD_OFFERED = re.compile(r"offered ([0-9.]+) Gbit/s")


def flood_result(text):
    """What an rknp-udp-flood run printed: {"bps", "bytes", "datagrams"}
    for a sink, {"offered_bps"} for a source, {} if neither."""
    m = FLOOD_ARRIVED.search(text)
    if m:
        n, b, secs = int(m.group(1)), int(m.group(2)), float(m.group(3))
        return {"datagrams": n, "bytes": b, "bps": b * 8 / secs if secs > 0 else 0.0}
    m = FLOOD_OFFERED.search(text)
    return {"offered_bps": float(m.group(1)) * 1e9} if m else {}


def udp_flood(target, port, tool, role, length, duration):
    """This end of a batched UDP rate test (rknp-udp-flood): the source
    sends to target:port; the sink says hello to it and counts."""
    if role == "source":
        cmd = [tool, "source", target, str(port), str(length), str(duration)]
    else:
        cmd = [tool, "sink", "0.0.0.0", "0", "--hello", "%s:%d" % (target, port)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    res = flood_result(p.stdout)
    if p.returncode != 0 or not res:
        return {"error": "rknp-udp-flood rc=%d: %s" % (p.returncode, p.stderr[-300:])}
    return res


def serve(servers, iperf_port, udp_port, tool):
    """The servers of the published-port tests, in this network: iperf3
    on iperf_port and, if tool names rknp-udp-rr, its echo server on
    udp_port (both on every address); they run until the agent quits."""
    servers.append(subprocess.Popen(["iperf3", "-s", "-p", str(iperf_port)],
                                    stdout=subprocess.DEVNULL))
    if tool:
        servers.append(subprocess.Popen([tool, "server", "0.0.0.0", str(udp_port)],
                                        stdout=subprocess.DEVNULL))
    time.sleep(0.5)
    dead = [p.args[0] for p in servers if p.poll() is not None]
    return {"error": "%s exited" % " and ".join(dead)} if dead else {"serving": True}


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def echo_verify(target, port, nbytes, limit):
    """nbytes of random data through the echo server and back on one
    connection, both ways at once (a writer thread); sha256 of what was
    sent against what came back."""
    import hashlib
    import os
    import threading
    data = os.urandom(nbytes)
    got = hashlib.sha256()
    n = 0
    with socket.create_connection((target, port), timeout=limit) as s:
        errors = []

        def write():
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            except OSError as e:
                errors.append(e)
        w = threading.Thread(target=write)
        t = time.monotonic()
        w.start()
        while n < nbytes:
            chunk = s.recv(min(1 << 20, nbytes - n))
            if not chunk:
                break
            got.update(chunk)
            n += len(chunk)
        w.join()
        secs = time.monotonic() - t
    if errors:
        return {"error": "send: %s" % errors[0]}
    sent = hashlib.sha256(data).hexdigest()
    return {"bytes": n, "sent": nbytes, "equal": n == nbytes and got.hexdigest() == sent,
            "sha256": sent, "seconds": secs}


def pingpong(target, port, count, size, limit):
    """count round trips of size bytes on one connection; latencies in us."""
    msg = b"x" * size
    lat = []
    with socket.create_connection((target, port), timeout=5) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(20):  # warm-up
            s.sendall(msg)
            recv_exact(s, size)
        stop = time.monotonic() + limit
        for _ in range(count):
            t = time.perf_counter_ns()
            s.sendall(msg)
            recv_exact(s, size)
            lat.append((time.perf_counter_ns() - t) / 1000.0)
            if time.monotonic() > stop:
                break
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return {"n": len(lat), "p50_us": pick(0.50), "p99_us": pick(0.99),
            "mean_us": sum(lat) / len(lat)}


def open_idle(target, port, count, held):
    """Opens count connections to the echo server and keeps them in held,
    idle, so a ping-pong can run with that many flows open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
    while len(held) < count:
        held.append(socket.create_connection((target, port), timeout=5))
    # Every one answers: they all reached the host, none is half-open.
    for s in held[::max(1, count // 50)]:
        s.sendall(b"i")
        recv_exact(s, 1)
    return {"open": len(held)}


def close_idle(held):
    n = len(held)
    for s in held:
        s.close()
    held.clear()
    return {"closed": n}


def connrate(target, port, seconds):
    """connect, 1-byte echo, abortive close (no TIME_WAIT), for seconds."""
    linger = struct.pack("ii", 1, 0)
    ok = fail = 0
    start = time.monotonic()
    stop = start + seconds
    while time.monotonic() < stop:
        s = socket.socket()
        try:
            s.settimeout(2)
            s.connect((target, port))
            s.sendall(b"c")
            recv_exact(s, 1)
            ok += 1
        except OSError:
            fail += 1
        finally:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            s.close()
    elapsed = time.monotonic() - start
    return {"per_s": ok / elapsed, "ok": ok, "failed": fail}


def main():
    target = sys.argv[1]
    echo_port = int(sys.argv[2])
    iperf_port = int(sys.argv[3])
    want_gw = sys.argv[4] if len(sys.argv) > 4 else ""
    if want_gw and default_gateway() != want_gw:
        emit({"error": "default gateway is %s, expected %s"
              % (default_gateway(), want_gw)})
        return 1
    try:
        ready = wait_first_connect(target, echo_port, 30)
    except OSError as e:
        emit({"error": "no connection to %s:%d: %s" % (target, echo_port, e)})
        return 1
    emit({"ready": ready})
    idle, servers = [], []
    try:
        return serve_commands(target, echo_port, iperf_port, idle, servers)
    finally:
        for p in servers:
            p.terminate()


def serve_commands(target, echo_port, iperf_port, idle, servers):
    """Answers bench.py's commands until quit or the end of input."""
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "quit":
                emit({"bye": True})
                return 0
            if op == "iperf3":
                res = run_iperf3(target, iperf_port, cmd["args"], cmd["duration"])
            elif op == "echo_verify":
                res = echo_verify(target, echo_port, cmd["bytes"], cmd["limit"])
            elif op == "pingpong":
                res = pingpong(target, echo_port, cmd["count"], cmd["size"],
                               cmd["limit"])
            elif op == "udp_rr":
                res = udp_rr(target, cmd["port"], cmd["tool"], cmd["count"],
                             cmd["size"], cmd["limit"])
            elif op == "udp_flood":
                res = udp_flood(target, cmd["port"], cmd["tool"], cmd["role"],
                                cmd["len"], cmd["duration"])
            elif op == "connrate":
                res = connrate(target, echo_port, cmd["seconds"])
            elif op == "open_idle":
                res = open_idle(target, echo_port, cmd["count"], idle)
            elif op == "close_idle":
                res = close_idle(idle)
            elif op == "serve":
                res = serve(servers, cmd["iperf_port"], cmd["udp_port"], cmd.get("tool"))
            else:
                res = {"error": "unknown op " + op}
        except Exception as e:  # report, keep serving
            res = {"error": "%s: %s" % (type(e).__name__, e)}
        emit(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
