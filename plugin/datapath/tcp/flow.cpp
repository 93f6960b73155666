// SPDX-License-Identifier: Apache-2.0

// One TCP flow (tcp::Flow, flow.hpp), the whole class: its setup both
// ways (a guest SYN opening a host connection: open, connected, SYN-ACK to
// the guest; a connection accepted on a forwarded port opening a guest one:
// SYN to the guest, its SYN-ACK, our ACK); the state machine guest segments
// go through after setup, socket events, deadlines, postponed work,
// closing; the guest->host half (guest data into the host socket in order,
// the ACKs and windows we give the guest for it); the host->guest half
// (socket data peeked into frames for the guest in either peek mode,
// peek_mode.hpp, the guest's ACKs releasing it, retransmission by
// rewinding). The calls on the host socket, and when each option is set,
// are HostSocket's (host_socket.cpp). Past 700 lines on purpose: every
// part reads and moves the same sequence and window state, so a cut would
// halve the class, not give a part a job of its own.
#include "datapath/tcp/flow.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "datapath/tcp/seq.hpp"

namespace rknp::tcp {

namespace {

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
    v_.peek_drained = true; // until the socket's first EPOLLIN edge
    v_.loopback = o.loopback;
    v_.our_mss = mss_for_mtu(c.mtu, o.ep.v6);
    v_.mss = guest_mss(syn.mss, o.ep.v6, v_.our_mss);

