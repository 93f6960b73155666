// SPDX-License-Identifier: Apache-2.0

// The stack thread's event loop over one list of paths (datapath/path.hpp,
// in ingress order: TCP fast path, UDP fast path, ICMP echo path, libslirp
// last as the catch-all). One epoll set holds the wake-up eventfd, the tap,
// the paths' host sockets (EventSource) and the sets of paths that keep
// their own (libslirp's PollSet); a round waits in epoll_wait on it, or,
// while the hand-over socket is open, in one poll over the hand-over's fds
// and the set. Guest frames go through GuestIngress along the list; every
// path writes its frames to the tap (libslirp's through the coalescer).
// Forwards, timers, the tap's coming and going and the counters reach the
// paths through the same list. Everything in here runs on the one stack
// thread; other threads only touch the atomic Stats, the TaskQueue and the
// wake-up eventfd.
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
#include "datapath/flows/route.hpp"
#include "datapath/forward_spec.hpp"
#include "datapath/path.hpp"
#include "datapath/tap_io.hpp"
#include "handover/server.hpp"
#include "parent/flow_limits.hpp"
#include "parent/guest_ingress.hpp"
#include "parent/task_queue.hpp"
#include "slirp/poll_set.hpp"

namespace rknp {

class StackLoop {
public:
    // Creates the libslirp instance; throws Error.
    StackLoop(const ParentConfig &cfg, handover::Server handover, int wake_fd,
              const std::atomic<bool> &stop, Stats &stats, TaskQueue &tasks);

    // Runs until stop is set (and wake_fd signalled).
    void run();

    // Forwards, for tasks run on the stack thread; throw Error. The first
    // path of the list that carries the forward takes it (TCP and UDP
    // forwards their fast paths, when on and the tap, once attached, has
    // vnet headers; the rest libslirp). add_forward returns that path's
    // name.
    const char *add_forward(const ForwardSpec &f);
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
    // Reads up to budget frames, stopping at EAGAIN; how many it read.
    int drain_tap(int budget);
    // The answers the round's frames drew from the guest, before the wait.
    void read_answers();
    void detach_tap(const std::string &why);
    // The paths that are on, in ingress order: one line and one maker
    // each.
    std::vector<std::unique_ptr<Path>> make_paths();
    // With cfg.tcp_fast_path, else nullptr; logs the peek mode and sets
    // Stats::tcp_peek_mode. Throws Error(RKNP_ERR_UNSUPPORTED) for
    // tcp_peek_mode offset on a kernel without SO_PEEK_OFF for TCP.
    std::unique_ptr<Path> make_tcp_path();
    // With cfg.udp_fast_path, else nullptr.
    std::unique_ptr<Path> make_udp_path();
    // Logs which path carries ICMP echo; nullptr when ping sockets are
    // refused (libslirp's then).
    std::unique_ptr<Path> make_echo_path();
    // libslirp, the catch-all; throws Error.
    std::unique_ptr<Path> make_slirp_path();
    // A path's admission of a new flow (GuestIngress::admit_flow).
    Admission admit_flow(bool lingering) { return ingress_.admit_flow(now_ms_, lingering); }
    std::vector<Path *> path_list() const;
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
    // Gauges and the paths' counters into Stats, once a round; a
    // warning when flows were refused (at most every kRefusalLogMs).
    void publish_stats();
    // The path that takes f now: the first that carries it and that the
    // tap (if attached) can carry.
    Path *path_for(const ForwardSpec &f) const;
    bool tap_carries(const Path &p) const;
    // Tells the paths before p that p took (or gave up) f.
    void tell_paths_before(const Path *p, const ForwardSpec &f, bool taken);
    // A tap without vnet headers cannot carry the fast paths' frames:
    // their forwards move to the next path that carries them (libslirp).
    void move_forwards_off_vnet_paths();

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
    // Whether each event owner (a path) had events last round: a burst.
    std::array<bool, kEventOwners> ready_before_{};
    // The shared epoll set; before the paths, which register with it.
    UniqueFd events_;
    EventSource loop_events_; // the loop's own share: the wake-up, the tap
    // kPathSetRef + i: the set of its own of paths_[i] (own_set_fd).
    static constexpr uint64_t kWakeRef = 0, kTapRef = 1, kPathSetRef = 2;
    static constexpr int kMaxEvents = 256;
    std::array<epoll_event, kMaxEvents> waited_{}, round_events_{};
    // The round's clock: read before the wait (for its timeout) and once
    // after it; everything the round does, the fast paths included, reads
    // this one.
    int64_t now_ms_ = monotonic_ms();
    // The networks as the paths see them, made once (in pasta's model it
    // reads the host's resolv.conf).
    const VirtualNet net_;
    FlowLimits limits_;  // before the paths, which point at it
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
    // The paths that are on, in ingress order, libslirp last: what the
    // loop and GuestIngress loop over. They write to tap_.
    std::vector<std::unique_ptr<Path>> paths_;
    // Every forward and the path that took it.
    struct HeldForward {
        ForwardSpec spec;
        Path *path;
    };
    std::vector<HeldForward> forwards_;
    GuestIngress ingress_; // last: destroyed first, points at all of them
};

} // namespace rknp
