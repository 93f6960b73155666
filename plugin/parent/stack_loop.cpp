// SPDX-License-Identifier: Apache-2.0

// The stack thread's loop: the wait, host sockets, tap input, timers,
// tasks, the hand-over, then the guest-bound frames of the round and the
// guest's answers to them; and which path takes each forward.
#include "parent/stack_loop.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/resolv_conf.hpp"
#include "datapath/offload.hpp"
#include "datapath/icmp/fastpath.hpp"
#include "datapath/tcp/fastpath.hpp"
#include "datapath/udp/fastpath.hpp"
#include "handover/server.hpp"
#include "slirp/adapter.hpp"

namespace rknp {

namespace {

// Frames drained from the tap per wake-up before host sockets get a turn.
constexpr int kTapBudget = 256;
// A flooding guest must not flood the log too.
constexpr int64_t kRefusalLogMs = 10000;

// The fast paths see the virtual networks as libslirp has them.
VirtualNet virtual_net(const ParentConfig &cfg) {
    VirtualNet f;
    f.net4 = cfg.cidr.network;
    f.mask4 = cfg.cidr.netmask();
    f.gateway4 = cfg.cidr.gateway();
    f.dns4 = cfg.cidr.dns();
    f.ipv6 = cfg.ipv6;
    inet_pton(AF_INET6, kIpv6Prefix, &f.prefix6);
    f.prefix6_len = kIpv6PrefixLen;
    inet_pton(AF_INET6, kIpv6Gateway, &f.gateway6);
    inet_pton(AF_INET6, kIpv6Dns, &f.dns6);
    if (cfg.ipv6_host) { // pasta's model for IPv6: the host's network
        f.host_network6 = true;
        f.prefix6 = cfg.ipv6_host->prefix.network;
        f.prefix6_len = cfg.ipv6_host->prefix.len;
        f.gateway6 = cfg.ipv6_host->gateway;
        // libslirp's IPv6 is off: the caller's IPv6 DNS forwarder, if any.
        f.dns6 = cfg.ipv6_host->dns.value_or(in6addr_any);
        f.guest6 = *cfg.ipv6_address;
        f.map_guest6 = cfg.ipv6_host->map_guest;
        f.map_loopback6 = cfg.ipv6_host->map_loopback;
    }
    f.disable_host_loopback = cfg.disable_host_loopback;
    f.host_network = cfg.host_network;
    f.guest4 = cfg.cidr.guest();
    f.dns = !cfg.disable_dns;
    if (cfg.host_network && f.dns) f.resolver4 = host_nameserver4();
    if (cfg.ipv6_host && cfg.ipv6_host->dns) f.resolver6 = host_nameserver6();
    f.map_guest4 = cfg.map_guest_addr;
    f.map_loopback4 = cfg.map_host_loopback;
    f.outbound_addr = cfg.outbound_addr;
    f.outbound_addr6 = cfg.outbound_addr6;
    return f;
}

// The TCP fast path shares max_flows with libslirp (its table has room
// for all of them).
tcp::FastPathConfig fast_path_config(const ParentConfig &cfg, const VirtualNet &net) {
    tcp::FastPathConfig f;
    static_cast<VirtualNet &>(f) = net;
    f.max_flows = cfg.max_flows;
    f.mtu = cfg.mtu;
    switch (cfg.tcp_peek_mode) {
    case TcpPeekMode::automatic: f.peek_mode = tcp::PeekMode::Automatic; break;
    case TcpPeekMode::offset: f.peek_mode = tcp::PeekMode::Offset; break;
    case TcpPeekMode::discard: f.peek_mode = tcp::PeekMode::Discard; break;
    }
    return f;
}

// The flows of forwarded ports, apart from the guest's max_flows (strangers
// on a published port must not use up what the guest may open): a quarter
// of it, so that with max_flows lowered for RLIMIT_NOFILE (three quarters
// of it) the forwards' TCP connections still leave fds free.
size_t forwarded_flows(uint32_t max_flows) { return std::max<size_t>(max_flows / 4, 1); }

// The loop's epoll set.
UniqueFd make_event_set() {
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep) throw_errno("stack loop: epoll_create1");
    return ep;
}

bool has_ref(std::span<const epoll_event> evs, uint64_t ref) {
    return std::any_of(evs.begin(), evs.end(),
                       [ref](const epoll_event &e) { return EventSource::ref_of(e) == ref; });
}

} // namespace

