// SPDX-License-Identifier: Apache-2.0

// The guest->host half of a flow: guest data into the host socket in
// order, the ACKs and windows we give the guest for it.
#include "datapath/tcp/flow.hpp"

#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "datapath/tcp/seq.hpp"

namespace rknp::tcp {

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
    // The kernel grows a send buffer (up to tcp_wmem's maximum) only for a
    // writer it saw blocked, and we never block: the guest sends what we
    // said fits. A writability poll on a socket the kernel deems full
    // (free below half of what is queued) marks it so, as for a blocked
    // writer; the buffer then autotunes to the path, and its EPOLLOUT edge
    // reopens the window (window_check). Setting SO_SNDBUF instead would
    // lock it at 2 x net.core.wmem_max: 416 KiB on Debian, 83 Mbit/s at
    // 40 ms.
    if (free < queued / 2) {
        pollfd p{sock_.get(), POLLOUT, 0};
        (void)::poll(&p, 1, 0);
    }
    uint64_t w = free / 4 * 3;
    uint64_t cap = uint64_t(65535) << v_.our_ws;
    v_.wnd_seen = uint32_t(std::min(w, cap));
    v_.taken_since = 0;
    return v_.wnd_seen;
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
        ssize_t n;
        do
            n = ::send(sock_.get(), s.payload.data() + off, want,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                close(c, Reset::Both);
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
    uint32_t step = std::max<uint32_t>(std::min<uint32_t>(v_.our_mss, v_.sndbuf / 2),
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

} // namespace rknp::tcp
