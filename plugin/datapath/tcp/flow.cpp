// SPDX-License-Identifier: Apache-2.0

// One flow after setup: guest segments, socket events, timers, frames out.
#include "datapath/tcp/flow.hpp"

#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "datapath/tcp/seq.hpp"

namespace rknp::tcp {

void Flow::set_epoll(FlowContext &c, uint32_t events, bool add) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = v_.ref;
    if (::epoll_ctl(c.epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, sock_.get(), &ev) < 0)
        close(c, true, true); // ENOMEM/ENOSPC: cannot watch it, give up
}

uint32_t Flow::window_now(bool fresh) {
    // Between looks the estimate only shrinks by what was sent, so the
    // window's right edge stays put and never promises more than the
    // socket had (ACKs from the host peer only free more). This saves a
    // getsockopt per guest segment of an interactive flow.
    if (!fresh && v_.wnd_seen != 0 && v_.taken_since < v_.wnd_seen / 8)
        return v_.wnd_seen - v_.taken_since;
    // SO_MEMINFO gives the two numbers send() is limited by: the send
    // buffer and what is queued in it (both in memory, not payload,
    // units). A quarter is kept back for per-skb overhead so that what we
    // advertise is what send() will take.
    uint32_t mem[SK_MEMINFO_VARS] = {};
    socklen_t len = sizeof mem;
    if (::getsockopt(sock_.get(), SOL_SOCKET, SO_MEMINFO, mem, &len) < 0)
        return v_.adv_wnd;
    v_.sndbuf = mem[SK_MEMINFO_SNDBUF];
    uint32_t queued = mem[SK_MEMINFO_WMEM_QUEUED];
    uint64_t free = v_.sndbuf > queued ? v_.sndbuf - queued : 0;
    uint64_t w = free / 4 * 3;
    uint64_t cap = uint64_t(65535) << v_.our_ws;
    v_.wnd_seen = uint32_t(std::min(w, cap));
    v_.taken_since = 0;
    return v_.wnd_seen;
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

bool Flow::window_low() const {
    // Below a quarter of the send buffer, or half of what the window field
    // can say at all (without scaling 64 KiB is all there is).
    uint32_t cap = uint32_t(65535) << v_.our_ws;
    return v_.adv_wnd < std::min(v_.sndbuf / 4, cap / 2);
}

uint16_t Flow::window_field(uint32_t wnd) const {
    return uint16_t(std::min<uint32_t>(wnd >> v_.our_ws, 65535));
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

void Flow::close(FlowContext &c, bool rst_guest, bool rst_host) {
    if (v_.state == State::Free) return;
    if (rst_guest) {
        ++c.stats.resets_to_guest;
        if (v_.state == State::Connecting) {
            // The guest is in SYN-SENT: only an RST acking its SYN counts.
            emit(c, kRst | kAck, 0, 0, 0);
        } else {
            // RFC 5961: the guest takes an RST only at exactly its rcv_nxt,
            // which is snd_max if everything sent arrived, else the last
            // point it acknowledged.
            uint32_t acked = v_.snd_una + (v_.fin_acked ? 1 : 0);
            emit(c, kRst | kAck, snd_max(), 0, 0);
            if (acked != snd_max()) emit(c, kRst | kAck, acked, 0, 0);
        }
    }
    if (rst_host && sock_) {
        linger l{1, 0};
        (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    sock_.reset(); // also leaves the epoll set
    v_.state = State::Free;
    v_.rto_at = v_.wnd_at = v_.idle_at = -1;
    v_.owe_ack = v_.owe_synack = v_.want_push = false;
}

int64_t Flow::deadline() const {
    int64_t d = -1;
    for (int64_t t : {v_.rto_at, v_.wnd_at, v_.idle_at})
        if (t >= 0 && (d < 0 || t < d)) d = t;
    return d;
}

bool Flow::ahead(const Segment &s) const {
    return v_.state == State::Established && !v_.guest_fin && !s.payload.empty() &&
           !(s.flags & (kSyn | kRst)) && seq_gt(s.seq, v_.rcv_nxt) &&
           seq_lt(s.seq, v_.rcv_nxt + std::max<uint32_t>(v_.adv_wnd, 65535));
}

void Flow::touch(FlowContext &c) {
    if (v_.state != State::Free && (v_.guest_fin || v_.host_eof))
        v_.idle_at = c.now + kHalfClosedIdleMs;
}

void Flow::guest_segment(FlowContext &c, const Segment &s) {
    if (s.flags & kRst) {
        // Any RST on the 4-tuple: only the guest can put frames on its tap,
        // so the only flows it can reset are its own.
        ++c.stats.resets_from_guest;
        close(c, false, true);
        return;
    }
    switch (v_.state) {
    case State::Free:
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
    touch(c);
    maybe_finish(c);
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
            // The acked bytes leave the kernel's queue only now; the peek
            // offset moves back by as much, staying = bytes in flight.
            ssize_t r;
            do
                r = ::recv(sock_.get(), nullptr, n, MSG_TRUNC | MSG_DONTWAIT);
            while (r < 0 && errno == EINTR);
            if (r != ssize_t(n)) {
                close(c, true, true);
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
            int zero = 0;
            (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero);
        }
        if (v_.rtt_timing && seq_ge(a, v_.rtt_seq)) {
            rtt_sample(c.now - v_.rtt_start);
            v_.rtt_timing = false;
        }
        v_.dupacks = 0;
        v_.retries = 0;
        v_.rto_ms = rto_base();
        v_.rto_at = in_flight() ? c.now + v_.rto_ms : -1;
    } else if (s.payload.empty() && !(s.flags & kFin) &&
               s.window == v_.last_wnd_field && in_flight()) {
        // A duplicate ACK (RFC 5681: no data, same ACK and window). Once per
        // loss episode: not again before what was out at the rewind is acked.
        if (++v_.dupacks >= kDupAcks && seq_ge(v_.snd_una, v_.recover)) {
            v_.recover = snd_max();
            v_.dupacks = 0;
            ++c.stats.fast_retransmits;
            if (!rewind(c)) return false;
        }
    }
    v_.snd_wnd = wnd;
    v_.last_wnd_field = s.window;
    return true;
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
        ssize_t n;
        do
            n = ::send(sock_.get(), s.payload.data() + off, want,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                close(c, true, true);
                return;
            }
            n = 0;
        }
        took = size_t(n);
        v_.taken_since += uint32_t(took);
        v_.rcv_nxt += uint32_t(took);
        c.stats.bytes_to_host += took;
        if (took < want) {
            // The rest is not acknowledged: the guest sends it again once
            // the window we advertise reopens.
            v_.partial = true;
            v_.wnd_seen = 0; // look again before the next ACK
            ++c.stats.partial_sends;
        }
    }
    if (fin && took == want) {
        v_.rcv_nxt += 1;
        v_.guest_fin = true;
        v_.wnd_at = -1;
        (void)::shutdown(sock_.get(), SHUT_WR);
    }
    v_.owe_ack = true;
}

bool Flow::rewind(FlowContext &c) {
    v_.snd_nxt = v_.snd_una;
    v_.peek_drained = false;
    v_.rtt_timing = false;
    if (v_.fin_sent && !v_.fin_acked) v_.fin_sent = false;
    int zero = 0;
    if (::setsockopt(sock_.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) < 0) {
        close(c, true, true);
        return false;
    }
    return true;
}

void Flow::push(FlowContext &c) {
    v_.want_push = false;
    if (v_.state != State::Established || v_.fin_sent || v_.peek_drained) return;
    const int fd = sock_.get();
    const size_t per_frame = kMaxPayload / v_.mss * v_.mss;
    for (;;) {
        const uint32_t inflight = v_.snd_nxt - v_.snd_una;
        if (v_.snd_wnd <= inflight) {
            // Zero window: probe it from the timer (persist) if nothing
            // in flight would make the guest answer anyway.
            if (v_.snd_wnd == 0 && !in_flight() && v_.rto_at < 0)
                v_.rto_at = c.now + v_.rto_ms;
            return;
        }
        uint32_t budget = v_.snd_wnd - inflight;
        size_t room = c.out.data_room();
        if (room == 0) {
            v_.want_push = true;
            return;
        }
        iovec iov[64];
        size_t k = 0, asked = 0;
        room = std::min(room, std::size(iov));
        while (k < room && asked < budget) {
            size_t l = std::min<size_t>(per_frame, budget - asked);
            iov[k] = {c.out.next_payload(k), l};
            asked += l;
            ++k;
        }
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = k;
        ssize_t n;
        do
            n = ::recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                v_.peek_drained = true;
                return;
            }
            close(c, true, true); // ECONNRESET and friends
            return;
        }
        if (n == 0) {
            // End of stream at the peek offset: all data is out, FIN next.
            v_.host_eof = true;
            if (!c.out.control_room()) { // retried from service()
                v_.want_push = true;
                return;
            }
            emit(c, kFin | kAck, v_.snd_nxt, 0, window_field(v_.adv_wnd));
            v_.fin_sent = true;
            v_.fin_seq = v_.snd_nxt;
            v_.fin_ever = true;
            v_.snd_high = seq_max(v_.snd_high, snd_max());
            if (v_.rto_at < 0) v_.rto_at = c.now + v_.rto_ms;
            return;
        }
        size_t left = size_t(n);
        const uint16_t wf = window_field(v_.adv_wnd);
        const bool fresh = seq_ge(v_.snd_nxt, v_.snd_high); // not a resend
        for (size_t j = 0; left != 0; ++j) {
            size_t l = std::min(left, iov[j].iov_len);
            left -= l;
            OutFields f;
            f.seq = v_.snd_nxt;
            f.ack = v_.rcv_nxt;
            f.flags = uint8_t(kAck | (left == 0 ? kPsh : 0));
            f.window = wf;
            f.ip_id = v_.ip_id++;
            c.out.append(v_.ep, f, l, v_.mss);
            v_.snd_nxt += uint32_t(l);
        }
        v_.snd_high = seq_max(v_.snd_high, v_.snd_nxt);
        if (fresh && !v_.rtt_timing) {
            v_.rtt_timing = true;
            v_.rtt_seq = v_.snd_nxt;
            v_.rtt_start = c.now;
        }
        if (v_.rto_at < 0) v_.rto_at = c.now + v_.rto_ms;
        if (size_t(n) < asked) { // drained, or an urgent mark
            v_.peek_drained = !v_.host_urgent;
            return;
        }
    }
}