    v_.state = State::Connecting; // so close() answers the SYN
    switch (sock_.connect(o.target, o.target_len, o.bind, o.bind_len)) {
    case HostSocket::Connect::Started:
        break;
    case HostSocket::Connect::NoSocket:
        ++c.stats.flows_refused;
        close(c, Reset::Guest);
        return false;
    case HostSocket::Connect::Refused:
        ++c.stats.connect_failed;
        close(c, Reset::Guest);
        return false;
    }
    // Connect completion (or failure) shows as EPOLLOUT/EPOLLERR, with the
    // established flow's mask (socket_events keeps what comes before it is
    // established).
    return watch(c);
}

void Flow::connected(FlowContext &c) {
    v_.state = State::SynAckSent;
    v_.keepalive_at = c.now + HostSocket::kKeepaliveAfterMs;
    // The guest may send us no larger segments than the host's path
    // carries (a 1500-byte link behind a 65520-byte tap): its window
    // steps, and our updates to it, are then of the path's size.
    // The path MTU, not TCP_MAXSEG, which at this point is also
    // bound to half the peer's first window (32 KiB over loopback).
    const uint32_t pmtu = sock_.path_mtu(v_.loopback, c.loopback_mtu);
    if (pmtu != 0) v_.our_mss = std::min(v_.our_mss, mss_for_mtu(pmtu, v_.ep.v6));
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
    // Until the socket's first EPOLLIN edge (adding it to the epoll set
    // reports data that came before).
    v_.peek_drained = true;
    sock_.adopt(std::move(sock));
    v_.state = State::HostSynSent;
    // The established flow's mask at once (no EPOLL_CTL_MOD when the guest
    // answers): data the host client sends meanwhile waits in the socket,
    // socket_events notes its FIN, and syn_answered() looks.
    if (!watch(c)) return;
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

bool Flow::watch(FlowContext &c) {
    if (sock_.watch(c.events, v_.ref)) return true;
    close(c, Reset::Both); // ENOMEM/ENOSPC: cannot watch it, give up
    return false;
}

bool Flow::emit(FlowContext &c, uint8_t flags, uint32_t seq, size_t payload_len,
                uint16_t window) {
    if (!c.out.control_room()) {
        ++c.stats.frames_lost;
        return false;
    }
    OutFields f;
    f.seq = seq;
    f.ack = v_.rcv_nxt;
    f.flags = flags;
    f.window = window;
    f.ip_id = v_.ip_id++;
    c.out.append(v_.ep, f, payload_len, v_.mss);
    return true;
}

void Flow::close(FlowContext &c, Reset reset) {
    if (v_.state == State::Free || v_.state == State::Closing) return;
    const bool guest = reset == Reset::Guest || reset == Reset::Both;
    if (guest) {
        ++c.stats.resets_to_guest;
        v_.rst_for_syn = v_.state == State::Connecting;
        v_.rsts_sent = 0;
    }
    sock_.close(reset == Reset::Host || reset == Reset::Both); // leaves the epoll set
    v_.state = State::Closing;
    v_.rto_at = v_.wnd_at = v_.keepalive_at = -1;
    v_.owe_ack = v_.owe_synack = v_.want_push = false;
    if (!guest || send_rsts(c)) v_.state = State::Free;
}

bool Flow::send_rsts(FlowContext &c) {
    if (v_.rst_for_syn) {
        // The guest is in SYN-SENT: only an RST acking its SYN counts. If
        // the batch is full it is lost (counted): the guest's next SYN
        // gets an answer, and a flow that failed to open stays Free.
        emit(c, kRst | kAck, 0, 0, 0);
        return true;
    }
    // RFC 5961: the guest takes an RST only at exactly its rcv_nxt: the
    // highest we ever sent if all of it arrived (a rewind may have gone
    // below it since), else the last point it acknowledged.
    const uint32_t high = v_.snd_high;
    const uint32_t acked = v_.snd_una + (v_.fin_acked ? 1 : 0);
    const uint8_t want = acked != high ? 2 : 1;
    for (; v_.rsts_sent < want; ++v_.rsts_sent) {
        if (!c.out.control_room()) return false; // service() sends the rest
        emit(c, kRst | kAck, v_.rsts_sent == 0 ? high : acked, 0, 0);
    }
    return true;
}

void Flow::guest_gone(FlowContext &c) {
    if (v_.state == State::Closing) v_.state = State::Free; // no RST owed now
    close(c, Reset::Host);
}

int64_t Flow::deadline() const {
    int64_t d = -1;
    for (int64_t t : {v_.rto_at, v_.wnd_at, v_.keepalive_at})
        if (t >= 0 && (d < 0 || t < d)) d = t;
    return d;
}

void Flow::guest_segment(FlowContext &c, const Segment &s) {
    if (s.flags & kRst) {
        // Any RST on the 4-tuple: only the guest can put frames on its tap,
        // so the only flows it can reset are its own.
        ++c.stats.resets_from_guest;
        close(c, Reset::Host);
        return;
    }
    switch (v_.state) {
    case State::Free:
    case State::Closing:
        return;
    case State::HostSynSent:
        host_syn_segment(c, s);
        return;
    case State::Connecting:
        // Only retransmitted SYNs can come before our SYN-ACK.
        if (!(s.flags & kSyn) || s.seq != v_.irs) ++c.stats.segments_dropped;
        return;
    case State::SynAckSent:
        if (s.flags & kSyn) {
            if (s.seq == v_.irs && !(s.flags & kAck)) { // our SYN-ACK was lost
                v_.rtt_timing = false;
                if (!send_synack(c)) v_.owe_synack = true;
            } else {
                ++c.stats.segments_dropped;
            }
            return;
        }
        if (!(s.flags & kAck)) {
            ++c.stats.segments_dropped;
            return;
        }
        if (s.ack != v_.iss + 1) {
            // RFC 793: an unacceptable ACK in SYN-RECEIVED gets <SEQ=SEG.ACK><RST>.
            ++c.stats.segments_dropped;
            OutFields f;
            if (c.out.control_room()) {
                f.seq = s.ack;
                f.flags = kRst;
                f.ip_id = v_.ip_id++;
                c.out.append(v_.ep, f, 0, v_.mss);
            }
            return;
        }
        v_.state = State::Established;
        v_.snd_wnd = uint32_t(s.window) << v_.guest_ws;
        v_.last_wnd_field = s.window;
        v_.rto_at = -1;
        if (v_.rtt_timing) rtt_sample(c.now - v_.rtt_start);
        v_.rtt_timing = false;
        v_.retries = 0;
        v_.rto_ms = rto_base();
        break;
    case State::Established:
        if (s.flags & kSyn) {
            // RFC 5961 4: a SYN on a synchronised connection gets a
            // challenge ACK, nothing else.
            ++c.stats.segments_dropped;
            v_.owe_ack = true;
            flush_owed(c);
            return;
        }
        if (!(s.flags & kAck)) {
            ++c.stats.segments_dropped;
            return;
        }
        if (!process_ack(c, s) || closed()) {
            flush_owed(c);
            return;
        }
        break;
    }
    process_data(c, s);
    if (closed()) return;
    flush_owed(c);
    push(c);
    if (closed()) return;
    maybe_finish(c);
}

void Flow::flush_owed(FlowContext &c) {
    if (closed()) return;
    if (v_.owe_synack && v_.state == State::SynAckSent) send_synack(c);
    if (v_.owe_synack && v_.state == State::HostSynSent) send_syn(c);
    if (v_.owe_ack && v_.state == State::Established) send_ack(c);
}

void Flow::service(FlowContext &c) {
    if (v_.state == State::Closing) {
        if (send_rsts(c)) v_.state = State::Free;
        return;
    }
    flush_owed(c);
    if (!closed() && v_.want_push) push(c);
    if (!closed()) maybe_finish(c);
}

void Flow::socket_events(FlowContext &c, uint32_t ev) {
    if (v_.state == State::Free || v_.state == State::Closing) return;
    // Host data or its FIN: something to peek (the flags hold it until
    // the flow is established, when push() runs). A socket registered
    // edge-triggered with every event from the start reports each one, so
    // a flow no edge reached has nothing to peek: no peek returning EAGAIN
    // when the guest completes the handshake.
    if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP)) v_.peek_drained = false;
    if (v_.state == State::Connecting) {
        // A failed connect sets the socket's error, which epoll reports as
        // EPOLLERR until SO_ERROR reads it: no getsockopt to tell.
        if (ev & (EPOLLERR | EPOLLHUP)) {
            ++c.stats.connect_failed;
            close(c, Reset::Guest);
            return;
        }
        if (ev & (EPOLLOUT | EPOLLIN)) connected(c);
        return;
    }
    if (ev & EPOLLERR) {
        // What the host sent before its RST is still readable (an HTTP
        // server's 413, then close with the upload unread): to the guest
        // first, then the RST after it.
        if (v_.state == State::Established && (ev & EPOLLIN)) {
            v_.host_shut = true;
            c.data_frames = SIZE_MAX; // no later turn: all the room there is
            push(c);
            if (closed()) return;
        }
        close(c, Reset::Both);
        return;
    }
    if (v_.state == State::HostSynSent && (ev & EPOLLHUP)) {
        // The host client is gone before the guest answered.
        close(c, Reset::Both);
        return;
    }
    // Before the guest completes the handshake the edges are noted for
    // push(), which runs once it does (its data stays in the socket).
    if (ev & EPOLLPRI) v_.host_urgent = true;
    if (ev & (EPOLLRDHUP | EPOLLHUP)) v_.host_shut = true;
    if (v_.state == State::Established) {
        if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP)) {
            // New host data left unread (the guest's window is full, or
            // a discard-mode peek is not worth it yet): without a read the
            // host gets no ACK until the guest's. A full batch is not such
            // a case: service() pushes again this round.
            if (!push(c) && !closed() && (ev & EPOLLIN) && !v_.want_push) sock_.ack_now();
        }
        if (closed()) return;
        // A writable socket reports EPOLLOUT with every edge, whatever
        // raised it: look at the window (a getsockopt) only when the guest
        // may be waiting for it to open, after a refused send or with a low
        // window it has used (before its first byte the window is the
        // SYN's, unscaled: the ACK of that byte carries the real one).
        // Otherwise the ACKs of its next segments carry it.
        if ((ev & EPOLLOUT) && (v_.partial || (window_low() && v_.rcv_nxt != v_.irs + 1)))
            window_check(c, false);
        maybe_finish(c);
    }
}

