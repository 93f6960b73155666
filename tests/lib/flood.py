#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""A guest flooding the stack with new flows, and the loopback side it aims at.

  flood.py send SRC DST TCP_PORT UDP_PORT COUNT RATE
      inside the child's network namespace (needs CAP_NET_RAW there):
      COUNT TCP SYNs to DST:TCP_PORT and COUNT UDP datagrams to
      DST:UDP_PORT, interleaved, from SRC (the guest's own address, which
      guest_filter lets through) and source ports cycling through
      1024..65535 (64512 UDP sources: libslirp keys UDP sockets by source),
      paced at RATE frames a second so the tap delivers them rather than
      its queue dropping them. The guest's kernel resets every SYN-ACK the
      stack sends back (it has no such socket). Prints "flood-sent N".
  flood.py sink TCP_PORT UDP_PORT
      on 127.0.0.1: a TCP listener that accepts and closes at once and a
      UDP socket that never reads. Prints "sink ready"; runs until killed.
"""
import errno
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spoof_udp import checksum  # noqa: E402  (the same Internet checksum)

PORTS = 65536 - 1024


def source_port(n):
    return 1024 + n % PORTS


def ipv4(s, d, proto, ident, payload):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident & 0xFFFF, 0, 64, proto, 0, s, d)
    return ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:] + payload


def syn(s, d, sport, dport, n):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1000 + n, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = s + d + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    return ipv4(s, d, 6, n, tcp)


def udp(s, d, sport, dport, n):
    payload = b"flood %d" % n
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    pseudo = s + d + struct.pack("!BBH", 0, 17, len(u))
    u = u[:6] + struct.pack("!H", checksum(pseudo + u) or 0xFFFF) + u[8:]
    return ipv4(s, d, 17, n, u)


def send(src, dst, tcp_port, udp_port, count, rate):
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    batch = 100
    start = time.monotonic()
    sent = 0
    for n in range(count):
        sport = source_port(n)
        for frame in (udp(s, d, sport, udp_port, n), syn(s, d, sport, tcp_port, n)):
            while True:
                try:
                    raw.sendto(frame, (dst, 0))
                    break
                except OSError as e:  # the tap's queue is full: let it drain
                    if e.errno != errno.ENOBUFS:
                        raise
                    time.sleep(0.002)
            sent += 1
        if sent % batch == 0:
            ahead = start + sent / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    print("flood-sent %d" % sent, flush=True)


def sink(tcp_port, udp_port):
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("127.0.0.1", tcp_port))
    t.listen(4096)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", udp_port))
    print("sink ready", flush=True)
    while True:
        c, _ = t.accept()
        c.close()


def main():
    if sys.argv[1] == "send":
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
    elif sys.argv[1] == "sink":
        sink(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
