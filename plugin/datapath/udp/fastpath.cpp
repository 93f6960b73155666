// SPDX-License-Identifier: Apache-2.0

// The UDP fast path (udp::FastPath, fastpath.hpp), the whole class: the
// dispatch of guest frames and host events (a forward's event to
// udp::Forwards); the guest's flows and their datagrams out (one
// UDP_SEGMENT send for a run of equal sizes, a forward's client's replies
// too, on its forward's socket), idle expiry; the guest-bound half (host
// sockets' datagrams to the guest, one GSO frame for a run of equal
// datagrams where the tap takes it, IP fragments over the guest's MTU;
// the errors ICMP left on a flow's socket as ICMP messages to the guest).
#include "datapath/udp/fastpath.hpp"

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "datapath/tap_io.hpp"
#include "datapath/udp/host_socket.hpp"

namespace rknp::udp {

namespace {

constexpr uint16_t kDhcpServerPort = 67;

// A send that failed because the path cannot segment (gso_size over its
// MTU, a kernel or device without UDP segmentation offload).
bool segmentation_refused(int err) {
    return err == EINVAL || err == EIO || err == EOPNOTSUPP || err == EMSGSIZE;
}

} // namespace

FastPath::FastPath(FastPathConfig cfg, GuestSink &guest)
    : cfg_(std::move(cfg)), guest_(guest), events_(cfg_.shared_epoll_fd, EventOwner::Udp),
      table_(std::max<size_t>(cfg_.max_flows, 1), random_flow_seeds()[0]),
      timers_(std::max<size_t>(cfg_.max_flows, 1)), port_seed_(random_flow_seeds()[1]),
      run_buf_(kMaxPayload),
      forwards_(cfg_, events_, guest_, table_, rx_, stats_, *this, port_seed_) {}

bool FastPath::icmp_left_error(int err) {
    return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == EHOSTDOWN || err == EPROTO;
}

Verdict FastPath::guest_frame(std::span<const uint8_t> frame) {
    forwards_.learn_guest_mac(frame);
    Datagram d;
    switch (parse_datagram(frame, d)) {
    case Parse::NotMine:
        return parse_port_unreachable(frame, d) && guest_port_unreachable(d) ? Verdict::Consumed
                                                                               : Verdict::NotMine;
    case Parse::Malformed:
        ++stats_.malformed;
        return Verdict::Consumed;
    case Parse::Ok:
        break;
    }
    // DHCP is libslirp's wherever it is addressed; port 0 is not a flow.
    if (d.dport == kDhcpServerPort || d.sport == 0 || d.dport == 0)
        return Verdict::NotMine;
    const Route r = classify(cfg_, d.v6, d.src, d.dst, d.dport);
    if (r == Route::NotMine) return Verdict::NotMine;
    // A reply to a forward's client (IPv4, or IPv6 for an IPv6 guest end).
    if (Flow *c = forwards_.answered(d)) {
        queue(*c, d.payload);
        return Verdict::Consumed;
    }
    const uint64_t h = table_.hash(d.src, d.dst, d.sport, d.dport, d.v6);
    std::optional<uint32_t> idx = table_.find(d.src, d.dst, d.sport, d.dport, d.v6, h);
    // The gateway with disable_host_loopback: only replies on a forward's
    // flow (to a loopback client) pass, as for TCP forwards.
    if (!idx && r == Route::Refuse) return Verdict::NotMine;
    // No flow for it in the host's network (the DNS address off port 53,
    // or no resolver): libslirp would send it to that address for real.
    if (!idx && r == Route::Unreachable) {
        ++stats_.dropped_to_host;
        return Verdict::Consumed;
    }
    // New flows from the guest end of a forward libslirp carries are
    // libslirp's (a fast-path forward's flows to the same end stay ours).
    if (!idx && !d.v6 && !slirp_ends_.empty() &&
        std::find(slirp_ends_.begin(), slirp_ends_.end(), GuestEnd{ipv4_of(d.src), d.sport}) !=
            slirp_ends_.end())
        return Verdict::NotMine;
    if (!idx) {
        // A destination that failed a moment ago: told again, for free.
        if (const Unreachable &u = unreachable_slot(d); u.until > now() && u.v6 == d.v6 &&
                                                        std::memcmp(u.addr, d.dst, 16) == 0) {
            tell_unreachable(d, u.icmp);
            ++stats_.unreachable_cached;
            return Verdict::Consumed;
        }
        idx = open_flow(d, r, h);
    }
    if (!idx) return Verdict::Consumed; // refused: counted
    table_[*idx].last_ms = now();
    queue(table_[*idx], d.payload);
    return Verdict::Consumed;
}

Verdict FastPath::routed_frame(std::span<const uint8_t> frame) {
    Datagram d;
    if (parse_datagram(frame, d) != Parse::Ok) return Verdict::NotMine;
    // Only a forward's client has a guest end outside the guest's own
    // addresses (the guest's flows are keyed by its own).
    Flow *c = forwards_.answered(d);
    if (c == nullptr) return Verdict::NotMine;
    queue(*c, d.payload);
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
    HostSocket hs = open_host_socket(d.v6, addrs, cfg_.segmentation);
    if (!hs.fd.valid() && !hs.shortage) {
        // No route, no IPv6, a broadcast address (EACCES), an outbound
        // address the host lacks: the guest hears it at once, as from a
        // router (libslirp and the echo path answer so too), and so does
        // its next try for a second.
        const IcmpError e =
            unreachable_for(hs.err, d.v6).value_or(*unreachable_for(ENETUNREACH, d.v6));
        Unreachable &u = unreachable_slot(d);
        std::memcpy(u.addr, d.dst, 16);
        u.v6 = d.v6;
        u.icmp = e;
        u.until = now() + kUnreachableMs;
        tell_unreachable(d, e);
        ++stats_.unreachable;
    }
    if (!hs.fd.valid() || events_.add(hs.fd.get(), EPOLLIN, table_.ref(idx)) < 0) {
        table_.unreserve(idx);
        ++stats_.dropped_to_host;
        return std::nullopt;
    }
    Flow &f = table_[idx];
    f.ep = guest_flow_endpoints(cfg_, d.v6, d.src_mac, d.src, d.dst, d.sport, d.dport);
    f.sock = std::move(hs.fd);
    f.last_ms = now();
    f.answered = false;
    f.segmentation = cfg_.segmentation;
    table_.insert(idx, h);
    timers_.set(idx, f.last_ms + cfg_.idle_ms);
    ++stats_.flows_opened;
    return idx;
}

void FastPath::close_flow(uint32_t idx) {
    closing(table_[idx]);
    timers_.cancel(idx);
    table_[idx].sock.reset(); // leaves the epoll set with it
    table_.release(idx);
}

void FastPath::queue(Flow &f, std::span<const uint8_t> p) {
    if (run_.count != 0 &&
        (run_.flow != &f || p.size() > run_.seg || run_.len + p.size() > kRunMaxBytes ||
         run_.count == kRunMaxSegments))
        flush();
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
        run_.flow = &f;
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
    Flow &f = *r.flow;
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
        if (r >= 0) {
            f.last_len = uint16_t(std::min(seg, len));
            return true;
        }
        // A full buffer drops the datagram, as a network would. Any other
        // error may be one an ICMP message left on the connected socket
        // (EMSGSIZE after a packet-too-big, EACCES, EOPNOTSUPP, ENONET,
        // ECONNREFUSED, ...: the error queue tells the guest): it fails
        // this one call and is gone. Once more, then; an error the path
        // itself gives (a segment over its MTU) fails again, and only then
        // does the caller decide that segmentation is refused.
        if (send_would_block(errno)) return false;
    }
    return false;
}

