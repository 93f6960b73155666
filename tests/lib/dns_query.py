#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Sends one A query for NAME to SERVER:53 (IPv4 or IPv6) over UDP and prints the first
address of the answer; exits 1 on timeout, NXDOMAIN or an empty answer.

usage: dns_query.py SERVER NAME
"""
import random
import socket
import struct
import sys


def main():
    server, name = sys.argv[1], sys.argv[2]
    ident = random.randrange(65536)
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    query = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)
    sock = socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET,
                         socket.SOCK_DGRAM)
    sock.settimeout(3)
    for _ in range(3):
        sock.sendto(query, (server, 53))
        try:
            resp = sock.recv(4096)
        except socket.timeout:
            continue
        rid, flags, _, ancount = struct.unpack("!HHHH", resp[:8])
        if rid != ident or flags & 0xF or ancount == 0:
            print(f"no answer (rcode {flags & 0xF})", file=sys.stderr)
            sys.exit(1)
        # The A record is the last 4 bytes of a single-answer response.
        print(socket.inet_ntoa(resp[-4:]))
        return
    print("timeout", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