void Flow::timer(FlowContext &c) {
    if (v_.keepalive_at >= 0 && c.now >= v_.keepalive_at) {
        v_.keepalive_at = -1;
        sock_.keepalive();
    }
    if (v_.rto_at >= 0 && c.now >= v_.rto_at) {
        v_.rto_at = -1;
        on_rto(c);
        if (closed()) return;
    }
    if (v_.wnd_at >= 0 && c.now >= v_.wnd_at) {
        v_.wnd_at = -1;
        window_check(c, true);
    }
    maybe_finish(c);
}

void Flow::maybe_finish(FlowContext &c) {
    // Both directions closed and acknowledged: the socket has nothing left
    // unread (every byte the guest acked was dropped), so close() sends no RST.
    if (v_.state == State::Established && v_.guest_fin && v_.fin_acked && !v_.owe_ack)
        close(c, Reset::None);
}

uint32_t Flow::window_now(bool fresh) {
    return sock_.window(fresh, uint32_t(65535) << v_.our_ws, v_.adv_wnd);
}

bool Flow::window_low() const {
    // Below a quarter of the send buffer, or half of what the window field
    // can say at all (without scaling 64 KiB is all there is).
    uint32_t cap = uint32_t(65535) << v_.our_ws;
    return v_.adv_wnd < std::min(sock_.sndbuf() / 4, cap / 2);
}

