// SPDX-License-Identifier: Apache-2.0

// The UDP fast path's guest-bound half: the host sockets' events of a
// round, their datagrams to the guest (one GSO frame for a run of equal
// datagrams where the tap takes it, IP fragments over the guest's MTU)
// and the errors ICMP left on them as ICMP messages to the guest.
#include "datapath/udp/fastpath.hpp"

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rknp::udp {

void FastPath::poll_events() {
    epoll_event evs[kMaxEvents];
    handle_events(events_.ready(evs), true);
}

void FastPath::handle_events(std::span<const epoll_event> evs, bool burst) {
    for (const epoll_event &e : evs) {
        const uint64_t ref = EventSource::ref_of(e);
        if (ref & kForwardTag) {
            receive_forward(size_t(ref & ~kForwardTag));
            continue;
        }
        if (!table_.names_open_flow(ref)) continue;
        const uint32_t idx = uint32_t(ref);
        if (e.events & EPOLLERR) drain_errors(idx);
        if (e.events & EPOLLIN) receive(idx, burst ? kRecvBatch : 1);
    }
}

void FastPath::receive(uint32_t idx, size_t batch) {
    Flow &f = table_[idx];
    for (size_t i = 0; i < batch; ++i) {
        rx_iov_[i] = iovec{rx_buf_.data() + i * kRecvBuf, kRecvBuf};
        msghdr &m = rx_msgs_[i].msg_hdr;
        m = msghdr{};
        m.msg_iov = &rx_iov_[i];
        m.msg_iovlen = 1;
        m.msg_control = rx_ctl_[i].data();
        m.msg_controllen = sizeof rx_ctl_[i];
    }
    int n;
    if (batch == 1) { // recvmsg(2): no second read that would only find the queue empty
        const ssize_t r = ::recvmsg(f.sock.get(), &rx_msgs_[0].msg_hdr, MSG_DONTWAIT);
        if (r >= 0) rx_msgs_[0].msg_len = unsigned(r);
        n = r < 0 ? -1 : 1;
    } else {
        n = ::recvmmsg(f.sock.get(), rx_msgs_.data(), unsigned(batch), MSG_DONTWAIT, nullptr);
    }
    if (n < 0) {
        if (icmp_left_error(errno)) drain_errors(idx);
        return;
    }
    if (n == 0) return;
    f.last_ms = now();
    f.answered = true;
    // Each read's datagram size: UDP_GRO's, or the read's own length.
    std::array<size_t, kRecvBatch> seg{};
    for (int i = 0; i < n; ++i) {
        msghdr &m = rx_msgs_[i].msg_hdr;
        seg[i] = rx_msgs_[i].msg_len;
        for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
                c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int g;
                std::memcpy(&g, CMSG_DATA(c), sizeof g);
                if (g > 0) seg[i] = size_t(g);
            }
        }
    }
    for (size_t i = 0; i < size_t(n);) {
        const size_t len = rx_msgs_[i].msg_len;
        const uint8_t *data = rx_buf_.data() + i * kRecvBuf;
        if (len == 0) { // an empty datagram is one too
            to_guest(f, {});
            ++i;
            continue;
        }
        // Reads of single datagrams of one size (the last may be shorter)
        // go to the guest as one GSO frame where the tap takes them.
        size_t j = i + 1, total = len;
        if (guest_gso_ && seg[i] == len && fits_mtu(f.ep, len, cfg_.mtu)) {
            while (j < size_t(n) && seg[j] == rx_msgs_[j].msg_len && seg[j] != 0 &&
                   seg[j] <= len && fits_gso_frame(f.ep, total + seg[j])) {
                total += seg[j++];
                if (seg[j - 1] < len) break;
            }
        }
        if (j - i == 1) {
            run_to_guest(f, {data, len}, seg[i]);
            ++i;
            continue;
        }
        for (size_t k = i; k < j; ++k)
            gather_[k - i] = iovec{rx_buf_.data() + k * kRecvBuf, rx_msgs_[k].msg_len};
        VnetHdr v{};
        // The IPv4 id: only fragments need one of their own (below).
        const size_t h = build_gso_datagrams(hdr_.data(), v, f.ep, total, len, uint16_t(ip_id_));
        guest_.write_frame_parts(v, {hdr_.data(), h}, {gather_.data(), j - i});
        stats_.datagrams_to_guest += j - i;
        ++stats_.gso_frames;
        i = j;
    }
}