StackLoop::StackLoop(const ParentConfig &cfg, handover::Server handover,
                     int wake_fd, const std::atomic<bool> &stop, Stats &stats,
                     TaskQueue &tasks)
    : cfg_(cfg), handover_(std::move(handover)), wake_fd_(wake_fd), stop_(stop), stats_(stats), tasks_(tasks),
      tap_(stats), coalescer_(tap_, stats), frame_(kTapFrameMax),
      events_(make_event_set()), loop_events_(events_.get(), EventOwner::Loop),
      net_(virtual_net(cfg)), limits_(cfg.max_flows, cfg.max_new_flows_per_sec, stats,
              uint64_t(monotonic_ms())),
      paths_(make_paths()), ingress_(cfg.cidr, stats, limits_, path_list()) {
    if (cfg_.ipv6_host)
        ingress_.set_ipv6_host(NdpNetwork{cfg_.ipv6_host->prefix, *cfg_.ipv6_address,
                                          cfg_.ipv6_host->gateway},
                               &tap_);
    if (cfg_.disable_ipv4) ingress_.set_ipv4_off();
    if (cfg_.host_network) {
        ingress_.set_neighbour_proxy(&tap_);
        if (!cfg_.disable_dns && !net_.resolver4)
            cfg_.logger.warn("no IPv4 nameserver in /etc/resolv.conf: DNS to " +
                             format_ipv4(cfg_.cidr.dns()) + " is refused");
    }
    if (cfg_.ipv6_host && cfg_.ipv6_host->dns && !net_.resolver6) {
        cfg_.logger.warn("no nameserver in /etc/resolv.conf: DNS to " +
                         format_ipv6(*cfg_.ipv6_host->dns) + " is refused");
    }
    if (loop_events_.add(wake_fd, EPOLLIN, kWakeRef) < 0) throw_errno("stack loop: epoll_ctl");
    // The sets paths keep of their own (libslirp's) are waited on too.
    for (size_t i = 0; i < paths_.size(); ++i)
        if (const int fd = paths_[i]->own_set_fd();
            fd >= 0 && loop_events_.add(fd, EPOLLIN, kPathSetRef + i) < 0)
            throw_errno("stack loop: epoll_ctl");
}

std::vector<std::unique_ptr<Path>> StackLoop::make_paths() {
    // Ingress order: TCP and UDP (no checksum needed), then echo, then
    // libslirp, which takes every frame and forward the others leave.
    std::vector<std::unique_ptr<Path>> paths;
    for (auto make : {&StackLoop::make_tcp_path, &StackLoop::make_udp_path,
                      &StackLoop::make_echo_path, &StackLoop::make_slirp_path})
        if (std::unique_ptr<Path> p = (this->*make)()) paths.push_back(std::move(p));
    return paths;
}

std::vector<Path *> StackLoop::path_list() const {
    std::vector<Path *> list;
    for (const std::unique_ptr<Path> &p : paths_) list.push_back(p.get());
    return list;
}

// The makers run before ingress_ exists: their admission callbacks are
// called only once frames or connections come, after the constructor.

std::unique_ptr<Path> StackLoop::make_tcp_path() {
    if (!cfg_.tcp_fast_path) return nullptr;
    tcp::FastPathConfig fc = fast_path_config(cfg_, net_);
    // Connections accepted on forwarded ports have bounds of their own.
    fc.admit_flow = [this] { return admit_flow(false); };
    fc.forward_flows = forwarded_flows(cfg_.max_flows);
    fc.forward_flows_each = std::max<size_t>(fc.forward_flows / 2, 1);
    fc.forward_new_per_sec = cfg_.max_new_flows_per_sec;
    fc.clock = [this] { return now_ms_; };
    fc.shared_epoll_fd = events_.get();
    fc.guest = &tap_; // one way out, as for every path
    // Throws RKNP_ERR_UNSUPPORTED for tcp_peek_mode offset on a kernel
    // without SO_PEEK_OFF for TCP: the start fails with that message.
    auto fast = std::make_unique<tcp::FastPath>(std::move(fc));
    const bool discard = fast->peek_mode() == tcp::PeekMode::Discard;
    stats_.tcp_peek_mode.store(discard ? RKNP_TCP_PEEK_DISCARD : RKNP_TCP_PEEK_OFFSET,
                               std::memory_order_relaxed);
    cfg_.logger.info(std::string("TCP fast path: peek mode ") +
                     tcp::peek_mode_name(fast->peek_mode()) + " (" +
                     fast->peek_mode_reason() + ")");
    return fast;
}

