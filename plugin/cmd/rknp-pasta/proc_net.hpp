// SPDX-License-Identifier: Apache-2.0

// The ports a namespace listens on, from /proc/net/{tcp,tcp6,udp,udp6}
// opened inside it ("auto" port specs): parsing (pure, unit-tested) and
// re-reading an open file from its start.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace pasta {

enum class SocketKind { tcp, udp };

// Ports with a socket that a forward from outside can reach: TCP sockets
// in LISTEN, UDP sockets bound and not connected. Sockets bound to a
// loopback address (127.0.0.0/8, ::1) are left out: a forwarded client
// arrives on the namespace's interface, never on its loopback.
std::set<unsigned> listening_ports(std::string_view proc_net_text,
                                   SocketKind kind);

// Reads fd (a /proc/net file) from its start. Returns false on a read
// error (the namespace is gone).
bool read_proc_net(int fd, std::string &out);

} // namespace pasta