uint16_t Flow::window_field(uint32_t wnd) const {
    return uint16_t(std::min<uint32_t>(wnd >> v_.our_ws, 65535));
}

bool Flow::send_ack(FlowContext &c, int copies) {
    uint32_t w = window_now();
    uint16_t field = window_field(w);
    for (int i = 0; i < copies; ++i) {
        if (!emit(c, kAck, snd_max(), 0, field)) {
            v_.owe_ack = true;
            return false;
        }
    }
    v_.owe_ack = false;
    v_.adv_wnd = uint32_t(field) << v_.our_ws;
    // A small window needs reopening once the host drains the socket:
    // EPOLLOUT (edge) normally tells us; the timer covers the case where
    // the kernel's idea of "writable" and ours differ.
    if (window_low() && !v_.guest_fin) {
        if (v_.wnd_at < 0) v_.wnd_at = c.now + v_.wnd_check_ms;
    } else {
        v_.wnd_at = -1;
        v_.wnd_check_ms = kWndCheckMinMs;
    }
    return true;
}

bool Flow::ahead(const Segment &s) const {
    return v_.state == State::Established && !v_.guest_fin && !s.payload.empty() &&
           !(s.flags & (kSyn | kRst)) && seq_gt(s.seq, v_.rcv_nxt) &&
           seq_lt(s.seq, v_.rcv_nxt + std::max<uint32_t>(v_.adv_wnd, 65535));
}

