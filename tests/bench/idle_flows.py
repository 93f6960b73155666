#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""What idle TCP flows cost one driver: memory per idle flow and the TCP
ping-pong's latency with them open, against the same run without them.

Starts build/bin/rootlesskit with a driver (default: the plugin with
--plugin-tcp=slirp, TCP through libslirp) and this script as the guest
agent; the guest opens --flows connections to an echo server on the
host's 127.0.0.1 (through the gateway 10.0.2.2) and leaves them idle. The
host side reads the stack's process (rootlesskit's parent, or the helper
named by --helper) before and after: RSS from smaps_rollup, the heap's
and the anonymous maps' shares from smaps. Loopback only: nothing leaves
this machine. Prints one JSON object; --repeat runs that many ping-pongs
of --count round trips each way and keeps the median p50;
--max-kib-per-flow K fails (exit 1) when an idle flow costs more than K
KiB (the ctest idle-flows-memory: 64, a quarter of what libslirp's two
heap-copied buffers cost).

    tests/bench/idle_flows.py --flows 4000
    tests/bench/idle_flows.py --flows 4000 --rootlesskit-args --net=slirp4netns
"""
import argparse
import json
import os
import resource
import select
import socket
import socketserver
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs  # noqa: E402
from agent import recv_exact  # noqa: E402


# --- guest side (run inside the network by rootlesskit) --------------------

def guest(gateway, port):
    """Reads commands on stdin, answers one JSON line each on stdout."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = []
    rr = socket.create_connection((gateway, port), timeout=120)
    rr.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "open":
            while len(held) < cmd["count"]:
                held.append(socket.create_connection((gateway, port), timeout=120))
            # Every one reached the host (none half-open) and carried a byte.
            for s in held:
                s.sendall(b"i")
            for s in held:
                recv_exact(s, 1)
            out = {"open": len(held)}
        elif cmd["op"] == "pingpong":
            msg = b"x" * cmd["size"]
            lat = []
            for _ in range(cmd["count"]):
                t = time.perf_counter_ns()
                rr.sendall(msg)
                recv_exact(rr, len(msg))
                lat.append((time.perf_counter_ns() - t) / 1000.0)
            lat.sort()
            out = {"p50_us": lat[len(lat) // 2], "p99_us": lat[int(len(lat) * 0.99)]}
        elif cmd["op"] == "bulk":
            # A connection that carries cmd["mb"] MiB each way, then closes:
            # what the benchmark's iperf3 runs do before its idle flows.
            b = socket.create_connection((gateway, port), timeout=120)
            chunk, total = b"b" * 65536, cmd["mb"] << 20
            got = [0]

            def drain():
                while got[0] < total:
                    n = len(b.recv(65536))
                    if n == 0:
                        break
                    got[0] += n
            t = threading.Thread(target=drain)
            t.start()
            for _ in range(total // len(chunk)):
                b.sendall(chunk)
            t.join()
            b.close()
            out = {"bulk_bytes": got[0]}
        elif cmd["op"] == "close":
            for s in held:
                s.close()
            out = {"closed": len(held)}
            held.clear()
        else:
            out = {"error": "unknown op"}
        print(json.dumps(out), flush=True)


# --- host side ---------------------------------------------------------------

class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = s.recv(65536)
            if not data:
                return
            s.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 4096


def memory_kib(pid):
    """RSS and where it lives: the heap ([heap]) and the other anonymous
    maps (glibc's mmapped chunks and its thread arenas), from smaps."""
    out = {"rss": 0, "heap": 0, "anon_maps": 0, "anon_maps_n": 0}
    name = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            parts = line.split()
            if not parts[0].endswith(":") or "-" in parts[0]:
                name = parts[5] if len(parts) > 5 else ""
                if name == "":
                    out["anon_maps_n"] += 1
                continue
            if parts[0] == "Rss:":
                kib = int(parts[1])
                out["rss"] += kib
                if name == "[heap]":
                    out["heap"] += kib
                elif name == "":
                    out["anon_maps"] += kib
    return out


def stack_pid(root, helper):
    """The process carrying the stack: the helper (by comm) if named, else
    the first rootlesskit (the parent) below root."""
    for _ in range(100):
        ps = procs.all_procs()
        for pid in procs.descendants(root, ps):
            comm, exe = ps[pid][2], ps[pid][3]
            if (helper and helper in (comm, exe)) or (not helper and comm == "rootlesskit"):
                return pid
        time.sleep(0.1)
    raise RuntimeError("no stack process below %d" % root)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--guest", nargs=2, metavar=("GATEWAY", "PORT"), help=argparse.SUPPRESS)
    ap.add_argument("--flows", type=int, default=4000)
    ap.add_argument("--count", type=int, default=500, help="round trips a ping-pong")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--bulk-mb", type=int, default=64,
                    help="MiB each way over one connection before the idle flows (0: none)")
    ap.add_argument("--user", default=os.environ.get("RKNP_TEST_USER", "rknptest"))
    ap.add_argument("--rootlesskit", default=os.path.join(ROOT, "build/bin/rootlesskit"))
    ap.add_argument("--plugin-lib", default=os.path.join(ROOT, "build/lib/librknp.so.1"))
    ap.add_argument("--helper", default="", help="comm of a stack helper (slirp4netns)")
    ap.add_argument("--max-kib-per-flow", type=float, default=0,
                    help="exit 1 if an idle flow costs more (0: report only)")
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE for rootlesskit's environment")
    ap.add_argument("--rootlesskit-args", nargs=argparse.REMAINDER,
                    help="driver flags (default: the plugin, --plugin-tcp=slirp)")
    o = ap.parse_args()
    if o.guest:
        return guest(o.guest[0], int(o.guest[1]))

    server = EchoServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    net = o.rootlesskit_args or ["--net=plugin", "--net-plugin=" + o.plugin_lib,
                                 "--plugin-tcp=slirp"]
    env = dict(os.environ)
    for kv in o.env:
        k, v = kv.split("=", 1)
        env[k] = v
    argv = (["runuser", "-u", o.user, "--", "env"] + o.env + [o.rootlesskit] + net +
            ["--mtu=1500", "--", "/usr/bin/python3", os.path.abspath(__file__),
             "--guest", "10.0.2.2", str(port)])
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(cmd):
        p.stdin.write(json.dumps(cmd) + "\n")
        p.stdin.flush()
        r, _, _ = select.select([p.stdout], [], [], 600)
        if not r:
            raise RuntimeError("guest did not answer %s" % cmd)
        return json.loads(p.stdout.readline())

    def pingpong():
        p50 = [ask({"op": "pingpong", "count": o.count, "size": o.size})["p50_us"]
               for _ in range(o.repeat)]
        return {"p50_us": round(statistics.median(p50), 1), "runs": [round(x, 1) for x in p50]}

    try:
        ask({"op": "pingpong", "count": 50, "size": o.size})  # warm-up
        pid = stack_pid(p.pid, o.helper)
        res = {"argv": net, "env": o.env, "flows": o.flows}
        res["before"] = memory_kib(pid)
        res["idle_free"] = pingpong()
        if o.bulk_mb:
            res["bulk"] = ask({"op": "bulk", "mb": o.bulk_mb})
            res["after_bulk"] = memory_kib(pid)
        t = time.monotonic()
        res["open"] = ask({"op": "open", "count": o.flows})
        res["open_s"] = round(time.monotonic() - t, 2)
        time.sleep(1)
        res["with_idle"] = memory_kib(pid)
        res["with_idle_rr"] = pingpong()
        base = res.get("after_bulk", res["before"])["rss"]
        res["kib_per_flow"] = round((res["with_idle"]["rss"] - base) / max(1, o.flows), 1)
        res["p50_ratio"] = round(res["with_idle_rr"]["p50_us"] / res["idle_free"]["p50_us"], 2)
        ask({"op": "close"})
        time.sleep(2)
        res["after_close"] = memory_kib(pid)
        print(json.dumps(res, indent=1))
        if o.max_kib_per_flow and res["kib_per_flow"] > o.max_kib_per_flow:
            print("FAIL: %.1f KiB an idle flow, more than %.1f" %
                  (res["kib_per_flow"], o.max_kib_per_flow), file=sys.stderr)
            return 1
        return 0
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
