#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

# Prints what the running kernel gives of each feature rknp probes or may
# use, one "name: value" line each (tests/vm/guest.sh runs it as root in the
# VM; its output is the README's "what kernel 6.1 gives"). Values are
# "yes", "no (<errno>)" or a number; the probes change nothing (the tap is
# created in a private network namespace and gone when its fd closes).
import ctypes
import errno
import fcntl
import os
import socket
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86_64 system call numbers and UAPI constants (not all in Python).
NR_SECCOMP = 317
NR_EPOLL_PWAIT2 = 441
NR_LANDLOCK_CREATE_RULESET = 444
LANDLOCK_CREATE_RULESET_VERSION = 1
SECCOMP_GET_ACTION_AVAIL = 2
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_LOG = 0x7FFC0000
SO_PEEK_OFF = 42
SO_MEMINFO = 55
SOL_UDP, UDP_SEGMENT, UDP_GRO = 17, 103, 104
CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
TUNGETFEATURES = 0x800454CF
IFF_TAP, IFF_NAPI, IFF_NAPI_FRAGS = 0x0002, 0x0010, 0x0020
IFF_NO_PI, IFF_VNET_HDR = 0x1000, 0x4000
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN = 0x01, 0x02, 0x04, 0x08
TUN_F_USO4, TUN_F_USO6 = 0x20, 0x40


def failed(err):
    return "no (%s)" % errno.errorcode.get(err, str(err))


def syscall(*args):
    """The raw result, or -errno."""
    rc = libc.syscall(*args)
    return rc if rc >= 0 else -ctypes.get_errno()


def socket_option(fn, kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            fn(s)
            return "yes"
        except OSError as e:
            return failed(e.errno)


def landlock_abi():
    rc = syscall(NR_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                 ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return str(rc) if rc >= 0 else failed(-rc)


def seccomp_action(action):
    val = ctypes.c_uint32(action)
    rc = syscall(NR_SECCOMP, ctypes.c_uint(SECCOMP_GET_ACTION_AVAIL),
                 ctypes.c_uint(0), ctypes.byref(val))
    return "yes" if rc == 0 else failed(-rc)


def syscall_exists(nr, *args):
    """A call with a bad fd: EBADF means the kernel has it."""
    rc = syscall(nr, *args)
    return "no (ENOSYS)" if rc == -errno.ENOSYS else "yes"


def tap_features(out):
    if libc.unshare(CLONE_NEWNET) != 0:
        out["tap"] = failed(ctypes.get_errno())
        return
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        feats = struct.unpack("I", fcntl.ioctl(fd, TUNGETFEATURES, b"\0" * 4))[0]
        out["tun IFF_VNET_HDR"] = "yes" if feats & IFF_VNET_HDR else "no"
        out["tun IFF_NAPI"] = "yes" if feats & IFF_NAPI else "no"
        out["tun IFF_NAPI_FRAGS"] = "yes" if feats & IFF_NAPI_FRAGS else "no"
        ifr = struct.pack("16sH22x", b"rknpvmprobe0", IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)
        fcntl.ioctl(fd, TUNSETIFF, ifr)
        for name, flags in (
            ("TUNSETOFFLOAD csum+TSO4+TSO_ECN (rknp below MTU 65520)",
             TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN),
            ("TUNSETOFFLOAD csum+TSO4+TSO6+TSO_ECN (rknp at MTU 65520)",
             TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN),
            ("TUNSETOFFLOAD USO4+USO6 (UDP GSO frames to the guest)",
             TUN_F_CSUM | TUN_F_USO4 | TUN_F_USO6),
        ):
            try:
                fcntl.ioctl(fd, TUNSETOFFLOAD, flags)
                out[name] = "yes"
            except OSError as e:
                out[name] = failed(e.errno)
    finally:
        os.close(fd)


def sysctl(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return "absent (%s)" % errno.errorcode.get(e.errno, e.errno)


def main():
    out = {"kernel": os.uname().release}
    out["SO_PEEK_OFF on TCP"] = socket_option(
        lambda s: s.setsockopt(socket.SOL_SOCKET, SO_PEEK_OFF, 0))
    out["SO_MEMINFO on TCP"] = socket_option(
        lambda s: s.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 9 * 4))
    out["UDP_SEGMENT"] = socket_option(
        lambda s: s.setsockopt(SOL_UDP, UDP_SEGMENT, 1400), socket.SOCK_DGRAM)
    out["UDP_GRO"] = socket_option(
        lambda s: s.setsockopt(SOL_UDP, UDP_GRO, 1), socket.SOCK_DGRAM)
    out["net.ipv4.ping_group_range"] = sysctl("/proc/sys/net/ipv4/ping_group_range")
    out["Landlock ABI"] = landlock_abi()
    out["seccomp(2) RET_ERRNO"] = seccomp_action(SECCOMP_RET_ERRNO)
    out["seccomp(2) RET_LOG"] = seccomp_action(SECCOMP_RET_LOG)
    out["epoll_pwait2"] = syscall_exists(NR_EPOLL_PWAIT2, -1, None, 0, None, None, 0)
    out["kernel.unprivileged_userns_clone"] = sysctl(
        "/proc/sys/kernel/unprivileged_userns_clone")
    out["user.max_user_namespaces"] = sysctl("/proc/sys/user/max_user_namespaces")
    tap_features(out)
    for k, v in out.items():
        print("%s: %s" % (k, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
