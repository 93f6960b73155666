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
    compat_slirp4netns_helper.py hardening BINARY USER DIR
        (as root) what the API socket guarantees beyond slirp4netns: the
        binary runs as USER with its socket and logs in DIR; one
        "name<TAB>result" line per check (the script asserts them).
    compat_slirp4netns_helper.py call SOCKET REQUEST
        one request, the reply or <closed> (for a client of another uid).

One request per connection: write it, half-close, read to EOF (as
rootlesskit's and Podman's clients do). Only unix sockets; the forwards
requested listen on 127.0.0.1.
"""
import hashlib
import json
import os
import resource
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


def ask(path, payload, half_close=True, timeout=3.0):
    """One request on a fresh connection; (reply, seconds). The reply is
    <closed> for EOF without a byte, <timeout> for nothing in time."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    start = time.monotonic()
    out = b""
    try:
        s.sendall(payload if isinstance(payload, bytes) else payload.encode())
        if half_close:
            s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        if not out:
            out = b"<timeout>"
    except (ConnectionResetError, BrokenPipeError):
        pass
    took = time.monotonic() - start
    s.close()
    return (out.decode(errors="replace") if out else "<closed>"), took


def user_argv(user):
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]


def wait_netns(pid):
    for _ in range(100):
        if os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net"):
            return
        time.sleep(0.05)


def open_fds(pid):
    return {int(x) for x in os.listdir(f"/proc/{pid}/fd")}


def limit_leaving(pid, free):
    """The RLIMIT_NOFILE under which PID can open exactly FREE more fds."""
    fds, limit, n = open_fds(pid), 0, 0
    while True:
        if limit in fds:
            limit += 1
        elif n == free:
            return limit
        else:
            n += 1
            limit += 1


def set_nofile(user, pid, soft):
    """PID's soft RLIMIT_NOFILE, set as its own USER (root may lack
    CAP_SYS_RESOURCE, which another user's process needs); the hard limit
    stays Server.NOFILE, so the soft one can come back."""
    subprocess.run(user_argv(user) + ["prlimit", f"--pid={pid}",
                                      f"--nofile={soft}:{Server.NOFILE}"], check=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """BINARY -c -a DIR/NAME.sock as USER, for a fresh `unshare -rn` target;
    serving once its banner is out."""
    NOFILE = 8192  # 4096 forwards and the reserve, whatever root's limit

    def __init__(self, binary, user, d, name, umask=0o022):
        self.sock, self.log = f"{d}/{name}.sock", f"{d}/{name}.log"
        self.user = user
        self.target = subprocess.Popen(user_argv(user) + ["unshare", "-rn", "sleep", "600"])
        wait_netns(self.target.pid)

        def setup():
            os.umask(umask)
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.NOFILE, self.NOFILE))
        out = f"{d}/{name}.out"
        with open(out, "w") as o, open(self.log, "w") as e:
            self.proc = subprocess.Popen(
                user_argv(user) + [binary, "-c", "-a", self.sock, str(self.target.pid), "tap0"],
                stdout=o, stderr=e, preexec_fn=setup)
        for _ in range(200):
            with open(out) as f:
                if "Starting slirp" in f.read():
                    break
            time.sleep(0.05)
        self.pid = self.proc.pid  # setpriv execs the binary

    def log_text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        alive = self.proc.poll() is None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.target.kill()
        self.target.wait()
        return alive


def out(name, value):
    print(f"{name}\t{value}", flush=True)


def check_serving(srv, path, helper, d):
    # 1. The socket's mode whatever the umask (the server runs under 002).
    out("socket_mode", oct(os.stat(path).st_mode & 0o7777)[2:].zfill(4))
    # 2. A client of another uid, past the mode (0666 for a moment): closed
    # unanswered, one line in the log.
    os.chmod(path, 0o666)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        sys.executable, helper, "call", path, '{"execute": "list_hostfwd"}'],
                       capture_output=True, text=True, timeout=20, cwd="/")
    os.chmod(path, 0o600)
    out("foreign_uid", r.stdout.strip() or r.stderr.strip())
    out("foreign_uid_logged", "refused a client of uid 65534" in srv.log_text())
    # 3. Three idle clients delay a request by nothing.
    idle = []
    for _ in range(3):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        idle.append(c)
    reply, took = ask(path, '{"execute": "list_hostfwd"}', timeout=10)
    out("idle3", f"{reply} after {took:.1f}s")
    for c in idle:
        c.close()
    # 4. A request no byte can fix is answered without a half-close; a
    # prefix of a valid one is not.
    for name, payload in (("early_1e400", b'{"execute": "list_hostfwd", "x": 1e400'),
                          ("early_utf8", b'{"execute": "\xff'),
                          ("early_not_json", b"x")):
        reply, took = ask(path, payload, half_close=False, timeout=1.5)
        out(name, f"{reply} after {took:.1f}s")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    c.sendall(b'{"execute": "list_')
    c.settimeout(0.3)
    try:
        quiet = not c.recv(100)
    except socket.timeout:
        quiet = True
    c.settimeout(3)
    c.sendall(b'hostfwd"}')
    out("prefix", f"quiet={quiet} then {c.recv(65536).decode(errors='replace')}")
    c.close()
    # 5. Sixteen clients at once; the seventeenth is closed at once.
    idle = []
    for _ in range(16):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        idle.append(c)
    time.sleep(0.2)
    reply, took = ask(path, '{"execute": "list_hostfwd"}', timeout=1.5)
    out("client_cap", f"{reply} after {took:.1f}s")
    for c in idle:
        c.close()
    time.sleep(0.1)
    out("after_cap", ask(path, '{"execute": "list_hostfwd"}', timeout=10)[0])
    # 6. No fd left for accept(2): clients wait, the process does not spin,
    # and answers them once fds are back.
    set_nofile(srv.user, srv.pid, limit_leaving(srv.pid, 0))
    pending = []
    for _ in range(10):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect(path)
        c.sendall(b'{"execute": "list_hostfwd"}')
        c.shutdown(socket.SHUT_WR)
        pending.append(c)
    time.sleep(0.2)
    lines0 = srv.log_text().count("api_handler: accept")
    cpu0 = cpu_seconds(srv.pid)
    time.sleep(2)
    cpu = cpu_seconds(srv.pid) - cpu0
    lines = srv.log_text().count("api_handler: accept") - lines0
    set_nofile(srv.user, srv.pid, Server.NOFILE)
    answered = 0
    for c in pending:
        try:
            answered += c.recv(65536).startswith(b'{"entries":')
        except OSError:
            pass
        c.close()
    out("flood", f"cpu={cpu:.2f}s answered={answered}/10 accept_log_lines={lines}")
    out("after_flood", ask(path, '{"execute": "list_hostfwd"}', timeout=10)[0])


