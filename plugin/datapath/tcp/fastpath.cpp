// SPDX-License-Identifier: Apache-2.0

// The fast path's flow table, epoll dispatch, deadlines and guest SYN routing.
#include "datapath/tcp/fastpath.hpp"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/hash.hpp"

namespace rknp::tcp {

namespace {

int64_t monotonic_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

uint32_t v4_of(const uint8_t a[16]) {
    return uint32_t(a[12]) << 24 | uint32_t(a[13]) << 16 | uint32_t(a[14]) << 8 | a[15];
}

// Unicast addresses a host socket may sensibly talk to or from.
bool unicast4(uint32_t a) {
    uint32_t top = a >> 24;
    return top != 0 && top != 127 && top < 224;
}

bool unicast6(const uint8_t a[16]) {
    static const uint8_t zero[16] = {};
    static const uint8_t loop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (a[0] == 0xff) return false;                         // multicast
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return false; // link-local
    if (std::memcmp(a, zero, 16) == 0 || std::memcmp(a, loop, 16) == 0) return false;
    return !is_mapped_v4(a);
}

bool in_prefix6(const uint8_t a[16], const in6_addr &p, uint32_t len) {
    len = std::min<uint32_t>(len, 128);
    size_t bytes = len / 8;
    if (std::memcmp(a, p.s6_addr, bytes) != 0) return false;
    if (len % 8 == 0) return true;
    uint8_t m = uint8_t(0xff << (8 - len % 8));
    return (a[bytes] & m) == (p.s6_addr[bytes] & m);
}

bool same6(const uint8_t a[16], const in6_addr &b) {
    return std::memcmp(a, b.s6_addr, 16) == 0;
}


} // namespace

Route classify(const FastPathConfig &cfg, const Segment &s) {
    if (!s.v6) {
        uint32_t d = v4_of(s.dst), src = v4_of(s.src);
        if (!unicast4(src) || !unicast4(d)) return Route::NotMine;
        if (d == cfg.gateway4)
            return cfg.disable_host_loopback ? Route::Refuse : Route::Loopback;
        if (d == cfg.dns4 || (d & cfg.mask4) == (cfg.net4 & cfg.mask4))
            return Route::NotMine;
        return Route::Host;
    }
    if (!cfg.ipv6 || !unicast6(s.src) || !unicast6(s.dst)) return Route::NotMine;
    if (same6(s.dst, cfg.gateway6))
        return cfg.disable_host_loopback ? Route::Refuse : Route::Loopback;
    if (same6(s.dst, cfg.dns6) || in_prefix6(s.dst, cfg.prefix6, cfg.prefix6_len))
        return Route::NotMine;
    return Route::Host;
}

FastPath::FastPath(FastPathConfig cfg)
    : cfg_(std::move(cfg)), out_(std::max<size_t>(cfg_.batch_data_frames, 1),
                                 std::max<size_t>(cfg_.batch_control_frames, 4)),
      timers_(std::max<size_t>(cfg_.max_flows, 1)) {
    const size_t n = std::max<size_t>(cfg_.max_flows, 1);
    ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep_) throw_errno("fast path: epoll_create1");
    wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_) throw_errno("fast path: eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeRef;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) < 0)
        throw_errno("fast path: epoll_ctl");

    flows_ = std::vector<Flow>(n);
    gen_.assign(n, 0);
    hashes_.assign(n, 0);
    queued_.assign(n, 0);
    pending_.assign(n, 0);
    free_.reserve(n);
    for (size_t i = n; i-- > 0;) free_.push_back(uint32_t(i));
    index_.assign(pow2_at_least(2 * n), 0);
    index_mask_ = index_.size() - 1;

    // Keys for the flow hash (the guest chooses the 4-tuples: an unkeyed
    // hash would let it pile every flow into one chain) and for ISNs.
    uint64_t seeds[2] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
    if (::getrandom(seeds, sizeof seeds, GRND_NONBLOCK) != ssize_t(sizeof seeds))
        seeds[0] ^= uint64_t(monotonic_ms()) * 0x9e3779b97f4a7c15ull;
    seed_ = seeds[0];
    isn_seed_ = seeds[1];

    // Data stays in the kernel until the guest ACKs it: without SO_PEEK_OFF
    // on TCP (Linux 6.9+) every peek would start at the oldest byte.
    UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe) {
        int zero = 0;
        enabled_ = ::setsockopt(probe.get(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof zero) == 0;
        // The window we give the guest is what the host socket's send
        // buffer has free, and a connection starts with a buffer of about
        // 20 segments (69 KiB at MSS 1448). The kernel grows it only for
        // a writer that found it full, which we never are (the guest sends
        // what fits), so it would stay there: a 50 KiB window whatever the
        // path. Instead each socket gets the largest buffer an unprivileged
        // process may set (twice net.core.wmem_max, asked for 4 MiB like
        // pasta), measured here once.
        int want = 4 << 20, got = 0;
        socklen_t len = sizeof got;
        if (::setsockopt(probe.get(), SOL_SOCKET, SO_SNDBUF, &want, sizeof want) == 0 &&
            ::getsockopt(probe.get(), SOL_SOCKET, SO_SNDBUF, &got, &len) == 0)
            sndbuf_ = got;
    }
}

