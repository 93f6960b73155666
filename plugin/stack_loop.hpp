// The libslirp stack and its event loop. Everything in here runs on the one
// stack thread (libslirp is not thread-safe); other threads only touch the
// atomic Stats and the wake-up eventfd.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "fd.hpp"
#include "forwards.hpp"
#include "offload.hpp"
#include "reassembly.hpp"
#include "stats.hpp"
#include "task_queue.hpp"
#include "timers.hpp"

struct Slirp;

namespace rknp {

class StackLoop {
public:
    // Creates the libslirp instance; throws Error.
    StackLoop(const ParentConfig &cfg, UniqueFd listen_fd, pid_t child_pid,
              int wake_fd, const std::atomic<bool> &stop, Stats &stats,
              TaskQueue &tasks);
    ~StackLoop();
    StackLoop(const StackLoop &) = delete;
    StackLoop &operator=(const StackLoop &) = delete;

    // Runs until stop is set (and wake_fd signalled).
    void run();

    // libslirp host forwards; on the stack thread only. Throw Error.
    void add_forward(const ForwardSpec &f);
    void remove_forward(const ForwardSpec &f);

private:
    friend struct SlirpCallbacks;

    int add_poll(int fd, int slirp_events);
    int revents(int idx) const;
    void accept_handover();
    void drain_tap();
    void input_frame(size_t len);
    void detach_tap(const std::string &why);
    ssize_t send_to_tap(const void *buf, size_t len);
    void write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                     std::span<const uint8_t> rest);

    const ParentConfig &cfg_;
    UniqueFd listen_;
    pid_t child_pid_;
    int wake_fd_;
    const std::atomic<bool> &stop_;
    Stats &stats_;
    TaskQueue &tasks_;
    UniqueFd tap_;
    bool vnet_hdr_ = false;
    Coalescer coalescer_;
    Ipv4Reassembler reassembler_;
    Timers timers_;
    std::vector<pollfd> fds_;
    std::vector<uint8_t> frame_;
    // libslirp keeps SlirpConfig.outbound_addr{,6} (pointers to these) and
    // binds outbound sockets through them for slirp_'s whole life;
    // ~StackLoop cleans slirp_ up before members go.
    sockaddr_in out4_{};
    sockaddr_in6 out6_{};
    Slirp *slirp_ = nullptr;
};

} // namespace rknp
