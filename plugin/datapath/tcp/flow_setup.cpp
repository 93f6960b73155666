// SPDX-License-Identifier: Apache-2.0

// Flow setup both ways: a guest SYN opening a host connection (open,
// connected, SYN-ACK to the guest) and a connection accepted on a forwarded
// port opening a guest one (SYN to the guest, its SYN-ACK, our ACK).
#include "datapath/tcp/flow.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "datapath/flows/route.hpp"

namespace rknp::tcp {

namespace {

// EPOLLPRI: urgent data ends a peek early (see Vars::peek_drained).
constexpr uint32_t kEstablishedEvents = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP | EPOLLET;

void set_int(int fd, int level, int opt, int v) {
    // Best effort: a missing option only costs performance.
    (void)::setsockopt(fd, level, opt, &v, sizeof v);
}

uint16_t mss_for_mtu(uint32_t mtu, bool v6) {
    uint32_t hdrs = (v6 ? kIp6Len : kIp4Len) + kTcpLen;
    uint32_t m = mtu > hdrs + 64 ? mtu - hdrs : 64;
    return uint16_t(std::min<uint32_t>(m, kMaxPayload));
}

bool mac_zero(const uint8_t mac[6]) {
    static const uint8_t zero[6] = {};
    return std::memcmp(mac, zero, 6) == 0;
}

// The guest's MSS, never below the classic minimum (a 1-byte MSS would
// make every GSO frame 64k segments) nor above our link.
uint16_t guest_mss(uint16_t offered, bool v6, uint16_t ours) {
    uint16_t want = offered != 0 ? offered : (v6 ? 1220 : 536);
    return std::min<uint16_t>(std::max<uint16_t>(want, 536), ours);
}

// Options every flow's host socket gets; false if SO_PEEK_OFF is refused
// (asked for only in the Offset peek mode).
bool setup_socket(int fd, PeekMode mode) {
    // The guest's stack already decided when to push (Nagle/cork happened
    // there): a second Nagle here would only add delay.
    set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
    // Urgent data inline: without this the kernel takes the urgent byte
    // out of the stream and our byte counting (peek offset = bytes in
    // flight) would slip. URG is never passed on in either direction.
    set_int(fd, SOL_SOCKET, SO_OOBINLINE, 1);
    if (mode != PeekMode::Offset) return true;
    int zero = 0;
    return ::setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) == 0;
}

} // namespace

bool Flow::open(FlowContext &c, const Open &o) {
    const Segment &syn = *o.syn;
    v_ = Vars{};
    v_.ep = o.ep;
    v_.ref = o.ref;
    v_.irs = syn.seq;
    v_.rcv_nxt = syn.seq + 1;
    v_.iss = o.isn;
    v_.snd_una = v_.snd_nxt = v_.snd_high = o.isn + 1;
    v_.recover = o.isn; // RFC 6582: the ISS
    // RFC 7323: scaling only if the guest offered it; its shift is capped
    // at 14, and the window in its SYN is not scaled.
    if (syn.wscale >= 0) {
        v_.guest_ws = uint8_t(std::min(syn.wscale, 14));
        v_.our_ws = kOurWs;
    }
    v_.snd_wnd = syn.window;
    v_.last_wnd_field = syn.window;
    v_.our_mss = mss_for_mtu(c.mtu, o.ep.v6);
    v_.mss = guest_mss(syn.mss, o.ep.v6, v_.our_mss);

    int fam = o.target->sa_family;
    sock_.reset(::socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock_) {
        ++c.stats.flows_refused;
        v_.state = State::Connecting; // so close() answers the SYN
        close(c, Reset::Guest);
        return false;
    }
    const int fd = sock_.get();
    if (!setup_socket(fd, c.peek.mode()) ||
        (o.bind != nullptr && ::bind(fd, o.bind, o.bind_len) < 0)) {
        ++c.stats.connect_failed;
        v_.state = State::Connecting;
        close(c, Reset::Guest);
        return false;
    }
    v_.state = State::Connecting;
    // Connected to itself: nothing listens on that port (a listener would
    // have kept the kernel from picking it), so the guest is refused.
    if ((::connect(fd, o.target, o.target_len) < 0 && errno != EINPROGRESS) ||
        connected_to_itself(fd, o.target)) {
        ++c.stats.connect_failed;
        close(c, Reset::Guest);
        return false;
    }
    // Connect completion (or failure) shows as EPOLLOUT/EPOLLERR.
    set_epoll(c, EPOLLOUT | EPOLLET, true);
    return !closed();
}



void Flow::connected(FlowContext &c) {
    v_.state = State::SynAckSent;
    set_epoll(c, kEstablishedEvents, false);
    if (closed()) return;
    // The guest may send us no larger segments than the host's path
    // carries (a 1500-byte link behind a 65520-byte tap): its window
    // steps, and our updates to it, are then of the path's size.
    // TCP_INFO's path MTU, not TCP_MAXSEG, which at this point is also
    // bound to half the peer's first window (32 KiB over loopback).
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(sock_.get(), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_pmtu != 0)
        v_.our_mss = std::min(v_.our_mss, mss_for_mtu(ti.tcpi_pmtu, v_.ep.v6));
    v_.rto_ms = kRtoInitialMs;
    v_.rto_at = c.now + v_.rto_ms;
    v_.rtt_timing = true; // SYN-ACK to the guest's ACK: the first sample
    v_.rtt_start = c.now;
    if (!send_synack(c)) v_.owe_synack = true;
}



