// SPDX-License-Identifier: Apache-2.0

// A guest flow's host socket on the UDP fast path: opened, bound to the
// outbound address if one is set, connected to the flow's destination,
// with the options the path reads it by (IP_RECVERR, UDP_GRO, SO_RCVBUF);
// or why not, and whether the reason says anything about the destination.
#pragma once

#include "common/fd.hpp"
#include "datapath/flows/route.hpp"

namespace rknp::udp {

// The socket, or why not: err, and whether it is a shortage of our own
// (fds, memory, ephemeral ports), which says nothing about the
// destination.
struct HostSocket {
    UniqueFd fd;
    int err = 0;
    bool shortage = false;
};

// Connected to addrs.target (bound first to addrs.bind if set), with
// IP_RECVERR/IPV6_RECVERR; a second socket where the kernel's ephemeral
// port made the first one connected to itself; UDP_GRO when gro, and a
// receive buffer of kHostRcvBuf.
HostSocket open_host_socket(bool v6, const HostAddrs &addrs, bool gro);

} // namespace rknp::udp
