// SPDX-License-Identifier: Apache-2.0

// The fast path's core: guest frames to flows, epoll dispatch, deadlines,
// postponed work, and the frames it answers with itself (RST, ARP).
#include "datapath/tcp/fastpath.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"

namespace rknp::tcp {

namespace {

// The MTU of the host's "lo" in this thread's network namespace, 0 if the
// kernel does not say.
uint32_t read_loopback_mtu() {
    UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    if (!s || ::ioctl(s.get(), SIOCGIFMTU, &ifr) < 0 || ifr.ifr_mtu <= 0) return 0;
    return uint32_t(ifr.ifr_mtu);
}

} // namespace

FastPath::FastPath(FastPathConfig cfg)
    : FastPath(std::move(cfg), random_flow_seeds()) {}

FastPath::FastPath(FastPathConfig cfg, std::array<uint64_t, 2> seeds)
    : cfg_(std::move(cfg)), peek_choice_(choose_peek_mode(cfg_.peek_mode, cfg_.peek_off_probe)),
      peek_(peek_choice_.mode), out_(std::max<size_t>(cfg_.batch_data_frames, 1),
                                 std::max<size_t>(cfg_.batch_control_frames, 4)),
      table_(std::max<size_t>(cfg_.max_flows, 1) + cfg_.forward_flows, seeds[0]),
      timers_(table_.slots()), isn_seed_(seeds[1]),
      events_(cfg_.shared_epoll_fd, EventOwner::Tcp) {
    const size_t n = table_.slots();
    wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wake_) throw_errno("fast path: eventfd");
    if (events_.add(wake_.get(), EPOLLIN, kWakeRef) < 0) throw_errno("fast path: epoll_ctl");
    queued_.assign(n, 0);
    pending_.assign(n, 0);
    fwd_of_.assign(n, kGuestFlow);
    loopback_mtu_ = read_loopback_mtu();
}

int64_t FastPath::now() const { return cfg_.clock ? cfg_.clock() : monotonic_ms(); }

uint32_t FastPath::isn_for(uint64_t h) const {
    if (cfg_.fixed_isn) return *cfg_.fixed_isn;
    return uint32_t(hash_mix(h, isn_seed_)) + uint32_t(uint64_t(monotonic_us()) / 4);
}

