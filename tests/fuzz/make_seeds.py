#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Writes the seed corpus (corpus/<target>/seed-*). Run once and commit the
files; rerunning reproduces them. Reproducers of fixed findings live next to
the seeds as corpus/<target>/regress-*; this script never touches them."""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- config: sel, mtu?, mtu, 4 flags, timeout?, timeout, mask, 6 strings
def config(mtu=None, flags=(0, 0, 0, 0), timeout=None, strings=None):
    b = bytes([0])
    b += bytes([1]) + struct.pack("<I", mtu) if mtu is not None else bytes([0])
    b += bytes(flags)
    b += bytes([1]) + struct.pack("<I", timeout) if timeout is not None else bytes([0])
    strings = strings or [None] * 6
    mask = sum(1 << i for i, s in enumerate(strings) if s is not None)
    b += bytes([mask]) + b"".join((s or "").encode() + b"\0" for s in strings)
    return b


put("config", "default", config())
put("config", "full", config(1500, (0, 1, 0, 0), 5000, [
    "10.0.135.128/25", "eth7", "fd00::64", "127.0.0.1", "::1",
    "02:00:5e:00:53:07"]))
put("config", "bad-values", config(70000, (2, 0, 0, 0), 0, [
    "10.0.2.1/24", "a/b", "fd01::1", "300.1.1.1", "::g", "01:00:00:00:00:00"]))
put("config", "ipv6-small-mtu", config(1000, (0, 1, 0, 0)))

# ---- opaque: key index byte (1..13) or name, NUL, value, NUL
KEYS = {"rknp.socket": 1, "rknp.ifname": 2, "rknp.mtu": 3, "rknp.ip": 4,
        "rknp.prefix_len": 5, "rknp.gateway": 6, "rknp.ipv6": 7,
        "rknp.offload": 8, "rknp.timeout_ms": 9, "rknp.mac": 10,
        "rknp.ipv6_address": 11, "rknp.parent_token": 12,
        "rknp.child_token": 13}


def opaque(pairs, by_index=True):
    out = b""
    for k, v in pairs:
        key = bytes([KEYS[k]]) if by_index and k in KEYS else k.encode()
        out += key + b"\0" + v.encode() + b"\0"
    return out


BASE = [("rknp.socket", "/tmp/rknp-harness.abc/rknp.sock"), ("rknp.ifname", "tap0"),
        ("rknp.mtu", "65520"), ("rknp.ip", "10.0.2.100"), ("rknp.prefix_len", "24"),
        ("rknp.gateway", "10.0.2.2"), ("rknp.ipv6", "0"), ("rknp.offload", "1"),
        ("rknp.timeout_ms", "10000"),
        ("rknp.parent_token", "00112233445566778899aabbccddeeff"),
        ("rknp.child_token", "ffeeddccbbaa99887766554433221100")]
put("opaque", "default", opaque(BASE))
put("opaque", "default-names", opaque(BASE, by_index=False))
put("opaque", "full", opaque(BASE + [("rknp.mac", "02:00:5e:00:53:07"),
                                     ("rknp.ipv6_address", "fd00::64"),
                                     ("rknp.unknown", "x")]))
put("opaque", "bad", opaque([(k, v + "x") for k, v in BASE]))

# ---- handover: greeting, hello and reply messages
token = bytes(range(16))
put("handover", "greeting", b"RKNG" + struct.pack("<HH", 2, 0) + token)
hello = b"RKNH" + struct.pack("<HH", 2, 0) + b"tap0".ljust(16, b"\0") + token
put("handover", "hello", hello)
put("handover", "hello-long-name", hello[:8] + b"abcdefghijklmno\0" + token)
put("handover", "reply-ok", b"RKNR" + struct.pack("<IH", 0, 0))
msg = b"hand-over refused: peer pid 1 uid 0 is not the child"
put("handover", "reply-error", b"RKNR" + struct.pack("<IH", 4, len(msg)) + msg)


# ---- frames: config byte, then records {op, len u16, bytes}
def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


GUEST_MAC = bytes.fromhex("020000000064")
GW_MAC = bytes.fromhex("525400123502")  # libslirp's default vhost MAC
BCAST = b"\xff" * 6
G4, GW4, DNS4 = bytes([10, 0, 2, 100]), bytes([10, 0, 2, 2]), bytes([10, 0, 2, 3])


def eth(dst, typ, payload):
    return dst + GUEST_MAC + struct.pack("!H", typ) + payload


def ipv4(proto, src, dst, l4, ident=1):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ident, 0x4000, 64,
                    proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + l4


def l4sum(src, dst, proto, seg):
    return csum(src + dst + struct.pack("!BBH", 0, proto, len(seg)) + seg)


def tcp(src, dst, sport, dport, seq, ack, flags, data=b"", opts=b"", partial=False):
    off = (20 + len(opts)) // 4
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags,
                      65535, 0, 0) + opts + data
    if partial:  # CHECKSUM_PARTIAL: pseudo-header sum only, not inverted
        c = ~csum(src + dst + struct.pack("!BBH", 0, 6, len(seg))) & 0xFFFF
    else:
        c = l4sum(src, dst, 6, seg)
    return seg[:16] + struct.pack("!H", c) + seg[18:]


def udp(src, dst, sport, dport, data):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    return seg[:6] + struct.pack("!H", l4sum(src, dst, 17, seg)) + seg[8:]


def rec(frame, op=0x10):
    return bytes([op | (0x20 if len(frame) > 0xFFFF else 0)]) + \
        struct.pack("<H", len(frame) & 0xFFFF) + frame


def vnet(frame, flags=0, gso=0, hdr_len=0, gso_size=0, start=0, off=0):
    return struct.pack("<BBHHHH", flags, gso, hdr_len, gso_size, start, off) + frame


arp = eth(BCAST, 0x0806, struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1,
                                      GUEST_MAC, G4, b"\0" * 6, GW4))
icmp = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"ping" * 8
icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
ping = eth(GW_MAC, 0x0800, ipv4(1, G4, GW4, icmp))
mss = b"\x02\x04\x05\xb4"
syn = eth(GW_MAC, 0x0800, ipv4(6, G4, GW4, tcp(G4, GW4, 40000, 80, 1000, 0, 0x02, opts=mss)))
ack_data = eth(GW_MAC, 0x0800, ipv4(6, G4, GW4, tcp(G4, GW4, 40000, 80, 1001, 1, 0x18, b"GET / HTTP/1.0\r\n\r\n")))
dns_q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
dns = eth(GW_MAC, 0x0800, ipv4(17, G4, DNS4, udp(G4, DNS4, 5353, 53, dns_q)))
dhcp = bytes([1, 1, 6, 0]) + b"\0" * 24 + GUEST_MAC + b"\0" * 202 + \
    b"\x63\x82\x53\x63\x35\x01\x01\xff"
dhcp_f = eth(BCAST, 0x0800, ipv4(17, b"\0" * 4, b"\xff" * 4, udp(b"\0" * 4, b"\xff" * 4, 68, 67, dhcp)))

G6 = bytes.fromhex("fd000000000000000000000000000064")
GW6 = bytes.fromhex("fd000000000000000000000000000002")
LL6 = bytes.fromhex("fe800000000000000000000000000064")
ALLR = bytes.fromhex("ff020000000000000000000000000002")


def ipv6(nh, src, dst, l4, hop=255):
    return struct.pack("!IHBB", 0x60000000, len(l4), nh, hop) + src + dst + l4


def icmp6(src, dst, body):
    c = csum(src + dst + struct.pack("!IxxxB", len(body), 58) + body)
    return body[:2] + struct.pack("!H", c) + body[4:]


rs = eth(b"\x33\x33\x00\x00\x00\x02", 0x86DD,
         ipv6(58, LL6, ALLR, icmp6(LL6, ALLR, struct.pack("!BBHI", 133, 0, 0, 0))))
echo6 = eth(GW_MAC, 0x86DD, ipv6(58, G6, GW6, icmp6(G6, GW6, struct.pack("!BBHHH", 128, 0, 0, 1, 1) + b"x" * 32), 64))
syn6 = eth(GW_MAC, 0x86DD, ipv6(6, G6, GW6, tcp(G6, GW6, 40001, 80, 5, 0, 0x02, opts=mss), 64))

put("frames", "arp-ping-tcp", bytes([0]) + rec(arp) + rec(ping, 0x11) + rec(syn) +
    rec(ack_data, 0x12) + rec(dns, 0x13))
put("frames", "dhcp", bytes([0]) + rec(dhcp_f) + rec(arp, 0x1f))
put("frames", "ipv6", bytes([2]) + rec(rs) + rec(echo6, 0x11) + rec(syn6, 0x1a))
# The ICMP echo path (config bit 7): the gateway over IPv4 and IPv6, a bad
# checksum, a host the private namespace cannot reach, the same id again.
bad_ping = bytearray(ping)
bad_ping[-1] ^= 1
far_ping = eth(GW_MAC, 0x0800, ipv4(1, G4, bytes([198, 51, 100, 1]), icmp))
put("frames", "echo-path", bytes([0x82]) + rec(arp) + rec(ping, 0x11) + rec(echo6, 0x11) +
    rec(bytes(bad_ping)) + rec(far_ping, 0x11) + rec(ping, 0x1f))
put("frames", "vnet-plain", bytes([1]) + rec(vnet(arp)) + rec(vnet(syn)) + rec(vnet(ping)))
# A TSO super-frame with a partial checksum, as the tap hands it over.
big = b"z" * 60000
tso = eth(GW_MAC, 0x0800, ipv4(6, G4, GW4, tcp(G4, GW4, 40000, 80, 1001, 1, 0x18, big, partial=True)))
put("frames", "vnet-tso", bytes([1]) + rec(vnet(arp)) + rec(vnet(syn)) +
    rec(vnet(tso, flags=1, gso=1, hdr_len=54, gso_size=1448, start=34, off=16), 0x12))
# Bogus checksum offsets, a truncated record and an oversized one.
put("frames", "vnet-bad", bytes([1]) +
    rec(vnet(syn, flags=1, start=70, off=16)) +
    rec(vnet(syn, flags=1, start=34, off=0xFFF0)) +
    rec(b"\x01\x02\x03") + rec(vnet(eth(GW_MAC, 0x0800, b"\x45" + b"\0" * 70000))) +
    bytes([0x10]) + struct.pack("<H", 1000) + syn[:100])
# Segments the probe Coalescer can merge: one flow, consecutive sequence.
seq_frames = b"".join(rec(eth(GUEST_MAC, 0x0800, ipv4(6, GW4, G4, tcp(GW4, G4, 80, 40000, 1 + i * 1000, 1001, 0x10, b"d" * 1000), ident=i)), 0)
                      for i in range(6))
put("frames", "mergeable", bytes([9]) + seq_frames)
# IPv4 fragments: in order, out of order, overlapping, a lone trailing one
# (IpReassembler: plugin/reassembly.hpp).
def frag(off_field, payload, ident=7):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, off_field,
                    64, 17, 0, G4, GW4)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return eth(GW_MAC, 0x0800, h + payload)


put("frames", "fragments", bytes([0]) + rec(arp) +
    rec(frag(0x2000, b"a" * 16)) + rec(frag(0x0002, b"b" * 16)) +
    rec(frag(0x0004, b"c" * 16, 8)) + rec(frag(0x2000, b"d" * 16, 8)) +
    rec(frag(0x2002, b"e" * 16, 9)) + rec(frag(0x0001, b"f" * 64, 9)) +
    rec(frag(0x0011, b"g" * 40, 10)))
# A UDP datagram of 3000 bytes to the gateway's port 9 in three fragments,
# last first: reassembled, it reaches libslirp as one datagram.
dgram = udp(G4, GW4, 40001, 9, bytes(range(256)) * 11 + b"u" * (3000 - 8 - 2816))
put("frames", "fragments-udp", bytes([8]) + rec(arp) +
    rec(frag(0x0000 | (2000 // 8), dgram[2000:], 11)) +
    rec(frag(0x2000, dgram[:1000], 11)) +
    rec(frag(0x2000 | (1000 // 8), dgram[1000:2000], 11), 0x11))
# Guest TCP to the target's echo listener (gateway port 8080 = 127.0.0.1:8080
# in its private namespace), acks fixed up (op bit 0x40) to libslirp's ISN.
# "tcp-wrap": the ISN puts the data across sequence 0 with the part ending
# at 0 sent first (libslirp 4.7.0's reassembly-queue loop, held back by
# ReassWrapGuard); then urgent data, a FIN and the echo read back.
# "tcp-echo-v6": the same over IPv6 with an RST at the end.
POLL = rec(b"", 0x10)


def tcp4(seq, flags, data=b"", opts=b""):
    return eth(GW_MAC, 0x0800, ipv4(6, G4, GW4, tcp(G4, GW4, 40002, 8080, seq, 0, flags, data, opts)))


def tcp6(seq, flags, data=b"", opts=b""):
    return eth(GW_MAC, 0x86DD, ipv6(6, G6, GW6, tcp(G6, GW6, 40003, 8080, seq, 0, flags, data, opts), 64))


def urg(seg_frame):  # URG flag and a pointer far past the data
    f = bytearray(seg_frame)
    t = 14 + (20 if f[12:14] == b"\x08\x00" else 40)
    f[t + 13] |= 0x20
    f[t + 18:t + 20] = struct.pack("!H", 60000)
    return bytes(f)  # checksum left stale on purpose: fixed by the ack fix-up


ISN = (1 << 32) - 3001
put("frames", "tcp-wrap", bytes([0]) + rec(arp) + rec(tcp4(ISN, 0x02, opts=mss)) +
    POLL + POLL + rec(tcp4(ISN + 1, 0x10), 0x50) +
    rec(tcp4(ISN + 1001, 0x18, b"w" * 2000), 0x50) +
    rec(tcp4(ISN + 1, 0x18, b"v" * 1000), 0x51) +
    rec(tcp4(ISN + 1001, 0x18, b"w" * 2000), 0x51) +
    rec(urg(tcp4(0, 0x18, b"u" * 100)), 0x51) +
    rec(tcp4(100, 0x11), 0x51) + POLL + rec(tcp4(101, 0x10), 0x53))
put("frames", "tcp-echo-v6", bytes([2]) + rec(tcp6(77, 0x02, opts=mss)) + POLL + POLL +
    rec(tcp6(78, 0x10), 0x50) + rec(tcp6(78, 0x18, b"hello" * 100), 0x51) + POLL +
    rec(tcp6(578, 0x14), 0x51))
# "fast-echo": the same through the TCP fast path (config bit 5 with vnet
# headers), the data segment's checksum left partial as a guest's kernel
# leaves it.
put("frames", "fast-echo", bytes([0x21]) + rec(vnet(arp)) +
    rec(vnet(tcp4(500, 0x02, opts=mss))) + POLL + POLL +
    rec(vnet(tcp4(501, 0x10)), 0x50) +
    rec(vnet(tcp4(501, 0x18, b"fast" * 100), flags=1, start=34, off=16), 0x51) +
    POLL + POLL + rec(vnet(tcp4(901, 0x11)), 0x51) + POLL +
    rec(vnet(tcp4(902, 0x10)), 0x53))


# Flow limits (config bit 6: max_flows 4, 2 new flows a second): new TCP
# and UDP flows from several source ports, for libslirp alone and with the
# fast path taking the TCP ones; 300 ms apart, so that both the rate
# and the cap refuse some.
def syn_from(port):
    return eth(GW_MAC, 0x0800, ipv4(6, G4, GW4, tcp(G4, GW4, port, 8080, 7000, 0, 0x02, opts=mss)))


def udp_from(port):
    return eth(GW_MAC, 0x0800, ipv4(17, G4, GW4, udp(G4, GW4, port, 9, b"x" * 8)))


put("frames", "flow-limits", bytes([0x40]) + b"".join(
    rec(syn_from(41000 + i), 0x13) + rec(udp_from(42000 + i)) for i in range(6)))
put("frames", "fast-flow-limits", bytes([0x61]) + b"".join(
    rec(vnet(syn_from(41000 + i)), 0x13) + rec(vnet(udp_from(42000 + i)))
    for i in range(6)))
# The UDP fast path (config bit 5 with the TCP fast path, vnet headers): datagrams to the
# gateway's echo sockets (127.0.0.1:8080, [::1]:8080) and back; at MTU
# 1500 a 3000-byte datagram leaves the guest in fragments (reassembled
# first) and comes back as fragments; port 8082 is closed (ICMP port
# unreachable to the guest); then the flow limits with both fast paths.
def udp_to(port, data, sport=43000):
    return eth(GW_MAC, 0x0800, ipv4(17, G4, GW4, udp(G4, GW4, sport, port, data)))


def udp6_to(port, data, sport=43001):
    return eth(GW_MAC, 0x86DD, ipv6(17, G6, GW6, udp(G6, GW6, sport, port, data), 64))


def frags_of(dgram, ident, step=1480):
    out = []
    for off in range(0, len(dgram), step):
        more = off + step < len(dgram)
        part = dgram[off:off + step]
        h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(part), ident,
                        (0x2000 if more else 0) | off // 8, 64, 17, 0, G4, GW4)
        h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
        out.append(eth(GW_MAC, 0x0800, h + part))
    return out


big_udp = udp(G4, GW4, 43002, 8080, bytes(range(256)) * 11 + b"q" * 184)
put("frames", "udp-fast-echo", bytes([0x23]) + rec(vnet(arp)) +
    rec(vnet(udp_to(8080, b"ping" * 50))) + POLL + POLL +
    rec(vnet(udp6_to(8080, b"ping6" * 40))) + POLL + POLL +
    rec(vnet(udp_to(8082, b"closed"))) + POLL + rec(vnet(udp_to(8080, b"again" * 3)), 0x11) +
    rec(b"", 0x1f) + rec(b"", 0x1f) + rec(b"", 0x1f) + POLL)
put("frames", "udp-fast-fragments", bytes([0x2B]) + rec(vnet(arp)) +
    b"".join(rec(vnet(f)) for f in frags_of(big_udp, 21)) + POLL + POLL +
    rec(vnet(udp6_to(8080, b"z" * 2000))) + POLL + POLL)
put("frames", "udp-fast-flow-limits", bytes([0x61]) + b"".join(
    rec(vnet(syn_from(41000 + i)), 0x13) + rec(vnet(udp_from(42000 + i))) +
    rec(vnet(eth(GW_MAC, 0x0800, ipv4(17, G4, GW4, udp(G4, GW4, 42100 + i, 8080, b"y" * 8))))) +
    POLL for i in range(6)))
# UDP GSO super-frames (the tap's USO: gso_type 5), split into datagrams
# before anything else sees them: to the echo sockets over IPv4 and IPv6
# through the UDP fast path, then with a segment size of 0 (dropped); and
# without the fast paths (vnet headers only) into libslirp.
def gso(frame, l4_off, seg):
    return vnet(frame, 1, 5, l4_off + 8, seg, l4_off, 6)


gso_v4 = udp_to(8080, bytes(range(256)) * 20, 43010)
gso_v6 = udp6_to(8080, b"six" * 1500, 43011)
put("frames", "udp-gso", bytes([0x2B]) + rec(vnet(arp)) +
    rec(gso(gso_v4, 34, 1400)) + POLL + POLL + rec(gso(gso_v6, 54, 1200)) + POLL + POLL +
    rec(gso(gso_v4, 34, 0)) + rec(gso(gso_v4, 34, 8)) + POLL)
put("frames", "udp-gso-libslirp", bytes([0x01]) + rec(vnet(arp)) +
    rec(gso(gso_v4, 34, 1000)) + POLL + POLL)
# ---- reassembly: raw frames (odd mode byte) or a datagram cut into pieces.
put("reassembly", "raw-fragments", bytes([1]) + b"".join(
    struct.pack("<H", len(f)) + f for f in
    (frag(0x2000, b"a" * 16), frag(0x0002, b"b" * 16), frag(0x0011, b"g" * 40, 10))))


def cut(payload, seed, ident, pieces, v6=False):
    """pieces: (first block, block count, flags); v6: mode bit 1, IPv6"""
    return bytes([2 if v6 else 0]) + struct.pack("<HBH", payload - 8, seed, ident) + b"".join(
        struct.pack("<HHB", f, c - 1, fl) for f, c, fl in pieces)


put("reassembly", "in-order", cut(3000, 7, 1, [(0, 125, 0), (125, 125, 0), (250, 125, 0)]))
put("reassembly", "reverse-dup", cut(3000, 9, 2, [(250, 125, 0), (125, 125, 0), (125, 125, 0), (0, 125, 0)]))
put("reassembly", "overlap-corrupt", cut(4000, 3, 3, [(0, 200, 0), (100, 200, 1), (300, 200, 0)]))
put("reassembly", "expire", cut(2000, 5, 4, [(0, 100, 0), (100, 150, 2), (0, 100, 0)]))
put("reassembly", "largest", cut(65515, 1, 5, [(i * 185, 185, 0) for i in range(44)] + [(8140, 50, 0)]))
put("reassembly", "ipv6-in-order", cut(3000, 7, 0x4242, [(0, 181, 0), (181, 181, 0), (362, 13, 0)], True))
put("reassembly", "ipv6-reverse-overlap",
    cut(3000, 7, 0x4242, [(362, 13, 0), (170, 192, 0), (0, 181, 0)], True))
put("reassembly", "ipv6-largest",
    cut(65535, 7, 0x4242, [(i * 181, min(181, 8192 - i * 181), 0) for i in range(46)], True))
put("reassembly", "ipv6-corrupt", cut(3000, 7, 0x4242, [(0, 181, 0), (100, 100, 1), (181, 194, 0)], True))

# ---- tcp: config byte, peek-mode byte (bit 0: discard), u32 fixed ISN,
# u32 guest ISN base, then records
# (target_tcp.cpp). Tuples: 0/1 IPv4 to the gateway's 8080/8081 (8081: a
# small receive buffer), 2/3 the same over IPv6, 4 a second IPv4 flow to
# 8080, 5 a closed port, 6 an unreachable host, 7 DNS (libslirp's).
SEQ_ACKED, SEQ_START, SEQ_ABS, SEQ_SENT = 0, 1, 2, 3      # seq bases
ACK_RCVD, ACK_MAX, ACK_ABS, ACK_ISS = 0, 1, 2, 3          # ack bases
FIN_, SYN_, RST_, PSH_, ACK_, URG_ = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


def tcfg(c=0, isn=0x10000, giss=0x20000):
    return bytes([c, 0]) + struct.pack("<II", isn, giss)


def tput(name, data):
    """Each tcp seed twice: the automatic peek mode and the discard mode."""
    put("tcp", name, data)
    put("tcp", name + "-discard", data[:1] + bytes([1]) + data[2:])


def seg(t, flags, seq=(SEQ_SENT, 0), ack=(ACK_RCVD, 0), window=None,
        mss_ws=None, data=0, mangle=None):
    op = t << 2 | (0x20 if mss_ws else 0) | (0x40 if mangle else 0) | (0x80 if data else 0)
    modes = seq[0] | ack[0] << 2 | (0x10 if window is not None else 0)
    b = bytes([op, flags, modes])
    for mode, v, absolute in ((seq[0], seq[1], SEQ_ABS), (ack[0], ack[1], ACK_ABS)):
        b += struct.pack("<I", v) if mode == absolute else struct.pack("<h", v)
    if window is not None:
        b += struct.pack("<H", window)
    if mss_ws:
        b += bytes([3]) + struct.pack("<H", mss_ws[0]) + bytes([mss_ws[1]])
    if data:
        b += struct.pack("<H", data)
    if mangle:
        b += bytes(mangle)
    return b


def syn(t, mss=1460, ws=7):
    return seg(t, SYN_, seq=(SEQ_START, -1), ack=(ACK_ABS, 0), mss_ws=(mss, ws))


def ack(t, **kw):
    return seg(t, ACK_, seq=(SEQ_SENT, 0), **kw)


def host(conn, action, amount=65536):  # read write echo shut close rst
    a = {"read": 0, "write": 1, "echo": 2, "shut": 3, "close": 4, "rst": 5}[action]
    return bytes([1 | conn << 2, a]) + struct.pack("<H", amount - 1)


def clock(ms, timers=True):
    if ms >= 65536:
        return bytes([2 | 4 | (0 if timers else 8)]) + struct.pack("<H", ms // 64)
    return bytes([2 | (0 if timers else 8)]) + struct.pack("<H", ms)


TPOLL = bytes([3])


def connect(t, **kw):
    return syn(t, **kw) + TPOLL + ack(t, ack=(ACK_ISS, 0))


tput("handshake-data-fin", tcfg() + connect(0) +
    seg(0, ACK_ | PSH_, data=1000) + host(0, "read") + host(0, "echo") + TPOLL +
    ack(0) + seg(0, ACK_, data=30000) + host(0, "write", 200000 // 4) + TPOLL +
    ack(0) + TPOLL + seg(0, FIN_ | ACK_) + host(0, "read") + host(0, "shut") +
    TPOLL + ack(0, ack=(ACK_MAX, 0)) + clock(100))
tput("rst", tcfg(1) + connect(0) + connect(4) + seg(0, ACK_, data=500) +
    seg(0, RST_ | ACK_) + host(1, "write", 3000) + TPOLL + host(1, "rst") + TPOLL +
    seg(4, ACK_, data=100) + clock(2000))
tput("out-of-order", tcfg() + connect(0) +
    seg(0, ACK_, seq=(SEQ_ACKED, 1000), data=1000) + seg(0, ACK_, seq=(SEQ_ACKED, 0), data=2000) +
    host(0, "read") + host(0, "write", 20000) + TPOLL +
    ack(0, ack=(ACK_ISS, 0)) + ack(0, ack=(ACK_ISS, 0)) + ack(0, ack=(ACK_ISS, 0)) +
    ack(0, ack=(ACK_ISS, 3000)) + clock(1500) + ack(0) + host(0, "read"))
tput("zero-window", tcfg(0x08) + connect(1, mss=536, ws=0) +
    b"".join(seg(1, ACK_, data=30000) for _ in range(8)) +
    host(0, "write", 60000) + TPOLL + ack(1, window=0) + clock(1000) + clock(3000) +
    ack(1, window=0) + clock(8000) + host(0, "read") + host(0, "read") + TPOLL +
    clock(300) + ack(1) + seg(1, ACK_, seq=(SEQ_ACKED, 0), data=20000) + TPOLL)
# Both streams cross sequence 0 (tuple t's guest ISN is the base + t << 28).
tput("seq-wrap", tcfg(0, 0xFFFFF000, 0xDFFFF800) + connect(2) +
    seg(2, ACK_, data=5000) + host(0, "read") + host(0, "write", 20000) + TPOLL +
    ack(2) + seg(2, ACK_, data=5000) + ack(2) + TPOLL + host(0, "read"))
tput("ipv6", tcfg(0x40) + connect(3) + seg(3, ACK_ | PSH_, data=3000) +
    host(0, "read") + host(0, "echo") + TPOLL + ack(3) + seg(3, FIN_ | ACK_) +
    host(0, "close") + TPOLL + ack(3, ack=(ACK_MAX, 0)) + clock(100))
tput("limits", tcfg(1) + syn(0) + syn(4) + syn(2) + TPOLL + clock(1100) +
    clock(65000))
tput("refused", tcfg(7) + syn(5) + syn(6) + syn(7) + TPOLL + syn(5) + TPOLL)
tput("loopback-refused", tcfg(0x20) + syn(0) + syn(2) + TPOLL)
tput("timeouts", tcfg(2) + syn(0) + syn(2) + TPOLL + clock(1000) + clock(2000) +
    clock(4000) + ack(2, ack=(ACK_ISS, 0)) + seg(2, FIN_ | ACK_) + TPOLL +
    clock(61000) + clock(200000))
tput("mangled", tcfg(3) + connect(0) +
    seg(0, ACK_, data=800, mangle=(2, 0x01)) +   # IPv4 length cut
    seg(0, ACK_, data=800, mangle=(2, 0xff)) +   # IPv4 length beyond the frame
    seg(0, ACK_, data=800, mangle=(11 + 5, SYN_ | ACK_)) +  # flags
    seg(0, ACK_, data=800, mangle=(11 + 12 + 0, 128)) +  # truncated
    seg(0, ACK_, data=800, mangle=(11 + 12 + 1, 20)) +  # padded
    host(0, "read") + TPOLL)

# ---- udp: config byte (max_flows = 1 + (c & 7); bits 3-4 MTU 65520 / 1500
# / 1280 / 9000; 0x20 no UDP_SEGMENT/GRO; 0x40 disable_host_loopback; 0x80
# IPv6 off), admission byte, then records (target_udp.cpp). Tuples: 0/1
# IPv4 to the gateway's 8080/8081, 2/3 the same over IPv6, 4/5 the closed
# port 8082 (v4/v6), 6/7 the outside addresses 192.0.2.1 / 2001:db8::1
# (on the namespace's lo). Servers: 0/1 IPv4 8080/8081, 2/3 IPv6.
def ucfg(c=0, admit=0):
    return bytes([c, admit])


def dgram(t, sport=0, length=100, dest=None, ports=None, mangle=None, flush=False):
    custom = dest is not None
    op = t << 2 | (0x20 if mangle else 0) | (0x40 if custom else 0) | (0x80 if flush else 0)
    b = bytes([op, sport]) + struct.pack("<H", length)
    if custom:
        b += bytes([dest]) + struct.pack("<HH", *ports)
    if mangle:
        b += bytes(mangle)
    return b


def srv(server, action, peer=0, size=0, count=1):
    a = {"read": 0, "reply": 1, "burst": 2, "stray": 3}[action]
    op = 1 | server << 2 | a << 4 | (0x40 if action != "burst" and size >= 0x10000 else 0)
    if action == "read":
        return bytes([op])
    if action == "burst":
        return bytes([op, peer, count - 1]) + struct.pack("<H", size - 1)
    return bytes([op, peer]) + struct.pack("<H", size & 0xFFFF)


def uclock(ms, timers=True):
    if ms >= 65536:
        return bytes([2 | 4 | (0 if timers else 8)]) + struct.pack("<H", ms // 1024)
    return bytes([2 | (0 if timers else 8)]) + struct.pack("<H", ms)


UPOLL, UFLUSH, UDETACH = bytes([3]), bytes([3 | 4]), bytes([3 | 8])


def keep(i, release=False):
    return bytes([3 | 4 | 0x10 | (0x20 if release else 0) | i << 6])


def raw(frame):
    return bytes([3 | 12]) + struct.pack("<H", len(frame)) + frame


def ask_answer(t, server, size, length=300):
    return dgram(t, 1, length, flush=True) + srv(server, "read") + \
        srv(server, "reply", 0, size) + UPOLL


put("udp", "echo", ucfg(3) + ask_answer(0, 0, 500) + ask_answer(2, 2, 700) +
    ask_answer(0, 0, 0, 0) + ask_answer(1, 1, 1000) + ask_answer(3, 3, 1000))
put("udp", "fragments", ucfg(3 | 0x08) + ask_answer(0, 0, 4000) +
    srv(0, "reply", 0, 65507) + ask_answer(2, 2, 3000) + srv(2, "reply", 0, 65527) + UPOLL)
put("udp", "fragments-1280", ucfg(1 | 0x10) + ask_answer(2, 2, 1233) + ask_answer(0, 0, 1253))
put("udp", "coalesced", ucfg(3) + dgram(0, 1, 10, flush=True) + srv(0, "read") +
    srv(0, "burst", 0, 1400, 20) + UPOLL + dgram(2, 1, 10, flush=True) + srv(2, "read") +
    srv(2, "burst", 0, 1000, 40) + srv(2, "burst", 0, 1, 64) + UPOLL)
put("udp", "coalesced-fragments", ucfg(3 | 0x08) + dgram(0, 1, 10, flush=True) +
    srv(0, "read") + srv(0, "burst", 0, 3000, 5) + UPOLL)
put("udp", "segmented", ucfg(3) + b"".join(dgram(0, 2, 1000) for _ in range(20)) +
    dgram(0, 2, 300) + dgram(0, 2, 1200) + dgram(0, 2, 1200) + dgram(0, 2, 0) +
    dgram(2, 2, 1200) + dgram(2, 2, 1200, flush=True) + srv(0, "read") + srv(2, "read"))
put("udp", "segmented-off", ucfg(3 | 0x20) + b"".join(dgram(0, 2, 1000) for _ in range(8)) +
    UFLUSH + srv(0, "read") + srv(0, "burst", 0, 500, 10) + UPOLL)
put("udp", "icmp", ucfg(3) + dgram(4, 3, 200, flush=True) + UPOLL + dgram(5, 3, 200, flush=True) +
    UPOLL + dgram(4, 3, 2000, flush=True) + dgram(4, 3, 20, flush=True) + UPOLL)
put("udp", "outside", ucfg(7) + ask_answer(6, 0, 900) + ask_answer(7, 2, 900) +
    dgram(0, 4, 10, dest=2, ports=(40004, 53), flush=True) +
    dgram(2, 4, 10, dest=2, ports=(40004, 53), flush=True) + UPOLL)
put("udp", "libslirps", ucfg(7) + b"".join(
    dgram(t, 5, 20, dest=d, ports=(40005, 53)) for t in (0, 2) for d in range(3, 8)) +
    dgram(0, 5, 20, dest=0, ports=(68, 67)) + dgram(0, 5, 20, dest=0, ports=(0, 9)) +
    dgram(2, 5, 20, dest=0, ports=(40005, 0)) + UFLUSH)
put("udp", "ipv6-off-no-loopback", ucfg(3 | 0x40 | 0x80) + dgram(0, 1, 20) + dgram(2, 1, 20) +
    dgram(6, 1, 20, flush=True) + srv(0, "read") + srv(0, "reply", 0, 50) + UPOLL)
put("udp", "expiry", ucfg(3) + dgram(0, 6, 10, flush=True) + uclock(29999) + uclock(1) +
    dgram(0, 6, 10, flush=True) + srv(0, "read") + srv(0, "reply", 0, 10) + UPOLL +
    uclock(60000) + uclock(150000) + uclock(65535, timers=False) + uclock(1))
put("udp", "limits", ucfg(1, 0b00010100) + b"".join(dgram(0, i, 10) for i in range(8)) +
    UFLUSH + uclock(40000) + b"".join(dgram(2, i, 10) for i in range(4)))
put("udp", "detach", ucfg(7) + dgram(0, 7, 10) + dgram(2, 7, 10) + dgram(4, 7, 10) +
    dgram(0, 7, 10) + UDETACH + dgram(0, 7, 10, flush=True) + srv(0, "read") +
    srv(0, "reply", 0, 10) + srv(0, "reply", 1, 10) + UPOLL + UDETACH)
put("udp", "keep", ucfg(3) + keep(1) + keep(1) + dgram(0, 1, 10) + keep(1, True) +
    dgram(0, 1, 10) + dgram(2, 1, 10) + keep(1, True) + dgram(0, 1, 10, flush=True) + srv(0, "read"))
put("udp", "mangled", ucfg(3) +
    dgram(0, 8, 800, mangle=(2 + 3, 0x01)) +    # IPv4 total length cut
    dgram(0, 8, 800, mangle=(2 + 12 + 1, 20)) +  # UDP length shorter
    dgram(2, 8, 800, mangle=(2 + 8 + 2, 0)) +    # IPv6 UDP checksum, high byte
    dgram(2, 8, 800, mangle=(2 + 8 + 3, 0)) +    # and low byte
    dgram(0, 8, 800, mangle=(2 + 12 + 4, 128)) +  # cut
    dgram(0, 8, 800, mangle=(2 + 12 + 5, 40)) +   # padded
    dgram(0, 8, 800, mangle=(2 + 7, 0x20), flush=True) +  # a fragment: not ours
    srv(0, "read"))
raw_ok = eth(GW_MAC, 0x0800, ipv4(17, G4, GW4, udp(G4, GW4, 40009, 8080, b"raw" * 10)))
put("udp", "raw", ucfg(3) + raw(raw_ok) + raw(raw_ok[:30]) + raw(b"\xff" * 60) + UFLUSH +
    srv(0, "read") + srv(0, "reply", 0, 100) + UPOLL)
put("udp", "stray", ucfg(3) + dgram(0, 9, 10, flush=True) + srv(0, "read") +
    srv(0, "stray", 0, 100) + UPOLL + srv(0, "reply", 0, 100) + UPOLL)
print("seeds written to", ROOT, file=sys.stderr)