void Flow::process_data(FlowContext &c, const Segment &s) {
    const bool fin = (s.flags & kFin) != 0;
    const size_t len = s.payload.size();
    if (len == 0 && !fin) {
        // An empty segment below rcv_nxt is a keepalive or a zero-window
        // probe: both want an ACK with our current window.
        if (seq_lt(s.seq, v_.rcv_nxt)) v_.owe_ack = true;
        return;
    }
    if (v_.guest_fin) {
        // After its FIN anything is a retransmission: just ACK again.
        v_.owe_ack = true;
        return;
    }
    size_t off = 0;
    if (seq_lt(s.seq, v_.rcv_nxt)) {
        uint32_t d = v_.rcv_nxt - s.seq;
        if (d > len || (d == len && !fin)) { // all old: re-ACK
            v_.owe_ack = true;
            return;
        }
        off = d;
    } else if (seq_gt(s.seq, v_.rcv_nxt)) {
        // A hole before it: drop, and a duplicate ACK asks for the hole.
        ++c.stats.segments_dropped;
        v_.owe_ack = true;
        return;
    }
    // URG is ignored: the bytes are ordinary data (the urgent pointer has
    // no meaning for a byte stream we pass through, and pasta does the same).
    size_t want = len - off, took = 0;
    if (want != 0) {
        const ssize_t n = sock_.send(s.payload.data() + off, want, v_.rcv_nxt == v_.irs + 1);
        if (n < 0) {
            close(c, Reset::Both);
            return;
        }
        took = size_t(n);
        v_.rcv_nxt += uint32_t(took);
        c.stats.bytes_to_host += took;
        if (took < want) {
            // The rest is not acknowledged: the guest sends it again once
            // the window we advertise reopens.
            v_.partial = true;
            ++c.stats.partial_sends;
        }
    }
    if (fin && took == want) {
        v_.rcv_nxt += 1;
        v_.guest_fin = true;
        v_.wnd_at = -1;
        sock_.shutdown_write();
    }
    v_.owe_ack = true;
}

void Flow::window_check(FlowContext &c, bool from_timer) {
    if (v_.state != State::Established || v_.guest_fin) return;
    uint32_t before = v_.adv_wnd;
    uint32_t w = window_now(true);
    // An update once the window grew by one segment the guest may send us
    // (the MSS we announced), or by half the send buffer where that is
    // less (RFC 1122 4.2.3.3). Not the guest's own MSS (what we send it):
    // at MTU 65520 that is 64 KiB, more than a send buffer the kernel
    // autotunes to a lossy path ever frees at once, and the window stayed
    // shut until the guest's persist timer probed it.
    uint32_t step = std::max<uint32_t>(std::min<uint32_t>(v_.our_mss, sock_.sndbuf() / 2),
                                       uint32_t(1) << v_.our_ws);
    if (w >= before + step || (before == 0 && w > 0)) {
        // Window update; after a partial send, duplicate ACKs too, so the
        // guest retransmits the refused part now rather than after its RTO.
        bool partial = v_.partial;
        v_.partial = false;
        send_ack(c, partial ? 4 : 1);
        return;
    }
    if (from_timer && window_low()) {
        v_.wnd_check_ms = std::min(v_.wnd_check_ms * 2, kWndCheckMaxMs);
        v_.wnd_at = c.now + v_.wnd_check_ms;
    }
}

uint32_t Flow::rto_base() const {
    if (v_.srtt_ms < 0) return kRtoInitialMs;
    uint32_t r = uint32_t(v_.srtt_ms) + std::max<uint32_t>(10, 4 * uint32_t(v_.rttvar_ms));
    return std::clamp(r, kRtoMinMs, kRtoMaxMs);
}

void Flow::rtt_sample(int64_t ms) {
    int32_t r = int32_t(std::clamp<int64_t>(ms, 0, kRtoMaxMs));
    if (v_.srtt_ms < 0) {
        v_.srtt_ms = r;
        v_.rttvar_ms = r / 2;
    } else {
        int32_t err = v_.srtt_ms > r ? v_.srtt_ms - r : r - v_.srtt_ms;
        v_.rttvar_ms = (3 * v_.rttvar_ms + err) / 4;
        v_.srtt_ms = (7 * v_.srtt_ms + r) / 8;
    }
}

