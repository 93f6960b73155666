// SPDX-License-Identifier: Apache-2.0

// The echo path's core: guest requests to entries and ping sockets, the
// replies back to the guest, idle expiry.
#include "datapath/icmp/fastpath.hpp"

#include <sys/epoll.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "datapath/tcp/frame.hpp"
#include "datapath/flows/flow_table.hpp"
#include "datapath/flows/route.hpp"

namespace rknp::icmp {

namespace {

// Datagrams read from one socket per event before the others get a turn.
constexpr int kRecvBudget = 32;
constexpr int kEvents = 64;
// How often idle entries are looked for.
constexpr int64_t kScanMs = 1000;

} // namespace

FastPath::FastPath(EchoConfig cfg, GuestSink &sink)
    : cfg_(std::move(cfg)), sink_(sink),
      probe_(cfg_.probe ? cfg_.probe() : probe_ping_sockets()),
      table_(std::max<size_t>(cfg_.max_entries, 1), random_flow_seeds()[0]),
      events_(cfg_.shared_epoll_fd, EventOwner::Echo), rx_(kHeadroom + kMaxMessage) {}

int64_t FastPath::now() const { return cfg_.clock ? cfg_.clock() : monotonic_ms(); }

socklen_t FastPath::target(const Entry &e, sockaddr_storage &ss) const {
    std::memset(&ss, 0, sizeof ss);
    if (e.v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
        a->sin6_family = AF_INET6;
        if (e.loopback)
            a->sin6_addr = in6addr_loopback;
        else
            std::memcpy(&a->sin6_addr, e.remote, 16);
        return sizeof *a;
    }
    auto *a = reinterpret_cast<sockaddr_in *>(&ss);
    a->sin_family = AF_INET;
    if (e.loopback)
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else
        std::memcpy(&a->sin_addr, e.remote + 12, 4);
    return sizeof *a;
}

Verdict FastPath::guest_frame(std::span<const uint8_t> frame) {
    if (!enabled()) return Verdict::NotMine;
    EchoRequest r;
    switch (parse_echo_request(frame, r)) {
    case Parse::NotMine:
        return Verdict::NotMine;
    case Parse::Malformed:
        ++stats_.malformed;
        return Verdict::Malformed;
    case Parse::Ok:
        break;
    }
    if (r.v6 && !probe_.v6) return Verdict::NotMine;
    bool loopback;
    switch (classify(cfg_, r.v6, r.src, r.dst, 0)) {
    case Route::Host:
        loopback = false;
        break;
    case Route::Loopback:
    case Route::GuestAddr: // the host answers at any of its addresses
        loopback = true;
        break;
    case Route::Unreachable: // host_network's DNS address: not a host
        return Verdict::Consumed;
    default: // the virtual network, DNS, a refused gateway: libslirp answers
        return Verdict::NotMine;
    }
    if (!echo_checksum_ok(r)) {
        ++stats_.malformed;
        return Verdict::Malformed;
    }
    std::optional<uint32_t> idx = table_.find(r.v6, r.src, r.id, r.dst);
    if (!idx) idx = open_entry(r, loopback);
    if (!idx) return Verdict::Consumed;
    Entry &e = table_[*idx];
    std::memcpy(e.guest_mac, r.src_mac, 6);
    e.last_ms = now();
    sockaddr_storage ss;
    socklen_t len = target(e, ss);
    // The kernel puts the socket's own echo id in and computes the checksum.
    if (::sendto(e.sock.get(), r.message.data(), r.message.size(),
                 MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<sockaddr *>(&ss),
                 len) >= 0) {
        ++stats_.requests;
        return Verdict::Consumed;
    }
    const int err = errno;
    ++stats_.socket_errors;
    // No route: the guest learns it at once, as from a router (and from
    // libslirp); a full buffer or the like is a lost packet.
    if (err == ENETUNREACH || err == EHOSTUNREACH) {
        ReplyEnds from;
        from.v6 = r.v6;
        if (r.v6) {
            std::memcpy(from.remote, &cfg_.gateway6, 16);
            gateway_mac6(from.remote, from.gw_mac);
        } else {
            const auto gw = ipv4_bytes(cfg_.gateway4);
            map_v4(gw.data(), from.remote);
            gateway_mac4(gw.data(), from.gw_mac);
        }
        write_unreachable(sink_, from, r,
                          err == ENETUNREACH ? Unreachable::Net : Unreachable::Host,
                          ip_id_++);
        ++stats_.unreachable;
    }
    return Verdict::Consumed;
}

std::optional<uint32_t> FastPath::open_entry(const EchoRequest &r, bool loopback) {
    // The table first: a full one must not take a token from the limits.
    if (table_.full() || (cfg_.admit_entry && !cfg_.admit_entry())) {
        ++stats_.refused;
        return std::nullopt;
    }
    const int family = r.v6 ? AF_INET6 : AF_INET;
    UniqueFd sock(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                           r.v6 ? int(IPPROTO_ICMPV6) : int(IPPROTO_ICMP)));
    if (!sock) {
        ++stats_.socket_errors;
        return std::nullopt;
    }
    int rc = 0;
    if (!r.v6 && cfg_.outbound_addr) {
        sockaddr_in b{};
        b.sin_family = AF_INET;
        b.sin_addr.s_addr = htonl(*cfg_.outbound_addr);
        rc = ::bind(sock.get(), reinterpret_cast<sockaddr *>(&b), sizeof b);
    } else if (r.v6 && cfg_.outbound_addr6) {
        sockaddr_in6 b{};
        b.sin6_family = AF_INET6;
        b.sin6_addr = *cfg_.outbound_addr6;
        rc = ::bind(sock.get(), reinterpret_cast<sockaddr *>(&b), sizeof b);
    }
    if (rc != 0) {
        ++stats_.socket_errors;
        return std::nullopt;
    }
    std::optional<uint32_t> idx = table_.insert(r.v6, r.src, r.id, r.dst);
    if (!idx) return std::nullopt; // not full a moment ago: cannot happen
    if (events_.add(sock.get(), EPOLLIN, table_.ref(*idx)) != 0) {
        ++stats_.socket_errors;
        table_.remove(*idx);
        return std::nullopt;
    }
    Entry &e = table_[*idx];
    e.loopback = loopback;
    e.sock = std::move(sock);
    ++stats_.opened;
    if (table_.open() == 1) next_scan_ms_ = now() + kScanMs;
    return idx;
}