void Flow::flush_owed(FlowContext &c) {
    if (closed()) return;
    if (v_.owe_synack && v_.state == State::SynAckSent) send_synack(c);
    if (v_.owe_synack && v_.state == State::HostSynSent) send_syn(c);
    if (v_.owe_ack && v_.state == State::Established) send_ack(c);
}

void Flow::service(FlowContext &c) {
    flush_owed(c);
    if (!closed() && v_.want_push) push(c);
    if (!closed()) maybe_finish(c);
}

void Flow::window_check(FlowContext &c, bool from_timer) {
    if (v_.state != State::Established || v_.guest_fin) return;
    uint32_t before = v_.adv_wnd;
    uint32_t w = window_now(true);
    uint32_t step = std::max<uint32_t>(v_.mss, uint32_t(1) << v_.our_ws);
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

void Flow::socket_events(FlowContext &c, uint32_t ev) {
    if (v_.state == State::Free) return;
    if (v_.state == State::Connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(sock_.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err != 0) {
            ++c.stats.connect_failed;
            close(c, true, false);
            return;
        }
        if (ev & (EPOLLOUT | EPOLLIN)) connected(c);
        return;
    }
    if (ev & EPOLLERR) {
        close(c, true, true);
        return;
    }
    if (v_.state == State::HostSynSent) {
        // The host client is gone before the guest answered.
        if (ev & EPOLLHUP) close(c, true, true);
        return;
    }
    if (v_.state == State::Established) {
        if (ev & EPOLLPRI) v_.host_urgent = true;
        if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP)) {
            v_.peek_drained = false;
            push(c);
        }
        if (closed()) return;
        if (ev & EPOLLOUT) window_check(c, false);
        touch(c);
        maybe_finish(c);
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
            close(c, true, true);
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
        if (in_flight() && !rewind(c)) return;
        v_.rto_ms = std::min(v_.rto_ms * 2, kRtoMaxMs);
        v_.rto_at = c.now + v_.rto_ms;
        emit(c, kAck, v_.snd_una - 1, 0, window_field(v_.adv_wnd));
        return;
    }
    if (!in_flight()) return;
    if (++v_.retries > kMaxRetries) {
        ++c.stats.timeouts;
        close(c, true, true);
        return;
    }
    ++c.stats.retransmits;
    if (!rewind(c)) return;
    v_.rto_ms = std::min(v_.rto_ms * 2, kRtoMaxMs);
    push(c);
    if (!closed() && v_.rto_at < 0) v_.rto_at = c.now + v_.rto_ms;
}

void Flow::timer(FlowContext &c) {
    if (v_.idle_at >= 0 && c.now >= v_.idle_at) {
        ++c.stats.timeouts;
        close(c, true, true);
        return;
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
        close(c, false, false);
}

} // namespace rknp::tcp
