// SPDX-License-Identifier: Apache-2.0

// The gate before slirp_input: whether a guest frame would cost libslirp a
// new host socket, and if so whether the flow limits let it through (the
// caller's admission, FlowLimits in the stack loop). A guest can ask for a
// host socket with every SYN, every new UDP source port and every echo
// request; refused frames never reach libslirp. The gate brackets each
// slirp_input so that GuestSockets learns which flow a socket libslirp
// registers belongs to, and it counts libslirp's flows for FlowLimits (the
// Path interface's flows()). Stack thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "common/addr.hpp"
#include "datapath/flows/route.hpp"
#include "slirp/guest_sockets.hpp"

namespace rknp {

// Room GuestSockets keeps beyond max_flows for sockets made by a frame not
// seen as a new flow (none known in libslirp 4.7.0): they are still
// counted, so the cap then refuses the next new flow.
inline constexpr size_t kGuestSocketSlack = 64;

// What a guest frame may cost libslirp.
struct NewFlow {
    bool candidate = false; // could make a host socket
    FlowKey key;            // proto 0: every such frame makes its own
};

// TCP segments with SYN and none of ACK/RST/FIN (tcp_input makes a socket
// only for those), every UDP datagram (keyed by source: libslirp's
// per-source socket, or DHCP/TFTP that make none), ICMP echo requests not
// to the gateway or DNS address (icmp_send: one socket each). IPv4 header
// options are skipped; IPv6 packets whose next header is not TCP/UDP are
// not candidates (libslirp 4.7.0 forwards no IPv6 echo and drops extension
// headers). Frames must be whole (IPv4 fragments reassembled).
NewFlow classify_new_flow(std::span<const uint8_t> eth_frame, const Ipv4Cidr &net);

class SlirpFlowGate {
public:
    // A new flow's admission (lingering: UDP or ICMP, which only libslirp's
    // idle timers end).
    using AdmitFlow = std::function<Admission(bool lingering)>;

    SlirpFlowGate(const Ipv4Cidr &net, uint32_t max_flows, AdmitFlow admit);

    // Whether the frame may go to slirp_input; when it may, call end()
    // after slirp_input returns.
    bool begin(std::span<const uint8_t> eth_frame);
    void end() { sockets_.end_input(); }

    // libslirp's socket registrations (SlirpCb) go here.
    GuestSockets &sockets() { return sockets_; }
    // The host sockets libslirp holds for guest flows, and of those the
    // UDP and ICMP ones.
    size_t flows() const { return sockets_.size(); }
    size_t lingering_flows() const { return sockets_.lingering(); }

private:
    Ipv4Cidr net_;
    AdmitFlow admit_;
    GuestSockets sockets_;
};

} // namespace rknp