void FastPath::poll_events() {
    epoll_event evs[kEvents];
    handle_events(events_.ready(evs), true);
}

void FastPath::handle_events(std::span<const epoll_event> evs, bool) {
    for (const epoll_event &e : evs)
        if (auto idx = table_.slot_of(EventSource::ref_of(e))) drain(*idx);
}

void FastPath::drain(uint32_t idx) {
    Entry &e = table_[idx];
    sockaddr_storage want;
    target(e, want);
    uint8_t *msg = rx_.data() + kHeadroom;
    for (int k = 0; k < kRecvBudget; ++k) {
        sockaddr_storage from;
        socklen_t from_len = sizeof from;
        ssize_t n = ::recvfrom(e.sock.get(), msg, kMaxMessage, MSG_DONTWAIT,
                               reinterpret_cast<sockaddr *>(&from), &from_len);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            // EINTR, or an ICMP error for an earlier request (reading it
            // clears it): go on.
            if (errno != EINTR) ++stats_.socket_errors;
            continue;
        }
        // Only the host the guest pinged may answer it: anyone can send an
        // echo reply with this socket's id.
        bool same = from.ss_family == want.ss_family &&
                    (e.v6 ? std::memcmp(&reinterpret_cast<sockaddr_in6 &>(from).sin6_addr,
                                        &reinterpret_cast<sockaddr_in6 &>(want).sin6_addr,
                                        16) == 0
                          : reinterpret_cast<sockaddr_in &>(from).sin_addr.s_addr ==
                                reinterpret_cast<sockaddr_in &>(want).sin_addr.s_addr);
        const uint8_t reply_type = e.v6 ? kEchoReply6 : kEchoReply4;
        if (!same || size_t(n) < kIcmpLen || msg[0] != reply_type) {
            ++stats_.replies_dropped;
            continue;
        }
        ReplyEnds ends;
        ends.v6 = e.v6;
        std::memcpy(ends.guest_mac, e.guest_mac, 6);
        std::memcpy(ends.guest, e.guest, 16);
        std::memcpy(ends.remote, e.remote, 16);
        ends.guest_id = e.guest_id;
        if (e.v6)
            gateway_mac6(e.remote, ends.gw_mac);
        else
            gateway_mac4(ipv4_bytes(cfg_.gateway4).data(), ends.gw_mac);
        size_t frames = write_reply(sink_, ends, msg, size_t(n), cfg_.mtu, ip_id_++);
        if (frames == 0) {
            ++stats_.replies_dropped;
            continue;
        }
        stats_.replies += frames;
        e.last_ms = now();
    }
}

int64_t FastPath::ms_until_next_timer(int64_t now_ms) const {
    if (table_.open() == 0) return -1;
    return std::max<int64_t>(next_scan_ms_ - now_ms, 0);
}

void FastPath::run_timers(int64_t now_ms) {
    if (table_.open() == 0 || now_ms < next_scan_ms_) return;
    next_scan_ms_ = now_ms + kScanMs;
    for (uint32_t i = 0; i < table_.slots(); ++i) {
        const Entry &e = table_[i];
        if (e.open && now_ms - e.last_ms >= cfg_.idle_timeout_ms) {
            table_.remove(i); // closing the socket takes it out of epoll
            ++stats_.expired;
        }
    }
}

} // namespace rknp::icmp
