#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The soak test's traffic (tests/soak/run.sh): servers and clients that
check every byte they receive, driven by files in a control directory.

  traffic.py node CONFIG NAME     one node of CONFIG (JSON): its servers
                                  and/or clients (host, remote, guest-*)
  traffic.py guest CONFIG         inside rootlesskit: every guest-* node of
                                  CONFIG as its own process, until ctl/exit
  traffic.py victim up|down ADDR PORT OFFSET LENGTH RATE
                                  one transfer, SIGKILLed by its parent
                                  mid-way; prints "v N" per verified chunk
  traffic.py fd-source FD OFFSET LENGTH RATE / fd-sink FD OFFSET
                                  a server's end of one transfer on an
                                  inherited socket, SIGKILLed mid-way

Every byte of a TCP stream is one pattern (P, random, PLEN bytes, the same
in every process: seeded) read from a random offset: byte i of a stream
with offset o is P[(o + i) % PLEN], so a lost, doubled, reordered or
foreign byte is found at once. UDP datagrams carry (offset, sequence,
size) and a slice of P; request/response payloads are random and echoed.

TCP requests start with a header: magic, op, flags, offset, length, hold.
  UP          client sends LENGTH bytes, half-closes; server checks and
              answers "OK" + LENGTH
  DOWN        server sends LENGTH bytes and closes
  ECHO        server echoes until EOF (short connections)
  HOLD_GFIN   client sends LENGTH bytes and half-closes; the server keeps
              writing a chunk a second for HOLD ms, then closes
  HOLD_FW2    client sends LENGTH bytes and closes at once (its side then
              sits in FIN_WAIT2, the stack's host socket in FIN_WAIT2 or
              half-closed); the server stays silent for HOLD ms, then
              writes a few bytes (half the time) and closes
  HOLD_HFIN   server sends LENGTH bytes and half-closes; the client keeps
              writing a chunk a second for HOLD ms, then closes
Flags: CUT (the client's end will be killed: a short stream is expected),
HOSTKILL (the server's end is killed after HOLD ms: a short stream is
expected by the client).

Control files (CONFIG's "ctl" directory): pool (open the long-lived UDP
and ICMP flows), churn (start everything else), stop-churn (start nothing
new, end the held connections, finish what runs), stop-pool (end), exit
(the guest process returns). Each node writes NAME.ready, NAME.pool-ready,
NAME.churn-done and its counters and errors to NAME.json in CONFIG's "out"
directory.
"""

import collections
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

PLEN = 65536 + 251  # not a power of two: a shifted stream cannot match
CHUNK = 65536
P = random.Random(0x534F414B).randbytes(PLEN)
P2 = P + P  # any window of up to PLEN bytes is one slice
HDR = struct.Struct("!2sBBQQI")  # magic, op, flags, offset, length, hold_ms
MAGIC = b"SK"
OP_UP, OP_DOWN, OP_ECHO, OP_HOLD_GFIN, OP_HOLD_FW2, OP_HOLD_HFIN = range(1, 7)
OP_NAMES = {OP_UP: "up", OP_DOWN: "down", OP_ECHO: "echo", OP_HOLD_GFIN: "hold_gfin",
            OP_HOLD_FW2: "hold_fw2", OP_HOLD_HFIN: "hold_hfin"}
FLAG_CUT, FLAG_HOSTKILL = 1, 2
UDP_HDR = struct.Struct("!QIH")  # offset, sequence, size
PULL = struct.Struct("!4sQIH")   # b"PULL", offset, count, size
IO_TIMEOUT = 60.0  # a stalled stream is an error ("hung"), never a wait for ever
SELF = os.path.abspath(__file__)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def chunk(off, n):
    """n (<= PLEN) bytes of the pattern from stream offset off."""
    s = off % PLEN
    return P2[s:s + n]


class Checker:
    """Checks a received stream against the pattern from offset base."""

    def __init__(self, base):
        self.base, self.pos, self.bad = base, 0, None

    def feed(self, data):
        off, n = 0, len(data)
        while off < n and self.bad is None:
            k = min(n - off, PLEN)
            got = bytes(data[off:off + k])
            want = chunk(self.base + self.pos, k)
            if got != want:
                i = next(j for j in range(k) if got[j] != want[j])
                self.bad = f"byte {self.pos + i} differs from the pattern"
                return False
            off += k
            self.pos += k
        return self.bad is None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = collections.Counter()
        self.errors = []
        self.nerr = 0

    def add(self, key, n=1):
        with self.lock:
            self.c[key] += n

    def err(self, msg):
        with self.lock:
            self.nerr += 1
            if len(self.errors) < 40:
                self.errors.append(time.strftime("%H:%M:%S ") + msg)
        log("ERROR", msg)


class Pacer:
    def __init__(self, rate):
        self.rate, self.t0, self.n = rate, time.monotonic(), 0

    def account(self, n):
        self.n += n
        if self.rate:
            ahead = self.n / self.rate - (time.monotonic() - self.t0)
            if ahead > 0:
                time.sleep(min(ahead, 1.0))


def send_pattern(sock, off, length, rate):
    pacer, pos = Pacer(rate), 0
    mv = memoryview(P2)
    while pos < length:
        k = min(CHUNK, length - pos)
        s = (off + pos) % PLEN
        n = sock.send(mv[s:s + k])
        pos += n
        pacer.account(n)
    return pos


def recv_check(sock, checker, on_chunk=None):
    """Reads to EOF, checking; returns the bytes read (stops at a bad one)."""
    buf = bytearray(CHUNK)
    mv = memoryview(buf)
    while True:
        n = sock.recv_into(buf)
        if n == 0:
            return checker.pos
        if not checker.feed(mv[:n]):
            return checker.pos
        if on_chunk:
            on_chunk(checker.pos)


def recv_exact(sock, n):
    b = b""
    while len(b) < n:
        d = sock.recv(n - len(b))
        if not d:
            break
        b += d
    return b


class Control:
    """The control directory's flags, polled twice a second."""

    def __init__(self, ctl):
        self.ctl = ctl
        self.flags = {k: threading.Event() for k in ("pool", "churn", "stop-churn", "stop-pool", "exit")}
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self):
        while True:
            for k, ev in self.flags.items():
                if not ev.is_set() and os.path.exists(os.path.join(self.ctl, k)):
                    ev.set()
            time.sleep(0.5)

    def wait(self, k):
        while not self.flags[k].wait(1.0):
            pass

    def is_set(self, k):
        return self.flags[k].is_set()

    def sleep(self, secs, k):
        """Sleeps secs unless k is set first; True if k is set."""
        return self.flags[k].wait(secs)


