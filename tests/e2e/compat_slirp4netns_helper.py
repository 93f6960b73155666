#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0

"""Helpers of compat_slirp4netns.sh (run as the unprivileged test user).

    compat_slirp4netns_helper.py api SOCKET common PORT_A PORT_B PORT_BUSY
        sends the requests both slirp4netns and rknp-slirp4netns survive and
        prints one "name<TAB>reply" line each (the script diffs the two);
    compat_slirp4netns_helper.py api SOCKET extra PORT
        requests that crash or misbehave in slirp4netns 1.2 itself (a missing
        proto is a NULL strcmp there; ports over 65535 wrap): rknp's replies.
    compat_slirp4netns_helper.py direct BINARY URL [OPTION...]
        Podman-style use: a fresh user+network namespace (unshare -rn), the
        binary started with -c, --ready-fd, --exit-fd, --netns-type=path and
        --userns-path plus OPTIONs; prints the ready byte, the tap's
        configuration, the sha256 of URL fetched inside, and the exit status
        after the exit fd is closed.
    compat_slirp4netns_helper.py podman BINARY URL [OPTION...]
        the same the way Podman runs it: from inside a user namespace (run
        this under `unshare -r`), netns path only, no --userns-path.

One request per connection: write it, half-close, read to EOF (as
rootlesskit's and Podman's clients do). Only unix sockets; the forwards
requested listen on 127.0.0.1.
"""
import hashlib
import json
import os
import socket
import subprocess
import sys
import time


def call(path, payload):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    out = b""
    try:
        s.sendall(payload if isinstance(payload, bytes) else payload.encode())
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (ConnectionResetError, BrokenPipeError) as e:
        # The server closed with request bytes unread (e.g. too large).
        # Whether the reset comes after its reply was read is a race: only
        # a reset with no reply at all is part of the answer.
        if not out:
            out = f"<{type(e).__name__}>".encode()
    s.close()
    return out.decode(errors="replace")


def add(proto, host_addr, host_port, guest_port, guest_addr="", **extra):
    args = {"proto": proto, "host_addr": host_addr, "host_port": host_port,
            "guest_addr": guest_addr, "guest_port": guest_port}
    args.update(extra)
    return json.dumps({"execute": "add_hostfwd", "arguments": args})


def common(path, pa, pb, busy):
    reqs = [
        ("list_empty", '{"execute": "list_hostfwd"}'),
        ("add_tcp", add("tcp", "127.0.0.1", pa, 80, "10.0.2.100")),
        ("add_udp", add("udp", "127.0.0.1", pb, 53)),
        ("add_dup_udp", add("udp", "127.0.0.1", pb, 53)),
        ("add_tcp_default_host", add("tcp", "", pb, 8080)),
        ("add_dup_tcp", add("tcp", "127.0.0.1", pa, 81)),
        ("add_busy_tcp", add("tcp", "127.0.0.1", busy, 80)),
        ("add_bad_proto", add("sctp", "127.0.0.1", pa, 80)),
        ("add_bad_host_addr", add("tcp", "no-such-addr", pa, 80)),
        ("add_ipv6_host_addr", add("tcp", "::1", pa, 80)),
        ("add_no_host_port", add("tcp", "127.0.0.1", 0, 80)),
        ("add_string_port", add("tcp", "127.0.0.1", str(pa), 80)),
        ("add_bad_guest_addr", add("tcp", "127.0.0.1", pa, 80, "10.0.2")),
        ("add_no_guest_port", add("tcp", "127.0.0.1", pa, 0)),
        ("list", '{"execute": "list_hostfwd"}\n'),
        ("remove_1", '{"execute": "remove_hostfwd", "arguments": {"id": 1}}'),
        ("remove_1_again", '{"execute": "remove_hostfwd", "arguments": {"id": 1}}'),
        ("remove_unknown", '{"execute": "remove_hostfwd", "arguments": {"id": 99}}'),
        ("remove_no_args", '{"execute": "remove_hostfwd"}'),
        ("readd_tcp", add("tcp", "127.0.0.1", pa, 80)),
        ("malformed", '{"execute": "list_hostfwd"'),
        ("empty", ""),
        ("not_object", "[1, 2]"),
        ("execute_not_string", '{"execute": 1}'),
        ("no_execute", "{}"),
        ("unknown_execute", '{"execute": "frobnicate"}'),
        ("trailing_garbage", '{"execute": "list_hostfwd"} trailing'),
        ("too_large", '{"execute": "list_hostfwd", "pad": "' + "x" * 5000 + '"}'),
        ("binary", b"\xff\xfe\x00garbage"),
        ("list_end", '{"execute": "list_hostfwd"}'),
    ]
    for name, payload in reqs:
        print(f"{name}\t{call(path, payload)}", flush=True)


