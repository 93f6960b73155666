// SPDX-License-Identifier: Apache-2.0

// The libslirp configuration, callbacks, guest frames and host forwards.
#include "slirp/adapter.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <slirp/libslirp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <utility>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/no_throw.hpp"

namespace rknp {

namespace {

in_addr in4(uint32_t host_order) { return in_addr{htonl(host_order)}; }

// libslirp's IPv6 gateway (vhost6), as bytes.
std::array<uint8_t, 16> ipv6_gateway_bytes() {
    std::array<uint8_t, 16> a{};
    inet_pton(AF_INET6, kIpv6Gateway, a.data());
    return a;
}

} // namespace

// No exception may unwind through libslirp's C frames: every callback is
// noexcept and returns through or_on_throw with what libslirp copes with.
struct SlirpCallbacks {
    static SlirpAdapter &self(void *opaque) {
        return *static_cast<SlirpAdapter *>(opaque);
    }
    static ssize_t send_packet(const void *buf, size_t len, void *o) noexcept {
        if (self(o).drain_.discard_frame()) return ssize_t(len);
        // A frame that could not be built is lost, as on a wire.
        if (!or_on_throw(false, [&] {
                self(o).to_guest({static_cast<const uint8_t *>(buf), len});
                return true;
            }))
            self(o).tap_.drop_frame();
        return ssize_t(len);
    }
    static void guest_error(const char *msg, void *o) noexcept {
        or_on_throw(0, [&] {
            auto &a = self(o);
            uint64_t suppressed = 0;
            if (!a.guest_error_log_.admit(monotonic_ms(), suppressed))
                return 0;
            std::string m = std::string("guest error: ") + msg;
            if (suppressed != 0)
                m += " (" + std::to_string(suppressed) +
                     " more guest errors not logged)";
            a.cfg_.logger.warn(m);
            return 0;
        });
    }
    static int64_t clock_get_ns(void *o) noexcept {
        return monotonic_ns() + self(o).drain_.clock_offset_ns();
    }
    static void *timer_new(SlirpTimerCb cb, void *cb_opaque, void *o) noexcept {
        // nullptr: libslirp checks, as for its own allocations.
        return or_on_throw<void *>(
            nullptr, [&] { return self(o).timers_.create(cb, cb_opaque); });
    }
    static void timer_free(void *t, void *o) noexcept {
        or_on_throw(0, [&] {
            self(o).timers_.destroy(t);
            return 0;
        });
    }
    static void timer_mod(void *t, int64_t expire_ms, void *o) noexcept {
        or_on_throw(0, [&] {
            self(o).timers_.arm(t, expire_ms);
            return 0;
        });
    }
    // The poll set keeps what libslirp asks for between rounds: a socket
    // registered or about to close is news to it (a number it may have
    // watched for a closed socket). Every socket libslirp creates or
    // accepts (forwards: accept(2) without SOCK_CLOEXEC in 4.7.0) is
    // registered here: rootlesskit's children must not inherit it.
    // Registrations also tell GuestSockets which host sockets guest flows
    // hold (see guest_sockets.hpp for when libslirp makes them).
    static void register_poll_fd(int fd, void *o) noexcept {
        int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC))
            (void)::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        self(o).polls_.forget(fd);
        self(o).gate_.sockets().on_register(fd);
        or_on_throw(0, [&] {
            if (self(o).reaper_.on_register(fd)) self(o).polls_.watch_hangup(fd);
            return 0;
        });
    }
    static void unregister_poll_fd(int fd, void *o) noexcept {
        self(o).polls_.forget(fd);
        self(o).gate_.sockets().on_unregister(fd);
        self(o).reaper_.on_unregister(fd);
    }
    static void notify(void *) noexcept {}
    static int add_poll(int fd, int events, void *o) noexcept {
        // -1: not polled this round; revents(-1) is 0.
        return or_on_throw(-1, [&] { return self(o).polls_.add(fd, events); });
    }
    static int get_revents(int idx, void *o) noexcept {
        return or_on_throw(0, [&] { return self(o).polls_.slirp_revents(idx); });
    }
};

namespace {

const SlirpCb kCallbacks = {
    .send_packet = SlirpCallbacks::send_packet,
    .guest_error = SlirpCallbacks::guest_error,
    .clock_get_ns = SlirpCallbacks::clock_get_ns,
    .timer_new = SlirpCallbacks::timer_new,
    .timer_free = SlirpCallbacks::timer_free,
    .timer_mod = SlirpCallbacks::timer_mod,
    .register_poll_fd = SlirpCallbacks::register_poll_fd,
    .unregister_poll_fd = SlirpCallbacks::unregister_poll_fd,
    .notify = SlirpCallbacks::notify,
    .init_completed = nullptr,
    .timer_new_opaque = nullptr,
};

int forward_flags(const ForwardSpec &f) {
    // V6ONLY: "::" must not also claim the IPv4 port (a separate forward).
    return (f.udp ? SLIRP_HOSTFWD_UDP : 0) | (f.host_v6 ? SLIRP_HOSTFWD_V6ONLY : 0);
}

} // namespace

