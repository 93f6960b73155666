// SPDX-License-Identifier: Apache-2.0

// The UDP fast path: flows, both directions of datagrams, the host
// sockets' errors as ICMP, idle expiry.
#include "datapath/udp/fastpath.hpp"

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.hpp"
#include "common/error.hpp"

namespace rknp::udp {

namespace {

constexpr uint16_t kDhcpServerPort = 67;

// A send that failed because the path cannot segment (gso_size over its
// MTU, a kernel or device without UDP segmentation offload).
bool segmentation_refused(int err) {
    return err == EINVAL || err == EIO || err == EOPNOTSUPP || err == EMSGSIZE;
}

// An error an earlier ICMP message left on a connected socket: it fails
// one call, and the error queue tells the guest about it.
bool icmp_left_error(int err) {
    return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == EHOSTDOWN || err == EPROTO;
}

// A socket connected to the flow's host address (bound first to the
// outbound address if one is set); invalid if any step fails.
UniqueFd connect_host_socket(bool v6, const HostAddrs &addrs) {
    UniqueFd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const int one = 1;
    // IP_RECVERR: ICMP errors queue with their type and the datagram they
    // answer, which is what the guest must be told.
    const bool ok =
        s.valid() &&
        (v6 ? ::setsockopt(s.get(), SOL_IPV6, IPV6_RECVERR, &one, sizeof one)
            : ::setsockopt(s.get(), SOL_IP, IP_RECVERR, &one, sizeof one)) == 0 &&
        (addrs.bind_len == 0 ||
         ::bind(s.get(), reinterpret_cast<const sockaddr *>(&addrs.bind), addrs.bind_len) ==
             0) &&
        ::connect(s.get(), reinterpret_cast<const sockaddr *>(&addrs.target),
                  addrs.target_len) == 0;
    return ok ? std::move(s) : UniqueFd();
}

} // namespace

FastPath::FastPath(FastPathConfig cfg, GuestSink &guest)
    : cfg_(std::move(cfg)), guest_(guest), events_(cfg_.shared_epoll_fd, EventOwner::Udp),
      table_(std::max<size_t>(cfg_.max_flows, 1), random_flow_seeds()[0]),
      timers_(std::max<size_t>(cfg_.max_flows, 1)), run_buf_(kMaxPayload),
      rx_buf_(kRecvBatch * kRecvBuf) {}

int64_t FastPath::now() const { return cfg_.clock ? cfg_.clock() : monotonic_ms(); }

Verdict FastPath::guest_frame(std::span<const uint8_t> frame) {
    learn_guest_mac(frame);
    Datagram d;
    switch (parse_datagram(frame, d)) {
    case Parse::NotUdp:
        return Verdict::NotMine;
    case Parse::Malformed:
        ++stats_.malformed;
        return Verdict::Consumed;
    case Parse::Ok:
        break;
    }
    // DHCP is libslirp's wherever it is addressed; port 0 is not a flow.
    if (d.dport == kDhcpServerPort || d.sport == 0 || d.dport == 0)
        return Verdict::NotMine;
    const Route r = classify(cfg_, d.v6, d.src, d.dst);
    if (r == Route::NotMine) return Verdict::NotMine;
    const uint64_t h = table_.hash(d.src, d.dst, d.sport, d.dport, d.v6);
    std::optional<uint32_t> idx = table_.find(d.src, d.dst, d.sport, d.dport, d.v6, h);
    // The gateway with disable_host_loopback: only replies on a forward's
    // flow (to a loopback client) pass, as for TCP forwards.
    if (!idx && r == Route::Refuse) return Verdict::NotMine;
    // New flows from the guest end of a forward libslirp carries are
    // libslirp's (a fast-path forward's flows to the same end stay ours).
    if (!idx && !d.v6 && !slirp_ends_.empty() &&
        std::find(slirp_ends_.begin(), slirp_ends_.end(), GuestEnd{ipv4_of(d.src), d.sport}) !=
            slirp_ends_.end())
        return Verdict::NotMine;
    if (!idx) idx = open_flow(d, r, h);
    if (!idx) return Verdict::Consumed; // refused: counted
    table_[*idx].last_ms = now();
    if (table_[*idx].fwd >= 0) table_[*idx].answered = true; // the guest replied
    queue(*idx, d.payload);
    return Verdict::Consumed;
}

std::optional<uint32_t> FastPath::open_flow(const Datagram &d, Route r, uint64_t h) {
    const Admission a = cfg_.admit_flow ? cfg_.admit_flow() : Admission::Accept;
    std::optional<uint32_t> slot = a == Admission::Accept ? table_.reserve() : std::nullopt;
    if (!slot) {
        ++stats_.flows_refused;
        return std::nullopt;
    }
    const uint32_t idx = *slot;
    const HostAddrs addrs = host_addrs(cfg_, r, d.v6, d.dst, d.dport);
    UniqueFd s = connect_host_socket(d.v6, addrs);
    if (s.valid() &&
        connected_to_itself(s.get(), reinterpret_cast<const sockaddr *>(&addrs.target))) {
        // While this one holds the port, a second socket gets another,
        // and the guest hears what nothing listening there means.
        UniqueFd self = std::move(s);
        s = connect_host_socket(d.v6, addrs);
    }
    const int one = 1;
    bool ok = s.valid();
    bool segmentation = cfg_.segmentation;
    // Without UDP_GRO reads simply come one datagram each.
    if (ok && segmentation) (void)::setsockopt(s.get(), SOL_UDP, UDP_GRO, &one, sizeof one);
    // Room for what arrives while the stack thread is busy elsewhere (the
    // default, 208 KiB, overflows in about a millisecond at 2 Gbit/s: the
    // udp_drops.sh benchmark counted it); the kernel caps it at rmem_max.
    if (ok) (void)::setsockopt(s.get(), SOL_SOCKET, SO_RCVBUF, &kHostRcvBuf, sizeof kHostRcvBuf);
    if (!ok || events_.add(s.get(), EPOLLIN, table_.ref(idx)) < 0) {
        table_.unreserve(idx);
        ++stats_.dropped_to_host;
        return std::nullopt;
    }
    Flow &f = table_[idx];
    f.ep = guest_flow_endpoints(cfg_, d.v6, d.src_mac, d.src, d.dst, d.sport, d.dport);
    f.sock = std::move(s);
    f.last_ms = now();
    f.answered = false;
    f.segmentation = segmentation;
    table_.insert(idx, h);
    timers_.set(idx, f.last_ms + cfg_.idle_ms);
    ++stats_.flows_opened;
    return idx;
}

void FastPath::close_flow(uint32_t idx) {
    if (run_.count != 0 && run_.idx == idx) flush();
    timers_.cancel(idx);
    table_[idx].sock.reset(); // leaves the epoll set with it
    table_[idx].fwd = -1;
    table_.release(idx);
}

void FastPath::queue(uint32_t idx, std::span<const uint8_t> p) {
    if (run_.count != 0 &&
        (run_.idx != idx || p.size() > run_.seg || run_.len + p.size() > kRunMaxBytes ||
         run_.count == kRunMaxSegments))
        flush();
    Flow &f = table_[idx];
    if (!f.segmentation || p.empty() || !first_of_reads_sent_) {
        first_of_reads_sent_ = true;
        flush(); // keeps the guest's order
        if (send(f, p.data(), p.size(), p.size()))
            ++stats_.datagrams_to_host;
        else
            ++stats_.dropped_to_host;
        return;
    }
    if (run_.count == 0) {
        run_.idx = idx;
        run_.seg = p.size();
    }
    std::memcpy(run_buf_.data() + run_.len, p.data(), p.size());
    run_.len += p.size();
    ++run_.count;
    if (p.size() < run_.seg) flush(); // a shorter datagram ends a run
}

void FastPath::flush() {
    if (run_.count == 0) return;
    const Run r = run_;
    run_ = Run{};
    Flow &f = table_[r.idx];
    if (send(f, run_buf_.data(), r.len, r.seg)) {
        stats_.datagrams_to_host += r.count;
        if (r.count > 1) ++stats_.segmented_sends;
        return;
    }
    if (r.count == 1 || !segmentation_refused(errno)) {
        stats_.dropped_to_host += r.count;
        return;
    }
    // This path cannot take segmented sends: one datagram at a time, now
    // and for the rest of the flow.
    f.segmentation = false;
    for (size_t off = 0; off < r.len; off += r.seg) {
        const size_t n = std::min(r.seg, r.len - off);
        if (send(f, run_buf_.data() + off, n, n))
            ++stats_.datagrams_to_host;
        else
            ++stats_.dropped_to_host;
    }
}

bool FastPath::send(Flow &f, const uint8_t *data, size_t len, size_t seg) {
    iovec iov{const_cast<uint8_t *>(data), len};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (f.fwd >= 0) { // the forward's socket, to the client
        m.msg_name = &f.client;
        m.msg_namelen = f.client_len;
    }
    alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(in6_pktinfo))]{};
    size_t used = 0;
    auto add_cmsg = [&](int level, int type, const void *data, size_t n) {
        cmsghdr *c = reinterpret_cast<cmsghdr *>(ctl + used);
        c->cmsg_level = level;
        c->cmsg_type = type;
        c->cmsg_len = CMSG_LEN(n);
        std::memcpy(CMSG_DATA(c), data, n);
        used += CMSG_SPACE(n);
    };
    if (seg < len) {
        const uint16_t s = uint16_t(seg);
        add_cmsg(SOL_UDP, UDP_SEGMENT, &s, sizeof s);
    }
    if (f.fwd >= 0 && f.reply_from.family == AF_INET) {
        in_pktinfo pi{};
        pi.ipi_spec_dst = f.reply_from.v4;
        add_cmsg(IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi);
    } else if (f.fwd >= 0 && f.reply_from.family == AF_INET6) {
        add_cmsg(IPPROTO_IPV6, IPV6_PKTINFO, &f.reply_from.v6, sizeof f.reply_from.v6);
    }
    m.msg_control = used != 0 ? ctl : nullptr;
    m.msg_controllen = used;
    for (int attempt = 0; attempt < 2; ++attempt) {
        // A plain datagram on a connected socket: send(2) spares the
        // kernel copying in a msghdr.
        const ssize_t r = used == 0 && m.msg_name == nullptr
                              ? ::send(flow_fd(f), data, len, MSG_DONTWAIT | MSG_NOSIGNAL)
                              : ::sendmsg(flow_fd(f), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r >= 0) return true;
        if (errno != EINTR && !icmp_left_error(errno)) return false;
    }
    return false;
}

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
        const size_t h = build_gso_datagrams(hdr_.data(), v, f.ep, total, len, uint16_t(ip_id_));
        ip_id_ += uint32_t(j - i);
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
        // The guest numbers each datagram's IPv4 id from the frame's.
        ip_id_ += uint32_t((p.size() + seg - 1) / seg);
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
        const size_t h = build_datagram(hdr_.data(), v, f.ep, payload.size(), uint16_t(ip_id_++));
        guest_.write_frame(v, {hdr_.data(), h}, payload);
        return;
    }
    ++stats_.fragmented;
    Fragments frags(f.ep, payload, cfg_.mtu, ip_id_++);
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
        if (r < 0) break;
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
            const size_t len = build_icmp_error(icmp_.data(), f.ep, e, {quote, got},
                                                size_t(r), uint16_t(ip_id_++));
            guest_.write_frame(VnetHdr{}, {icmp_.data(), len}, {});
            ++stats_.icmp_to_guest;
        }
    }
}