def fuzz(path, rounds=300):
    """Random bytes and random JSON shapes (fixed seed); returns the replies
    that are not a JSON object, and how many forwards got added."""
    import random
    rnd = random.Random(1234)
    words = ["execute", "arguments", "add_hostfwd", "list_hostfwd", "remove_hostfwd",
             "proto", "tcp", "udp", "host_addr", "host_port", "guest_addr", "guest_port", "id"]

    def value(depth):
        k = rnd.randrange(8 if depth < 3 else 5)
        if k == 0:
            return rnd.choice(words)
        if k == 1:
            return rnd.choice([0, 1, -1, 65535, 65536, 2**31, -2**63, 1e300, 0.5])
        if k == 2:
            return rnd.choice([None, True, False, "", "127.0.0.1", "::1", "x" * 300])
        if k == 3:
            return "".join(chr(rnd.randrange(1, 0x2FF)) for _ in range(rnd.randrange(20)))
        if k == 4:
            return rnd.randrange(-5, 70000)
        if k == 5:
            return [value(depth + 1) for _ in range(rnd.randrange(4))]
        return {rnd.choice(words): value(depth + 1) for _ in range(rnd.randrange(5))}

    bad, added = [], 0
    for i in range(rounds):
        if i % 3 == 0:
            payload = bytes(rnd.randrange(256) for _ in range(rnd.randrange(64)))
        else:
            text = json.dumps({"execute": rnd.choice(words[2:5]), "arguments": value(0)})
            if i % 5 == 0:
                text = text[:rnd.randrange(len(text) + 1)]
            payload = text.encode()
        reply = call(path, payload)
        try:
            ok = isinstance(json.loads(reply), dict)
        except ValueError:
            ok = False
        if not ok:
            bad.append((payload, reply))
        added += '"return":{"id"' in reply
    return bad, added


def idle(path):
    """A client that connects and sends nothing must not wedge the API."""
    lazy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lazy.connect(path)
    start = time.monotonic()
    reply = call(path, '{"execute": "list_hostfwd"}')
    lazy.close()
    return reply, time.monotonic() - start


def extra(path, port):
    reqs = [
        ("add_missing_proto", json.dumps({"execute": "add_hostfwd", "arguments": {
            "host_addr": "127.0.0.1", "host_port": port, "guest_port": 80}})),
        ("add_no_arguments", '{"execute": "add_hostfwd"}'),
        ("add_port_too_big", add("tcp", "127.0.0.1", 70000, 80)),
        ("add_guest_port_too_big", add("tcp", "127.0.0.1", port, 70000)),
        ("list", '{"execute": "list_hostfwd"}'),
    ]
    for name, payload in reqs:
        print(f"{name}\t{call(path, payload)}", flush=True)
    bad, added = fuzz(path)
    print(f"fuzz\t{len(bad)} malformed replies ({added} forwards added)", flush=True)
    for payload, reply in bad[:5]:
        print(f"fuzz_bad\t{payload!r} -> {reply!r}", flush=True)
    reply, took = idle(path)
    print(f"idle_client\t{reply} after {took:.1f}s", flush=True)
    after = call(path, '{"execute": "list_hostfwd"}')
    print(f"list_after\t{after}", flush=True)


def direct(binary, url, options, podman=False):
    # podman: already inside a user namespace (run under `unshare -r`), as
    # Podman runs slirp4netns in its rootless one: the netns is created in
    # it and no --userns-path is passed.
    target = subprocess.Popen(["unshare", "-n" if podman else "-rn", "sleep", "120"])
    try:
        for _ in range(100):  # until unshare has exec'd sleep in the new ns
            if os.readlink(f"/proc/{target.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
            time.sleep(0.05)
        ns = f"/proc/{target.pid}/ns"
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        userns = [] if podman else [f"--userns-path={ns}/user"]
        argv = [binary, "-c", "-r", str(ready_w), "-e", str(exit_r), *options,
                "--netns-type=path", *userns, f"{ns}/net", "tap0"]
        proc = subprocess.Popen(argv, pass_fds=(ready_w, exit_r))
        os.close(ready_w)
        os.close(exit_r)
        print(f"ready={os.read(ready_r, 16).decode()!r}", flush=True)
        enter = ["nsenter", "-t", str(target.pid), "-n"]
        if not podman:
            enter[3:3] = ["-U", "--preserve-credentials"]
        for cmd in (["ip", "-o", "link", "show", "dev", "tap0"],
                    ["ip", "-o", "addr", "show", "dev", "tap0"], ["ip", "route"]):
            print(subprocess.run(enter + cmd, capture_output=True, text=True).stdout, end="", flush=True)
        body = subprocess.run(enter + ["curl", "-sSf", "--max-time", "20", "-g", url],
                              capture_output=True).stdout
        print(f"sha={hashlib.sha256(body).hexdigest()}", flush=True)
        print(f"alive={proc.poll() is None}", flush=True)
        os.close(exit_w)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "timeout"
        print(f"exit={rc}", flush=True)
    finally:
        target.kill()
        target.wait()


if __name__ == "__main__":
    if sys.argv[1] in ("direct", "podman"):
        direct(sys.argv[2], sys.argv[3], sys.argv[4:], podman=sys.argv[1] == "podman")
    elif sys.argv[3] == "common":
        common(sys.argv[2], *map(int, sys.argv[4:7]))
    else:
        extra(sys.argv[2], int(sys.argv[4]))