bool FastPath::guest_port_unreachable(const Datagram &q) {
    // The guest's socket for host datagrams is gone: so is the flow, or a
    // remote that goes on sending would keep its slot (and socket) for
    // ever. Its next datagram meets the host's own port unreachable.
    if (forwards_.guest_port_unreachable(q)) return true;
    const uint64_t h = table_.hash(q.dst, q.src, q.dport, q.sport, q.v6);
    const std::optional<uint32_t> idx = table_.find(q.dst, q.src, q.dport, q.sport, q.v6, h);
    if (!idx) return false; // libslirp's, or nobody's
    close_flow(*idx);
    ++stats_.closed_by_guest;
    return true;
}

FastPath::Unreachable &FastPath::unreachable_slot(const Datagram &d) {
    // Keyed: the guest chooses the addresses.
    uint64_t h = hash_mix(port_seed_, d.v6 ? 1 : 0);
    h = hash_mix(h, load64(d.dst));
    h = hash_mix(h, load64(d.dst + 8));
    return unreachable_[hash_mix(h, port_seed_) % kUnreachableSlots];
}

void FastPath::tell_unreachable(const Datagram &d, const IcmpError &e) {
    const Endpoints ep =
        guest_flow_endpoints(cfg_, d.v6, d.src_mac, d.src, d.dst, d.sport, d.dport);
    // From the gateway, with its MAC: as libslirp's icmp_send_error.
    Endpoints gw = ep;
    if (d.v6) {
        std::memcpy(gw.remote, &cfg_.gateway6, 16);
        gateway_mac6(gw.remote, gw.gw_mac);
    } else {
        map_v4(ipv4_bytes(cfg_.gateway4).data(), gw.remote);
    }
    const size_t len = build_icmp_error(icmp_.data(), gw, ep, e, d.payload, d.payload.size(),
                                        uint16_t(ip_id_), cfg_.mtu);
    if (len == 0) return;
    guest_.write_frame(VnetHdr{}, {icmp_.data(), len}, {});
    ++stats_.icmp_to_guest;
}

