// SPDX-License-Identifier: Apache-2.0

// Guest ingress: what becomes of one frame read from the tap. The frame is
// split from its virtio-net header, filtered (guest_filter.hpp: only ARP,
// IPv4 and IPv6 from the guest's own addresses, no router messages), IPv4
// fragments are reassembled (libslirp must never see one), then the TCP
// and UDP fast paths get the first look (their frames never need their
// checksum finished); every other frame has its checksum completed and URG
// cleared, echo requests go to the ICMP echo path when it is on, and the
// rest, if FlowLimits admits the host socket it may cost, goes to libslirp.
// The stack loop and the `frames` fuzz target both run this one chain, so
// the fuzzer tests what ships. Stack thread only.
//
// It lives in parent/ because it joins the parent's FlowLimits with both
// backends (datapath/tcp/ and slirp/); datapath/ sits below all of them.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <functional>
#include <span>

#include "common/addr.hpp"
#include "common/stats.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/icmp/echo_path.hpp"
#include "datapath/reassembly.hpp"
#include "datapath/tcp/fastpath.hpp"
#include "datapath/udp/fastpath.hpp"
#include "datapath/udp_gso.hpp"
#include "parent/flow_limits.hpp"

namespace rknp {

class GuestIngress {
public:
    // The last step: one whole, admitted Ethernet frame into libslirp
    // (SlirpAdapter::input in the stack loop).
    using ToLibslirp = std::function<void(std::span<const uint8_t> frame)>;

    // What became of a frame, for the caller's follow-up (the fast path's
    // output batch to write) and for tests.
    enum class Outcome {
        Dropped,      // malformed: frames_dropped
        Filtered,     // not the guest's to send: frames_dropped and _filtered
        Reassembling, // an IPv4 fragment held (or given up) by the reassembler
        FastPath,     // consumed by a fast path (TCP: its frames() may be due)
        Refused,      // over the flow limits (FlowLimits counts it)
        Libslirp,     // given to libslirp
        Echo,         // consumed by the ICMP echo path
        Answered,     // an ARP request for a neighbour, answered here
    };

    // net: the guest's IPv4 network (the IPv6 prefix is kIpv6Prefix).
    // fast_path, udp_fast_path: nullptr when off. limits and the fast
    // paths must outlive this.
    GuestIngress(const Ipv4Cidr &net, Stats &stats, FlowLimits &limits,
                 tcp::FastPath *fast_path, udp::FastPath *udp_fast_path,
                 ToLibslirp to_libslirp);

    // One frame as read from the tap, changed in place (vnet_hdr: it starts
    // with a virtio-net header; only such a tap carries the fast path's
    // frames). A UDP GSO super-frame goes on as the datagrams it stands
    // for. now_ms: the monotonic clock, for reassembly and admission.
    Outcome input(std::span<uint8_t> raw, bool vnet_hdr, int64_t now_ms);

    // The fast paths' admission of a new flow (admit_flow in their
    // configs): the limits they share with libslirp. UDP flows also count
    // against the cap of lingering (UDP/ICMP) sockets.
    Admission admit_fast_flow(int64_t now_ms);
    Admission admit_udp_flow(int64_t now_ms);

    // The ICMP echo path (nullptr: off), offered echo requests after the
    // TCP fast path and before libslirp; its entries count as flows.
    void set_echo_path(icmp::EchoPath *echo) { echo_ = echo; }
    bool admit_echo(int64_t now_ms) {
        return limits_.admit(fast_flows(), uint64_t(now_ms), true, lingering_flows()) ==
               FlowLimits::Admit::Ok;
    }

    // pasta's model (ParentConfig::host_network): ARP requests for any
    // address of the network but the guest's are answered here, into sink
    // (neighbour_proxy.hpp). nullptr: off, libslirp answers for its own.
    void set_neighbour_proxy(GuestSink *sink) { neighbours_ = sink; }

private:
    // One Ethernet frame (a tap's, or a datagram of a UDP GSO one).
    Outcome input_frame(TapFrame &tap_frame, bool vnet_hdr, int64_t now_ms);
    size_t udp_flows() const { return udp_fast_path_ ? udp_fast_path_->flows() : 0; }
    size_t echo_entries() const { return echo_ ? echo_->entries() : 0; }
    // Fast-path flows of any kind, and those the guest cannot end itself
    // (UDP flows, echo entries): FlowLimits' lingering sockets.
    size_t fast_flows() const {
        return (fast_path_ ? fast_path_->flows() : 0) + udp_flows() + echo_entries();
    }
    size_t lingering_flows() const { return udp_flows() + echo_entries(); }
    static Admission admission(FlowLimits::Admit a);

    Ipv4Cidr net_;
    in6_addr prefix6_{}; // the guest's IPv6 /64 (guest_source_allowed)
    Stats &stats_;
    FlowLimits &limits_;
    tcp::FastPath *fast_path_;
    udp::FastPath *udp_fast_path_;
    ToLibslirp to_libslirp_;
    icmp::EchoPath *echo_ = nullptr;
    GuestSink *neighbours_ = nullptr;
    std::array<uint8_t, 42> arp_reply_{};
    IpReassembler reassembler_;
    UdpGsoSplitter udp_gso_;
};

} // namespace rknp
