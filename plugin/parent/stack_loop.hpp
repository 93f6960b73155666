// The stack thread's event loop: one poll over the wake-up eventfd, the
// hand-over socket, the tap, the TCP fast path's epoll fd and libslirp's
// host sockets; guest frames go tap -> offload/reassembly -> (TCP fast path
// | libslirp), libslirp's replies -> coalescer -> tap, the fast path's
// straight to the tap. Everything in here runs on the one stack thread; other threads only
// touch the atomic Stats, the TaskQueue and the wake-up eventfd.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/fd.hpp"
#include "common/stats.hpp"
#include "datapath/coalescer.hpp"
#include "datapath/reassembly.hpp"
#include "datapath/tap_io.hpp"
#include "datapath/tcp_fastpath.hpp"
#include "parent/poll_set.hpp"
#include "parent/slirp_adapter.hpp"
#include "parent/task_queue.hpp"

namespace rknp {

class StackLoop {
public:
    // Creates the libslirp instance; throws Error.
    StackLoop(const ParentConfig &cfg, UniqueFd listen_fd, pid_t child_pid,
              int wake_fd, const std::atomic<bool> &stop, Stats &stats,
              TaskQueue &tasks);

    // Runs until stop is set (and wake_fd signalled).
    void run();

    // Forwards, for tasks run on the stack thread; throw Error. TCP
    // forwards go to the fast path when it is on (and the tap, once
    // attached, has vnet headers), the rest to libslirp. add_forward says
    // whether the fast path took it.
    bool add_forward(const ForwardSpec &f);
    void remove_forward(const ForwardSpec &f);

private:
    void accept_handover();
    void drain_tap();
    void input_frame(size_t len);
    void detach_tap(const std::string &why);
    // Writes the fast path's batch to the tap and empties it.
    void flush_fast_path();
    // A tap without vnet headers cannot carry the fast path's frames: its
    // forwards move to libslirp.
    void forwards_to_slirp();

    const ParentConfig &cfg_;
    UniqueFd listen_;
    pid_t child_pid_;
    int wake_fd_;
    const std::atomic<bool> &stop_;
    Stats &stats_;
    TaskQueue &tasks_;
    TapIo tap_;
    Coalescer coalescer_;
    Ipv4Reassembler reassembler_;
    PollSet polls_;
    std::vector<uint8_t> frame_;
    in6_addr prefix6_{}; // the guest's IPv6 /64 (guest_source_allowed)
    // Only with cfg.tcp_fast_path; used once the tap has vnet headers.
    std::optional<tcp::FastPath> fast_;
    std::vector<ForwardSpec> fast_forwards_; // the ones fast_ listens for
    SlirpAdapter slirp_; // last: destroyed first, it points at the above
};

} // namespace rknp