int64_t FastPath::ms_until_next_timer(int64_t now_ms) const {
    int64_t d = forwards_.next_expiry();
    if (!timers_.empty() && (d < 0 || timers_.top_deadline() < d)) d = timers_.top_deadline();
    return d < 0 ? -1 : std::max<int64_t>(0, d - now_ms);
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
    forwards_.run_timers(now_ms);
}

std::string FastPath::tap_attached(TapIo &tap) {
    if (!tap.vnet_hdr()) return {};
    guest_gso_ = tap.takes_udp_gso();
    return guest_gso_ ? "UDP fast path: datagrams the host socket coalesced reach the guest as "
                        "one GSO frame (the tap takes UDP GSO)"
                      : "UDP fast path: one frame a datagram to the guest (the tap takes no "
                        "UDP GSO frames: Linux before 6.2)";
}

void FastPath::tap_detached() {
    flush();
    for (uint32_t i = 0; i < table_.slots(); ++i)
        if (!table_[i].closed()) close_flow(i);
    forwards_.tap_detached();
}

void FastPath::keep_for_libslirp(uint32_t guest4, uint16_t guest_port) {
    slirp_ends_.push_back({guest4, guest_port});
    // Flows the guest opened from that end before are closed: its next
    // datagrams go to libslirp, whose forwarding socket must carry the
    // forward's replies (a fast-path forward's clients stay).
    for (uint32_t i = 0; i < table_.slots(); ++i) {
        const Flow &f = table_[i];
        if (!f.closed() && !f.ep.v6 && f.ep.guest_port == guest_port &&
            ipv4_of(f.ep.guest) == guest4)
            close_flow(i);
    }
}

void FastPath::release_to_fast_path(uint32_t guest4, uint16_t guest_port) {
    auto it = std::find(slirp_ends_.begin(), slirp_ends_.end(), GuestEnd{guest4, guest_port});
    if (it != slirp_ends_.end()) slirp_ends_.erase(it);
}

