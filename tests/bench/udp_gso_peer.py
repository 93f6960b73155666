#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Both ends of tests/bench/udp_gso.sh (loopback and the child only).

  udp_gso_peer.py source ADDR PORT SEG SECONDS gso|plain [--wait-hello]
      sends datagrams of SEG bytes to ADDR:PORT for SECONDS: with gso,
      65000/SEG of them a send (UDP_SEGMENT, as QUIC stacks send); plain,
      one a send. --wait-hello: bind ADDR:PORT instead and send to whoever
      says hello first (iperf3 -R's way through a NAT). Prints the rate
      offered.
  udp_gso_peer.py sink ADDR PORT [--hello HOST:PORT]
      receives on ADDR:PORT (UDP_GRO, 8 MiB buffer) until a second passes
      without data after the first (20 s for it); --hello: says hello to
      HOST:PORT until data comes. Prints what arrived and how fast.
"""
import socket
import sys
import time

SOL_UDP, UDP_SEGMENT, UDP_GRO, SO_RCVBUFFORCE = 17, 103, 104, 33


def source(addr, port, seg, secs, gso, wait_hello):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if wait_hello:
        s.bind((addr, port))
        print("ready", flush=True)
        s.settimeout(20)
        _, peer = s.recvfrom(64)
        s.connect(peer)
    else:
        s.connect((addr, port))
    if gso:
        s.setsockopt(SOL_UDP, UDP_SEGMENT, seg)
    data = bytes(seg * (65000 // seg if gso else 1))
    n, end = 0, time.monotonic() + secs
    while time.monotonic() < end:
        for _ in range(50 if gso else 2000):
            try:
                n += s.send(data)
            except OSError:  # a full or refused path: what arrives counts
                pass
    print("offered %.2f Gbit/s" % (n * 8 / secs / 1e9))


def sink(addr, port, hello):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # root here (the host, or the child's namespace): past rmem_max
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(SOL_UDP, UDP_GRO, 1)  # several datagrams a read
    s.bind((addr, port))
    print("ready", flush=True)
    n, first, last, deadline = 0, None, None, time.monotonic() + 20
    s.settimeout(0.2 if hello else 20)
    while True:
        if hello and first is None:
            if time.monotonic() > deadline:
                break
            s.sendto(b"hello", hello)
        try:
            d = s.recv(65535)
        except socket.timeout:
            if first is not None or not hello:
                break
            continue
        last = time.monotonic()
        first = first or last
        n += len(d)
        s.settimeout(1)
    span = (last - first) if first else 0
    print("arrived %d bytes in %.2f s: %.2f Gbit/s" % (
        n, span, n * 8 / span / 1e9 if span else 0))


def main():
    a = sys.argv
    if len(a) in (7, 8) and a[1] == "source" and a[6] in ("gso", "plain"):
        source(a[2], int(a[3]), int(a[4]), float(a[5]), a[6] == "gso",
               len(a) == 8 and a[7] == "--wait-hello")
        return 0
    if len(a) in (4, 6) and a[1] == "sink":
        hello = None
        if len(a) == 6 and a[4] == "--hello":
            host, port = a[5].rsplit(":", 1)
            hello = (host, int(port))
        sink(a[2], int(a[3]), hello)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
