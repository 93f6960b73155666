#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Sends one IPv4 fragment (the last one, alone) from the guest's tap to the
gateway: the frame that crashed Debian 12's libslirp 4.7.0 in ip_reass.
rknp's reassembler holds it (copies are duplicates); a copy with other bytes
contradicts it and drops the datagram. Runs inside the test namespace (root
there: AF_PACKET is allowed)."""
import socket
import struct
import sys

ifname = sys.argv[1] if len(sys.argv) > 1 else "tap0"


def csum(d):
    s = sum(struct.unpack("!%dH" % (len(d) // 2), d))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
src_mac = s.getsockname()[4]
# offset 136 bytes, MF clear: a trailing fragment with nothing before it
h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 60, 0x1234, 0x0011, 64, 17, 0,
                bytes([10, 0, 2, 100]), bytes([10, 0, 2, 2]))
h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
gw_mac = bytes.fromhex("525400123502")  # libslirp's gateway MAC
for _ in range(3):
    s.send(gw_mac + src_mac + b"\x08\x00" + h + b"A" * 40)
s.send(gw_mac + src_mac + b"\x08\x00" + h + b"B" * 40)
print("sent 3 lone fragments and a contradicting one")
