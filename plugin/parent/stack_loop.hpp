// SPDX-License-Identifier: Apache-2.0

// The stack thread's event loop: one epoll set holds the wake-up
// eventfd, the tap, the TCP and UDP fast paths' and the ICMP echo
// path's host sockets (EventSource) and libslirp's own epoll set
// (PollSet); a round waits in epoll_wait on it, or, while the hand-over
// socket is open, in one poll over the hand-over's fds and the set. Guest
// frames go through
// GuestIngress (filter, reassembly, TCP | UDP fast path | echo path |
// libslirp), libslirp's replies -> coalescer -> tap, the fast paths'
// straight to the tap. Everything in here runs on the one stack thread; other threads only
// touch the atomic Stats, the TaskQueue and the wake-up eventfd.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/config.hpp"
#include "common/fd.hpp"
#include "common/log_limiter.hpp"
#include "common/stats.hpp"
#include "datapath/coalescer.hpp"
#include "datapath/event_source.hpp"
#include "datapath/icmp/echo_path.hpp"
#include "datapath/tap_io.hpp"
#include "datapath/tcp/fastpath.hpp"
#include "datapath/udp/fastpath.hpp"
#include "handover/server.hpp"
#include "parent/flow_limits.hpp"
#include "parent/guest_ingress.hpp"
#include "slirp/poll_set.hpp"
#include "slirp/adapter.hpp"
#include "parent/task_queue.hpp"

namespace rknp {

class StackLoop {
public:
    // Creates the libslirp instance; throws Error.
    StackLoop(const ParentConfig &cfg, handover::Server handover, int wake_fd,
              const std::atomic<bool> &stop, Stats &stats, TaskQueue &tasks);

    // Runs until stop is set (and wake_fd signalled).
    void run();

    // Forwards, for tasks run on the stack thread; throw Error. TCP
    // forwards go to the TCP fast path when it is on, UDP ones to the UDP
    // fast path when it is on (and the tap, once attached, has vnet
    // headers), the rest to libslirp. add_forward says whether a fast
    // path took it.
    bool add_forward(const ForwardSpec &f);
    void remove_forward(const ForwardSpec &f);

private:
    // The hand-over's fds in this round's poll set, and serving them.
    struct HandoverPolls {
        int listen_idx = -1;
        int first_pending_idx = -1;
        size_t pending = 0;
    };
    HandoverPolls poll_handover();
    void serve_handover(const HandoverPolls &h);
    void handover_refused(const std::string &why);
    void adopt_tap(handover::Accepted &&a);
    // Reads and handles up to budget frames, fewer if the tap runs dry.
    void drain_tap(int budget);
    void detach_tap(const std::string &why);
    // With cfg.tcp_fast_path, else nullptr; logs the peek mode and sets
    // Stats::tcp_peek_mode. Throws Error(RKNP_ERR_UNSUPPORTED) for
    // tcp_peek_mode offset on a kernel without SO_PEEK_OFF for TCP.
    std::unique_ptr<tcp::FastPath> make_fast_path();
    // With cfg.udp_fast_path, else nullptr.
    std::unique_ptr<udp::FastPath> make_udp_fast_path();
    // Logs which path carries ICMP echo; nullptr when ping sockets are
    // refused (libslirp's then).
    std::unique_ptr<icmp::EchoPath> make_echo_path();
    // The paths that are on, in ingress order.
    std::vector<Path *> make_paths();
    // This round's events of the shared set, split by owner (a span of
    // round_events_ each, in the order epoll_wait gave them).
    struct RoundEvents {
        std::array<std::span<const epoll_event>, kEventOwners> by_owner;
        std::span<const epoll_event> of(EventOwner o) const { return by_owner[size_t(o)]; }
    };
    // epoll_wait on the shared set for up to timeout_ms; n: its result.
    RoundEvents take_events(int timeout_ms, int &n);
    // The tap in the shared set (level-triggered: a round may read one
    // frame and leave the rest to the next wait), from attach to detach;
    // watch_tap detaches the tap and throws Error if epoll_ctl fails.
    void watch_tap();
    void unwatch_tap();
    // Gauges and the fast path's counters into Stats, once a round; a
    // warning when flows were refused (at most every kRefusalLogMs).
    void publish_stats();
    // A tap without vnet headers cannot carry the fast paths' frames:
    // their forwards move to libslirp.
    void forwards_to_slirp();
    void remove_fast_forward(const ForwardSpec &f);

    const ParentConfig &cfg_;
    handover::Server handover_;
    int wake_fd_;
    const std::atomic<bool> &stop_;
    Stats &stats_;
    TaskQueue &tasks_;
    TapIo tap_;
    Coalescer coalescer_;
    PollSet polls_; // libslirp's host sockets
    // The hand-over's fds and the loop's set, while the hand-over is open:
    // what the round waits on with poll(2).
    std::vector<pollfd> own_polls_;
    std::vector<uint8_t> frame_;
    bool tap_ready_before_ = false; // the tap was readable last round
    // Whether each event owner (a path) had events last round: a burst.
    std::array<bool, kEventOwners> ready_before_{};
    // The shared epoll set; before the paths, which register with it.
    UniqueFd events_;
    EventSource loop_events_; // the loop's own share: the wake-up, the tap
    static constexpr uint64_t kWakeRef = 0, kTapRef = 1, kSlirpRef = 2;
    static constexpr int kMaxEvents = 256;
    std::array<epoll_event, kMaxEvents> waited_{}, round_events_{};
    // The round's clock: read before the wait (for its timeout) and once
    // after it; everything the round does, the fast paths included, reads
    // this one.
    int64_t now_ms_ = monotonic_ms();
    // The networks as the paths see them, made once (in pasta's model it
    // reads the host's resolv.conf).
    const VirtualNet net_;
    FlowLimits limits_;  // before slirp_ and fast_, which point at it
    uint64_t logged_refused_ = 0, logged_rate_limited_ = 0;
    int64_t refusal_logged_ms_ = 0;
    // Refused hand-over peers: anyone who can reach the socket decides how
    // often, so at most kHandoverLogBurst lines a kHandoverLogPeriodMs
    // (every one counted in Stats::handovers_refused), and one notice when
    // the lines stop.
    static constexpr uint32_t kHandoverLogBurst = 10;
    static constexpr int64_t kHandoverLogPeriodMs = 60000;
    LogLimiter handover_log_{kHandoverLogBurst, kHandoverLogPeriodMs};
    bool handover_log_muted_ = false;
    // Only with cfg.tcp_fast_path; used once the tap has vnet headers.
    std::unique_ptr<tcp::FastPath> fast_;
    // The forwards fast_ (TCP) and udp_fast_ (UDP) listen for.
    std::vector<ForwardSpec> fast_forwards_;
    // Only with cfg.udp_fast_path; used once the tap has vnet headers.
    std::unique_ptr<udp::FastPath> udp_fast_;
    std::unique_ptr<icmp::EchoPath> echo_; // writes to tap_
    // The paths above that are on, in ingress order: what the loop and
    // GuestIngress loop over.
    std::vector<Path *> paths_;
    SlirpAdapter slirp_; // points at the above
    GuestIngress ingress_; // last: destroyed first, points at all of them
};

} // namespace rknp