void FastPath::run_to_guest(Flow &f, std::span<const uint8_t> p, size_t seg) {
    if (guest_gso_ && seg < p.size() && fits_mtu(f.ep, seg, cfg_.mtu) &&
        fits_gso_frame(f.ep, p.size())) {
        VnetHdr v{};
        const size_t h = build_gso_datagrams(hdr_.data(), v, f.ep, p.size(), seg,
                                             uint16_t(ip_id_));
        guest_.write_frame(v, {hdr_.data(), h}, p);
        stats_.datagrams_to_guest += (p.size() + seg - 1) / seg;
        ++stats_.gso_frames;
        return;
    }
    // Each datagram on its own.
    for (size_t off = 0; off < p.size(); off += seg)
        to_guest(f, p.subspan(off, std::min(seg, p.size() - off)));
}

void FastPath::to_guest(Flow &f, std::span<const uint8_t> payload) {
    ++stats_.datagrams_to_guest;
    if (fits_mtu(f.ep, payload.size(), cfg_.mtu)) {
        VnetHdr v{};
        // The IPv4 id matters only to reassembly: a whole datagram takes
        // the current one, and the counter moves only for fragments, so
        // it wraps after 65536 fragmented datagrams (not every 0.25 s at
        // 260k datagrams a second) while their fragments may still meet
        // in the guest's reassembly queue.
        const size_t h = build_datagram(hdr_.data(), v, f.ep, payload.size(), uint16_t(ip_id_));
        guest_.write_frame(v, {hdr_.data(), h}, payload);
        return;
    }
    ++stats_.fragmented;
    Fragments frags(f.ep, payload, cfg_.mtu, ++ip_id_);
    size_t h = 0;
    std::span<const uint8_t> part;
    while (frags.next(hdr_.data(), h, part)) guest_.write_frame(VnetHdr{}, {hdr_.data(), h}, part);
}

void FastPath::drain_errors(uint32_t idx) {
    Flow &f = table_[idx];
    // Bounded: a peer cannot keep the loop here.
    for (int k = 0; k < 16; ++k) {
        // The datagram the error answers, as far as the ICMP message quoted
        // it: its length goes into the quoted headers, kIcmpQuote bytes
        // into the quote.
        uint8_t quote[1500];
        iovec iov{quote, sizeof quote};
        alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(sock_extended_err) + sizeof(sockaddr_in6))];
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        const ssize_t r = ::recvmsg(f.sock.get(), &m, MSG_ERRQUEUE | MSG_DONTWAIT);
        if (r < 0) {
            // Woken with nothing queued: an error is set on the socket that
            // never made it into the queue (no room in the receive buffer,
            // no memory; or IP_RECVERR lost). It keeps EPOLLERR raised in
            // the level-triggered set, and the loop would spin at full CPU
            // until the flow expires (180 s): SO_ERROR reads and clears it.
            // (With entries queued, taking the last ICMP one clears it.)
            if (k == 0) take_socket_error(f);
            break;
        }
        for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
            const bool recverr = (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                                 (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR);
            if (!recverr || c->cmsg_len < CMSG_LEN(sizeof(sock_extended_err))) continue;
            sock_extended_err ee;
            std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
            // Only what came from the path; local errors (a too-big send)
            // were the host socket's own business.
            if (ee.ee_origin != SO_EE_ORIGIN_ICMP && ee.ee_origin != SO_EE_ORIGIN_ICMP6) continue;
            const IcmpError e{ee.ee_type, ee.ee_code, ee.ee_info};
            const size_t got = std::min(size_t(r), sizeof quote);
            // The datagram's own length, not the quote's: a router may
            // quote 8 bytes of it (RFC 792), and the guest's kernel guesses
            // a path MTU from the quoted length when no MTU is given. The
            // flow's last datagram is the best guess of the one that
            // erred; at least as long as what the quote holds.
            const size_t len = build_icmp_error(icmp_.data(), f.ep, f.ep, e, {quote, got},
                                                std::max<size_t>(size_t(r), f.last_len),
                                                uint16_t(ip_id_), cfg_.mtu);
            if (len == 0) continue;
            guest_.write_frame(VnetHdr{}, {icmp_.data(), len}, {});
            ++stats_.icmp_to_guest;
        }
    }
}

void FastPath::take_socket_error(Flow &f) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(f.sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0) return;
    ++stats_.socket_errors;
    // What the error says, without the ICMP message's type or quote: the
    // guest hears the unreachable it stands for, if any (its connected
    // socket then fails as the host's did), quoting only the headers.
    const std::optional<IcmpError> e = unreachable_for(err, f.ep.v6);
    if (!e) return;
    const size_t n = build_icmp_error(icmp_.data(), f.ep, f.ep, *e, {}, f.last_len,
                                      uint16_t(ip_id_), cfg_.mtu);
    if (n == 0) return;
    guest_.write_frame(VnetHdr{}, {icmp_.data(), n}, {});
    ++stats_.icmp_to_guest;
}

} // namespace rknp::udp
