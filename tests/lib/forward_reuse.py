#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Clients of a published port that reuse a few source ports, and the
server behind it: the case where libslirp 4.7.0 held two connections on
one 4-tuple (plugin/slirp/forward_reaper.hpp).

  forward_reuse.py server PORT LOG      inside: each connection is read to
      its EOF, held 0-0.2 s, answered with 10 bytes (to a client long gone:
      a reset comes back) and closed; "ID LENGTH" appended to LOG for each
      (-1: bytes missing or changed), after a first line "listening"
  forward_reuse.py client PORT N LO-HI SENT
      on the host: N connections (or as many as 20 s allow) to
      127.0.0.1:PORT, each bound to a random source port in LO-HI, sending an 8-byte id and length then the
      payload, closing at once; "ID LENGTH" in SENT for each that connected
      and sent everything (a port still in use is skipped)
  forward_reuse.py compare SENT LOG     exit 0 when every sent connection
      arrived whole, else the missing ones on stdout
"""
import random
import socket
import struct
import sys
import threading
import time


def server(port, log):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(512)
    lock = threading.Lock()
    out = open(log, "a", buffering=1)
    out.write("listening\n")

    def handle(c):
        with c:
            data = bytearray()
            while True:
                d = c.recv(65536)
                if not d:
                    break
                data += d
            if len(data) >= 8:
                cid, length = struct.unpack("!II", data[:8])
                ok = len(data) - 8 == length and data[8:] == bytes([cid % 251]) * length
                with lock:
                    out.write(f"{cid} {length if ok else -1}\n")
            time.sleep(random.uniform(0, 0.2))
            try:
                c.sendall(b"x" * 10)
            except OSError:
                pass

    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


def client(port, n, ports, sent):
    lo, hi = map(int, ports.split("-"))
    deadline = time.monotonic() + 20
    made = 0
    with open(sent, "w") as out:
        for cid in range(1 << 30):
            if made == n or time.monotonic() > deadline:
                break
            length = random.choice([10, 1000, 30000])
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", random.randint(lo, hi)))
                s.settimeout(10)
                s.connect(("127.0.0.1", port))
            except OSError:  # the port's last connection still holds it
                s.close()
                time.sleep(0.01)
                continue
            made += 1
            try:
                s.sendall(struct.pack("!II", cid, length) + bytes([cid % 251]) * length)
                out.write(f"{cid} {length}\n")
            except OSError:
                pass
            s.close()
            time.sleep(random.uniform(0, 0.01))


def compare(sent, log):
    got = {}
    for line in open(log):
        if line.strip() != "listening":
            cid, length = line.split()
            got[cid] = length
    missing = [line.strip() for line in open(sent) if got.get(line.split()[0]) != line.split()[1]]
    for m in missing:
        print("not arrived whole: connection", m)
    return 1 if missing else 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "server":
        server(int(sys.argv[2]), sys.argv[3])
    elif mode == "client":
        client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
