#include "stack_loop.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <slirp/libslirp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "error.hpp"
#include "handover.hpp"

namespace rknp {

namespace {

// Frames drained from the tap per wake-up before host sockets get a turn.
constexpr int kTapBudget = 256;
// vnet header plus a 64 KiB TSO super-frame plus its Ethernet header.
constexpr size_t kFrameBuffer = 65536 + 1024;
constexpr int kHelloTimeoutMs = 2000;

int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

in_addr in4(uint32_t host_order) { return in_addr{htonl(host_order)}; }

} // namespace

struct SlirpCallbacks {
    static StackLoop &self(void *opaque) {
        return *static_cast<StackLoop *>(opaque);
    }
    static ssize_t send_packet(const void *buf, size_t len, void *o) {
        return self(o).send_to_tap(buf, len);
    }
    static void guest_error(const char *msg, void *o) {
        self(o).cfg_.logger.warn(std::string("guest error: ") + msg);
    }
    static int64_t clock_get_ns(void *) { return now_ns(); }
    static void *timer_new(SlirpTimerCb cb, void *cb_opaque, void *o) {
        return self(o).timers_.create(cb, cb_opaque);
    }
    static void timer_free(void *t, void *o) { self(o).timers_.destroy(t); }
    static void timer_mod(void *t, int64_t expire_ms, void *o) {
        self(o).timers_.arm(t, expire_ms);
    }
    // The loop rebuilds its poll set every iteration, so registration and
    // notification need no bookkeeping; they must still be non-NULL.
    static void register_poll_fd(int, void *) {}
    static void unregister_poll_fd(int, void *) {}
    static void notify(void *) {}
    static int add_poll(int fd, int events, void *o) {
        return self(o).add_poll(fd, events);
    }
    static int get_revents(int idx, void *o) { return self(o).revents(idx); }
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

} // namespace

StackLoop::StackLoop(const ParentConfig &cfg, UniqueFd listen_fd,
                     pid_t child_pid, int wake_fd,
                     const std::atomic<bool> &stop, Stats &stats,
                     TaskQueue &tasks)
    : cfg_(cfg), listen_(std::move(listen_fd)), child_pid_(child_pid),
      wake_fd_(wake_fd), stop_(stop), stats_(stats), tasks_(tasks),
      coalescer_([this](const VnetHdr &h, std::span<const uint8_t> f,
                        std::span<const uint8_t> rest) {
          write_frame(h, f, rest);
      }),
      frame_(kFrameBuffer) {
    SlirpConfig sc{};
    sc.version = std::min(4, SLIRP_CONFIG_VERSION_MAX);
    sc.restricted = 0;
    sc.in_enabled = true;
    sc.vnetwork = in4(cfg.cidr.network);
    sc.vnetmask = in4(cfg.cidr.netmask());
    sc.vhost = in4(cfg.cidr.gateway());
    sc.vdhcp_start = in4(cfg.cidr.dhcp_start());
    sc.vnameserver = in4(cfg.cidr.dns());
    sc.in6_enabled = cfg.ipv6;
    inet_pton(AF_INET6, kIpv6Prefix, &sc.vprefix_addr6);
    sc.vprefix_len = kIpv6PrefixLen;
    inet_pton(AF_INET6, kIpv6Gateway, &sc.vhost6);
    inet_pton(AF_INET6, kIpv6Dns, &sc.vnameserver6);
    sc.if_mtu = cfg.mtu;
    sc.if_mru = cfg.mtu;
    sc.disable_host_loopback = cfg.disable_host_loopback;
    // libslirp keeps these pointers and binds each outbound socket through
    // them later: members, so they live as long as slirp_.
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

StackLoop::~StackLoop() {
    if (slirp_ != nullptr) slirp_cleanup(slirp_);
}

int StackLoop::add_poll(int fd, int ev) {
    short events = 0;
    if (ev & SLIRP_POLL_IN) events |= POLLIN;
    if (ev & SLIRP_POLL_OUT) events |= POLLOUT;
    if (ev & SLIRP_POLL_PRI) events |= POLLPRI;
    fds_.push_back(pollfd{fd, events, 0});
    return int(fds_.size() - 1);
}

int StackLoop::revents(int idx) const {
    // Sockets libslirp created after the fill have no slot yet.
    if (idx < 0 || size_t(idx) >= fds_.size()) return 0;
    short r = fds_[size_t(idx)].revents;
    int ev = 0;
    if (r & POLLIN) ev |= SLIRP_POLL_IN;
    if (r & POLLOUT) ev |= SLIRP_POLL_OUT;
    if (r & POLLPRI) ev |= SLIRP_POLL_PRI;
    if (r & (POLLERR | POLLNVAL)) ev |= SLIRP_POLL_ERR;
    if (r & POLLHUP) ev |= SLIRP_POLL_HUP;
    return ev;
}

ssize_t StackLoop::send_to_tap(const void *buf, size_t len) {
    if (!tap_) {
        Stats::add(stats_.frames_dropped, 1);
        return ssize_t(len);
    }
    std::span<const uint8_t> frame(static_cast<const uint8_t *>(buf), len);
    if (vnet_hdr_) {
        coalescer_.push(frame); // written by flush() before the loop sleeps
    } else {
        // Straight from libslirp's buffer to the kernel: no copy of our own.
        write_frame({}, frame, {});
    }
    return ssize_t(len);
}

void StackLoop::write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                            std::span<const uint8_t> rest) {
    iovec iov[3] = {{const_cast<VnetHdr *>(&h), kVnetHdrSize},
                    {const_cast<uint8_t *>(frame.data()), frame.size()},
                    {const_cast<uint8_t *>(rest.data()), rest.size()}};
    int first = vnet_hdr_ ? 0 : 1, count = rest.empty() ? 2 : 3;
    ssize_t n = ::writev(tap_.get(), iov + first, count - first);
    // Dropped frames are retransmitted by TCP; errors here only add noise.
    if (n < 0) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    Stats::add(stats_.frames_to_tap, 1);
    Stats::add(stats_.bytes_to_tap, frame.size() + rest.size());
}

void StackLoop::accept_handover() {
    try {
        handover::accept_tap(
            listen_.get(), child_pid_, ::geteuid(), kHelloTimeoutMs,
            [this](handover::Accepted &&a) {
                int flags = ::fcntl(a.tap.get(), F_GETFL);
                if (flags < 0 ||
                    ::fcntl(a.tap.get(), F_SETFL, flags | O_NONBLOCK) < 0)
                    throw_errno("set tap non-blocking");
                tap_ = std::move(a.tap);
                vnet_hdr_ = a.vnet_hdr;
                stats_.tap_attached.store(true);
                cfg_.logger.info("tap \"" + a.ifname + "\" attached from pid " +
                                 std::to_string(child_pid_) +
                                 (vnet_hdr_ ? " (offloads on)"
                                            : " (offloads off)"));
            });
        // One tap per parent: stop accepting further hand-overs.
        listen_.reset();
    } catch (const Error &e) {
        if (e.code() == RKNP_ERR_PERMISSION)
            Stats::add(stats_.handovers_refused, 1);
        cfg_.logger.error(e.what());
    }
}

void StackLoop::detach_tap(const std::string &why) {
    cfg_.logger.info("tap detached: " + why);
    coalescer_.flush(); // frames for a dead tap are dropped by write_frame
    tap_.reset();
}

void StackLoop::drain_tap() {
    for (int i = 0; i < kTapBudget && tap_; ++i) {
        ssize_t n = ::read(tap_.get(), frame_.data(), frame_.size());
        if (n > 0) {
            input_frame(size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        // EBADFD/EIO: the child's network namespace is gone.
        detach_tap(n == 0 ? "end of file" : std::strerror(errno));
    }
}

void StackLoop::input_frame(size_t n) {
    std::span<const uint8_t> frame =
        prepare_guest_frame({frame_.data(), n}, vnet_hdr_);
    if (frame.empty()) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    uint32_t frames = 1;
    if (is_ipv4_fragment(frame)) { // libslirp must never see one
        auto o = reassembler_.add(frame, now_ns() / 1'000'000);
        Stats::add(stats_.frames_dropped, o.dropped);
        if (o.datagram.empty()) return;
        frame = o.datagram;
        frames = o.fragments;
    }
    Stats::add(stats_.frames_from_tap, frames);
    Stats::add(stats_.bytes_from_tap, frame.size());
    slirp_input(slirp_, frame.data(), int(frame.size()));
}

namespace {

struct HostAddr {
    sockaddr_storage ss{};
    socklen_t len = 0;
};

HostAddr host_sockaddr(const ForwardSpec &f) {
    HostAddr h;
    if (f.host_v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&h.ss);
        a->sin6_family = AF_INET6;
        a->sin6_addr = f.host6;
        a->sin6_port = htons(f.host_port);
        h.len = sizeof *a;
    } else {
        auto *a = reinterpret_cast<sockaddr_in *>(&h.ss);
        a->sin_family = AF_INET;
        a->sin_addr = in4(f.host4);
        a->sin_port = htons(f.host_port);
        h.len = sizeof *a;
    }
    return h;
}

int forward_flags(const ForwardSpec &f) {
    // V6ONLY: "::" must not also claim the IPv4 port (a separate forward).
    return (f.udp ? SLIRP_HOSTFWD_UDP : 0) | (f.host_v6 ? SLIRP_HOSTFWD_V6ONLY : 0);
}

} // namespace

void StackLoop::add_forward(const ForwardSpec &f) {
    HostAddr h = host_sockaddr(f);
    sockaddr_in g{};
    g.sin_family = AF_INET;
    g.sin_addr = in4(f.guest);
    g.sin_port = htons(f.guest_port);
    errno = 0;
    if (slirp_add_hostxfwd(slirp_, reinterpret_cast<sockaddr *>(&h.ss), h.len,
                           reinterpret_cast<sockaddr *>(&g), sizeof g,
                           forward_flags(f)) < 0)
        throw_errno("forward " + f.host_side(), errno != 0 ? errno : EADDRINUSE);
}

void StackLoop::remove_forward(const ForwardSpec &f) {
    HostAddr h = host_sockaddr(f);
    if (slirp_remove_hostxfwd(slirp_, reinterpret_cast<sockaddr *>(&h.ss),
                              h.len, forward_flags(f)) < 0)
        throw Error(RKNP_ERR_INTERNAL, "libslirp lost forward " + f.host_side());
}

void StackLoop::run() {
    while (!stop_.load()) {
        fds_.clear();
        add_poll(wake_fd_, SLIRP_POLL_IN);
        int listen_idx = listen_ ? add_poll(listen_.get(), SLIRP_POLL_IN) : -1;
        int tap_idx = tap_ ? add_poll(tap_.get(), SLIRP_POLL_IN) : -1;

        uint32_t timeout = 1000;
        slirp_pollfds_fill(slirp_, &timeout, SlirpCallbacks::add_poll, this);
        int64_t next = timers_.ms_until_next(now_ns() / 1000000);
        if (next >= 0 && uint64_t(next) < timeout) timeout = uint32_t(next);

        int n = ::poll(fds_.data(), fds_.size(), int(timeout));
        if (n < 0 && errno != EINTR) {
            cfg_.logger.error(std::string("stack loop: poll: ") +
                              std::strerror(errno));
            return;
        }
        // Host sockets first, with this round's results, before tap input
        // can create or close sockets; serviced every iteration.
        slirp_pollfds_poll(slirp_, n < 0, SlirpCallbacks::get_revents, this);
        if (tap_idx >= 0 && fds_[size_t(tap_idx)].revents != 0) drain_tap();
        timers_.run_due(now_ns() / 1000000);
        if (fds_[0].revents & POLLIN) {
            uint64_t v;
            (void)!::read(wake_fd_, &v, sizeof v);
            for (auto &task : tasks_.take()) task(this);
        }
        if (listen_idx >= 0 && listen_ &&
            (fds_[size_t(listen_idx)].revents & POLLIN))
            accept_handover();
        coalescer_.flush();
    }
}

} // namespace rknp
