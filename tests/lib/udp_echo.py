#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""UDP echo for forwarding tests.

server: udp_echo.py ADDR PORT            echoes every datagram (ADDR with a
                                         colon: IPv6, both ways)
client: udp_echo.py --client ADDR PORT [SIZE]   sends a random datagram of
                                         SIZE bytes (512), expects it back
                                         (retries for ~10 s)
"""
import os
import socket
import sys


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def main():
    if sys.argv[1] == "--client":
        addr, port = sys.argv[2], int(sys.argv[3])
        sock = socket.socket(family(addr), socket.SOCK_DGRAM)
        sock.settimeout(0.5)
        msg = os.urandom(int(sys.argv[4]) if len(sys.argv) > 4 else 512)
        for _ in range(20):
            sock.sendto(msg, (addr, port))
            try:
                if sock.recv(65535) == msg:
                    return 0
            except socket.timeout:
                continue
        return 1
    sock = socket.socket(family(sys.argv[1]), socket.SOCK_DGRAM)
    sock.bind((sys.argv[1], int(sys.argv[2])))
    while True:
        data, peer = sock.recvfrom(65535)
        sock.sendto(data, peer)


if __name__ == "__main__":
    sys.exit(main())