int64_t FastPath::now() const { return cfg_.clock ? cfg_.clock() : monotonic_ms(); }

uint64_t FastPath::hash(const uint8_t guest[16], const uint8_t remote[16],
                        uint16_t gport, uint16_t rport, bool v6) const {
    uint64_t h = seed_;
    h = hash_mix(h, load64(guest));
    h = hash_mix(h, load64(guest + 8));
    h = hash_mix(h, load64(remote));
    h = hash_mix(h, load64(remote + 8));
    h = hash_mix(h, uint64_t(gport) << 32 | uint64_t(rport) << 8 | (v6 ? 1 : 0));
    return hash_mix(h, seed_);
}

long FastPath::lookup(const Segment &s, uint64_t h) const {
    return lookup_key(s.src, s.dst, s.sport, s.dport, s.v6, h);
}

long FastPath::lookup_key(const uint8_t guest[16], const uint8_t remote[16],
                          uint16_t gport, uint16_t rport, bool v6, uint64_t h) const {
    for (size_t i = h & index_mask_;; i = (i + 1) & index_mask_) {
        uint32_t v = index_[i];
        if (v == 0) return -1;
        const Endpoints &ep = flows_[v - 1].endpoints();
        if (hashes_[v - 1] == h && ep.v6 == v6 && ep.guest_port == gport &&
            ep.remote_port == rport && std::memcmp(ep.guest, guest, 16) == 0 &&
            std::memcmp(ep.remote, remote, 16) == 0)
            return long(v - 1);
    }
}

uint32_t FastPath::isn_for(uint64_t h) const {
    if (cfg_.fixed_isn) return *cfg_.fixed_isn;
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t us = uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000;
    return uint32_t(hash_mix(h, isn_seed_)) + uint32_t(us / 4);
}

void FastPath::insert(uint32_t idx, uint64_t h) {
    hashes_[idx] = h;
    size_t i = h & index_mask_;
    while (index_[i] != 0) i = (i + 1) & index_mask_;
    index_[i] = idx + 1;
}

void FastPath::erase(uint32_t idx) {
    size_t i = hashes_[idx] & index_mask_;
    while (index_[i] != idx + 1) i = (i + 1) & index_mask_;
    // Backward-shift deletion: no tombstones, chains stay short.
    for (size_t j = i;;) {
        j = (j + 1) & index_mask_;
        if (index_[j] == 0) break;
        size_t home = hashes_[index_[j] - 1] & index_mask_;
        bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            index_[i] = index_[j];
            i = j;
        }
    }
    index_[i] = 0;
}