std::unique_ptr<Path> StackLoop::make_udp_path() {
    if (!cfg_.udp_fast_path) return nullptr;
    udp::FastPathConfig uc;
    static_cast<VirtualNet &>(uc) = net_;
    uc.max_flows = cfg_.max_flows;
    uc.mtu = cfg_.mtu;
    // For a guest datagram on a new 4-tuple; never for a forward's
    // clients, which have their own pool.
    uc.admit_flow = [this] { return admit_flow(true); };
    uc.forward_clients = forwarded_flows(cfg_.max_flows);
    uc.forward_clients_each = std::max<size_t>(uc.forward_clients / 2, 1);
    uc.forward_new_per_sec = cfg_.max_new_flows_per_sec;
    uc.clock = [this] { return now_ms_; };
    uc.shared_epoll_fd = events_.get();
    return std::make_unique<udp::FastPath>(std::move(uc), tap_);
}

std::unique_ptr<Path> StackLoop::make_echo_path() {
    icmp::EchoConfig ec = icmp::echo_config_from(net_, cfg_.mtu);
    ec.max_entries = std::clamp<size_t>(cfg_.max_flows / 2, 1, 1024);
    ec.admit_entry = [this] { return admit_flow(true) == Admission::Accept; };
    ec.clock = [this] { return now_ms_; };
    ec.shared_epoll_fd = events_.get();
    auto echo = std::make_unique<icmp::FastPath>(std::move(ec), tap_);
    cfg_.logger.info(echo->description());
    if (!echo->enabled()) return nullptr;
    return echo;
}

std::unique_ptr<Path> StackLoop::make_slirp_path() {
    return std::make_unique<SlirpAdapter>(cfg_, tap_, coalescer_, polls_,
                                          [this](bool lingering) { return admit_flow(lingering); });
}

StackLoop::RoundEvents StackLoop::take_events(int timeout_ms, int &n) {
    n = ::epoll_wait(events_.get(), waited_.data(), kMaxEvents, timeout_ms);
    const std::span<const epoll_event> waited(waited_.data(), n > 0 ? size_t(n) : 0);
    std::array<size_t, kEventOwners> count{}, at{};
    for (const epoll_event &e : waited) ++count[size_t(EventSource::owner_of(e))];
    for (size_t o = 1; o < kEventOwners; ++o) at[o] = at[o - 1] + count[o - 1];
    RoundEvents r;
    for (size_t o = 0; o < kEventOwners; ++o)
        r.by_owner[o] = {round_events_.data() + at[o], count[o]};
    for (const epoll_event &e : waited) round_events_[at[size_t(EventSource::owner_of(e))]++] = e;
    return r;
}

void StackLoop::watch_tap() {
    if (loop_events_.add(tap_.fd(), EPOLLIN, kTapRef) == 0) return;
    // A tap nobody would read is refused, not kept.
    const int err = errno;
    tap_.detach();
    throw_errno("stack loop: epoll_ctl (tap)", err);
}

void StackLoop::unwatch_tap() {
    if (tap_.attached()) (void)loop_events_.remove(tap_.fd());
}

