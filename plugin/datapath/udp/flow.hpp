// SPDX-License-Identifier: Apache-2.0

// One flow of the UDP fast path, as both of its tables hold it: the
// guest's flows (a connected host socket each, udp::FastPath's FlowTable)
// and the clients of forwarded ports (no socket of their own: replies
// leave through the forward's socket, client_pool.hpp).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "common/fd.hpp"
#include "datapath/flows/endpoints.hpp"

namespace rknp::udp {

// A forwarded port's client (AF_INET or AF_INET6).
union ClientAddr {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
};

// The source address a forward's reply leaves from when the forward is
// bound to a wildcard address: the one its client sent to, as a server
// would answer. A client that connect()ed to one of the host's addresses
// takes nothing from another (the kernel's own choice for the reply).
struct ReplySource {
    sa_family_t family = AF_UNSPEC; // AF_UNSPEC: the kernel chooses
    in_addr v4{};
    in6_pktinfo v6{}; // with the interface for a link-local address
};

struct Flow {
    Endpoints ep;
    UniqueFd sock; // a guest flow's; invalid: a free slot or a forward's client
    int64_t last_ms = 0;
    bool answered = false;    // the other side spoke back (the host, or
                              // for a forward's client the guest)
    bool segmentation = true; // UDP_SEGMENT works towards this peer
    // The length of the last datagram sent (a run's segment size), for the
    // quote of an ICMP error: the error queue gives only the bytes the
    // ICMP message quoted, often none past the UDP header.
    uint16_t last_len = 0;
    // A forward's client: replies sendto client on that forward's socket.
    int32_t fwd = -1;
    ClientAddr client{};
    socklen_t client_len = 0;
    ReplySource reply_from{}; // where its client last sent to
    const Endpoints &endpoints() const { return ep; }
    bool closed() const { return !sock.valid() && fwd < 0; }
};

} // namespace rknp::udp
