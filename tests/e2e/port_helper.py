#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Servers and a UDP client for the e2e port cases (loopback / test netns only).

  port_helper.py serve DIR TCP_PORT UDP_PORT
      inside rootlesskit: HTTP on 0.0.0.0:TCP_PORT serving DIR and a UDP
      echo on 0.0.0.0:UDP_PORT; logs "tcp-peer ADDR ..." per request so a
      case can see which source address reached the child. Exits on SIGTERM.
  port_helper.py udp-echo ADDR PORT [--from-loopback]
      sends random datagrams to ADDR:PORT until one comes back unchanged
      (prints "udp-echo-ok N") or gives up after ~10 s (exit 1).
      --from-loopback: from a socket on 127.0.0.1 connect()ed to ADDR, as
      a DNS client is: only replies from ADDR itself count.
"""
import functools
import http.server
import os
import socket
import sys
import threading
import time


def serve(directory, tcp_port, udp_port):
    def echo():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", udp_port))
        while True:
            data, addr = s.recvfrom(65535)
            s.sendto(data, addr)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            print("tcp-peer", self.client_address[0], fmt % args, file=sys.stderr, flush=True)

    srv = http.server.ThreadingHTTPServer(
        ("0.0.0.0", tcp_port), functools.partial(Handler, directory=directory))
    threading.Thread(target=echo, daemon=True).start()
    print("port_helper ready", file=sys.stderr, flush=True)
    srv.serve_forever()


def udp_echo(addr, port, from_loopback=False):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.5)
    if from_loopback:
        s.bind(("127.0.0.1", 0))
        s.connect((addr, port))
    for _ in range(20):
        msg = os.urandom(1200)
        try:
            s.sendto(msg, (addr, port)) if not from_loopback else s.send(msg)
            while True:  # skip late replies to earlier attempts
                data, _ = s.recvfrom(65535)
                if data == msg:
                    print("udp-echo-ok", len(data))
                    return 0
        except (socket.timeout, ConnectionRefusedError):
            time.sleep(0.1)
    print("no UDP echo from %s:%d" % (addr, port), file=sys.stderr)
    return 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) in (4, 5) and sys.argv[1] == "udp-echo":
        if len(sys.argv) == 5 and sys.argv[4] != "--from-loopback":
            print(__doc__, file=sys.stderr)
            return 2
        return udp_echo(sys.argv[2], int(sys.argv[3]), len(sys.argv) == 5)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