bool Flow::process_ack(FlowContext &c, const Segment &s) {
    const uint32_t a = s.ack;
    // Up to snd_high, not snd_max: after a rewind the guest may ACK what it
    // got before the rewind (segments it held out of order).
    if (seq_gt(a, v_.snd_high)) {
        // Acknowledges what we never sent: ACK back and drop (RFC 793).
        ++c.stats.segments_dropped;
        v_.owe_ack = true;
        return false;
    }
    if (seq_lt(a, v_.snd_una)) return true; // old ACK: nothing to learn
    const uint32_t wnd = uint32_t(s.window) << v_.guest_ws;
    if (a != v_.snd_una) {
        uint32_t data_end = a;
        bool fin_ack = false;
        if (v_.fin_ever && v_.fin_seq + 1 == a) {
            data_end = v_.fin_seq;
            fin_ack = true;
        }
        uint32_t n = data_end - v_.snd_una;
        if (n != 0) {
            if (!sock_.drop(n)) {
                close(c, Reset::Both);
                return false;
            }
            c.stats.bytes_to_guest += n;
        }
        v_.snd_una = data_end;
        if (fin_ack) v_.fin_sent = v_.fin_acked = true;
        if (seq_lt(v_.snd_nxt, v_.snd_una)) {
            // Acked beyond a rewind: skip ahead. The kernel clamped the
            // peek offset at 0 already; say so explicitly all the same.
            v_.snd_nxt = v_.snd_una;
            v_.peek_drained = false;
            (void)sock_.peek_from_head();
        }
        if (v_.rtt_timing && seq_ge(a, v_.rtt_seq)) {
            rtt_sample(c.now - v_.rtt_start);
            v_.rtt_timing = false;
        }
        v_.dupacks = 0;
        v_.retries = 0;
        v_.stall_since = -1;
        v_.rto_ms = rto_base();
        v_.rto_at = in_flight() ? c.now + v_.rto_ms : -1;
    } else if (s.payload.empty() && !(s.flags & kFin) && !seq_lt(s.seq, v_.rcv_nxt) &&
               s.window == v_.last_wnd_field && in_flight()) {
        // A duplicate ACK (RFC 5681: no data, same ACK and window; not a
        // keepalive or zero-window probe, seq = rcv_nxt - 1). Once per
        // loss episode (RFC 6582): not again before the guest acks beyond
        // all that was out at the last rewind. A guest that kept the data
        // after a hole acks up to exactly that, then repeats it for each
        // resent copy: no reason to resend again.
        if (++v_.dupacks >= kDupAcks && seq_gt(v_.snd_una, v_.recover)) {
            v_.recover = v_.snd_high;
            v_.dupacks = 0;
            ++c.stats.fast_retransmits;
            if (!rewind(c)) return false;
        }
    }
    v_.snd_wnd = wnd;
    v_.last_wnd_field = s.window;
    return true;
}

bool Flow::rewind(FlowContext &c) {
    v_.snd_nxt = v_.snd_una;
    v_.peek_drained = false;
    v_.rtt_timing = false;
    if (v_.fin_sent && !v_.fin_acked) v_.fin_sent = false;
    // Discard mode: the next peek skips snd_nxt - snd_una = 0 bytes; no
    // peek offset yet: the next peek starts at the head of the queue.
    if (c.peek.discard() || sock_.peek_from_head()) return true;
    close(c, Reset::Both);
    return false;
}

bool Flow::send_host_fin(FlowContext &c) {
    // End of stream right after what was sent: all data is out, FIN next.
    v_.host_eof = true;
    if (!c.out.control_room()) { // retried from service()
        v_.want_push = true;
        return false;
    }
    emit(c, kFin | kAck, v_.snd_nxt, 0, window_field(v_.adv_wnd));
    v_.fin_sent = true;
    v_.fin_seq = v_.snd_nxt;
    v_.fin_ever = true;
    v_.snd_high = seq_max(v_.snd_high, snd_max());
    if (v_.rto_at < 0) v_.rto_at = c.now + v_.rto_ms;
    return true;
}

void Flow::nothing_past_in_flight(FlowContext &c, bool stream_ends) {
    if (stream_ends)
        send_host_fin(c);
    else // past the host's FIN no edge comes: the guest's ACKs retry
        v_.peek_drained = !v_.host_urgent && !v_.host_shut;
}