void StackLoop::publish_stats() {
    const size_t flows = ingress_.path_flows();
    stats_.host_sockets.store(flows, std::memory_order_relaxed);
    uint64_t refused = stats_.flows_refused.load(std::memory_order_relaxed);
    uint64_t limited = stats_.flows_rate_limited.load(std::memory_order_relaxed);
    if (refused + limited != logged_refused_ + logged_rate_limited_) {
        const int64_t now = now_ms_;
        if (logged_refused_ + logged_rate_limited_ == 0 ||
            now - refusal_logged_ms_ >= kRefusalLogMs) {
            cfg_.logger.warn(
                "guest flows refused: " + std::to_string(refused - logged_refused_) +
                " at max_flows " + std::to_string(limits_.max_flows()) + ", " +
                std::to_string(limited - logged_rate_limited_) +
                " over max_new_flows_per_sec " +
                std::to_string(cfg_.max_new_flows_per_sec) + " (totals " +
                std::to_string(refused) + ", " + std::to_string(limited) +
                "; host sockets now " +
                std::to_string(flows) + ")");
            logged_refused_ = refused;
            logged_rate_limited_ = limited;
            refusal_logged_ms_ = now;
        }
    }
    for (const std::unique_ptr<Path> &p : paths_) p->publish(stats_);
}

void StackLoop::adopt_tap(handover::Accepted &&a) {
    unwatch_tap();
    tap_.attach(std::move(a.tap), a.vnet_hdr);
    watch_tap();
    if (!a.vnet_hdr) move_forwards_off_vnet_paths();
    for (const std::unique_ptr<Path> &p : paths_) {
        const std::string line = p->tap_attached(tap_);
        if (!line.empty()) cfg_.logger.info(line);
    }
    stats_.tap_attached.store(true);
    cfg_.logger.info("tap \"" + a.ifname + "\" attached" +
                     (a.vnet_hdr ? " (offloads on)" : " (offloads off)"));
}

void StackLoop::handover_refused(const std::string &why) {
    Stats::add(stats_.handovers_refused, 1);
    uint64_t left_out = 0;
    if (!handover_log_.admit(now_ms_, left_out)) {
        if (!handover_log_muted_)
            cfg_.logger.error("hand-over refusals: more than " +
                              std::to_string(kHandoverLogBurst) + " in " +
                              std::to_string(kHandoverLogPeriodMs / 1000) +
                              " s; further ones are counted "
                              "(rknp_stats.handovers_refused) and logged at "
                              "most that often");
        handover_log_muted_ = true;
        return;
    }
    handover_log_muted_ = false;
    cfg_.logger.error(left_out == 0 ? why
                                    : why + " (" + std::to_string(left_out) +
                                          " more refused hand-overs not logged)");
}

StackLoop::HandoverPolls StackLoop::poll_handover() {
    HandoverPolls h;
    if (!handover_.listening()) return h;
    auto add = [this](int fd) {
        own_polls_.push_back(pollfd{fd, POLLIN, 0});
        return int(own_polls_.size() - 1);
    };
    h.listen_idx = add(handover_.listen_fd());
    h.pending = handover_.pending();
    for (size_t i = 0; i < h.pending; ++i) {
        int idx = add(handover_.pending_fd(i));
        if (i == 0) h.first_pending_idx = idx;
    }
    return h;
}

// Never blocks: a peer that connects and says nothing only waits out its
// own deadline while the loop, and the real child, go on.
void StackLoop::serve_handover(const HandoverPolls &h) {
    if (!handover_.listening()) return;
    // Serving one changes the pending list: note the fds first.
    int ready[handover::Server::kMaxPending];
    size_t n_ready = 0;
    for (size_t i = 0; i < h.pending; ++i)
        if (own_polls_[size_t(h.first_pending_idx) + i].revents != 0)
            ready[n_ready++] = handover_.pending_fd(i);
    auto adopt = [this](handover::Accepted &&a) { adopt_tap(std::move(a)); };
    for (size_t i = 0; i < n_ready && handover_.listening(); ++i) {
        try {
            handover_.receive(ready[i], adopt);
        } catch (const std::exception &e) {
            handover_refused(e.what());
        }
    }
    if (!handover_.listening()) return;
    for (const std::string &why : handover_.expire(now_ms_))
        handover_refused(why);
    if (own_polls_[size_t(h.listen_idx)].revents & POLLIN) {
        try {
            handover_.accept_one(now_ms_);
        } catch (const Error &e) {
            // RKNP_ERR_SYSTEM is our own trouble (fds, memory), not a
            // refused peer.
            if (e.code() != RKNP_ERR_SYSTEM) handover_refused(e.what());
            else cfg_.logger.error(e.what());
        } catch (const std::exception &e) {
            cfg_.logger.error(std::string("hand-over: ") + e.what());
        }
    }
}

