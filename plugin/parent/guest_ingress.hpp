// SPDX-License-Identifier: Apache-2.0

// Guest ingress: what becomes of one frame read from the tap. The frame is
// split from its virtio-net header, filtered (guest_filter.hpp: only ARP,
// IPv4 and IPv6 from the guest's own addresses, no router messages; a
// whole IPv4 TCP or UDP frame from another source goes only to the paths'
// routed_frame, which take replies on forwards to an address routed behind
// the guest and nothing else), IPv4
// fragments are reassembled (libslirp must never see one), then each path
// of the list (datapath/path.hpp) gets a look in order: the TCP and UDP
// fast paths first (their frames never need their checksum finished),
// then, with the checksum completed and URG cleared, the ICMP echo path
// and libslirp, the catch-all. The stack loop and the `frames` fuzz target
// both run this one chain, so the fuzzer tests what ships. Stack thread
// only.
//
// It lives in parent/ because it joins the parent's FlowLimits (each
// path's admission of a new flow) with the paths; datapath/ and slirp/
// sit below it.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/addr.hpp"
#include "common/stats.hpp"
#include "datapath/guest_sink.hpp"
#include "datapath/ndp_proxy.hpp"
#include "datapath/path.hpp"
#include "datapath/reassembly.hpp"
#include "datapath/flows/route.hpp"
#include "datapath/udp/gso_splitter.hpp"
#include "parent/flow_limits.hpp"

namespace rknp {

class GuestIngress {
public:
    // What became of a frame, for the caller's follow-up (the fast path's
    // output batch to write) and for tests.
    enum class Outcome {
        Dropped,      // malformed, or no path took it: frames_dropped
        Filtered,     // not the guest's to send: frames_dropped and _filtered
        Reassembling, // an IPv4 fragment held (or given up) by the reassembler
        Path,         // consumed by a path (taken_by() says which)
        Refused,      // over the flow limits (FlowLimits counts it)
        Answered,     // an ARP request or a neighbour solicitation for a
                      // neighbour, answered here
    };

    // net: the guest's IPv4 network (the IPv6 prefix is kIpv6Prefix).
    // paths: in ingress order, the catch-all (libslirp) last (nullptr
    // entries, paths that are off, are left out). limits and the paths must
    // outlive this.
    GuestIngress(const Ipv4Cidr &net, Stats &stats, FlowLimits &limits,
                 std::vector<Path *> paths);

    // One frame as read from the tap, changed in place (vnet_hdr: it starts
    // with a virtio-net header; only such a tap carries the fast path's
    // frames). A UDP GSO super-frame goes on as the datagrams it stands
    // for. now_ms: the monotonic clock, for reassembly and admission.
    Outcome input(std::span<uint8_t> raw, bool vnet_hdr, int64_t now_ms);
    // The path that consumed or refused the last frame, else nullptr.
    const Path *taken_by() const { return taken_by_; }

    // One more path, offered frames after those before it (nullptr: off,
    // left out).
    void add_path(Path *p) {
        if (p) paths_.push_back(p);
    }

    // A path's admission of a new flow (admit_flow in their configs): the
    // limits the paths share with libslirp. A lingering flow (UDP, echo:
    // Path::Traits) also counts against the cap of lingering sockets.
    Admission admit_flow(int64_t now_ms, bool lingering);
    // All the paths' flows, and the lingering ones.
    size_t path_flows() const;
    size_t lingering_flows() const;

    // pasta's model (ParentConfig::host_network): ARP requests for any
    // address of the network but the guest's are answered here, into sink
    // (neighbour_proxy.hpp). nullptr: off, libslirp answers for its own.
    void set_neighbour_proxy(GuestSink *sink) { neighbours_ = sink; }

    // pasta's model for IPv6 (ParentConfig::ipv6_host): the guest's IPv6
    // sources are net.prefix's (not fd00::/64) and neighbour solicitations
    // for the network's addresses are answered here, into sink
    // (ndp_proxy.hpp).
    void set_ipv6_host(const NdpNetwork &net, GuestSink *sink) {
        prefix6_ = net.prefix.network;
        prefix6_len_ = net.prefix.len;
        ndp_ = net;
        ndp_sink_ = sink;
    }
    // IPv6 alone (ParentConfig::disable_ipv4): ARP and IPv4 are dropped.
    void set_ipv4_off() { ipv4_off_ = true; }

private:
    // One Ethernet frame (a tap's, or a datagram of a UDP GSO one).
    Outcome input_frame(TapFrame &tap_frame, bool vnet_hdr, int64_t now_ms);
    // frame (tap_frame's, or the datagram reassembled from `frames`) to
    // each path in order: Path::guest_frame, or Path::routed_frame for a
    // frame from a source outside the guest's addresses (routed). Dropped
    // when no path took it (counted here unless routed: the caller counts
    // a routed frame as filtered).
    Outcome offer(TapFrame &tap_frame, std::span<uint8_t> frame, bool vnet_hdr,
                  uint32_t frames, bool routed);
    static Admission admission(FlowLimits::Admit a);

    Ipv4Cidr net_;
    in6_addr prefix6_{}; // the guest's IPv6 network (guest_source_allowed)
    uint32_t prefix6_len_ = 64;
    Stats &stats_;
    FlowLimits &limits_;
    std::vector<Path *> paths_;
    const Path *taken_by_ = nullptr;
    GuestSink *neighbours_ = nullptr;
    std::array<uint8_t, 42> arp_reply_{};
    NdpNetwork ndp_;
    GuestSink *ndp_sink_ = nullptr;
    std::array<uint8_t, kNdpAdvertLen> ndp_reply_{};
    bool ipv4_off_ = false;
    IpReassembler reassembler_;
    UdpGsoSplitter udp_gso_;
};

} // namespace rknp