void FastPath::wake() {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

void FastPath::settle(const FlowContext &c, uint32_t idx) {
    Flow &f = table_[idx];
    if (f.closed()) {
        table_.release(idx);
        timers_.cancel(idx);
        if (fwd_of_[idx] != kGuestFlow) {
            if (fwd_of_[idx] >= 0) --fwds_[size_t(fwd_of_[idx])].live;
            --forwarded_open_;
            fwd_of_[idx] = kGuestFlow;
        }
        ++stats_.flows_closed;
        return; // a pending_ entry, if any, finds the slot free or reused
    }
    if (c.want_guest_mac) send_arp(f.endpoints().guest, f.endpoints().v6);
    timers_.set(idx, f.deadline());
    if (f.wants_service() && !queued_[idx]) {
        queued_[idx] = 1;
        pending_[(pending_head_ + pending_count_) % pending_.size()] = idx;
        if (pending_count_++ == 0) wake();
    }
}

void FastPath::service_pending() {
    int64_t t = now();
    auto turn = [&] {
        uint32_t idx = pending_[pending_head_];
        pending_head_ = (pending_head_ + 1) % pending_.size();
        --pending_count_;
        queued_[idx] = 0;
        if (table_[idx].closed()) return;
        FlowContext c = ctx(t, pending_count_ != 0 ? kShareFrames : SIZE_MAX);
        table_[idx].service(c);
        settle(c, idx);
    };
    // Round-robin: each slot is in the ring at most once, served in order
    // and back at the tail if it wants more (kShareFrames). One pass gives
    // every flow waiting now a turn, the batch written out to the guest
    // whenever it fills (without a sink, as in tests, the pass stops
    // there); then further turns while the batch has room, each adding a
    // frame or settling a flow's want.
    for (size_t pass = pending_count_; pass > 0 && pending_count_ != 0; --pass) {
        if (!out_.control_room() || out_.data_room() == 0) {
            if (cfg_.guest == nullptr) return;
            flush_to_guest();
        }
        turn();
    }
    for (size_t more = out_.data_room(); more > 0 && pending_count_ != 0 && out_.control_room();
         --more)
        turn();
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
        gateway_mac4(ipv4_bytes(cfg_.gateway4).data(), ep.gw_mac);
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
    if (r == Route::Refuse || r == Route::Unreachable) {
        reply_rst(s);
        return;
    }
    Admission a = cfg_.admit_flow ? cfg_.admit_flow() : Admission::Accept;
    if (a == Admission::Drop) {
        ++stats_.flows_refused;
        return;
    }
    // The guest's flows keep to max_flows whatever the admission said: the
    // slots beyond are the forwards'.
    std::optional<uint32_t> slot = a == Admission::Reset || flows() >= cfg_.max_flows
                                       ? std::nullopt
                                       : table_.reserve();
    if (!slot) {
        ++stats_.flows_refused;
        reply_rst(s);
        return;
    }
    const uint32_t idx = *slot;

    Flow::Open o{};
    o.syn = &s;
    o.ep = guest_flow_endpoints(cfg_, s.v6, s.src_mac, s.src, s.dst, s.sport, s.dport);
    const HostAddrs addrs = host_addrs(cfg_, r, s.v6, s.dst, s.dport);
    o.target = reinterpret_cast<const sockaddr *>(&addrs.target);
    o.target_len = addrs.target_len;
    o.bind = addrs.bind_len != 0 ? reinterpret_cast<const sockaddr *>(&addrs.bind) : nullptr;
    o.bind_len = addrs.bind_len;
    o.ref = table_.ref(idx);
    o.loopback = r == Route::Loopback;
    uint64_t h = table_.hash(s.src, s.dst, s.sport, s.dport, s.v6);
    o.isn = isn_for(h);

    int64_t t = now();
    FlowContext c = ctx(t);
    if (!table_[idx].open(c, o)) {
        table_.unreserve(idx);
        return;
    }
    table_.insert(idx, h);
    ++stats_.flows_opened;
    settle(c, idx);
}

Verdict FastPath::guest_frame(std::span<const uint8_t> frame) {
    const FlushOnReturn flush{*this};
    learn_guest_mac(frame);
    Segment s;
    switch (parse_segment(frame, s)) {
    case Parse::NotMine:
        return Verdict::NotMine;
    case Parse::Malformed:
        ++stats_.malformed;
        return Verdict::Consumed;
    case Parse::Ok:
        break;
    }
    Route r = classify(cfg_, s.v6, s.src, s.dst, s.dport);
    if (r == Route::NotMine) return Verdict::NotMine;
    uint64_t h = table_.hash(s.src, s.dst, s.sport, s.dport, s.v6);
    if (std::optional<uint32_t> idx = table_.find(s.src, s.dst, s.sport, s.dport, s.v6, h)) {
        deliver(*idx, s, frame);
        return Verdict::Consumed;
    }
    // Only a bare SYN starts a flow; anything else on an unknown 4-tuple
    // belongs to a connection libslirp carries (or carried).
    if ((s.flags & (kSyn | kAck | kRst | kFin)) != kSyn) return Verdict::NotMine;
    open_flow(s, r);
    return Verdict::Consumed;
}

Verdict FastPath::routed_frame(std::span<const uint8_t> frame) {
    const FlushOnReturn flush{*this};
    Segment s;
    if (parse_segment(frame, s) != Parse::Ok) return Verdict::NotMine;
    // A flow the guest opened has its own address at this end: only a
    // forwarded connection's can match a routed source.
    uint64_t h = table_.hash(s.src, s.dst, s.sport, s.dport, s.v6);
    std::optional<uint32_t> idx = table_.find(s.src, s.dst, s.sport, s.dport, s.v6, h);
    if (!idx || fwd_of_[*idx] == kGuestFlow) return Verdict::NotMine;
    deliver(*idx, s, frame);
    return Verdict::Consumed;
}

void FastPath::deliver(uint32_t idx, const Segment &s, std::span<const uint8_t> frame) {
    int64_t t = now();
    const uint64_t ref = table_.ref(idx);
    if (!replaying_ && table_[idx].ahead(s) && reorder_.hold(ref, s.seq, frame, t)) {
        ++stats_.reorder_held;
        return;
    }
    // A guest ACK lets its flow send on at once, a share's worth if other
    // flows wait (their turns come before its next): the ACKs, up to 256 a
    // round, keep the batch going between two of the loop's waits.
    FlowContext c = ctx(t, pending_count_ != 0 ? kShareFrames : SIZE_MAX);
    table_[idx].guest_segment(c, s);
    settle(c, idx);
    if (replaying_) return;
    // settle() may have freed the slot: held frames then wait for expiry.
    while (!reorder_.empty() && table_.names_open_flow(ref)) {
        std::optional<size_t> slot = reorder_.ready(ref, table_[idx].rcv_nxt());
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
    if (table_.names_open_flow(ref) && parse_segment(frame, s) == Parse::Ok) {
        replaying_ = true;
        deliver(idx, s, frame);
        replaying_ = false;
    }
    reorder_.release(slot);
}

void FastPath::poll_events() {
    epoll_event evs[kMaxEvents];
    handle_events(events_.ready(evs), true);
}

void FastPath::handle_events(std::span<const epoll_event> evs, bool) {
    const FlushOnReturn flush{*this};
    const size_t n = evs.size();
    // Postponed work first: it has waited longest.
    for (size_t i = 0; i < n; ++i) {
        if (EventSource::ref_of(evs[i]) == kWakeRef) {
            uint64_t v;
            (void)!::read(wake_.get(), &v, sizeof v);
            service_pending();
        }
    }
    // The flows with host events this round share the batch with each
    // other and with those already waiting (turn_frames).
    size_t flow_events = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t ref = EventSource::ref_of(evs[i]);
        if (ref != kWakeRef && !(ref & kListenerTag)) ++flow_events;
    }
    for (size_t i = 0; i < n; ++i) {
        const uint64_t ref = EventSource::ref_of(evs[i]);
        if (ref == kWakeRef) continue;
        if (ref & kListenerTag) {
            accept_forward(size_t(uint32_t(ref)));
            continue;
        }
        if (!table_.names_open_flow(ref)) continue;
        uint32_t idx = uint32_t(ref);
        FlowContext c = ctx(now(), turn_frames(flow_events > 1 || pending_count_ != 0));
        table_[idx].socket_events(c, evs[i].events);
        settle(c, idx);
    }
    // Their turns, while the batch has room.
    if (pending_count_ != 0 && out_.data_room() != 0) service_pending();
    if (pending_count_ != 0) wake();
}

int64_t FastPath::ms_until_next_timer(int64_t now_ms) const {
    int64_t d = reorder_.next_deadline();
    if (!timers_.empty() && (d < 0 || timers_.top_deadline() < d)) d = timers_.top_deadline();
    if (listeners_resume_at_ >= 0 && (d < 0 || listeners_resume_at_ < d))
        d = listeners_resume_at_;
    return d < 0 ? -1 : std::max<int64_t>(0, d - now_ms);
}

void FastPath::run_timers(int64_t now_ms) {
    const FlushOnReturn flush{*this};
    if (listeners_resume_at_ >= 0 && now_ms >= listeners_resume_at_) resume_listeners();
    // Held frames whose gap did not fill: the flow drops them and asks the
    // guest for the gap with a duplicate ACK, as without the stash.
    while (std::optional<size_t> slot = reorder_.expired(now_ms)) replay(*slot);
    // Bounded: a flow re-arms for a later time, so each runs once per call.
    for (size_t budget = table_.slots() + 1; budget > 0 && !timers_.empty() &&
                                            timers_.top_deadline() <= now_ms;
         --budget) {
        uint32_t idx = timers_.top_id();
        timers_.cancel(idx);
        FlowContext c = ctx(now_ms);
        table_[idx].timer(c);
        settle(c, idx);
    }
}

void FastPath::tap_detached() {
    const FlushOnReturn flush{*this};
    const int64_t t = now();
    for (uint32_t idx = 0; idx < table_.slots() && table_.open_flows() != 0; ++idx) {
        if (table_[idx].closed()) continue;
        FlowContext c = ctx(t);
        table_[idx].guest_gone(c);
        settle(c, idx);
    }
    out_.clear();
    guest_mac_known_ = false;
}

void FastPath::learn_guest_mac(std::span<const uint8_t> frame) {
    const bool first = !guest_mac_known_;
    if (!rknp::learn_guest_mac(frame, guest_mac_, guest_mac_known_) || !first ||
        table_.open_flows() == 0)
        return;
    // SYNs of forwarded connections waited for it (rare: once per tap).
    int64_t t = now();
    for (uint32_t idx = 0; idx < table_.slots(); ++idx) {
        if (table_[idx].state() != Flow::State::HostSynSent) continue;
        FlowContext c = ctx(t);
        table_[idx].guest_mac_learned(c, guest_mac_);
        settle(c, idx);
    }
}

void FastPath::send_arp(const uint8_t guest[16], bool v6) {
    if (!out_.control_room()) {
        ++stats_.frames_lost;
        return;
    }
    // An address routed behind the guest answers no ARP: the guest does,
    // for its own, with the MAC that address is reached through; so for
    // an IPv6 end, which shares the guest's one MAC.
    uint32_t ask = v6 ? cfg_.guest4 : ipv4_of(guest);
    if ((ask & cfg_.mask4) != (cfg_.net4 & cfg_.mask4)) ask = cfg_.guest4;
    uint8_t f[kArpRequestLen];
    gateway_arp_request(cfg_.gateway4, ipv4_bytes(ask).data(), f);
    out_.append_raw(f);
    ++stats_.arp_requests;
}

void FastPath::flush_to_guest() {
    if (cfg_.guest == nullptr) return;
    for (size_t i = 0; i < out_.size(); ++i)
        cfg_.guest->write_frame(out_.vnet(i), out_.headers(i), out_.payload(i));
    if (out_.answer_due()) cfg_.guest->expect_answer();
    out_.clear();
}

void FastPath::publish(Stats &s) const {
    // Every flow the path carries, forwarded connections too (they are
    // not the guest's, and not in host_sockets).
    s.tcp_fast_flows.store(table_.open_flows(), std::memory_order_relaxed);
    s.tcp_fast_retransmits.store(stats_.retransmits + stats_.fast_retransmits,
                                 std::memory_order_relaxed);
    s.tcp_forward_accepted.store(stats_.forward_accepted, std::memory_order_relaxed);
    s.tcp_forward_refused.store(stats_.forward_refused, std::memory_order_relaxed);
    s.tcp_forward_full.store(stats_.forward_full, std::memory_order_relaxed);
    s.tcp_forward_rate_limited.store(stats_.forward_rate_limited, std::memory_order_relaxed);
    s.tcp_forward_flows.store(forward_flows(), std::memory_order_relaxed);
}

} // namespace rknp::tcp