namespace {

// Whether a "major.minor.patch" version is older than a.b.c.
bool version_older(std::string_view version, unsigned a, unsigned b,
                   unsigned c) {
    unsigned v[3] = {0, 0, 0};
    size_t part = 0;
    for (char ch : version) {
        if (ch == '.' && ++part == 3) break;
        if (ch >= '0' && ch <= '9') v[part] = v[part] * 10 + unsigned(ch - '0');
        else if (ch != '.') break;
    }
    return v[0] != a ? v[0] < a : v[1] != b ? v[1] < b : v[2] < c;
}

} // namespace

bool libslirp_has_reass_loop(std::string_view version) {
    return version_older(version, 4, 8, 0);
}

std::string libslirp_bug_warning(std::string_view version) {
    auto older = [&](unsigned a, unsigned b, unsigned c) {
        return version_older(version, a, b, c);
    };
    std::string w;
    if (older(4, 8, 0))
        w += " its TCP reassembly queue can loop (fixed in 4.8.0; rknp "
             "holds back guest segments that could reach it);";
    if (older(4, 9, 2))
        w += " urgent data can over-read its buffer (fixed in 4.9.2; rknp "
             "clears URG before libslirp sees it);";
    if (w.empty()) return w;
    w.pop_back();
    return "libslirp " + std::string(version) +
           " has guest-reachable bugs:" + w;
}

SlirpAdapter::SlirpAdapter(const ParentConfig &cfg, TapIo &tap,
                           Coalescer &coalescer, PollSet &polls,
                           SlirpFlowGate::AdmitFlow admit)
    : cfg_(cfg), tap_(tap), coalescer_(coalescer), polls_(polls),
      gate_(cfg.cidr, cfg.max_flows, std::move(admit)), routed_(cfg.cidr.guest()),
      reaper_(cfg.cidr.gateway(), ipv6_gateway_bytes().data()) {
    if (libslirp_has_reass_loop(slirp_version_string()))
        wrap_guard_ = std::make_unique<ReassWrapGuard>();
    SlirpConfig sc{};
    sc.version = std::min(4, SLIRP_CONFIG_VERSION_MAX);
    sc.restricted = 0;
    sc.in_enabled = true;
    sc.vnetwork = in4(cfg.cidr.network);
    sc.vnetmask = in4(cfg.cidr.netmask());
    sc.vhost = in4(cfg.cidr.gateway());
    sc.vdhcp_start = in4(cfg.cidr.dhcp_start());
    sc.vnameserver = in4(cfg.cidr.dns());
    // pasta's IPv6 model: libslirp must not advertise its prefix (the guest
    // would take a second address) nor see the guest's IPv6 flows: the
    // fast paths and the NDP answers (datapath/ndp_proxy) serve it all.
    sc.in6_enabled = cfg.ipv6 && !cfg.ipv6_host;
    inet_pton(AF_INET6, kIpv6Prefix, &sc.vprefix_addr6);
    sc.vprefix_len = kIpv6PrefixLen;
    inet_pton(AF_INET6, kIpv6Gateway, &sc.vhost6);
    inet_pton(AF_INET6, kIpv6Dns, &sc.vnameserver6);
    sc.if_mtu = cfg.mtu;
    sc.if_mru = cfg.mtu;
    sc.disable_host_loopback = cfg.disable_host_loopback;
    if (cfg.outbound_addr) {
        out4_.sin_family = AF_INET;
        out4_.sin_addr = in4(*cfg.outbound_addr);
        sc.outbound_addr = &out4_;
    }
    if (cfg.outbound_addr6) {
        out6_.sin6_family = AF_INET6;
        out6_.sin6_addr = *cfg.outbound_addr6;
        sc.outbound_addr6 = &out6_;
    }
    sc.disable_dns = cfg.disable_dns;
    // The child configures its address itself: no DHCP server for a guest
    // to poke at unless asked for (SlirpConfig version 4).
    sc.disable_dhcp = !cfg.enable_dhcp;
    slirp_ = slirp_new(&sc, &kCallbacks, this);
    if (slirp_ == nullptr)
        throw Error(RKNP_ERR_INTERNAL, "libslirp refused the configuration");
}

SlirpAdapter::~SlirpAdapter() {
    if (slirp_ == nullptr) return;
    drain_.run(slirp_);
    slirp_cleanup(slirp_);
}

