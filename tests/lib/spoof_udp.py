#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Sends UDP datagrams with a forged IPv4 source through a raw socket.

spoof_udp.py SRC DST PORT COUNT TAG: COUNT datagrams "TAG <n>" from SRC
(any address: the point is one the guest does not own) to DST:PORT. Needs
CAP_NET_RAW in the network namespace (root of the test's user namespace).
"""
import socket
import struct
import sys


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def main():
    src, dst, port, count, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    for n in range(count):
        payload = ("%s %d" % (tag, n)).encode()
        udp_len = 8 + len(payload)
        sport = 20000 + n
        pseudo = s + d + struct.pack("!BBH", 0, 17, udp_len)
        udp = struct.pack("!HHHH", sport, port, udp_len, 0) + payload
        udp = udp[:6] + struct.pack("!H", checksum(pseudo + udp) or 0xFFFF) + udp[8:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, n, 0, 64, 17, 0, s, d)
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        raw.sendto(ip + udp, (dst, 0))


if __name__ == "__main__":
    main()
