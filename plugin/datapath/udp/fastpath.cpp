// SPDX-License-Identifier: Apache-2.0

// The UDP fast path: flows, the guest's datagrams to the host (queued
// runs, UDP_SEGMENT sends), idle expiry; the guest-bound half is in
// to_guest.cpp.
#include "datapath/udp/fastpath.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "datapath/tap_io.hpp"

namespace rknp::udp {

namespace {

constexpr uint16_t kDhcpServerPort = 67;

// A send that failed because the path cannot segment (gso_size over its
// MTU, a kernel or device without UDP segmentation offload).
bool segmentation_refused(int err) {
    return err == EINVAL || err == EIO || err == EOPNOTSUPP || err == EMSGSIZE;
}


// A socket connected to the flow's host address (bound first to the
// outbound address if one is set), or why not: err, and whether it is a
// shortage of our own (fds, memory, ephemeral ports), which says nothing
// about the destination.
struct HostSocket {
    UniqueFd fd;
    int err = 0;
    bool shortage = false;
};

bool shortage_errno(int err) {
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM || err == EAGAIN;
}

HostSocket connect_host_socket(bool v6, const HostAddrs &addrs) {
    HostSocket h;
    UniqueFd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const int one = 1;
    // IP_RECVERR: ICMP errors queue with their type and the datagram they
    // answer, which is what the guest must be told.
    if (!s.valid() ||
        (v6 ? ::setsockopt(s.get(), SOL_IPV6, IPV6_RECVERR, &one, sizeof one)
            : ::setsockopt(s.get(), SOL_IP, IP_RECVERR, &one, sizeof one)) != 0) {
        h.err = errno;
        // No IPv6 in this kernel (EAFNOSUPPORT) is the destination's
        // business: no route to it.
        h.shortage = h.err != EAFNOSUPPORT;
        return h;
    }
    if (addrs.bind_len != 0 &&
        ::bind(s.get(), reinterpret_cast<const sockaddr *>(&addrs.bind), addrs.bind_len) != 0) {
        h.err = errno; // EADDRNOTAVAIL: the outbound address is not the host's
        h.shortage = shortage_errno(h.err);
        return h;
    }
    if (::connect(s.get(), reinterpret_cast<const sockaddr *>(&addrs.target),
                  addrs.target_len) != 0) {
        h.err = errno;
        // EADDRNOTAVAIL here: no ephemeral port left.
        h.shortage = shortage_errno(h.err) || h.err == EADDRNOTAVAIL;
        return h;
    }
    h.fd = std::move(s);
    return h;
}

} // namespace

FastPath::FastPath(FastPathConfig cfg, GuestSink &guest)
    : cfg_(std::move(cfg)), guest_(guest), events_(cfg_.shared_epoll_fd, EventOwner::Udp),
      table_(std::max<size_t>(cfg_.max_flows, 1), random_flow_seeds()[0]),
      timers_(std::max<size_t>(cfg_.max_flows, 1)),
      clients_(cfg_.forward_clients, cfg_.forward_clients_each, cfg_.forward_new_per_sec,
               random_flow_seeds()[0]),
      port_seed_(random_flow_seeds()[1]), run_buf_(kMaxPayload),
      rx_buf_(kRecvBatch * kRecvBuf) {}

bool FastPath::icmp_left_error(int err) {
    return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == EHOSTDOWN || err == EPROTO;
}

int64_t FastPath::now() const { return cfg_.clock ? cfg_.clock() : monotonic_ms(); }

Verdict FastPath::guest_frame(std::span<const uint8_t> frame) {
    learn_guest_mac(frame);
    Datagram d;
    switch (parse_datagram(frame, d)) {
    case Parse::NotUdp:
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
    // A reply to a forward's client (IPv4 only: forwards go to the guest's
    // IPv4 address).
    if (!d.v6) {
        if (std::optional<uint32_t> c = clients_.find_guest_side(d.src, d.dst, d.sport, d.dport)) {
            clients_.answered(*c, now());
            queue(clients_[*c], d.payload);
            return Verdict::Consumed;
        }
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

std::optional<uint32_t> FastPath::open_flow(const Datagram &d, Route r, uint64_t h) {
    const Admission a = cfg_.admit_flow ? cfg_.admit_flow() : Admission::Accept;
    std::optional<uint32_t> slot = a == Admission::Accept ? table_.reserve() : std::nullopt;
    if (!slot) {
        ++stats_.flows_refused;
        return std::nullopt;
    }
    const uint32_t idx = *slot;
    const HostAddrs addrs = host_addrs(cfg_, r, d.v6, d.dst, d.dport);
    HostSocket hs = connect_host_socket(d.v6, addrs);
    if (hs.fd.valid() &&
        connected_to_itself(hs.fd.get(), reinterpret_cast<const sockaddr *>(&addrs.target))) {
        // While this one holds the port, a second socket gets another,
        // and the guest hears what nothing listening there means.
        HostSocket self = std::move(hs);
        hs = connect_host_socket(d.v6, addrs);
    }
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
    UniqueFd s = std::move(hs.fd);
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
    if (run_.count != 0 && run_.flow == &table_[idx]) flush();
    timers_.cancel(idx);
    table_[idx].sock.reset(); // leaves the epoll set with it
    table_.release(idx);
}

void FastPath::close_client(uint32_t idx) {
    if (run_.count != 0 && run_.flow == &clients_[idx]) flush();
    clients_.remove(idx);
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
    if (!q.v6) {
        if (std::optional<uint32_t> c = clients_.find_guest_side(q.dst, q.src, q.dport, q.sport)) {
            close_client(*c);
            ++stats_.closed_by_guest;
            return true;
        }
    }
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
    int64_t d = clients_.next_expiry(cfg_.idle_ms, cfg_.idle_answered_ms);
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
    while (std::optional<uint32_t> c =
               clients_.expired(now_ms, cfg_.idle_ms, cfg_.idle_answered_ms)) {
        close_client(*c);
        ++stats_.flows_expired;
    }
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
    while (std::optional<uint32_t> c = clients_.any()) close_client(*c);
    guest_mac_known_ = false; // the next tap's guest may differ
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

} // namespace rknp::udp