def check_forwards(srv, path):
    # 7. At most 4096 forwards (127.1.x.y:PORT, all free while PORT is).
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    added, tries = 0, 0
    while added < 4096 and tries < 4600:
        host = f"127.1.{tries // 256}.{tries % 256}"
        tries += 1
        added += '"return"' in call(path, add("tcp" if tries % 2 else "udp", host, port, 80))
    out("added", added)
    out("cap", call(path, add("tcp", "127.0.0.1", port, 80)))
    # 8. Their list, ~450 KB, whole, to a client that starts reading only
    # after half a second: the reply waits for room in the socket (a unix
    # socket holds ~200 KB), it is not cut where the first write stopped.
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(10)
    c.connect(path)
    c.sendall(b'{"execute": "list_hostfwd"}')
    c.shutdown(socket.SHUT_WR)
    time.sleep(0.5)
    reply = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        reply += b
    c.close()
    reply = reply.decode(errors="replace")
    try:
        out("list", f"whole entries={len(json.loads(reply)['entries'])} bytes={len(reply)}")
    except ValueError:
        out("list", f"cut at {len(reply)} bytes")
    # 9. Fewer than 64 fds left: refused; back: accepted.
    out("remove", call(path, '{"execute": "remove_hostfwd", "arguments": {"id": 1}}'))
    set_nofile(srv.user, srv.pid, limit_leaving(srv.pid, 30))
    out("reserve", call(path, add("tcp", "127.2.0.1", port, 80)))
    set_nofile(srv.user, srv.pid, Server.NOFILE)
    out("reserve_restored", call(path, add("tcp", "127.2.0.1", port, 80)))


def check_startup(binary, user, d):
    target = subprocess.Popen(user_argv(user) + ["unshare", "-rn", "sleep", "600"])
    wait_netns(target.pid)

    def run(name, args, pass_fds=()):
        try:
            r = subprocess.run(user_argv(user) + [binary, *args, str(target.pid), "tap0"],
                               capture_output=True, text=True, timeout=5, pass_fds=pass_fds)
            first = r.stderr.splitlines()[0] if r.stderr else ""
            out(name, f"exit={r.returncode} {first}")
        except subprocess.TimeoutExpired:
            out(name, "still running after 5s")
    try:
        # 10. -a at a file that is not a socket: exit 1, the file intact.
        path = f"{d}/precious.txt"
        with open(path, "w") as f:
            f.write("precious\n")
        os.chmod(d, 0o777)
        run("regular_file", ["-c", "-a", path])
        try:
            with open(path) as f:
                intact = f.read() == "precious\n"
        except OSError:
            intact = False
        out("regular_file_intact", intact)
        # 11. -r/-e: not open, the same fd, a standard stream.
        r, w = os.pipe()
        os.dup2(w, 9)
        run("fd_unopened", ["-r", "77"])
        run("fd_same", ["-r", "9", "-e", "9"], pass_fds=(9,))
        run("fd_stdio", ["-r", "2"])
        os.close(9)
        os.close(r)
        os.close(w)
    finally:
        target.kill()
        target.wait()


def hardening(binary, user, d):
    helper = os.path.abspath(__file__)
    srv = Server(binary, user, d, "api", umask=0o002)
    try:
        check_serving(srv, srv.sock, helper, d)
        check_forwards(srv, srv.sock)
    finally:
        out("alive", srv.stop())
    check_startup(binary, user, d)


if __name__ == "__main__":
    if sys.argv[1] == "hardening":
        hardening(*sys.argv[2:5])
    elif sys.argv[1] == "call":
        print(ask(sys.argv[2], sys.argv[3], timeout=10)[0])
    elif sys.argv[1] in ("direct", "podman"):
        direct(sys.argv[2], sys.argv[3], sys.argv[4:], podman=sys.argv[1] == "podman")
    elif sys.argv[3] == "common":
        common(sys.argv[2], *map(int, sys.argv[4:7]))
    else:
        extra(sys.argv[2], int(sys.argv[4]))