void StackLoop::detach_tap(const std::string &why) {
    cfg_.logger.info("tap detached: " + why);
    coalescer_.flush(); // frames for a dead tap are dropped by TapIo
    unwatch_tap();
    tap_.detach();
    // Path flows would stay open (idle ones for ever) with nobody behind
    // them: reset their host sides now.
    for (const std::unique_ptr<Path> &p : paths_) p->tap_detached();
}

int StackLoop::drain_tap(int budget) {
    // What the paths queued (the UDP fast path's guest datagrams) goes out
    // once the reads stop, and the next reads' first one goes out at once.
    struct EndOfInput {
        const std::vector<std::unique_ptr<Path>> &paths;
        ~EndOfInput() {
            for (const std::unique_ptr<Path> &p : paths) p->end_of_input();
        }
    } end_of_input{paths_};
    int i = 0;
    for (; i < budget && tap_.attached(); ++i) {
        size_t len = 0;
        switch (tap_.read_frame(frame_, len)) {
        case TapRead::Frame:
            ingress_.input({frame_.data(), len}, tap_.vnet_hdr(), now_ms_);
            break;
        case TapRead::Truncated: // counted by TapIo; no real frame is that long
        case TapRead::DropOne:   // one bad frame, the tap is fine
        case TapRead::Retry:
            break;
        case TapRead::Empty:
            return i;
        case TapRead::Gone:
            detach_tap(errno == 0 ? "end of file" : std::strerror(errno));
            return i;
        }
    }
    return i;
}

void StackLoop::read_answers() {
    // The guest's kernel answered a frame of this round while it was
    // written (TapIo::answer_due): its answer is read now, not after a wait
    // that would return at once to say it is there. One frame at a time,
    // as long as each one read draws another answer (a handshake's next
    // step); up to the tap's budget, so host sockets still get a turn.
    for (int i = 0; i < kTapBudget && tap_.attached() && tap_.answer_due(); ++i) {
        if (drain_tap(1) == 0) return;
        coalescer_.flush();
    }
}

void StackLoop::run() {
    while (!stop_.load()) {
        own_polls_.clear();
        HandoverPolls handover_polls = poll_handover();
        uint32_t timeout = 1000;
        // The timeouts count from now; after the wait the round reads the
        // clock once more.
        now_ms_ = monotonic_ms();
        auto sooner = [&timeout](int64_t next) {
            if (next >= 0 && uint64_t(next) < timeout) timeout = uint32_t(next);
        };
        for (const std::unique_ptr<Path> &p : paths_) {
            p->before_wait(timeout);
            sooner(p->ms_until_next_timer(now_ms_));
        }
        sooner(handover_.ms_until_deadline(now_ms_));

        // Host sockets first, with this round's results, before tap input
        // can create or close sockets; serviced every iteration. With no
        // hand-over to watch, the set is all there is: one epoll_wait, no
        // poll(2) around it.
        int n;
        RoundEvents events;
        if (own_polls_.empty()) {
            events = take_events(int(timeout), n);
            now_ms_ = monotonic_ms();
        } else {
            own_polls_.push_back(pollfd{events_.get(), POLLIN, 0});
            n = ::poll(own_polls_.data(), own_polls_.size(), int(timeout));
            now_ms_ = monotonic_ms();
            if (n > 0 && own_polls_.back().revents != 0) {
                int taken;
                events = take_events(0, taken);
            }
        }
        if (n < 0 && errno != EINTR) {
            cfg_.logger.error(std::string("stack loop: wait: ") + std::strerror(errno));
            return;
        }
        // Sockets in sets of their own (libslirp's), when the set is ready.
        for (size_t i = 0; i < paths_.size(); ++i)
            paths_[i]->after_wait(has_ref(events.of(EventOwner::Loop), kPathSetRef + i), n < 0);
        for (const std::unique_ptr<Path> &p : paths_) {
            const std::optional<EventOwner> owner = p->event_owner();
            if (!owner) continue;
            const std::span<const epoll_event> evs = events.of(*owner);
            bool &before = ready_before_[size_t(*owner)];
            if (!evs.empty()) p->handle_events(evs, before);
            before = !evs.empty();
        }
        // In a burst the tap is read dry (up to the budget); otherwise the
        // wake-up is most likely for one frame (a request, an ACK): that
        // one is read and the next wait says whether more came, which
        // saves a read that would only return EAGAIN (TapIo::burst).
        const bool tap_ready = has_ref(events.of(EventOwner::Loop), kTapRef);
        if (tap_.burst(tap_ready)) drain_tap(kTapBudget);
        else if (tap_ready) drain_tap(1);
        for (const std::unique_ptr<Path> &p : paths_) p->run_timers(now_ms_);
        if (has_ref(events.of(EventOwner::Loop), kWakeRef)) {
            uint64_t v;
            (void)!::read(wake_fd_, &v, sizeof v);
            for (auto &task : tasks_.take()) task(this);
        }
        serve_handover(handover_polls);
        coalescer_.flush();
        read_answers();
        publish_stats();
    }
}