int64_t FastPath::ms_until_next_timer(int64_t now_ms) const {
    if (timers_.empty()) return -1;
    return std::max<int64_t>(0, timers_.top_deadline() - now_ms);
}

void FastPath::run_timers(int64_t now_ms) {
    while (!timers_.empty() && timers_.top_deadline() <= now_ms) {
        const uint32_t idx = timers_.top_id();
        const Flow &f = table_[idx];
        const int64_t due = f.last_ms + (f.answered ? cfg_.idle_answered_ms : cfg_.idle_ms);
        if (due > now_ms) {
            timers_.set(idx, due); // it saw traffic since: look again then
            continue;
        }
        close_flow(idx);
        ++stats_.flows_expired;
    }
}

void FastPath::tap_detached() {
    flush();
    for (uint32_t i = 0; i < table_.slots(); ++i)
        if (!table_[i].closed()) close_flow(i);
    guest_mac_known_ = false; // the next tap's guest may differ
}

void FastPath::keep_for_libslirp(uint32_t guest4, uint16_t guest_port) {
    slirp_ends_.push_back({guest4, guest_port});
    // Flows the guest opened from that end before are closed: its next
    // datagrams go to libslirp, whose forwarding socket must carry the
    // forward's replies (a fast-path forward's flows stay).
    for (uint32_t i = 0; i < table_.slots(); ++i) {
        const Flow &f = table_[i];
        if (!f.closed() && f.fwd < 0 && !f.ep.v6 && f.ep.guest_port == guest_port &&
            ipv4_of(f.ep.guest) == guest4)
            close_flow(i);
    }
}

void FastPath::release_to_fast_path(uint32_t guest4, uint16_t guest_port) {
    auto it = std::find(slirp_ends_.begin(), slirp_ends_.end(), GuestEnd{guest4, guest_port});
    if (it != slirp_ends_.end()) slirp_ends_.erase(it);
}

} // namespace rknp::udp
