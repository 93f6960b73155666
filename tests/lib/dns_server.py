#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Minimal authoritative DNS responder for tests: answers A queries for the
names given as NAME=IP arguments, NXDOMAIN for everything else.

usage: dns_server.py ADDR PORT NAME=IP [NAME=IP ...]   (ADDR IPv4 or IPv6)
"""
import socket
import struct
import sys


def parse_qname(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def answer(query, records):
    ident, flags, qd = struct.unpack("!HHH", query[:6])
    name, end = parse_qname(query, 12)
    qtype, qclass = struct.unpack("!HH", query[end:end + 4])
    question = query[12:end + 4]
    ip = records.get(name)
    rd = flags & 0x0100
    if ip is None or qtype != 1:
        rcode = 3 if ip is None else 0
        return struct.pack("!HHHHHH", ident, 0x8480 | rd | rcode, 1, 0, 0, 0) + question
    rr = struct.pack("!HHHLH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(ip)
    return struct.pack("!HHHHHH", ident, 0x8480 | rd, 1, 1, 0, 0) + question + rr


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    records = dict(a.lower().split("=", 1) for a in sys.argv[3:])
    sock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((addr, port))
    print("ready", flush=True)
    while True:
        query, peer = sock.recvfrom(4096)
        try:
            sock.sendto(answer(query, records), peer)
        except (IndexError, struct.error):
            pass  # malformed query: no answer


if __name__ == "__main__":
    main()