void SlirpAdapter::to_guest(std::span<const uint8_t> frame) {
    if (!routed_.empty()) {
        switch (routed_.from_slirp(frame, arp_)) {
        case RoutedEnds::Arp::Held:
            return; // answered in before_wait: libslirp is mid-call now
        case RoutedEnds::Arp::Rewritten:
            frame = arp_;
            break;
        case RoutedEnds::Arp::Pass:
            break;
        }
    }
    if (wrap_guard_) wrap_guard_->from_slirp(frame);
    reaper_.from_slirp(frame);
    if (tap_.vnet_hdr())
        coalescer_.push(frame); // written by flush() before the loop sleeps
    else
        tap_.write_frame({}, frame, {}); // straight from libslirp's buffer
}

Verdict SlirpAdapter::guest_frame(std::span<const uint8_t> frame) {
    routed_.learn(frame); // for the ARP answers of routed forwards yet to come
    // A frame that would cost libslirp a host socket beyond the limits
    // never reaches it (counted by FlowLimits, not as a dropped frame).
    if (!gate_.begin(frame)) return Verdict::Refused;
    input(frame);
    gate_.end();
    return Verdict::Consumed;
}

Verdict SlirpAdapter::routed_frame(std::span<const uint8_t> frame) {
    if (!routed_.admits(frame)) return Verdict::NotMine;
    routed_.learn(frame);
    // It makes no socket (admits: no SYN, a forward's UDP socket takes
    // it), so no admission; sockets registered meanwhile still count.
    gate_.sockets().begin_input(FlowKey{});
    input(frame);
    gate_.end();
    return Verdict::Consumed;
}

void SlirpAdapter::input(std::span<const uint8_t> frame) {
    if (wrap_guard_ && !wrap_guard_->allow(frame)) {
        tap_.drop_frame();
        return;
    }
    reaper_.from_guest(frame);
    slirp_input(slirp_, frame.data(), int(frame.size()));
    reap(); // the ACK of libslirp's FIN may have made one due
}

void SlirpAdapter::reap() {
    std::span<const uint8_t> rst;
    bool guest_bound = false;
    while (reaper_.next_due(rst, guest_bound)) {
        if (guest_bound) {
            to_guest(rst);
            continue;
        }
        gate_.sockets().begin_input(FlowKey{}); // a reset makes no socket
        slirp_input(slirp_, rst.data(), int(rst.size()));
        gate_.end();
    }
}

void SlirpAdapter::before_wait(uint32_t &timeout_ms) {
    // ARP answers for routed ends, which libslirp asked for in a call it
    // was still in; the frames it queued leave at its next poll, which
    // must come before they expire (a second): at once.
    bool answered = false;
    while (routed_.next_answer(arp_)) {
        slirp_input(slirp_, arp_.data(), int(arp_.size()));
        answered = true;
    }
    polls_.begin();
    slirp_pollfds_fill(slirp_, &timeout_ms, SlirpCallbacks::add_poll, this);
    if (answered) timeout_ms = 0;
    polls_.end();
}

void SlirpAdapter::after_wait(bool ready, bool wait_failed) {
    // Which of its sockets are ready, when its set said some are.
    const bool error = wait_failed || (ready && polls_.collect() < 0);
    // Before libslirp accepts: a client reconnecting from the port of a
    // connection whose hangup is in this round must find it gone.
    if (ready && !error)
        for (const PollSet::Hangup &h : polls_.hangups()) reaper_.host_gone(h.fd, h.error);
    reap();
    slirp_pollfds_poll(slirp_, error, SlirpCallbacks::get_revents, this);
}

void SlirpAdapter::add_forward(const ForwardSpec &f) {
    // libslirp's forwards take the client's family to the guest: an IPv6
    // guest end is the fast paths' alone.
    if (f.guest_v6)
        throw Error(RKNP_ERR_UNSUPPORTED,
                    "forward " + f.host_side() + " to " + f.guest_string() +
                    ": an IPv6 guest address needs the " +
                    (f.udp ? "UDP" : "TCP") +
                    " fast path (with offloads), not libslirp");
    ForwardSpec::HostAddress h = f.host_address();
    sockaddr_in g{};
    g.sin_family = AF_INET;
    g.sin_addr = in4(f.guest);
    g.sin_port = htons(f.guest_port);
    errno = 0;
    if (slirp_add_hostxfwd(slirp_, reinterpret_cast<sockaddr *>(&h.ss), h.len,
                           reinterpret_cast<sockaddr *>(&g), sizeof g,
                           forward_flags(f)) < 0)
        throw_errno("forward " + f.host_side(), errno != 0 ? errno : EADDRINUSE);
    routed_.add(f);
    reaper_.add_forward(f);
}

void SlirpAdapter::remove_forward(const ForwardSpec &f) {
    ForwardSpec::HostAddress h = f.host_address();
    if (slirp_remove_hostxfwd(slirp_, reinterpret_cast<sockaddr *>(&h.ss),
                              h.len, forward_flags(f)) < 0)
        throw Error(RKNP_ERR_INTERNAL, "libslirp lost forward " + f.host_side());
    routed_.remove(f);
    reaper_.remove_forward(f);
}

} // namespace rknp