bool Flow::discard_peek_worth_it(FlowContext &c, uint32_t inflight, uint32_t budget,
                                 size_t room) {
    // A Discard peek copies the inflight bytes again: it goes ahead only
    // if it brings at least as many new ones, so that no byte is copied
    // more than twice; else the guest's ACKs (fewer to skip) or the host's
    // data (an EPOLLIN edge) call push() again. This also bounds what is
    // in flight to twice what one peek carries (PeekScratch::kMaxSkip).
    const int64_t q = sock_.queued();
    if (q < 0) return inflight < PeekScratch::kMaxSkip;
    const uint32_t queued = uint32_t(q);
    if (queued <= inflight) {
        // Nothing past the bytes in flight (FIONREAD counts no FIN, and
        // urgent bytes are inline): the stream ends right after them if
        // the host shut its side.
        nothing_past_in_flight(c, v_.host_shut && queued == inflight);
        return false;
    }
    const uint64_t can = std::min<uint64_t>({uint64_t(queued - inflight), budget,
                                             uint64_t(room) * kMaxPayload});
    return can >= inflight && inflight <= PeekScratch::kMaxSkip;
}

bool Flow::push(FlowContext &c) {
    v_.want_push = false;
    if (v_.state != State::Established || v_.fin_sent || v_.peek_drained) return false;
    const size_t per_frame = kMaxPayload / v_.mss * v_.mss;
    const bool discard = c.peek.discard();
    bool read = false;
    for (;;) {
        const uint32_t inflight = v_.snd_nxt - v_.snd_una;
        if (v_.snd_wnd <= inflight) {
            // Zero window: probe it from the timer (persist) if nothing
            // in flight would make the guest answer anyway.
            if (v_.snd_wnd == 0 && !in_flight() && v_.rto_at < 0)
                v_.rto_at = c.now + v_.rto_ms;
            return read;
        }
        uint32_t budget = v_.snd_wnd - inflight;
        // Discard mode takes the whole room: a peek there copies the bytes
        // in flight again, and a share of a frame or two per peek would
        // copy them many times over (discard_peek_worth_it would refuse).
        size_t room = std::min(c.out.data_room(), discard ? SIZE_MAX : c.data_frames);
        if (room == 0) {
            v_.want_push = true; // service() goes on, in turn with the others
            return read;
        }
        room = std::min(room, PeekScratch::kDataIovs);
        if (discard && inflight != 0 && !discard_peek_worth_it(c, inflight, budget, room))
            return read;
        if (!discard && !sock_.peek_past(inflight)) {
            close(c, Reset::Both);
            return read;
        }
        // Discard mode: the bytes in flight are still first in the queue;
        // they go to the discard buffer, the frames' payload after them.
        iovec *iov = c.peek.iov();
        const size_t skip_iovs = discard ? c.peek.cover(inflight) : 0;
        const size_t skip = discard ? inflight : 0;
        size_t k = 0, asked = 0;
        while (k < room && asked < budget) {
            size_t l = std::min<size_t>(per_frame, budget - asked);
            iov[skip_iovs + k] = {c.out.next_payload(k), l};
            asked += l;
            ++k;
        }
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = skip_iovs + k;
        read = true;
        const ssize_t n = sock_.peek(mh);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                v_.peek_drained = true;
                return read;
            }
            close(c, Reset::Both); // ECONNRESET and friends
            return read;
        }
        if (size_t(n) < skip) {
            // Discard mode: the peek stopped at an urgent mark among the
            // bytes in flight; past it only once the guest acked up to it.
            return read;
        }
        const size_t got = size_t(n) - skip;
        if (got == 0) {
            // Offset mode: end of stream at the peek offset. Discard mode
            // with bytes in flight: their end is where the peek stopped,
            // the end of the stream if the host shut and nothing else is
            // queued (an urgent mark right there stops a peek too).
            nothing_past_in_flight(c, skip == 0 || (v_.host_shut &&
                                                    sock_.queued() == int64_t(inflight)));
            return read;
        }
        size_t left = got;
        const uint16_t wf = window_field(v_.adv_wnd);
        const bool fresh = seq_ge(v_.snd_nxt, v_.snd_high); // not a resend
        for (size_t j = skip_iovs; left != 0; ++j) {
            size_t l = std::min(left, iov[j].iov_len);
            left -= l;
            OutFields f;
            f.seq = v_.snd_nxt;
            f.ack = v_.rcv_nxt;
            f.flags = uint8_t(kAck | (left == 0 ? kPsh : 0));
            f.window = wf;
            f.ip_id = v_.ip_id++;
            // A Linux guest acks at once the first data of a connection
            // (quick-ack mode) and two full segments; the segments of an
            // exchange in progress it may hold for its reply.
            f.acked_at_once = v_.snd_nxt == v_.iss + 1 || l >= 2 * size_t(v_.mss);
            c.out.append(v_.ep, f, l, v_.mss);
            v_.snd_nxt += uint32_t(l);
            if (!discard) --c.data_frames;
        }
        v_.snd_high = seq_max(v_.snd_high, v_.snd_nxt);
        if (fresh && !v_.rtt_timing) {
            v_.rtt_timing = true;
            v_.rtt_seq = v_.snd_nxt;
            v_.rtt_start = c.now;
        }
        if (v_.rto_at < 0) v_.rto_at = c.now + v_.rto_ms;
        sock_.bytes_in_flight(v_.snd_nxt - v_.snd_una);
        if (got < asked) { // drained, or an urgent mark
            // Past the host's FIN nothing more will arrive to wake us: peek
            // again, which gives 0 and sends our FIN (or the rest after an
            // urgent mark).
            if (v_.host_shut) continue;
            v_.peek_drained = !v_.host_urgent;
            return read;
        }
    }
}