void FastPath::publish(Stats &s) const {
    // Every flow the path carries, the forwards' clients too (they are not
    // the guest's, and not in host_sockets).
    s.udp_fast_flows.store(flows() + forward_flows(), std::memory_order_relaxed);
    s.udp_fast_dropped.store(stats_.dropped_to_host, std::memory_order_relaxed);
    s.udp_forward_clients.store(forward_flows(), std::memory_order_relaxed);
    s.udp_forward_admitted.store(stats_.forward_admitted, std::memory_order_relaxed);
    s.udp_forward_rate_limited.store(stats_.forward_rate_limited, std::memory_order_relaxed);
    s.udp_forward_evicted.store(stats_.forward_evicted, std::memory_order_relaxed);
    s.udp_forward_full.store(stats_.forward_full, std::memory_order_relaxed);
}

void FastPath::poll_events() {
    epoll_event evs[kMaxEvents];
    handle_events(events_.ready(evs), true);
}

void FastPath::handle_events(std::span<const epoll_event> evs, bool burst) {
    for (const epoll_event &e : evs) {
        const uint64_t ref = EventSource::ref_of(e);
        if (ref & Forwards::kEventTag) {
            forwards_.receive(size_t(ref & ~Forwards::kEventTag));
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
    for (size_t i = 0; i < batch; ++i) (void)rx_.prepare(i);
    int n;
    if (batch == 1) { // recvmsg(2): no second read that would only find the queue empty
        const ssize_t r = ::recvmsg(f.sock.get(), &rx_.msgs[0].msg_hdr, MSG_DONTWAIT);
        if (r >= 0) rx_.msgs[0].msg_len = unsigned(r);
        n = r < 0 ? -1 : 1;
    } else {
        n = ::recvmmsg(f.sock.get(), rx_.msgs.data(), unsigned(batch), MSG_DONTWAIT, nullptr);
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
        msghdr &m = rx_.msgs[i].msg_hdr;
        seg[i] = rx_.msgs[i].msg_len;
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
        const size_t len = rx_.msgs[i].msg_len;
        const uint8_t *data = rx_.buf(i);
        if (len == 0) { // an empty datagram is one too
            to_guest(f, {});
            ++i;
            continue;
        }
        // Reads of single datagrams of one size (the last may be shorter)
        // go to the guest as one GSO frame where the tap takes them.
        size_t j = i + 1, total = len;
        if (guest_gso_ && seg[i] == len && fits_mtu(f.ep, len, cfg_.mtu)) {
            while (j < size_t(n) && seg[j] == rx_.msgs[j].msg_len && seg[j] != 0 &&
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
            gather_[k - i] = iovec{rx_.buf(k), rx_.msgs[k].msg_len};
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
    if (p.empty()) { // an empty datagram is one too
        to_guest(f, {});
        return;
    }
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

int FastPath::add_forward(const sockaddr *host, socklen_t host_len, uint32_t guest4,
                          uint16_t guest_port) {
    uint8_t guest[16];
    map_v4(ipv4_bytes(guest4).data(), guest);
    return add_forward(host, host_len, guest, false, guest_port);
}

int FastPath::add_forward(const sockaddr *host, socklen_t host_len, const uint8_t guest[16],
                          bool v6, uint16_t guest_port) {
    // Belt and braces: a run queued now leaves before the new forward's
    // clients take slots closed ones had (closing() already sent theirs).
    flush();
    return forwards_.add(host, host_len, guest, v6, guest_port);
}

void FastPath::forward_behind(const ForwardSpec &f, bool taken) {
    // libslirp carries no IPv6 guest end (SlirpAdapter::add_forward).
    if (!f.udp || f.guest_v6) return;
    if (taken)
        keep_for_libslirp(f.guest, f.guest_port);
    else
        release_to_fast_path(f.guest, f.guest_port);
}

} // namespace rknp::udp
