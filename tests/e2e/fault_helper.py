#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Both ends of the fault test's transfers (tests/e2e/faults.sh).

Every transfer carries one known byte stream (a 1 MiB random block from a
fixed seed, repeated), so either end checks the bytes it got are an exact
prefix of it: a fault may cut a transfer short, never change its bytes.

  server ADDR PORT
      accepts connections; each sends a line "down N" (the server sends N
      bytes) or "up N" (the client sends N bytes, the server reads them).
      One line per connection when it ends, e.g.
        server down bytes=123 end=reset t=1700000000.123
  client ADDR PORT down|up N RATE TIMEOUT
      one transfer at RATE bytes/s (0: as fast as possible); prints
        client started ...     once 256 KiB went through,
        client down bytes=... end=ok|eof|reset|error|timeout|corrupt
                 sha=... t=... (sha: of the bytes, when all N arrived)
      end=timeout means TIMEOUT seconds without progress: a hang.

end: ok (all N bytes, as sent), eof (the peer closed early), reset
(ECONNRESET/EPIPE/ECONNABORTED), error (another OSError, named in err=),
corrupt (a byte differs from the stream), timeout (no progress).
"""
import hashlib
import os
import random
import socket
import sys
import threading
import time

BLOCK = random.Random(38).randbytes(1 << 20)
CHUNK = 64 << 10
STARTED = 256 << 10


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def piece(offset, n):
    """n bytes of the stream from offset (n <= CHUNK)."""
    o = offset % len(BLOCK)
    b = BLOCK[o:o + n]
    return b if len(b) == n else b + BLOCK[: n - len(b)]


def classify(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "reset"
    return "error"


class Transfer:
    """One side's bytes of one transfer: counts, checks, hashes."""

    def __init__(self, total):
        self.total = total
        self.done = 0
        self.sha = hashlib.sha256()
        self.corrupt = False

    def received(self, data):
        if data != piece(self.done, len(data)):
            self.corrupt = True
        self.sha.update(data)
        self.done += len(data)

    def next_send(self):
        n = min(CHUNK, self.total - self.done)
        data = piece(self.done, n)
        return data

    def sent(self, data):
        self.sha.update(data)
        self.done += len(data)


def run(sock, direction, t, rate, on_progress):
    """Moves the bytes; returns (end, err)."""
    start = time.monotonic()
    try:
        while t.done < t.total:
            if direction == "send":
                data = t.next_send()
                sock.sendall(data)
                t.sent(data)
            else:
                data = sock.recv(CHUNK)
                if not data:
                    return "eof", ""
                t.received(data)
                if t.corrupt:
                    return "corrupt", ""
            on_progress(t.done)
            if rate:
                ahead = t.done / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        if direction == "send":
            sock.shutdown(socket.SHUT_WR)
            # The receiver closes after the last byte: wait for it, so
            # that a cut after the last send is seen too.
            if sock.recv(1):
                return "error", "unexpected bytes"
        return "ok", ""
    except OSError as e:
        return classify(e), type(e).__name__ + ":" + str(e.errno)


def summary(role, mode, t, end, err):
    sha = t.sha.hexdigest() if end == "ok" else "-"
    return f"{role} {mode} bytes={t.done} end={end} err={err or '-'} sha={sha} t={time.time():.3f}"


def request_line(conn):
    """The client's "down N" / "up N" line, read a byte at a time so that
    no byte of an upload is read with it."""
    line = b""
    while not line.endswith(b"\n") and len(line) < 64:
        b = conn.recv(1)
        if not b:
            break
        line += b
    return line.decode(errors="replace").split()


def serve_one(conn):
    with conn:
        conn.settimeout(120)
        try:
            line = request_line(conn)
        except OSError:
            return
        if len(line) != 2 or line[0] not in ("down", "up"):
            return
        mode, total = line[0], int(line[1])
        t = Transfer(total)
        # The client's rate sets the pace: the server moves bytes as fast
        # as the client takes or gives them.
        end, err = run(conn, "send" if mode == "down" else "recv", t, 0, lambda _: None)
        out(summary("server", mode, t, end, err))


def server(addr, port):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    s.listen(64)
    out("server ready")
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve_one, args=(conn,), daemon=True).start()


def client(addr, port, mode, total, rate, timeout):
    total, rate, timeout = int(total), int(rate), float(timeout)
    t = Transfer(total)
    state = {"started": False}

    def progress(done):
        if not state["started"] and done >= STARTED:
            state["started"] = True
            out(f"client started {mode} t={time.time():.3f}")

    try:
        s = socket.create_connection((addr, int(port)), timeout=timeout)
        s.settimeout(timeout)
        s.sendall(f"{mode} {total}\n".encode())
    except OSError as e:
        out(summary("client", mode, t, classify(e), type(e).__name__))
        return 1
    end, err = run(s, "recv" if mode == "down" else "send", t, rate, progress)
    out(summary("client", mode, t, end, err))
    s.close()
    return 0 if end == "ok" else 1


def main():
    cmd = sys.argv[1]
    if cmd == "server":
        server(*sys.argv[2:4])
    elif cmd == "client":
        sys.exit(client(*sys.argv[2:8]))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
