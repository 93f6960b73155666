#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""UDP GSO sends from the guest for the e2e udp_gso case (loopback only).

  udp_gso_helper.py sink PORT
      on the host: receives on 127.0.0.1:PORT until 3 s pass without a
      datagram (20 s for the first); prints "got N datagrams SIZES sha=HEX".
  udp_gso_helper.py send ADDR PORT SEG BYTES COUNT
      in the guest: COUNT sends of BYTES bytes each with UDP_SEGMENT SEG (the
      kernel makes datagrams of SEG bytes, the last perhaps shorter), as a
      QUIC stack sends; prints what the sink must print.
"""
import collections
import hashlib
import socket
import sys
import time

SOL_UDP, UDP_SEGMENT = 17, 103
SO_RCVBUFFORCE = 33


def payload(i, n):
    return bytes((i * 31 + j * 7) % 251 for j in range(n))


def describe(sizes, digest):
    c = collections.Counter(sizes)
    return "got %d datagrams %s sha=%s" % (
        len(sizes), ",".join("%dx%d" % (c[k], k) for k in sorted(c)), digest.hexdigest())


def sink(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # root: past rmem_max, so no burst overflows the sink
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", port))
    print("ready", flush=True)
    s.settimeout(20)
    sizes, h = [], hashlib.sha256()
    try:
        while True:
            d = s.recv(65535)
            sizes.append(len(d))
            h.update(d)
            s.settimeout(3)
    except socket.timeout:
        pass
    print(describe(sizes, h))


def send(addr, port, seg, nbytes, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(SOL_UDP, UDP_SEGMENT, seg)
    sizes, h = [], hashlib.sha256()
    for i in range(count):
        data = payload(i, nbytes)
        s.sendto(data, (addr, port))
        time.sleep(0.005)  # a sink that is slow to start loses nothing
        for off in range(0, nbytes, seg):
            sizes.append(len(data[off:off + seg]))
            h.update(data[off:off + seg])
    print(describe(sizes, h))


def main():
    a = sys.argv
    if len(a) == 3 and a[1] == "sink":
        sink(int(a[2]))
        return 0
    if len(a) == 7 and a[1] == "send":
        send(a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
