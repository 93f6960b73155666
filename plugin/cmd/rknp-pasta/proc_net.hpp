// SPDX-License-Identifier: Apache-2.0

// The ports a namespace listens on, from /proc/net/{tcp,tcp6,udp,udp6}
// opened inside it (-t/-u "auto"), or the host's (-T/-U "auto"): parsing
// (pure, unit-tested) and re-reading an open file from its start.
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

// Ports with a socket that a client on the same host's loopback reaches
// (-T/-U "auto", read from the host's files): bound to a loopback address
// or to any address.
std::set<unsigned> loopback_reachable_ports(std::string_view proc_net_text,
                                            SocketKind kind);

// Ports with a socket bound to a loopback address (--host-lo-to-ns-lo:
// those with none elsewhere, in any of a namespace's files, only a client
// on its loopback reaches, so the host's loopback is relayed to them).
std::set<unsigned> loopback_ports(std::string_view proc_net_text, SocketKind kind);

// Reads fd (a /proc/net file) from its start. Returns false on a read
// error (the namespace is gone).
bool read_proc_net(int fd, std::string &out);

} // namespace pasta
