#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""A process that is not the rootlesskit child tries to hand a tap over.

usage: foreign_peer.py SOCKET
Sends a well-formed hello with an fd (/dev/null) and requires the parent's
refusal: a reply with status RKNP_ERR_PERMISSION (4). Exit 0 if refused."""
import array
import os
import socket
import struct
import sys

hello = b"RKNH" + struct.pack("<HH", 1, 0) + b"tap0".ljust(16, b"\0")
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(10)
s.connect(sys.argv[1])
fd = os.open("/dev/null", os.O_RDONLY)
try:
    s.sendmsg([hello], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
except (BrokenPipeError, ConnectionResetError):
    pass  # refused at accept: the reply is still queued
try:
    reply = s.recv(512)
except ConnectionResetError:
    reply = s.recv(512)
magic, status, length = struct.unpack("<4sIH", reply[:10])
print("uid %d pid %d: status %d: %s" % (os.getuid(), os.getpid(), status,
                                        reply[10:10 + length].decode()))
sys.exit(0 if magic == b"RKNR" and status == 4 else 1)
