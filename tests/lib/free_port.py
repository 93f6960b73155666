# SPDX-License-Identifier: Apache-2.0
"""Picks a port nobody uses for a test's server or published port, and
never the same port twice in one suite run.

usage: free_port.py tcp|udp ADDR LEDGER

The kernel hands out a free ephemeral port on bind(ADDR, 0); once this
process exits the port is free again, so two calls in a row may both get
it (a case picking 127.0.0.1:P and then 0.0.0.0:P for two forwards gets a
clash only when the second one is published). LEDGER (one port a line,
kept for the whole suite, locked while read and written) lists every port
handed out so far; a port already in it is skipped.
"""

import fcntl
import socket
import sys

TRIES = 200


def main():
    proto, addr, ledger = sys.argv[1:4]
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    with open(ledger, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        given = {int(line) for line in f if line.strip()}
        held = []  # kept bound so the next try gets another port
        try:
            for _ in range(TRIES):
                s = socket.socket(family, kind)
                s.bind((addr, 0))
                held.append(s)
                port = s.getsockname()[1]
                if port not in given:
                    f.write(f"{port}\n")
                    print(port)
                    return 0
        finally:
            for s in held:
                s.close()
    print(f"free_port.py: no unused {proto} port on {addr} in {TRIES} tries", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
