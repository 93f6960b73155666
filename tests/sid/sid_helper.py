#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Servers and clients of the sid Podman cases (tests/sid/podman_cases.sh).
The servers run inside a container (the image has python3), the clients in
the test's own network namespaces.

servers (run until killed):
  udp PORT          every datagram echoed, but "PEER?" answered with
                    "PEER <source address>"
  tcp-peer PORT     every connection gets "PEER <source address>\\n"

clients (print one line, exit 0 on success):
  udp-echo ADDR PORT COUNT SIZE   COUNT random datagrams of SIZE bytes, each
                    echoed back (retried); prints the sha256 of all that was
                    sent and of all that came back
  udp-peer ADDR PORT              prints the address the server saw
  tcp-peer ADDR PORT              the same over TCP
  resolve NAME                    the IPv4 address of NAME (the resolver of
                                  /etc/resolv.conf)
Clients retry for up to 15 s: the server may still be starting.
"""
import hashlib
import os
import socket
import sys
import time

RETRY_SECONDS = 15


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def serve_udp(port):
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    while True:
        data, peer = sock.recvfrom(65535)
        if data == b"PEER?":
            data = b"PEER " + unmapped(peer[0]).encode()
        sock.sendto(data, peer)


def serve_tcp_peer(port):
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("::", port))
    sock.listen(16)
    while True:
        conn, peer = sock.accept()
        with conn:
            conn.sendall(b"PEER " + unmapped(peer[0]).encode() + b"\n")


def unmapped(addr):
    return addr[7:] if addr.startswith("::ffff:") else addr


def udp_exchange(sock, dest, msg, want=None):
    """Sends msg until a reply (equal to want, when given) arrives."""
    end = time.monotonic() + RETRY_SECONDS
    while time.monotonic() < end:
        sock.sendto(msg, dest)
        try:
            reply = sock.recv(65535)
        except socket.timeout:
            continue
        if want is None or reply == want:
            return reply
    raise SystemExit(f"no reply from {dest[0]}:{dest[1]} within {RETRY_SECONDS} s")


def udp_echo(addr, port, count, size):
    sock = socket.socket(family(addr), socket.SOCK_DGRAM)
    sock.settimeout(0.3)
    sent, got = hashlib.sha256(), hashlib.sha256()
    for _ in range(count):
        msg = os.urandom(size)
        sent.update(msg)
        got.update(udp_exchange(sock, (addr, port), msg, want=msg))
    print(f"sent {sent.hexdigest()} echoed {got.hexdigest()}")


def udp_peer(addr, port):
    sock = socket.socket(family(addr), socket.SOCK_DGRAM)
    sock.settimeout(0.3)
    print(udp_exchange(sock, (addr, port), b"PEER?").decode())


def tcp_peer(addr, port):
    end = time.monotonic() + RETRY_SECONDS
    while True:
        try:
            with socket.create_connection((addr, port), timeout=3) as conn:
                line = conn.makefile().readline().strip()
            if line:
                print(line)
                return
        except OSError as e:
            if time.monotonic() > end:
                raise SystemExit(f"tcp {addr}:{port}: {e}")
        time.sleep(0.2)


def resolve(name):
    end = time.monotonic() + RETRY_SECONDS
    while True:
        try:
            print(socket.gethostbyname(name))
            return
        except OSError as e:
            if time.monotonic() > end:
                raise SystemExit(f"resolve {name}: {e}")
        time.sleep(0.5)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "udp":
        serve_udp(int(args[0]))
    elif mode == "tcp-peer" and len(args) == 1:
        serve_tcp_peer(int(args[0]))
    elif mode == "tcp-peer":
        tcp_peer(args[0], int(args[1]))
    elif mode == "udp-echo":
        udp_echo(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif mode == "udp-peer":
        udp_peer(args[0], int(args[1]))
    elif mode == "resolve":
        resolve(args[0])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