bool Flow::send_synack(FlowContext &c) {
    if (!c.out.control_room()) return false;
    // The window of a SYN is never scaled (RFC 7323 2.2).
    uint32_t w = std::min<uint32_t>(window_now(), 65535);
    v_.adv_wnd = w;
    OutFields f;
    f.seq = v_.iss;
    f.ack = v_.rcv_nxt;
    f.flags = kSyn | kAck;
    f.window = uint16_t(w);
    f.mss_opt = v_.our_mss;
    f.ws_opt = v_.our_ws != 0 ? v_.our_ws : -1;
    f.ip_id = v_.ip_id++;
    c.out.append(v_.ep, f, 0, v_.mss);
    v_.owe_synack = false;
    return true;
}



void Flow::open_accepted(FlowContext &c, UniqueFd sock, const Endpoints &ep, uint64_t ref,
                         uint32_t isn) {
    v_ = Vars{};
    v_.ep = ep;
    v_.ref = ref;
    v_.iss = isn;
    v_.snd_una = v_.snd_nxt = v_.snd_high = isn + 1;
    v_.recover = isn; // RFC 6582: the ISS
    v_.our_ws = kOurWs; // offered; dropped if the guest's SYN-ACK has none
    v_.our_mss = mss_for_mtu(c.mtu, ep.v6);
    v_.mss = guest_mss(0, ep.v6, v_.our_mss);
    sock_ = std::move(sock);
    v_.state = State::HostSynSent;
    if (!setup_socket(sock_.get(), c.peek.mode())) {
        close(c, Reset::Host);
        return;
    }
    // Until the guest answers only errors and hang-ups (always reported)
    // matter: data the host client sends waits in the socket.
    set_epoll(c, 0, true);
    if (closed()) return;
    v_.rto_ms = kRtoInitialMs;
    v_.rto_at = c.now + v_.rto_ms;
    v_.rtt_timing = true; // SYN to the guest's SYN-ACK: the first sample
    v_.rtt_start = c.now;
    if (!send_syn(c)) v_.owe_synack = true;
}

void Flow::guest_mac_learned(FlowContext &c, const uint8_t mac[6]) {
    if (v_.state != State::HostSynSent || !mac_zero(v_.ep.guest_mac)) return;
    std::memcpy(v_.ep.guest_mac, mac, 6);
    if (!send_syn(c)) v_.owe_synack = true;
}

bool Flow::send_syn(FlowContext &c) {
    if (mac_zero(v_.ep.guest_mac)) {
        // Nowhere to send it yet: the fast path asks the guest (ARP).
        c.want_guest_mac = true;
        return true;
    }
    if (!c.out.control_room()) return false;
    // The window of a SYN is never scaled (RFC 7323 2.2).
    uint32_t w = std::min<uint32_t>(window_now(), 65535);
    v_.adv_wnd = w;
    OutFields f;
    f.seq = v_.iss;
    f.flags = kSyn;
    f.window = uint16_t(w);
    f.mss_opt = v_.our_mss;
    f.ws_opt = kOurWs;
    f.ip_id = v_.ip_id++;
    c.out.append(v_.ep, f, 0, v_.mss);
    v_.owe_synack = false;
    return true;
}

void Flow::host_syn_segment(FlowContext &c, const Segment &s) {
    if ((s.flags & kAck) && s.ack != v_.iss + 1) {
        // RFC 793 SYN-SENT: an unacceptable ACK gets <SEQ=SEG.ACK><RST>.
        ++c.stats.segments_dropped;
        if (c.out.control_room()) {
            OutFields f;
            f.seq = s.ack;
            f.flags = kRst;
            f.ip_id = v_.ip_id++;
            c.out.append(v_.ep, f, 0, v_.mss);
        }
        return;
    }
    if ((s.flags & (kSyn | kAck)) != (kSyn | kAck)) {
        ++c.stats.segments_dropped; // a simultaneous open is not supported
        return;
    }
    syn_answered(c, s);
}

void Flow::syn_answered(FlowContext &c, const Segment &s) {
    v_.irs = s.seq;
    v_.rcv_nxt = s.seq + 1;
    // RFC 7323: both shifts apply only if both SYNs carried the option.
    if (s.wscale >= 0) {
        v_.guest_ws = uint8_t(std::min(s.wscale, 14));
    } else {
        v_.guest_ws = 0;
        v_.our_ws = 0;
    }
    v_.mss = guest_mss(s.mss, v_.ep.v6, v_.our_mss);
    v_.snd_wnd = s.window; // not scaled in a SYN-ACK
    v_.last_wnd_field = s.window;
    v_.state = State::Established;
    v_.rto_at = -1;
    if (v_.rtt_timing) rtt_sample(c.now - v_.rtt_start);
    v_.rtt_timing = false;
    v_.retries = 0;
    v_.rto_ms = rto_base();
    v_.owe_synack = false;
    ++c.stats.forward_established;
    set_epoll(c, kEstablishedEvents, false);
    if (closed()) return;
    v_.owe_ack = true;
    flush_owed(c);
    // The host client may have written (or closed) already: the edge
    // is gone, so look now.
    push(c);
}

void Flow::on_syn_rto(FlowContext &c) {
    if (++v_.retries > kMaxSynRetries) {
        ++c.stats.timeouts;
        ++c.stats.forward_syn_timeouts;
        // The guest never synchronised: an RST would mean nothing to it.
        close(c, Reset::Host);
        return;
    }
    ++c.stats.retransmits;
    v_.rto_ms = std::min(v_.rto_ms * 2, kRtoMaxMs);
    v_.rto_at = c.now + v_.rto_ms;
    v_.rtt_timing = false; // Karn: no sample across a retransmission
    if (!send_syn(c)) v_.owe_synack = true;
}

} // namespace rknp::tcp
