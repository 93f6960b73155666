// The stack thread's loop: poll, host sockets, tap input, timers, tasks,
// the hand-over, then the guest-bound frames of the round.
#include "parent/stack_loop.hpp"

#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "datapath/guest_filter.hpp"
#include "datapath/offload.hpp"
#include "handover/server.hpp"

namespace rknp {

namespace {

// Frames drained from the tap per wake-up before host sockets get a turn.
constexpr int kTapBudget = 256;
// vnet header plus a 64 KiB TSO super-frame plus its Ethernet header.
constexpr size_t kFrameBuffer = 65536 + 1024;
constexpr int kHelloTimeoutMs = 2000;

int64_t now_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The fast path sees the virtual networks as libslirp has them.
tcp::FastPathConfig fast_path_config(const ParentConfig &cfg) {
    tcp::FastPathConfig f;
    f.net4 = cfg.cidr.network;
    f.mask4 = cfg.cidr.netmask();
    f.gateway4 = cfg.cidr.gateway();
    f.dns4 = cfg.cidr.dns();
    f.ipv6 = cfg.ipv6;
    inet_pton(AF_INET6, kIpv6Prefix, &f.prefix6);
    f.prefix6_len = kIpv6PrefixLen;
    inet_pton(AF_INET6, kIpv6Gateway, &f.gateway6);
    inet_pton(AF_INET6, kIpv6Dns, &f.dns6);
    f.disable_host_loopback = cfg.disable_host_loopback;
    f.outbound_addr = cfg.outbound_addr;
    f.outbound_addr6 = cfg.outbound_addr6;
    f.mtu = cfg.mtu;
    return f;
}

} // namespace

StackLoop::StackLoop(const ParentConfig &cfg, UniqueFd listen_fd,
                     pid_t child_pid, int wake_fd,
                     const std::atomic<bool> &stop, Stats &stats,
                     TaskQueue &tasks)
    : cfg_(cfg), listen_(std::move(listen_fd)), child_pid_(child_pid),
      wake_fd_(wake_fd), stop_(stop), stats_(stats), tasks_(tasks),
      tap_(stats), coalescer_(tap_, stats), frame_(kFrameBuffer),
      slirp_(cfg, tap_, coalescer_, polls_) {
    inet_pton(AF_INET6, kIpv6Prefix, &prefix6_);
    if (!cfg.tcp_fast_path) return;
    fast_.emplace(fast_path_config(cfg));
    if (!fast_->enabled()) {
        cfg_.logger.warn("TCP fast path: the kernel has no SO_PEEK_OFF for "
                         "TCP (Linux < 6.9); libslirp carries all TCP");
        fast_.reset();
    }
}

void StackLoop::flush_fast_path() {
    tcp::GuestFrames &out = fast_->frames();
    // Only a forward's SYN can be produced without a guest frame; a tap
    // without vnet headers must not get it (forwards_to_slirp covers that).
    if (tap_.vnet_hdr())
        for (size_t i = 0; i < out.size(); ++i) tap_.write_iov(out.iov(i));
    else if (!out.empty())
        Stats::add(stats_.frames_dropped, out.size());
    out.clear();
}

bool StackLoop::add_forward(const ForwardSpec &f) {
    if (f.udp || !fast_ || (tap_.attached() && !tap_.vnet_hdr())) {
        slirp_.add_forward(f);
        return false;
    }
    sockaddr_storage ss;
    socklen_t len = f.host_sockaddr(ss);
    int err = fast_->add_forward(reinterpret_cast<sockaddr *>(&ss), len, f.guest,
                                 f.guest_port);
    if (err != 0) throw_errno("forward " + f.host_side(), err);
    fast_forwards_.push_back(f);
    return true;
}

void StackLoop::remove_forward(const ForwardSpec &f) {
    for (auto it = fast_forwards_.begin(); it != fast_forwards_.end(); ++it) {
        if (!it->same_host_side(f)) continue;
        sockaddr_storage ss;
        socklen_t len = f.host_sockaddr(ss);
        fast_->remove_forward(reinterpret_cast<sockaddr *>(&ss), len);
        fast_forwards_.erase(it);
        return;
    }
    slirp_.remove_forward(f);
}

void StackLoop::forwards_to_slirp() {
    for (const ForwardSpec &f : fast_forwards_) {
        sockaddr_storage ss;
        socklen_t len = f.host_sockaddr(ss);
        fast_->remove_forward(reinterpret_cast<sockaddr *>(&ss), len);
        try {
            slirp_.add_forward(f);
            cfg_.logger.info("forward " + f.host_side() +
                             " moved to libslirp: the tap has no vnet headers");
        } catch (const Error &e) {
            cfg_.logger.error(std::string(e.what()) + " (moving it to libslirp: "
                              "the tap has no vnet headers)");
        }
    }
    fast_forwards_.clear();
}

void StackLoop::accept_handover() {
    try {
        handover::accept_tap(
            listen_.get(), child_pid_, ::geteuid(), kHelloTimeoutMs,
            [this](handover::Accepted &&a) {
                tap_.attach(std::move(a.tap), a.vnet_hdr);
                if (fast_ && !a.vnet_hdr) forwards_to_slirp();
                stats_.tap_attached.store(true);
                cfg_.logger.info("tap \"" + a.ifname + "\" attached from pid " +
                                 std::to_string(child_pid_) +
                                 (a.vnet_hdr ? " (offloads on)"
                                             : " (offloads off)"));
            });
        // One tap per parent: stop accepting further hand-overs.
        listen_.reset();
    } catch (const Error &e) {
        if (e.code() == RKNP_ERR_PERMISSION)
            Stats::add(stats_.handovers_refused, 1);
        cfg_.logger.error(e.what());
    } catch (const std::exception &e) {
        cfg_.logger.error(std::string("hand-over: ") + e.what());
    }
}

void StackLoop::detach_tap(const std::string &why) {
    cfg_.logger.info("tap detached: " + why);
    coalescer_.flush(); // frames for a dead tap are dropped by TapIo
    tap_.detach();
}

void StackLoop::drain_tap() {
    for (int i = 0; i < kTapBudget && tap_.attached(); ++i) {
        ssize_t n = tap_.read(frame_);
        if (n > 0 && size_t(n) < frame_.size()) {
            input_frame(size_t(n));
            continue;
        }
        if (n > 0) { // filled the buffer: no real frame is that long, cut
            Stats::add(stats_.frames_dropped, 1);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        // Errors of one frame, not of the tap: drop it and go on.
        if (n < 0 && (errno == EINVAL || errno == EFAULT ||
                      errno == EMSGSIZE || errno == ENOBUFS)) {
            Stats::add(stats_.frames_dropped, 1);
            continue;
        }
        // EBADFD/EIO: the child's network namespace is gone.
        detach_tap(n == 0 ? "end of file" : std::strerror(errno));
    }
}

void StackLoop::input_frame(size_t n) {
    std::span<uint8_t> frame =
        prepare_guest_frame({frame_.data(), n}, tap_.vnet_hdr());
    if (frame.empty()) {
        Stats::add(stats_.frames_dropped, 1);
        return;
    }
    if (!libslirp_ethertype(frame) ||
        !guest_source_allowed(frame, cfg_.cidr, prefix6_) ||
        router_message_from_guest(frame)) {
        Stats::add(stats_.frames_dropped, 1);
        Stats::add(stats_.frames_filtered, 1);
        return;
    }
    uint32_t frames = 1;
    if (is_ipv4_fragment(frame)) { // libslirp must never see one
        auto o = reassembler_.add(frame, now_ms());
        Stats::add(stats_.frames_dropped, o.dropped);
        if (o.datagram.empty()) return;
        frame = o.datagram;
        frames = o.fragments;
    }
    if (fast_ && tap_.vnet_hdr() &&
        fast_->guest_frame(frame) == tcp::Verdict::Consumed) {
        Stats::add(stats_.frames_from_tap, frames);
        Stats::add(stats_.bytes_from_tap, frame.size());
        flush_fast_path();
        return;
    }
    strip_urgent(frame); // also in reassembled datagrams
    Stats::add(stats_.frames_from_tap, frames);
    Stats::add(stats_.bytes_from_tap, frame.size());
    slirp_.input(frame);
}

void StackLoop::run() {
    while (!stop_.load()) {
        polls_.clear();
        int wake_idx = polls_.add(wake_fd_, SLIRP_POLL_IN);
        int listen_idx = listen_ ? polls_.add(listen_.get(), SLIRP_POLL_IN) : -1;
        int tap_idx = tap_.attached() ? polls_.add(tap_.fd(), SLIRP_POLL_IN) : -1;
        int fast_idx = fast_ ? polls_.add(fast_->epoll_fd(), SLIRP_POLL_IN) : -1;
        uint32_t timeout = 1000;
        slirp_.fill(timeout, now_ms());
        if (fast_) {
            int64_t next = fast_->ms_until_next_timer(now_ms());
            if (next >= 0 && uint64_t(next) < timeout) timeout = uint32_t(next);
        }

        int n = polls_.wait(int(timeout));
        if (n < 0 && errno != EINTR) {
            cfg_.logger.error(std::string("stack loop: poll: ") +
                              std::strerror(errno));
            return;
        }
        // Host sockets first, with this round's results, before tap input
        // can create or close sockets; serviced every iteration.
        slirp_.poll(n < 0);
        if (fast_ && polls_.revents(fast_idx) != 0) {
            fast_->poll_events();
            flush_fast_path();
        }
        if (polls_.revents(tap_idx) != 0) drain_tap();
        slirp_.run_timers(now_ms());
        if (fast_) {
            fast_->run_timers(now_ms());
            flush_fast_path();
        }
        if (polls_.revents(wake_idx) & POLLIN) {
            uint64_t v;
            (void)!::read(wake_fd_, &v, sizeof v);
            for (auto &task : tasks_.take()) task(this);
        }
        if (listen_ && (polls_.revents(listen_idx) & POLLIN)) accept_handover();
        coalescer_.flush();
    }
}

} // namespace rknp