void Flow::on_rto(FlowContext &c) {
    if (v_.state == State::HostSynSent) {
        on_syn_rto(c);
        return;
    }
    if (v_.state == State::SynAckSent) {
        if (++v_.retries > kMaxRetries) {
            ++c.stats.timeouts;
            close(c, Reset::Both);
            return;
        }
        v_.rto_ms = std::min(v_.rto_ms * 2, kRtoMaxMs);
        v_.rto_at = c.now + v_.rto_ms;
        v_.rtt_timing = false;
        if (!send_synack(c)) v_.owe_synack = true;
        return;
    }
    if (v_.state != State::Established) return;
    if (v_.snd_wnd == 0) {
        // Persist: the guest is alive but not reading. Probe with an old
        // sequence number (the guest answers with its window) and never
        // count it as a failure.
        if (in_flight()) {
            v_.recover = v_.snd_high;
            if (!rewind(c)) return;
        }
        v_.rto_ms = std::min(v_.rto_ms * 2, kRtoMaxMs);
        v_.rto_at = c.now + v_.rto_ms;
        emit(c, kAck, v_.snd_una - 1, 0, window_field(v_.adv_wnd));
        return;
    }
    if (!in_flight()) return;
    // Given up like Linux with tcp_retries2 = 15: after about 15 minutes
    // without progress, counted from when the oldest data went out.
    if (v_.stall_since < 0) v_.stall_since = c.now - v_.rto_ms;
    if (c.now - v_.stall_since >= kGiveUpMs) {
        ++c.stats.timeouts;
        close(c, Reset::Both);
        return;
    }
    ++c.stats.retransmits;
    // RFC 6582 4: duplicate ACKs for what was out before the timeout
    // start no fast retransmit.
    v_.recover = v_.snd_high;
    if (!rewind(c)) return;
    v_.rto_ms = std::min(v_.rto_ms * 2, kRtoMaxMs);
    push(c);
    if (!closed() && v_.rto_at < 0) v_.rto_at = c.now + v_.rto_ms;
}

} // namespace rknp::tcp