# ---------------------------------------------------------------- servers

class Servers:
    """TCP protocol server and the three UDP servers on one address."""

    def __init__(self, cfg, ctl, stats, load):
        self.cfg, self.ctl, self.st, self.load = cfg, ctl, stats, load
        fam = socket.AF_INET6 if ":" in cfg["bind"] else socket.AF_INET
        self.tcp = socket.socket(fam, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((cfg["bind"], cfg["tcp"]))
        self.tcp.listen(256)
        self.udp = {}
        for k in ("udp_echo", "udp_sink", "udp_pull"):
            u = socket.socket(fam, socket.SOCK_DGRAM)
            u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            u.bind((cfg["bind"], cfg[k]))
            self.udp[k] = u
        for fn in (self.accept_loop, self.udp_echo, self.udp_sink, self.udp_pull):
            threading.Thread(target=fn, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                c, _ = self.tcp.accept()
            except OSError as e:
                self.st.err(f"accept: {e}")
                time.sleep(0.1)
                continue
            threading.Thread(target=self.conn, args=(c,), daemon=True).start()

    def conn(self, c):
        op = 0
        try:
            c.settimeout(IO_TIMEOUT)
            h = recv_exact(c, HDR.size)
            if len(h) < HDR.size:
                if h:
                    self.st.err(f"short header ({len(h)} bytes)")
                else:
                    self.st.add("srv_no_header")  # a victim killed before its header
                return
            magic, op, flags, off, length, hold = HDR.unpack(h)
            if magic != MAGIC or op not in OP_NAMES:
                self.st.err(f"bad header {h!r}")
                return
            name = "srv_" + OP_NAMES[op]
            if flags & FLAG_HOSTKILL and op in (OP_UP, OP_DOWN):
                self.hostkill(c, op, off, length, hold)
                c = None
                return
            getattr(self, "srv_" + OP_NAMES[op])(c, name, flags, off, length, hold)
        except (socket.timeout, TimeoutError):
            self.st.err(f"server {OP_NAMES.get(op, op)}: no progress for {IO_TIMEOUT:.0f} s (hung)")
        except OSError as e:
            self.st.err(f"server {OP_NAMES.get(op, op)}: {e}")
        finally:
            if c is not None:
                c.close()

    def srv_up(self, c, name, flags, off, length, hold):
        ck = Checker(off)
        try:
            n = recv_check(c, ck)
        except ConnectionResetError:
            if not flags & FLAG_CUT:
                raise
            n = ck.pos
        if ck.bad:
            self.st.err(f"{name}: {ck.bad}")
            return
        self.st.add(name + "_bytes", n)
        if n == length:
            c.sendall(b"OK" + struct.pack("!Q", n))
            self.st.add(name + "_ok")
        elif flags & FLAG_CUT:
            self.st.add(name + "_cut")  # the client was killed: a checked prefix
        else:
            self.st.err(f"{name}: stream ended after {n} of {length} bytes")

    def srv_down(self, c, name, flags, off, length, hold):
        try:
            n = send_pattern(c, off, length, self.load["bulk_rate"])
        except (BrokenPipeError, ConnectionResetError):
            if not flags & FLAG_CUT:
                raise
            self.st.add(name + "_cut")
            return
        self.st.add(name + "_bytes", n)
        self.st.add(name + "_ok")

    def srv_echo(self, c, name, flags, off, length, hold):
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
        self.st.add(name + "_ok")

    def srv_hold_gfin(self, c, name, flags, off, length, hold):
        ck = Checker(off)
        n = recv_check(c, ck)
        if ck.bad or n != length:
            self.st.err(f"{name}: {ck.bad or f'{n} of {length} bytes before the FIN'}")
            return
        # The client's half is closed: keep writing on ours.
        end, pos = time.monotonic() + hold / 1000, 0
        while time.monotonic() < end and not self.ctl.sleep(1.0, "stop-churn"):
            c.sendall(chunk(off + pos, 100))
            pos += 100
        self.st.add(name + "_ok")
        self.st.add(name + "_held_s", int(hold / 1000))

    def srv_hold_fw2(self, c, name, flags, off, length, hold):
        ck = Checker(off)
        n = recv_check(c, ck)
        if ck.bad or n != length:
            self.st.err(f"{name}: {ck.bad or f'{n} of {length} bytes before the FIN'}")
            return
        # The client has closed; this end stays open and silent.
        self.ctl.sleep(hold / 1000, "stop-churn")
        if off % 2:
            try:  # to a client long gone: an RST comes back
                c.sendall(chunk(off, 10))
            except OSError:
                pass
        self.st.add(name + "_ok")

    def srv_hold_hfin(self, c, name, flags, off, length, hold):
        send_pattern(c, off, length, 0)
        c.shutdown(socket.SHUT_WR)
        ck = Checker(off + length)
        recv_check(c, ck)
        if ck.bad:
            self.st.err(f"{name}: {ck.bad}")
            return
        self.st.add(name + "_ok")

    def hostkill(self, c, op, off, length, hold):
        """This end of the transfer in a process killed after hold ms."""
        mode = "fd-source" if op == OP_DOWN else "fd-sink"
        args = [sys.executable, SELF, mode, str(c.fileno()), str(off)]
        if op == OP_DOWN:
            args += [str(length), str(self.load["bulk_rate"])]
        p = subprocess.Popen(args, pass_fds=[c.fileno()])
        c.close()
        time.sleep(hold / 1000)
        p.kill()
        p.wait()
        self.st.add(f"srv_{OP_NAMES[op]}_hostkill")

    def udp_echo(self):
        u = self.udp["udp_echo"]
        while True:
            d, a = u.recvfrom(65536)
            try:
                u.sendto(d, a)
                self.st.add("srv_udp_echo")
            except OSError as e:
                self.st.err(f"udp echo send: {e}")

    def udp_sink(self):
        u = self.udp["udp_sink"]
        while True:
            d, a = u.recvfrom(65536)
            if len(d) < UDP_HDR.size:
                self.st.err(f"udp sink: {len(d)}-byte datagram")
                continue
            off, seq, size = UDP_HDR.unpack_from(d)
            body = d[UDP_HDR.size:]
            if len(body) != size or body != chunk(off + seq * size, size):
                self.st.err(f"udp sink: datagram {seq} of offset {off} differs")
                continue
            self.st.add("srv_udp_sink_dgrams")
            self.st.add("srv_udp_sink_bytes", len(d))

    def udp_pull(self):
        u = self.udp["udp_pull"]
        while True:
            d, a = u.recvfrom(65536)
            if len(d) != PULL.size or d[:4] != b"PULL":
                self.st.err(f"udp pull: bad request {d[:16]!r}")
                continue
            _, off, count, size = PULL.unpack(d)
            for seq in range(count):
                try:
                    u.sendto(UDP_HDR.pack(off, seq, size) + chunk(off + seq * size, size), a)
                except OSError as e:
                    self.st.err(f"udp pull send: {e}")
                    break
                if seq % 16 == 15:
                    time.sleep(0.002)  # a burst, not a flood: no drop by design
            self.st.add("srv_udp_pulls")


# ---------------------------------------------------------------- clients

class Client:
    """Every kind of traffic towards one node's servers (a target)."""

    def __init__(self, cfg, ctl, stats, load, label, rng):
        self.t, self.ctl, self.st, self.load, self.label = cfg, ctl, stats, load, label
        self.rng = rng
        self.fam = socket.AF_INET6 if ":" in cfg["addr"] else socket.AF_INET
        self.churn = []

    def key(self, k):
        return f"{self.label}_{k}"

    def stopping(self):
        return self.ctl.is_set("stop-churn")

    def connect(self):
        s = socket.create_connection((self.t["addr"], self.t["tcp"]), timeout=10)
        s.settimeout(IO_TIMEOUT)
        return s

    def header(self, op, flags, off, length, hold=0):
        return HDR.pack(MAGIC, op, flags, off, length, hold)

    def rnd_off(self):
        return self.rng.randrange(1 << 40)

    # --- long-lived UDP flows (opened before the baseline, kept to the end)
    def open_pool(self):
        self.rr = []
        for _ in range(self.load["udp_rr_flows"]):
            u = socket.socket(self.fam, socket.SOCK_DGRAM)
            u.connect((self.t["addr"], self.t["udp_echo"]))
            u.settimeout(1.0)
            self.rr.append(u)
        self.pull = socket.socket(self.fam, socket.SOCK_DGRAM)
        self.pull.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.pull.connect((self.t["addr"], self.t["udp_pull"]))
        self.pull.settimeout(1.0)
        self.rr_seq = 0
        for u in self.rr:  # one answered exchange each: the flow exists
            for _ in range(10):
                if self.rr_once(u, count=False):
                    break
            else:
                self.st.err(f"{self.label}: no UDP echo while opening the pool")
        for _ in range(10):
            if self.pull_once(4, count=False):
                break
        else:
            self.st.err(f"{self.label}: no UDP pull answer while opening the pool")

    def rr_once(self, u, count=True):
        self.rr_seq += 1
        seq = self.rr_seq
        payload = struct.pack("!I", seq) + os.urandom(self.rng.randrange(16, 1000))
        u.send(payload)
        deadline = time.monotonic() + 1.0
        while True:
            try:
                d = u.recv(65536)
            except (socket.timeout, TimeoutError):
                if count:
                    self.st.add(self.key("udp_rr_lost"))
                return False
            except ConnectionRefusedError as e:
                self.st.err(f"{self.label}: udp rr: {e}")
                return False
            if d == payload:
                if count:
                    self.st.add(self.key("udp_rr_ok"))
                return True
            (got,) = struct.unpack_from("!I", d)
            if got < seq:  # a late answer to an earlier request
                self.st.add(self.key("udp_rr_late"))
            else:
                self.st.err(f"{self.label}: udp rr answer differs from request {seq}")
                return False
            if time.monotonic() > deadline:
                return False

    def pull_once(self, n, count=True):
        size = 1200
        off = self.rnd_off()
        self.pull.send(PULL.pack(b"PULL", off, n, size))
        got = set()
        try:
            while len(got) < n:
                d = self.pull.recv(65536)
                o, seq, sz = UDP_HDR.unpack_from(d)
                if o != off:
                    if count:
                        self.st.add(self.key("udp_pull_stale"))  # an earlier pull's tail
                    continue
                if sz != size or d[UDP_HDR.size:] != chunk(off + seq * size, size) or seq >= n:
                    self.st.err(f"{self.label}: udp pull datagram {seq} differs")
                    return False
                got.add(seq)
        except (socket.timeout, TimeoutError):
            pass
        if count:
            self.st.add(self.key("udp_pull_dgrams"), len(got))
            self.st.add(self.key("udp_pull_missing"), n - len(got))
        return len(got) == n

    def pool_loop(self):
        """UDP request/response on the pool's flows until stop-pool (they
        carry on through the drain: the flows of the baseline)."""
        period = len(self.rr) / max(self.load["udp_rr_rate"], 0.1)
        while not self.ctl.is_set("stop-pool"):
            t0 = time.monotonic()
            for u in self.rr:
                self.rr_once(u)
            rest = period - (time.monotonic() - t0)
            if rest > 0:
                self.ctl.sleep(rest, "stop-pool")

    # --- churn: every loop runs from ctl/churn to ctl/stop-churn
    def start_churn(self):
        loops = [self.bulk_up, self.bulk_down, self.short_conns, self.holds,
                 self.kills, self.udp_bulk, self.udp_pulls]
        for fn in loops:
            t = threading.Thread(target=self.guard, args=(fn,), daemon=True, name=fn.__name__)
            t.start()
            self.churn.append(t)

    def guard(self, fn):
        while not self.stopping():
            try:
                fn()
                return
            except (socket.timeout, TimeoutError):
                self.st.err(f"{self.label} {fn.__name__}: no progress for {IO_TIMEOUT:.0f} s (hung)")
            except OSError as e:
                self.st.err(f"{self.label} {fn.__name__}: {e!r}")
                time.sleep(1)

    def bulk_up(self):
        while not self.stopping():
            length = self.rng.randrange(1 << 16, self.load["bulk_max"])
            off = self.rnd_off()
            with self.connect() as s:
                s.sendall(self.header(OP_UP, 0, off, length))
                n = send_pattern(s, off, length, self.load["bulk_rate"])
                s.shutdown(socket.SHUT_WR)
                r = recv_exact(s, 10)
            if r != b"OK" + struct.pack("!Q", length):
                self.st.err(f"{self.label} up: {n} bytes sent, answer {r!r}")
                continue
            self.st.add(self.key("up_ok"))
            self.st.add(self.key("up_bytes"), length)

    def bulk_down(self):
        while not self.stopping():
            length = self.rng.randrange(1 << 16, self.load["bulk_max"])
            off = self.rnd_off()
            with self.connect() as s:
                s.sendall(self.header(OP_DOWN, 0, off, length))
                ck = Checker(off)
                n = recv_check(s, ck)
            if ck.bad or n != length:
                self.st.err(f"{self.label} down: {ck.bad or f'{n} of {length} bytes'}")
                continue
            self.st.add(self.key("down_ok"))
            self.st.add(self.key("down_bytes"), n)

    def short_conns(self):
        period = 1.0 / self.load["short_rate"]
        nxt = time.monotonic()
        while not self.stopping():
            msg = os.urandom(self.rng.randrange(1, 200))
            with self.connect() as s:
                s.sendall(self.header(OP_ECHO, 0, 0, 0) + msg)
                got = b""
                if self.rng.random() < 0.5:
                    # the client ends first: it closes once it has the echo
                    while len(got) < len(msg):
                        d = s.recv(4096)
                        if not d:
                            break
                        got += d
                else:
                    # half-close, then the server closes after its echo
                    s.shutdown(socket.SHUT_WR)
                    while True:
                        d = s.recv(4096)
                        if not d:
                            break
                        got += d
            if got != msg:
                self.st.err(f"{self.label} short connection: echo of {len(msg)} bytes differs ({len(got)} back)")
            else:
                self.st.add(self.key("short_ok"))
            nxt += period
            rest = nxt - time.monotonic()
            if rest > 0:
                time.sleep(rest)
            else:
                nxt = time.monotonic()

    # half-closed connections left open, self.load["holds"] at a time
    def holds(self):
        live = []
        kinds = (OP_HOLD_GFIN, OP_HOLD_FW2, OP_HOLD_HFIN)
        i = self.rng.randrange(len(kinds))
        while not self.stopping():
            live = [t for t in live if t.is_alive()]
            while len(live) < self.load["holds"] and not self.stopping():
                op = kinds[i % len(kinds)]  # each kind in turn
                i += 1
                hold = self.rng.randrange(5000, self.load["hold_max_ms"])
                t = threading.Thread(target=self.guard1, args=(self.hold, op, hold), daemon=True)
                t.start()
                live.append(t)
                time.sleep(self.rng.random())
            time.sleep(0.5)
        for t in live:
            t.join(IO_TIMEOUT + 30)
            if t.is_alive():
                self.st.err(f"{self.label}: a held connection did not end after stop-churn")

    def guard1(self, fn, *a):
        try:
            fn(*a)
        except (socket.timeout, TimeoutError):
            self.st.err(f"{self.label} {fn.__name__}: no progress for {IO_TIMEOUT:.0f} s (hung)")
        except OSError as e:
            self.st.err(f"{self.label} {fn.__name__}: {e!r}")

    def hold(self, op, hold):
        name = OP_NAMES[op]
        length = self.rng.randrange(1, 1 << 16)
        off = self.rnd_off()
        s = self.connect()
        s.settimeout(hold / 1000 + IO_TIMEOUT)
        try:
            if op == OP_HOLD_HFIN:
                s.sendall(self.header(op, 0, off, length, hold))
                ck = Checker(off)
                n = recv_check(s, ck)  # to the server's FIN
                if ck.bad or n != length:
                    self.st.err(f"{self.label} {name}: {ck.bad or f'{n} of {length} bytes'}")
                    return
                end, pos = time.monotonic() + hold / 1000, 0
                while time.monotonic() < end and not self.ctl.sleep(1.0, "stop-churn"):
                    s.sendall(chunk(off + length + pos, 100))
                    pos += 100
                self.st.add(self.key(name + "_ok"))
                return
            s.sendall(self.header(op, 0, off, length, hold) + chunk(off, length))
            if op == OP_HOLD_FW2:
                self.st.add(self.key(name + "_ok"))
                return  # closed at once (finally): FIN, then nothing
            s.shutdown(socket.SHUT_WR)
            ck = Checker(off)
            n = recv_check(s, ck)  # the server writes for hold ms, then closes
            if ck.bad:
                self.st.err(f"{self.label} {name}: {ck.bad}")
                return
            self.st.add(self.key(name + "_ok"))
            self.st.add(self.key(name + "_bytes"), n)
        finally:
            s.close()

    def kills(self):
        kinds = ("victim_up", "victim_down", "hostkill_up", "hostkill_down")
        i = self.rng.randrange(len(kinds))
        while not self.ctl.sleep(self.rng.uniform(0.5, 1.5) * self.load["kill_every"], "stop-churn"):
            getattr(self, kinds[i % len(kinds)])()  # each kind in turn
            i += 1

    def victim(self, op):
        """This side's end of a transfer killed mid-way (the far end sees
        the kernel's FIN or RST); what it got until then was checked."""
        length = 256 << 20
        off = self.rnd_off()
        p = subprocess.Popen([sys.executable, SELF, "victim", op, self.t["addr"], str(self.t["tcp"]),
                              str(off), str(length), str(self.load["bulk_rate"])],
                             stdout=subprocess.PIPE, text=True)
        # The kill comes 0.3-2 s into the transfer, counted from its header
        # (a loaded machine may take long to start the process).
        first = p.stdout.readline() if select.select([p.stdout], [], [], IO_TIMEOUT)[0] else ""
        if first.startswith("v "):
            time.sleep(self.rng.uniform(0.3, 2.0))
        p.kill()
        out, _ = p.communicate()
        lines = (first + out).splitlines()
        bad = [ln for ln in lines if ln.startswith("BAD")]
        if bad or not first.startswith("v "):
            self.st.err(f"{self.label} victim {op}: {bad[0] if bad else 'no transfer started within 60 s'}")
            return
        n = max(int(ln.split()[1]) for ln in lines if ln.startswith("v "))
        self.st.add(self.key(f"kill_{op}"))
        self.st.add(self.key(f"kill_{op}_bytes"), n)

    def victim_up(self):
        self.victim("up")

    def victim_down(self):
        self.victim("down")

    def hostkill(self, op):
        """The far end killed mid-transfer: this side must see the end of
        the stream (FIN or RST) soon, with every byte before it right."""
        hold = self.rng.randrange(300, 2000)
        off = self.rnd_off()
        length = 256 << 20
        t0 = time.monotonic()
        with self.connect() as s:
            s.sendall(self.header(op, FLAG_HOSTKILL, off, length, hold))
            n = 0
            try:
                if op == OP_DOWN:
                    ck = Checker(off)
                    n = recv_check(s, ck)
                    if ck.bad:
                        self.st.err(f"{self.label} hostkill down: {ck.bad}")
                        return
                else:
                    n = send_pattern(s, off, length, self.load["bulk_rate"])
                    recv_exact(s, 10)
                    self.st.err(f"{self.label} hostkill up: all {n} bytes taken by a killed server")
                    return
            except (ConnectionResetError, BrokenPipeError):
                pass
        if n >= length:
            self.st.err(f"{self.label} hostkill {OP_NAMES[op]}: the whole stream came")
            return
        self.st.add(self.key(f"hostkill_{OP_NAMES[op]}"))
        self.st.add(self.key("hostkill_end_ms"), int((time.monotonic() - t0) * 1000 - hold))

    def hostkill_up(self):
        self.hostkill(OP_UP)

    def hostkill_down(self):
        self.hostkill(OP_DOWN)

    def udp_bulk(self):
        """Bursts of datagrams from a new source port each (a new flow that
        is never answered: it expires on the stack's idle timer)."""
        size, count = 1200, self.load["udp_burst"]
        while not self.ctl.sleep(self.load["udp_burst_every"], "stop-churn"):
            off = self.rnd_off()
            with socket.socket(self.fam, socket.SOCK_DGRAM) as u:
                u.connect((self.t["addr"], self.t["udp_sink"]))
                for seq in range(count):
                    u.send(UDP_HDR.pack(off, seq, size) + chunk(off + seq * size, size))
                    if seq % 16 == 15:
                        time.sleep(0.002)
            self.st.add(self.key("udp_bulk_dgrams"), count)

    def udp_pulls(self):
        while not self.ctl.sleep(self.load["udp_pull_every"], "stop-churn"):
            self.pull_once(self.load["udp_burst"])


def icmp_checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


class Pinger:
    """ICMP echo from a raw socket (the guest is root in its user
    namespace), one identifier per target, payloads checked."""

    def __init__(self, targets, ctl, stats, rate, rng):
        self.ctl, self.st, self.rate = ctl, stats, rate
        self.targets = targets
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self.ids = {t: rng.randrange(1, 65535) for t in targets}
        self.seq = 0

    def once(self, target, count=True):
        self.seq = (self.seq + 1) & 0xFFFF
        ident = self.ids[target]
        payload = chunk(ident * 65536 + self.seq, 56)
        h = struct.pack("!BBHHH", 8, 0, 0, ident, self.seq)
        c = icmp_checksum(h + payload)
        self.sock.sendto(struct.pack("!BBHHH", 8, 0, c, ident, self.seq) + payload, (target, 0))
        deadline = time.monotonic() + 1.0
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                if count:
                    self.st.add(f"ping_{target}_lost")
                return False
            d, a = self.sock.recvfrom(65536)
            ihl = (d[0] & 0xF) * 4
            typ, code, _, rid, rseq = struct.unpack_from("!BBHHH", d, ihl)
            if typ != 0 or a[0] != target:
                continue
            if rid != ident:
                continue  # another target's
            if rseq != self.seq:
                if count:
                    self.st.add(f"ping_{target}_late")
                continue
            if d[ihl + 8:] != payload:
                self.st.err(f"ping {target}: reply payload differs")
                return False
            if count:
                self.st.add(f"ping_{target}_ok")
            return True

    def open_pool(self):
        for t in self.targets:
            for _ in range(5):
                if self.once(t, count=False):
                    break
            else:
                self.st.err(f"ping {t}: no reply while opening the pool")

    def loop(self):
        period = 1.0 / self.rate
        while not self.ctl.sleep(period, "stop-pool"):
            for t in self.targets:
                self.once(t)


class Dns:
    """A queries to the stack's DNS address from a new source port each."""

    def __init__(self, cfg, ctl, stats, rng):
        self.c, self.ctl, self.st, self.rng = cfg, ctl, stats, rng

    def query(self):
        ident = self.rng.randrange(65536)
        qname = b"".join(bytes([len(p)]) + p.encode() for p in self.c["name"].split(".")) + b"\0"
        q = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.settimeout(2.0)
            u.connect((self.c["server"], 53))
            u.send(q)
            try:
                r = u.recv(4096)
            except (socket.timeout, TimeoutError):
                self.st.add("dns_lost")
                return
        rid, flags, _, an = struct.unpack_from("!HHHH", r)
        if rid != ident or flags & 0xF or an != 1 or socket.inet_ntoa(r[-4:]) != self.c["ip"]:
            self.st.err(f"dns: wrong answer {r!r}")
            return
        self.st.add("dns_ok")

    def loop(self):
        period = 1.0 / self.c["rate"]
        while not self.ctl.sleep(period, "stop-churn"):
            try:
                self.query()
            except OSError as e:
                self.st.err(f"dns: {e!r}")


# ---------------------------------------------------------------- nodes

def node(config_path, name):
    cfg = json.load(open(config_path))
    me = cfg["nodes"][name]
    load = cfg["load"]
    out = cfg["out"]
    ctl = Control(cfg["ctl"])
    st = Stats()
    rng = random.Random(os.urandom(8))
    mark = lambda what: open(os.path.join(out, f"{name}.{what}"), "w").close()  # noqa: E731

    def dump():
        tmp = os.path.join(out, f".{name}.json")
        with open(tmp, "w") as f:
            with st.lock:
                json.dump({"node": name, "stack": cfg["stack"], "counters": dict(st.c),
                           "errors": st.errors, "error_count": st.nerr}, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(out, f"{name}.json"))

    if me.get("servers"):
        Servers(me["servers"], ctl, st, load)
    mark("ready")
    clients = [Client(t, ctl, st, load, t["label"], rng) for t in me.get("clients", [])]
    pinger = Pinger(me["ping"], ctl, st, load["ping_rate"], rng) if me.get("ping") else None
    dns = Dns(me["dns"], ctl, st, rng) if me.get("dns") else None

    ctl.wait("pool")
    for c in clients:
        c.open_pool()
    if pinger:
        pinger.open_pool()
    mark("pool-ready")
    ctl.wait("churn")
    pool_threads = [threading.Thread(target=c.pool_loop, daemon=True) for c in clients]
    if pinger:
        pool_threads.append(threading.Thread(target=pinger.loop, daemon=True))
    churn = []
    if dns:
        churn.append(threading.Thread(target=dns.loop, daemon=True))
    for t in pool_threads + churn:
        t.start()
    for c in clients:
        c.start_churn()
        churn += c.churn
    ctl.wait("stop-churn")
    t0 = time.monotonic()
    for t in churn:
        t.join(max(1.0, 120 - (time.monotonic() - t0)))
        if t.is_alive():
            st.err(f"{name}: {t.name} still running 120 s after stop-churn")
    dump()
    mark("churn-done")
    ctl.wait("stop-pool")
    for t in pool_threads:
        t.join(10)
    time.sleep(1)  # servers: the last answers
    dump()
    mark("done")
    return 0


def guest(config_path):
    """Inside rootlesskit: each guest node as a process of its own."""
    cfg = json.load(open(config_path))
    ctl = Control(cfg["ctl"])
    procs = {n: subprocess.Popen([sys.executable, SELF, "node", config_path, n])
             for n in cfg["nodes"] if n.startswith("guest")}
    rc = 0
    for n, p in procs.items():
        if p.wait() != 0:
            log(f"guest node {n} exited {p.returncode}")
            rc = 1
    ctl.wait("exit")
    return rc


def victim(op, addr, port, off, length, rate):
    s = socket.create_connection((addr, int(port)), timeout=10)
    s.settimeout(IO_TIMEOUT)
    off, length, rate = int(off), int(length), float(rate)
    o = OP_UP if op == "up" else OP_DOWN
    s.sendall(HDR.pack(MAGIC, o, FLAG_CUT, off, length, 0))
    print("v 0", flush=True)
    if o == OP_UP:
        pacer, pos, mv = Pacer(rate), 0, memoryview(P2)
        while pos < length:
            k = min(CHUNK, length - pos)
            n = s.send(mv[(off + pos) % PLEN:(off + pos) % PLEN + k])
            pos += n
            pacer.account(n)
            print("v", pos, flush=True)
    else:
        ck = Checker(off)
        recv_check(s, ck, on_chunk=lambda n: print("v", n, flush=True))
        if ck.bad:
            print("BAD", ck.bad, flush=True)
    return 0


def fd_socket(fd):
    """The socket the parent handed over: blocking again (the parent's
    timeout left O_NONBLOCK on the shared file, which would end this
    process with BlockingIOError before its kill)."""
    s = socket.socket(fileno=int(fd))
    s.setblocking(True)
    return s


def fd_source(fd, off, length, rate):
    s = fd_socket(fd)
    send_pattern(s, int(off), int(length), float(rate))
    return 0


def fd_sink(fd, off):
    s = fd_socket(fd)
    ck = Checker(int(off))
    buf = bytearray(4096)
    while True:  # slowly: data stays unread, so the kill resets
        n = s.recv_into(buf)
        if n == 0 or not ck.feed(memoryview(buf)[:n]):
            break
        time.sleep(0.01)
    return 0


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    cmd, args = sys.argv[1], sys.argv[2:]
    fn = {"node": node, "guest": guest, "victim": victim, "fd-source": fd_source,
          "fd-sink": fd_sink}.get(cmd)
    if fn is None:
        print(__doc__, file=sys.stderr)
        return 2
    return fn(*args)


if __name__ == "__main__":
    sys.exit(main())