void FastPath::wake() {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

void FastPath::after(uint32_t idx) {
    Flow &f = flows_[idx];
    if (f.closed()) {
        erase(idx);
        timers_.cancel(idx);
        ++gen_[idx];
        free_.push_back(idx);
        --live_;
        ++stats_.flows_closed;
        return; // a pending_ entry, if any, finds the slot free or reused
    }
    timers_.set(idx, f.deadline());
    if (f.wants_service() && !queued_[idx]) {
        queued_[idx] = 1;
        pending_[(pending_head_ + pending_count_) % pending_.size()] = idx;
        if (pending_count_++ == 0) wake();
    }
}

void FastPath::service_pending() {
    int64_t t = now();
    // Each slot is in the ring at most once; stop when output fills up.
    for (size_t todo = pending_count_; todo > 0 && out_.control_room(); --todo) {
        uint32_t idx = pending_[pending_head_];
        pending_head_ = (pending_head_ + 1) % pending_.size();
        --pending_count_;
        queued_[idx] = 0;
        if (flows_[idx].closed()) continue;
        FlowContext c = ctx(t);
        flows_[idx].service(c);
        after_flow_call(c, idx);
    }
}

void FastPath::reply_rst(const Segment &s) {
    if (!out_.control_room()) {
        ++stats_.frames_lost;
        return;
    }
    Endpoints ep;
    ep.v6 = s.v6;
    std::memcpy(ep.guest_mac, s.src_mac, 6);
    if (s.v6) {
        gateway_mac6(s.dst, ep.gw_mac);
    } else {
        uint8_t gw[4] = {uint8_t(cfg_.gateway4 >> 24), uint8_t(cfg_.gateway4 >> 16),
                         uint8_t(cfg_.gateway4 >> 8), uint8_t(cfg_.gateway4)};
        gateway_mac4(gw, ep.gw_mac);
    }
    std::memcpy(ep.guest, s.src, 16);
    std::memcpy(ep.remote, s.dst, 16);
    ep.guest_port = s.sport;
    ep.remote_port = s.dport;
    OutFields f;
    f.seq = 0;
    f.ack = s.seq + 1 + uint32_t(s.payload.size());
    f.flags = kRst | kAck;
    out_.append(ep, f, 0, 0);
    ++stats_.resets_to_guest;
}

void FastPath::open_flow(const Segment &s, Route r) {
    if (r == Route::Refuse) {
        reply_rst(s);
        return;
    }
    Admission a = cfg_.admit_flow ? cfg_.admit_flow() : Admission::Accept;
    if (a == Admission::Drop) {
        ++stats_.flows_refused;
        return;
    }
    if (a == Admission::Reset || free_.empty()) {
        ++stats_.flows_refused;
        reply_rst(s);
        return;
    }
    uint32_t idx = free_.back();
    free_.pop_back();

    Flow::Open o{};
    o.syn = &s;
    Endpoints &ep = o.ep;
    ep.v6 = s.v6;
    std::memcpy(ep.guest_mac, s.src_mac, 6);
    std::memcpy(ep.guest, s.src, 16);
    std::memcpy(ep.remote, s.dst, 16);
    ep.guest_port = s.sport;
    ep.remote_port = s.dport;

    sockaddr_in t4{}, b4{};
    sockaddr_in6 t6{}, b6{};
    if (!s.v6) {
        uint8_t gw[4] = {uint8_t(cfg_.gateway4 >> 24), uint8_t(cfg_.gateway4 >> 16),
                         uint8_t(cfg_.gateway4 >> 8), uint8_t(cfg_.gateway4)};
        gateway_mac4(gw, ep.gw_mac);
        t4.sin_family = AF_INET;
        t4.sin_port = htons(s.dport);
        if (r == Route::Loopback)
            t4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else
            std::memcpy(&t4.sin_addr, s.dst + 12, 4);
        o.target = reinterpret_cast<const sockaddr *>(&t4);
        o.target_len = sizeof t4;
        if (cfg_.outbound_addr) {
            b4.sin_family = AF_INET;
            b4.sin_addr.s_addr = htonl(*cfg_.outbound_addr);
            o.bind = reinterpret_cast<const sockaddr *>(&b4);
            o.bind_len = sizeof b4;
        }
    } else {
        gateway_mac6(s.dst, ep.gw_mac);
        t6.sin6_family = AF_INET6;
        t6.sin6_port = htons(s.dport);
        if (r == Route::Loopback)
            t6.sin6_addr = in6addr_loopback;
        else
            std::memcpy(&t6.sin6_addr, s.dst, 16);
        o.target = reinterpret_cast<const sockaddr *>(&t6);
        o.target_len = sizeof t6;
        if (cfg_.outbound_addr6) {
            b6.sin6_family = AF_INET6;
            b6.sin6_addr = *cfg_.outbound_addr6;
            o.bind = reinterpret_cast<const sockaddr *>(&b6);
            o.bind_len = sizeof b6;
        }
    }
    o.ref = flow_ref(idx);
    uint64_t h = hash(s.src, s.dst, s.sport, s.dport, s.v6);
    o.isn = isn_for(h);

    int64_t t = now();
    FlowContext c = ctx(t);
    if (!flows_[idx].open(c, o)) {
        free_.push_back(idx);
        return;
    }
    insert(idx, h);
    ++live_;
    ++stats_.flows_opened;
    after(idx);
}

Verdict FastPath::guest_frame(std::span<const uint8_t> frame) {
    if (!enabled_) return Verdict::NotMine;
    learn_guest_mac(frame);
    Segment s;
    switch (parse_segment(frame, s)) {
    case Parse::NotTcp:
        return Verdict::NotMine;
    case Parse::Malformed:
        ++stats_.malformed;
        return Verdict::Consumed;
    case Parse::Ok:
        break;
    }
    Route r = classify(cfg_, s);
    if (r == Route::NotMine) return Verdict::NotMine;
    uint64_t h = hash(s.src, s.dst, s.sport, s.dport, s.v6);
    long idx = lookup(s, h);
    if (idx >= 0) {
        deliver(uint32_t(idx), s, frame);
        return Verdict::Consumed;
    }
    // Only a bare SYN starts a flow; anything else on an unknown 4-tuple
    // belongs to a connection libslirp carries (or carried).
    if ((s.flags & (kSyn | kAck | kRst | kFin)) != kSyn) return Verdict::NotMine;
    open_flow(s, r);
    return Verdict::Consumed;
}

void FastPath::deliver(uint32_t idx, const Segment &s, std::span<const uint8_t> frame) {
    int64_t t = now();
    if (!replaying_ && flows_[idx].ahead(s) &&
        reorder_.hold(flow_ref(idx), s.seq, frame, t)) {
        ++stats_.reorder_held;
        return;
    }
    FlowContext c = ctx(t);
    flows_[idx].guest_segment(c, s);
    const uint64_t ref = flow_ref(idx);
    after(idx);
    if (replaying_) return;
    // after() may have freed the slot: held frames then wait for expiry.
    while (!reorder_.empty() && live(ref)) {
        std::optional<size_t> slot = reorder_.ready(ref, flows_[idx].rcv_nxt());
        if (!slot) break;
        ++stats_.reorder_filled;
        replay(*slot);
    }
}

void FastPath::replay(size_t slot) {
    std::span<const uint8_t> frame = reorder_.frame(slot);
    const uint64_t ref = reorder_.flow(slot);
    const uint32_t idx = uint32_t(ref);
    Segment s;
    if (live(ref) && parse_segment(frame, s) == Parse::Ok) {
        replaying_ = true;
        deliver(idx, s, frame);
        replaying_ = false;
    }
    reorder_.release(slot);
}

void FastPath::poll_events() {
    epoll_event evs[kMaxEvents];
    int n = ::epoll_wait(ep_.get(), evs, kMaxEvents, 0);
    // Postponed work first: it has waited longest.
    for (int i = 0; i < n; ++i) {
        if (evs[i].data.u64 == kWakeRef) {
            uint64_t v;
            (void)!::read(wake_.get(), &v, sizeof v);
            service_pending();
        }
    }
    for (int i = 0; i < n; ++i) {
        uint64_t ref = evs[i].data.u64;
        if (ref == kWakeRef) continue;
        if (ref & kListenerTag) {
            accept_forward(size_t(uint32_t(ref)));
            continue;
        }
        if (!live(ref)) continue;
        uint32_t idx = uint32_t(ref);
        FlowContext c = ctx(now());
        flows_[idx].socket_events(c, evs[i].events);
        after(idx);
    }
    if (pending_count_ != 0) wake();
}

int64_t FastPath::ms_until_next_timer(int64_t now_ms) const {
    int64_t d = reorder_.next_deadline();
    if (!timers_.empty() && (d < 0 || timers_.top_deadline() < d)) d = timers_.top_deadline();
    return d < 0 ? -1 : std::max<int64_t>(0, d - now_ms);
}

void FastPath::run_timers(int64_t now_ms) {
    // Held frames whose gap did not fill: the flow drops them and asks the
    // guest for the gap with a duplicate ACK, as without the stash.
    while (std::optional<size_t> slot = reorder_.expired(now_ms)) replay(*slot);
    // Bounded: a flow re-arms for a later time, so each runs once per call.
    for (size_t budget = flows_.size() + 1; budget > 0 && !timers_.empty() &&
                                            timers_.top_deadline() <= now_ms;
         --budget) {
        uint32_t idx = timers_.top_id();
        timers_.cancel(idx);
        FlowContext c = ctx(now_ms);
        flows_[idx].timer(c);
        after_flow_call(c, idx);
    }
}

// --- Forwarded ports ----------------------------------------------------

int FastPath::add_forward(const sockaddr *host, socklen_t host_len, uint32_t guest4,
                          uint16_t guest_port) {
    if (host_len > socklen_t(sizeof(sockaddr_storage))) return EINVAL;
    UniqueFd fd(::socket(host->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return errno;
    int one = 1;
    // "::" must not also claim the IPv4 port: that is a forward of its own.
    if (host->sa_family == AF_INET6 &&
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        return errno;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        ::bind(fd.get(), host, host_len) < 0 || ::listen(fd.get(), SOMAXCONN) < 0)
        return errno;
    size_t slot = 0;
    while (slot < fwds_.size() && fwds_[slot].fd) ++slot;
    if (slot == fwds_.size()) fwds_.emplace_back();
    epoll_event ev{};
    ev.events = EPOLLIN; // level-triggered: a bounded accept batch per round
    ev.data.u64 = kListenerTag | slot;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd.get(), &ev) < 0) return errno;
    ForwardListener &l = fwds_[slot];
    l.fd = std::move(fd);
    std::memset(&l.host, 0, sizeof l.host);
    std::memcpy(&l.host, host, host_len);
    l.host_len = host_len;
    l.guest4 = guest4;
    l.guest_port = guest_port;
    return 0;
}

namespace {

bool same_host(const sockaddr_storage &a, const sockaddr *b, socklen_t len) {
    if (a.ss_family != b->sa_family) return false;
    if (b->sa_family == AF_INET && len >= socklen_t(sizeof(sockaddr_in))) {
        auto *x = reinterpret_cast<const sockaddr_in *>(&a);
        auto *y = reinterpret_cast<const sockaddr_in *>(b);
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (b->sa_family == AF_INET6 && len >= socklen_t(sizeof(sockaddr_in6))) {
        auto *x = reinterpret_cast<const sockaddr_in6 *>(&a);
        auto *y = reinterpret_cast<const sockaddr_in6 *>(b);
        return x->sin6_port == y->sin6_port &&
               std::memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
    }
    return false;
}

// Closes a host connection with an RST rather than a FIN: the client must
// not take a refused connection for an empty reply.
void reset_close(UniqueFd &fd) {
    linger l{1, 0};
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    fd.reset();
}

} // namespace

bool FastPath::remove_forward(const sockaddr *host, socklen_t host_len) {
    for (ForwardListener &l : fwds_) {
        if (l.fd && same_host(l.host, host, host_len)) {
            l.fd.reset(); // also leaves the epoll set; connections pending
                          // in its backlog are reset by the kernel
            return true;
        }
    }
    return false;
}

size_t FastPath::forwards() const {
    size_t n = 0;
    for (const ForwardListener &l : fwds_) n += l.fd ? 1 : 0;
    return n;
}

void FastPath::accept_forward(size_t slot) {
    if (slot >= fwds_.size() || !fwds_[slot].fd) return;
    for (int i = 0; i < kAcceptBudget; ++i) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        int s = ::accept4(fwds_[slot].fd.get(), reinterpret_cast<sockaddr *>(&peer), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (s < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return; // EAGAIN; EMFILE and the like: the next round retries
        }
        ++stats_.forward_accepted;
        open_forwarded(fwds_[slot], UniqueFd(s), peer);
    }
}

uint32_t FastPath::forwarded_source(const sockaddr_storage &peer) const {
    uint32_t a = 0;
    if (peer.ss_family == AF_INET) {
        a = ntohl(reinterpret_cast<const sockaddr_in &>(peer).sin_addr.s_addr);
    } else if (peer.ss_family == AF_INET6) {
        // The guest is IPv4: an IPv6 peer (loopback or not) shows as the
        // gateway, an IPv4-mapped one as its IPv4 address.
        const auto &a6 = reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr;
        if (is_mapped_v4(a6.s6_addr)) a = v4_of(a6.s6_addr);
    }
    // Loopback and unspecified as libslirp has it; also anything the
    // guest's answer would not come back to us for (its own network,
    // non-unicast).
    if (!unicast4(a) || (a & cfg_.mask4) == (cfg_.net4 & cfg_.mask4)) a = cfg_.gateway4;
    return a;
}

void FastPath::open_forwarded(const ForwardListener &l, UniqueFd sock,
                              const sockaddr_storage &peer) {
    Endpoints ep;
    ep.v6 = false;
    if (guest_mac_known_) std::memcpy(ep.guest_mac, guest_mac_, 6);
    const uint8_t gw[4] = {uint8_t(cfg_.gateway4 >> 24), uint8_t(cfg_.gateway4 >> 16),
                           uint8_t(cfg_.gateway4 >> 8), uint8_t(cfg_.gateway4)};
    gateway_mac4(gw, ep.gw_mac);
    const uint8_t g4[4] = {uint8_t(l.guest4 >> 24), uint8_t(l.guest4 >> 16),
                           uint8_t(l.guest4 >> 8), uint8_t(l.guest4)};
    map_v4(g4, ep.guest);
    const uint32_t src = forwarded_source(peer);
    const uint8_t r4[4] = {uint8_t(src >> 24), uint8_t(src >> 16), uint8_t(src >> 8),
                           uint8_t(src)};
    map_v4(r4, ep.remote);
    ep.guest_port = l.guest_port;
    ep.remote_port = peer.ss_family == AF_INET6
                         ? ntohs(reinterpret_cast<const sockaddr_in6 &>(peer).sin6_port)
                         : ntohs(reinterpret_cast<const sockaddr_in &>(peer).sin_port);
    const uint64_t h = hash(ep.guest, ep.remote, ep.guest_port, ep.remote_port, false);
    // A full table, or the 4-tuple taken by a flow the guest opened (two
    // host peers can only clash after the gateway translation).
    if (free_.empty() ||
        lookup_key(ep.guest, ep.remote, ep.guest_port, ep.remote_port, false, h) >= 0) {
        if (free_.empty()) ++stats_.flows_refused;
        ++stats_.forward_refused;
        reset_close(sock);
        return;
    }
    uint32_t idx = free_.back();
    free_.pop_back();
    FlowContext c = ctx(now());
    flows_[idx].open_accepted(c, std::move(sock), ep, flow_ref(idx), isn_for(h));
    if (flows_[idx].closed()) {
        ++stats_.forward_refused;
        free_.push_back(idx);
        return;
    }
    insert(idx, h);
    ++live_;
    ++stats_.flows_opened;
    after_flow_call(c, idx);
}

void FastPath::learn_guest_mac(std::span<const uint8_t> frame) {
    if (frame.size() < kEthLen) return;
    const uint8_t *mac = frame.data() + 6;
    if (guest_mac_known_ && std::memcmp(mac, guest_mac_, 6) == 0) return;
    static const uint8_t zero[6] = {};
    if ((mac[0] & 1) != 0 || std::memcmp(mac, zero, 6) == 0) return; // not unicast
    std::memcpy(guest_mac_, mac, 6);
    const bool first = !guest_mac_known_;
    guest_mac_known_ = true;
    if (!first || live_ == 0) return;
    // SYNs of forwarded connections waited for it (rare: once per tap).
    int64_t t = now();
    for (uint32_t idx = 0; idx < flows_.size(); ++idx) {
        if (flows_[idx].state() != Flow::State::HostSynSent) continue;
        FlowContext c = ctx(t);
        flows_[idx].guest_mac_learned(c, guest_mac_);
        after(idx);
    }
}

void FastPath::after_flow_call(const FlowContext &c, uint32_t idx) {
    if (c.want_guest_mac && !flows_[idx].closed()) send_arp(flows_[idx].endpoints().guest);
    after(idx);
}

void FastPath::send_arp(const uint8_t guest[16]) {
    if (!out_.control_room()) {
        ++stats_.frames_lost;
        return;
    }
    // Who has <guest>? Tell <gateway>: from the gateway's MAC, as libslirp
    // asks (its answer also reaches libslirp, which learns it too).
    uint8_t f[42] = {};
    std::memset(f, 0xff, 6);
    const uint8_t gw[4] = {uint8_t(cfg_.gateway4 >> 24), uint8_t(cfg_.gateway4 >> 16),
                           uint8_t(cfg_.gateway4 >> 8), uint8_t(cfg_.gateway4)};
    gateway_mac4(gw, f + 6);
    f[12] = 0x08;
    f[13] = 0x06;
    const uint8_t arp[8] = {0, 1, 0x08, 0x00, 6, 4, 0, 1}; // Ethernet, IPv4, request
    std::memcpy(f + 14, arp, 8);
    std::memcpy(f + 22, f + 6, 6); // sender MAC
    std::memcpy(f + 28, gw, 4);    // sender IP
    std::memcpy(f + 38, guest + 12, 4);
    out_.append_raw(f);
    ++stats_.arp_requests;
}

} // namespace rknp::tcp
