// SPDX-License-Identifier: Apache-2.0

// The guest-ingress chain, step by step, with the Stats each step owes.
#include "parent/guest_ingress.hpp"

#include <arpa/inet.h>

#include <utility>

#include "common/config.hpp"
#include "datapath/guest_filter.hpp"
#include "datapath/neighbour_proxy.hpp"
#include "datapath/offload.hpp"

namespace rknp {

namespace {

bool is_ipv6_frame(std::span<const uint8_t> frame) {
    return frame.size() >= 14 && frame[12] == 0x86 && frame[13] == 0xdd;
}

// What a reply from an address routed behind the guest may be: a whole
// IPv4 or IPv6 TCP segment or UDP datagram (forwards to such addresses
// carry nothing else; a fragment never reaches a path from there, nor an
// IPv6 extension header).
bool routed_candidate(std::span<const uint8_t> frame) {
    constexpr size_t kEth = 14;
    const uint8_t *ip = frame.data() + kEth;
    if (is_ipv6_frame(frame)) {
        if (frame.size() < kEth + 40) return false;
        const uint8_t next = ip[6];
        return (ip[0] >> 4) == 6 && (next == 6 || next == 17);
    }
    if (frame.size() < kEth + 20 || frame[12] != 0x08 || frame[13] != 0x00) return false;
    const uint8_t proto = ip[9];
    return (ip[0] >> 4) == 4 && (proto == 6 || proto == 17) && !is_ip_fragment(frame);
}

} // namespace

GuestIngress::GuestIngress(const Ipv4Cidr &net, Stats &stats,
                           FlowLimits &limits, std::vector<Path *> paths)
    : net_(net), stats_(stats), limits_(limits), paths_(std::move(paths)) {
    std::erase(paths_, nullptr);
    inet_pton(AF_INET6, kIpv6Prefix, &prefix6_);
}

GuestIngress::Outcome GuestIngress::input(std::span<uint8_t> raw,
                                          bool vnet_hdr, int64_t now_ms) {
    taken_by_ = nullptr;
    TapFrame tap_frame = split_tap_frame(raw, vnet_hdr);
    if (tap_frame.eth.empty()) {
        Stats::add(stats_.frames_dropped, 1);
        return Outcome::Dropped;
    }
    if (vnet_hdr && UdpGsoSplitter::is_udp_gso(tap_frame.hdr)) {
        if (!udp_gso_.start(tap_frame.eth, tap_frame.hdr)) {
            Stats::add(stats_.frames_dropped, 1);
            return Outcome::Dropped;
        }
        // Each datagram on its own way; the caller's follow-up is due if
        // any reached a path.
        Outcome result = Outcome::Dropped;
        TapFrame datagram;
        while (udp_gso_.next(datagram)) {
            const Outcome o = input_frame(datagram, vnet_hdr, now_ms);
            if (result != Outcome::Path) result = o;
        }
        return result;
    }
    return input_frame(tap_frame, vnet_hdr, now_ms);
}

GuestIngress::Outcome GuestIngress::input_frame(TapFrame &tap_frame, bool vnet_hdr,
                                                int64_t now_ms) {
    std::span<uint8_t> frame = tap_frame.eth;
    auto filtered = [this] {
        Stats::add(stats_.frames_dropped, 1);
        Stats::add(stats_.frames_filtered, 1);
        return Outcome::Filtered;
    };
    if (!libslirp_ethertype(frame) || router_message_from_guest(frame) ||
        (ipv4_off_ && !is_ipv6_frame(frame)))
        return filtered();
    if (!guest_source_allowed(frame, net_, prefix6_, prefix6_len_)) {
        // Perhaps a reply from an address routed behind the guest, on a
        // forward's flow: only the paths' forwarded flows may take it.
        if (!routed_candidate(frame)) return filtered();
        const Outcome o = offer(tap_frame, frame, vnet_hdr, 1, true);
        return o == Outcome::Dropped ? filtered() : o;
    }
    if (neighbours_ && answer_neighbour_arp(frame, net_, arp_reply_)) {
        neighbours_->write_frame(VnetHdr{}, arp_reply_, {});
        Stats::add(stats_.frames_from_tap, 1);
        Stats::add(stats_.bytes_from_tap, frame.size());
        return Outcome::Answered;
    }
    if (ndp_sink_ && answer_neighbour_ndp(frame, ndp_, ndp_reply_)) {
        ndp_sink_->write_frame(VnetHdr{}, ndp_reply_, {});
        Stats::add(stats_.frames_from_tap, 1);
        Stats::add(stats_.bytes_from_tap, frame.size());
        return Outcome::Answered;
    }
    // Fragments have their checksum checked whole first.
    uint32_t frames = 1;
    if (is_ip_fragment(frame)) { // libslirp must never see one
        if (!finish_checksum(tap_frame)) {
            Stats::add(stats_.frames_dropped, 1);
            return Outcome::Dropped;
        }
        auto o = reassembler_.add(frame, now_ms);
        Stats::add(stats_.frames_dropped, o.dropped);
        if (o.datagram.empty()) return Outcome::Reassembling;
        frame = o.datagram;
        frames = o.fragments;
    }
    return offer(tap_frame, frame, vnet_hdr, frames, false);
}

GuestIngress::Outcome GuestIngress::offer(TapFrame &tap_frame, std::span<uint8_t> frame,
                                          bool vnet_hdr, uint32_t frames, bool routed) {
    // The checksum is finished once, before the first path that needs it
    // (the fast paths never do; the echo path and libslirp do).
    bool checksum_done = false;
    auto finish = [&] {
        if (checksum_done) return true;
        checksum_done = true;
        if (!finish_checksum(tap_frame)) return false;
        strip_urgent(frame); // also in reassembled datagrams
        return true;
    };
    for (Path *p : paths_) {
        const Path::Traits t = p->traits();
        if (t.needs_vnet_hdr && !vnet_hdr) continue;
        if (t.needs_checksum && !finish()) break;
        const Verdict v = routed ? p->routed_frame(frame) : p->guest_frame(frame);
        if (v == Verdict::NotMine) continue;
        if (v == Verdict::Malformed) break;
        taken_by_ = p;
        Stats::add(stats_.frames_from_tap, frames);
        Stats::add(stats_.bytes_from_tap, frame.size());
        return v == Verdict::Refused ? Outcome::Refused : Outcome::Path;
    }
    if (!routed) Stats::add(stats_.frames_dropped, 1);
    return Outcome::Dropped;
}

Admission GuestIngress::admission(FlowLimits::Admit a) {
    switch (a) {
    case FlowLimits::Admit::Ok:
        return Admission::Accept;
    case FlowLimits::Admit::Full:
        return Admission::Reset;
    case FlowLimits::Admit::RateLimited:
        break;
    }
    return Admission::Drop;
}

Admission GuestIngress::admit_flow(int64_t now_ms, bool lingering) {
    return admission(limits_.admit(path_flows(), uint64_t(now_ms), lingering,
                                   lingering_flows()));
}

size_t GuestIngress::path_flows() const {
    size_t n = 0;
    for (const Path *p : paths_) n += p->flows();
    return n;
}

size_t GuestIngress::lingering_flows() const {
    size_t n = 0;
    for (const Path *p : paths_) n += p->lingering_flows();
    return n;
}

} // namespace rknp