// Forwards: which path takes each one, their removal, and their move off
// the fast paths when the tap turns out to have no vnet headers.

bool StackLoop::tap_carries(const Path &p) const {
    return !(p.traits().needs_vnet_hdr && tap_.attached() && !tap_.vnet_hdr());
}

Path *StackLoop::path_for(const ForwardSpec &f) const {
    for (const std::unique_ptr<Path> &p : paths_)
        if (p->carries(f) && tap_carries(*p)) return p.get();
    return nullptr;
}

void StackLoop::tell_paths_before(const Path *taker, const ForwardSpec &f, bool taken) {
    for (const std::unique_ptr<Path> &p : paths_) {
        if (p.get() == taker) return;
        p->forward_behind(f, taken);
    }
}

const char *StackLoop::add_forward(const ForwardSpec &f) {
    Path *p = path_for(f);
    // libslirp, last, carries every forward.
    if (p == nullptr) throw Error(RKNP_ERR_INTERNAL, "no path for forward " + f.host_side());
    p->add_forward(f);
    tell_paths_before(p, f, true);
    forwards_.push_back({f, p});
    return p->name();
}

void StackLoop::remove_forward(const ForwardSpec &f) {
    for (auto it = forwards_.begin(); it != forwards_.end(); ++it) {
        if (!it->spec.same_host_side(f)) continue;
        const HeldForward held = *it;
        held.path->remove_forward(held.spec); // libslirp's may throw: kept
        forwards_.erase(it);
        tell_paths_before(held.path, held.spec, false);
        return;
    }
    throw Error(RKNP_ERR_INTERNAL, "lost forward " + f.host_side());
}

void StackLoop::move_forwards_off_vnet_paths() {
    for (auto it = forwards_.begin(); it != forwards_.end();) {
        if (tap_carries(*it->path)) {
            ++it;
            continue;
        }
        const ForwardSpec f = it->spec;
        it->path->remove_forward(f);
        tell_paths_before(it->path, f, false);
        Path *next = path_for(f);
        try {
            if (next == nullptr) throw Error(RKNP_ERR_INTERNAL, "no path for forward " + f.host_side());
            next->add_forward(f);
            // Should a tap with vnet headers follow, the paths before
            // (the UDP fast path) must still leave its guest end to it.
            tell_paths_before(next, f, true);
            it->path = next;
            ++it;
            cfg_.logger.info("forward " + f.host_side() + " moved to " + next->name() +
                             ": the tap has no vnet headers");
        } catch (const Error &e) {
            cfg_.logger.error(std::string(e.what()) + " (moving it to " +
                              (next ? next->name() : "another path") +
                              ": the tap has no vnet headers)");
            it = forwards_.erase(it);
        }
    }
}

} // namespace rknp
