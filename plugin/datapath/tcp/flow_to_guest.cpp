// SPDX-License-Identifier: Apache-2.0

// The host->guest half of a flow: socket data peeked into frames for the
// guest (in either peek mode, peek_mode.hpp), the guest's ACKs releasing
// it, retransmission by rewinding.
#include "datapath/tcp/flow.hpp"

#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "datapath/tcp/seq.hpp"

namespace rknp::tcp {

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
            // The acked bytes leave the kernel's queue only now; the peek
            // offset (Offset mode) moves back by as much, staying = bytes
            // in flight. A read ends at an urgent mark (even inline):
            // repeat until all acked bytes are gone.
            for (uint32_t left = n; left != 0;) {
                ssize_t r = ::recv(sock_.get(), nullptr, left, MSG_TRUNC | MSG_DONTWAIT);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0 || uint32_t(r) > left) {
                    close(c, Reset::Both);
                    return false;
                }
                left -= uint32_t(r);
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
            if (!c.peek.discard())
                (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero);
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
    // Discard mode: the next peek skips snd_nxt - snd_una = 0 bytes.
    if (c.peek.discard()) return true;
    int zero = 0;
    if (::setsockopt(sock_.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) < 0) {
        close(c, Reset::Both);
        return false;
    }
    return true;
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

int64_t Flow::queued_bytes() const {
    int q = 0;
    return ::ioctl(sock_.get(), FIONREAD, &q) == 0 && q >= 0 ? q : -1;
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
    const int64_t q = queued_bytes();
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

void Flow::raise_rcvbuf() {
    // What the guest has not acknowledged stays in the socket's receive
    // queue and takes room from the window the kernel offers the sender,
    // which starts from tcp_rmem's default (128 KiB) and grows with what
    // the reader consumes: while it is small, the bytes in flight to the
    // guest close it. Raising SO_RCVLOWAT makes the kernel grow the buffer
    // to fit that window without locking it (SO_RCVBUF would stop the
    // autotuning); the low mark goes back to 1 at once, so readiness is
    // unchanged. Capped by the kernel at half of tcp_rmem's maximum.
    v_.rcvbuf_raised = true;
    int lowat = int(kRaisedWindow), one = 1;
    (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
    (void)::setsockopt(sock_.get(), SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
}

void Flow::ack_host_now() {
    // The kernel acks two full segments at once only if the reader keeps
    // the window's right edge moving ("tcp_recvmsg() will send ACK
    // otherwise"); bytes held for the guest stop it, so the ACK would wait
    // for our next read of this socket (the guest's ACK) or the
    // delayed-ACK timer. A sender limited by its send buffer, as in a
    // download over a long path, goes only as fast as its ACKs come back.
    // TCP_QUICKACK sends the one owed, if any, now.
    int one = 1;
    (void)::setsockopt(sock_.get(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

bool Flow::push(FlowContext &c) {
    v_.want_push = false;
    if (v_.state != State::Established || v_.fin_sent || v_.peek_drained) return false;
    const int fd = sock_.get();
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
        size_t room = c.out.data_room();
        if (room == 0) {
            v_.want_push = true;
            return read;
        }
        room = std::min(room, PeekScratch::kDataIovs);
        if (discard && inflight != 0 && !discard_peek_worth_it(c, inflight, budget, room))
            return read;
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
        ssize_t n;
        do
            n = ::recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
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
                                                    queued_bytes() == int64_t(inflight)));
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
        if (!v_.rcvbuf_raised && v_.snd_nxt - v_.snd_una >= kBulkInFlight) raise_rcvbuf();
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
