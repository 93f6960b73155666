// SPDX-License-Identifier: Apache-2.0

// One flow after setup: the state machine guest segments go through,
// socket events, deadlines, postponed work, closing.
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
    const int fd = sock_.get();
    if ((add ? c.events.add(fd, events, v_.ref) : c.events.modify(fd, events, v_.ref)) < 0)
        close(c, Reset::Both); // ENOMEM/ENOSPC: cannot watch it, give up
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
    if ((reset == Reset::Host || reset == Reset::Both) && sock_) {
        linger l{1, 0};
        (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    sock_.reset(); // also leaves the epoll set
    v_.state = State::Closing;
    v_.rto_at = v_.wnd_at = -1;
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
    for (int64_t t : {v_.rto_at, v_.wnd_at})
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
    if (v_.state == State::Connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(sock_.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err != 0) {
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
            v_.peek_drained = false;
            push(c);
            if (closed()) return;
        }
        close(c, Reset::Both);
        return;
    }
    if (v_.state == State::HostSynSent) {
        // The host client is gone before the guest answered.
        if (ev & EPOLLHUP) close(c, Reset::Both);
        return;
    }
    if (v_.state == State::Established) {
        if (ev & EPOLLPRI) v_.host_urgent = true;
        if (ev & (EPOLLRDHUP | EPOLLHUP)) v_.host_shut = true;
        if (ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP)) {
            v_.peek_drained = false;
            // New host data left unread (the guest's window is full, or
            // a discard-mode peek is not worth it yet): without a read the
            // host gets no ACK until the guest's. A full batch is not such
            // a case: service() pushes again this round.
            if (!push(c) && !closed() && (ev & EPOLLIN) && !v_.want_push) ack_host_now();
        }
        if (closed()) return;
        if (ev & EPOLLOUT) window_check(c, false);
        maybe_finish(c);
    }
}

void Flow::timer(FlowContext &c) {
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

} // namespace rknp::tcp
