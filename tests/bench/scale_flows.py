#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Many TCP flows at once, for tests/bench/scale.sh (issue 38, part 4).

  server PORT...
      accepts on 127.0.0.1:PORT each, holds every connection and echoes
      what it reads; prints "ready" once listening.
  clients HOST PORT,PORT,... N MODE SECONDS [GO_FILE]
      (once GO_FILE exists, when given) opens N connections to HOST, spread over the ports (one port has
      ~28k source ports per destination), then prints
        open N in T s
      MODE active: for SECONDS every flow sends 64 bytes and waits for
      them back, all flows at once, round after round; prints
        active flows=N rounds=R exchanges=X per_s=... p50_ms=... p99_ms=...
      MODE idle: holds them SECONDS. Then "done" and exits (closing all).

One thread and epoll each: 100,000 sockets fit where the fd limit allows
(the caller raises it). Bytes are checked: an echo that differs fails.
"""
import errno
import os
import resource
import select
import socket
import sys
import time

MSG = bytes(range(64))


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def raise_nofile():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def server(ports):
    raise_nofile()
    ep = select.epoll()
    listeners, conns = {}, {}
    for p in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", int(p)))
        s.listen(4096)
        s.setblocking(False)
        listeners[s.fileno()] = s
        ep.register(s.fileno(), select.EPOLLIN)
    out("ready")
    while True:
        for fd, ev in ep.poll(1.0, 4096):
            if fd in listeners:
                while True:
                    try:
                        c, _ = listeners[fd].accept()
                    except (BlockingIOError, OSError):
                        break
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            c = conns.get(fd)
            if c is None:
                continue
            try:
                data = c.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                ep.unregister(fd)
                conns.pop(fd).close()
                continue
            try:
                c.send(data)
            except OSError:
                pass


def open_all(host, ports, n):
    ep = select.epoll()
    socks, pending = [], {}
    t0 = time.monotonic()
    batch = 512
    i = 0
    while i < n or pending:
        while i < n and len(pending) < batch:
            s = socket.socket()
            s.setblocking(False)
            err = s.connect_ex((host, ports[i % len(ports)]))
            if err not in (0, errno.EINPROGRESS):
                sys.exit(f"connect {i}: {errno.errorcode.get(err, err)}")
            pending[s.fileno()] = s
            ep.register(s.fileno(), select.EPOLLOUT)
            i += 1
        for fd, _ in ep.poll(10.0):
            s = pending.pop(fd)
            ep.unregister(fd)
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                sys.exit(f"connect: {errno.errorcode.get(err, err)} after {len(socks)} flows")
            socks.append(s)
        if time.monotonic() - t0 > 600:
            sys.exit(f"only {len(socks)} of {n} flows open after 600 s")
    out(f"open {len(socks)} in {time.monotonic() - t0:.1f} s")
    return socks


def active(socks, seconds):
    ep = select.epoll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        ep.register(fd, select.EPOLLIN)
    got = dict.fromkeys(by_fd, 0)
    sent_at = {}
    rtts = []
    rounds = exchanges = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        now = time.monotonic()
        for fd, s in by_fd.items():
            s.send(MSG)
            sent_at[fd] = now
            got[fd] = 0
        left = len(by_fd)
        while left:
            events = ep.poll(30.0)
            if not events:
                sys.exit(f"no echo for 30 s, {left} flows waiting")
            for fd, _ in events:
                data = by_fd[fd].recv(256)
                if not data:
                    sys.exit("a flow closed")
                if data != MSG[got[fd]:got[fd] + len(data)]:
                    sys.exit("echo differs")
                got[fd] += len(data)
                if got[fd] == len(MSG):
                    left -= 1
                    exchanges += 1
                    if len(rtts) < 200000:
                        rtts.append(time.monotonic() - sent_at[fd])
        rounds += 1
    rtts.sort()
    p = lambda q: rtts[min(len(rtts) - 1, int(q * len(rtts)))] * 1000 if rtts else 0
    out(f"active flows={len(by_fd)} rounds={rounds} exchanges={exchanges} "
        f"per_s={exchanges / seconds:.0f} p50_ms={p(0.5):.2f} p99_ms={p(0.99):.2f}")


def clients(host, ports, n, mode, seconds, go_file=None):
    raise_nofile()
    while go_file and not os.path.exists(go_file):
        time.sleep(0.1)
    socks = open_all(host, [int(p) for p in ports.split(",")], int(n))
    if mode == "active":
        active(socks, float(seconds))
    else:
        time.sleep(float(seconds))
    out("done")


def main():
    if sys.argv[1] == "server":
        server(sys.argv[2:])
    elif sys.argv[1] == "clients":
        clients(*sys.argv[2:8])
    else:
        sys.exit("usage: scale_flows.py server PORT... | clients HOST PORTS N MODE SECONDS")


if __name__ == "__main__":
    main()
