#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0

"""TCP echo server for the latency and connection-rate tests.

usage: echo_server.py ADDR PORT
One thread, non-blocking sockets: echoes whatever arrives, closes on EOF or
error. Meant to bind only to loopback or to an address inside a namespace the
benchmark created.
"""
import resource
import selectors
import socket
import sys


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    # The idle-connections test holds thousands open at once.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    lsock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((addr, port))
    lsock.listen(1024)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is lsock:
                try:
                    while True:
                        c, _ = lsock.accept()
                        c.setblocking(False)
                        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        sel.register(c, selectors.EVENT_READ)
                except (BlockingIOError, InterruptedError):
                    pass
                continue
            try:
                data = s.recv(65536)
                if data:
                    s.setblocking(True)  # replies are small: never blocks long
                    s.sendall(data)
                    s.setblocking(False)
                    continue
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                pass
            sel.unregister(s)
            s.close()


if __name__ == "__main__":
    main()
