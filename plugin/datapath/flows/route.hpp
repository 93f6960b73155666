// SPDX-License-Identifier: Apache-2.0

// Which guest flows the fast paths (TCP and UDP) carry, and to where: the
// virtual networks as libslirp has them, and the routing of a flow's
// first packet by its addresses.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>

#include "datapath/flows/endpoints.hpp"

namespace rknp {

struct VirtualNet {
    // The virtual networks as libslirp has them (IPv4 in host byte order).
    // Destinations inside them other than the gateway stay libslirp's.
    uint32_t net4 = 0x0a000200, mask4 = 0xffffff00;
    uint32_t gateway4 = 0x0a000202, dns4 = 0x0a000203;
    bool ipv6 = false;
    in6_addr prefix6{};
    uint32_t prefix6_len = 64;
    in6_addr gateway6{}, dns6{};
    // The gateway means the host's loopback unless this is set; then a
    // flow to it is refused (as libslirp refuses it), or goes to the real
    // gateway in the host's network (host_network).
    bool disable_host_loopback = false;
    // pasta's model (RKNP_NETWORK_MODEL_HOST): net4 is the host's network,
    // its other addresses are neighbours reached through the host, and
    // DNS to dns4 goes to the host's resolver (resolver4) from here, so
    // dns4 may lie outside net4. libslirp then sees no unicast IPv4 flow.
    bool host_network = false;
    uint32_t guest4 = 0x0a000264;
    bool dns = true; // a DNS forwarder at dns4
    std::optional<uint32_t> resolver4;       // the host's first nameserver
    std::optional<uint32_t> map_guest4;      // -> the host at guest4
    std::optional<uint32_t> map_loopback4;   // -> 127.0.0.1
    // pasta's model for IPv6 (ParentConfig::ipv6_host): prefix6 is the
    // host's IPv6 network and gateway6 its gateway (the host's ::1 unless
    // disable_host_loopback, as for IPv4); every other unicast address but
    // guest6 is reached through the host. libslirp's IPv6 is off: dns6 is
    // the caller's (dns_address6), if any.
    bool host_network6 = false;
    in6_addr guest6{};
    std::optional<in6_addr> map_guest6;      // -> the host at guest6
    std::optional<in6_addr> map_loopback6;   // -> ::1
    // DNS to dns6 goes to the host's resolver (resolver6: IPv6, or an
    // IPv4 one as ::ffff:a.b.c.d), as dns4 in host_network; dns6 is :: when
    // there is no IPv6 DNS forwarder.
    std::optional<in6_addr> resolver6;
    std::optional<uint32_t> outbound_addr; // host byte order
    std::optional<in6_addr> outbound_addr6;
};

// What becomes of a guest packet that would open a new flow, or a
// connection accepted on a forwarded port (the parent's max_flows and
// max_new_flows_per_sec, FlowLimits).
enum class Admission {
    Accept,
    Reset, // at the cap: refused at once (TCP: RST; UDP: dropped)
    Drop,  // rate-limited: silence, the guest retries
};

// Where a guest flow's destination goes.
enum class Route {
    NotMine,     // libslirp's (DNS, virtual network, non-unicast, v6 disabled)
    Host,        // connect to the destination itself
    Loopback,    // the gateway (or map_loopback4): 127.0.0.1 / ::1
    GuestAddr,   // map_guest4: the host at the guest's address
    Resolver,    // host_network's DNS: the host's nameserver, port 53
    Refuse,      // the gateway with disable_host_loopback (libslirp's way)
    Unreachable, // host_network's DNS address but port 53, or no resolver
};
// src and dst as IPv4-mapped (v6 false) or IPv6 addresses; dport: the
// destination port (0 for ICMP).
Route classify(const VirtualNet &net, bool v6, const uint8_t src[16],
               const uint8_t dst[16], uint16_t dport);

// The host socket addresses of a flow to dst:port that classify() routed
// (Host or Loopback): what to connect to and, with an outbound address
// configured, what to bind first (bind_len 0: nothing).
struct HostAddrs {
    sockaddr_storage target{};
    socklen_t target_len = 0;
    sockaddr_storage bind{};
    socklen_t bind_len = 0;
};
HostAddrs host_addrs(const VirtualNet &net, Route r, bool v6,
                     const uint8_t dst[16], uint16_t port);

// Whether a socket connect() has just given an ephemeral port holds the
// very address and port it connected to. On loopback, with nothing bound
// there, the kernel may pick the port the guest dialled: the socket then
// talks to itself (UDP gets its own datagrams back, TCP opens
// simultaneously with itself) where the guest must see the port closed.
bool connected_to_itself(int fd, const sockaddr *target);

// The Endpoints of a guest flow from its first packet: the guest's MAC
// and address as sent, the remote it dialled, the gateway MAC libslirp
// would use for frames from that remote.
Endpoints guest_flow_endpoints(const VirtualNet &net, bool v6,
                               const uint8_t guest_mac[6], const uint8_t src[16],
                               const uint8_t dst[16], uint16_t sport,
                               uint16_t dport);

// The client address a guest sees on a forwarded port (IPv4, host byte
// order), as libslirp's sotranslate_accept has it: the peer's own IPv4
// address (or the IPv4 of an IPv4-mapped one), the gateway for loopback,
// IPv6, and anything the guest's answer would not come back to us for
// (its own network, non-unicast). In the host's network (host_network)
// a neighbour keeps its address, and the host's own address (the
// guest's) shows as map_guest4 where there is one.
uint32_t forwarded_source(const VirtualNet &net, const sockaddr_storage &peer);

// The same for a forward to an IPv6 guest end (1.7): the peer's own IPv6
// address where the guest's answer comes back to us for it (a unicast
// address outside the guest's network, or a neighbour in the host's
// network, host_network6); the host's own address (the guest's) as
// map_guest6 where there is one; anything else (loopback, IPv4 clients,
// libslirp's network) as map_loopback6 where there is one, else the IPv6
// gateway. Written to out (16 bytes).
void forwarded_source6(const VirtualNet &net, const sockaddr_storage &peer, uint8_t out[16]);

} // namespace rknp
