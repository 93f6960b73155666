// SPDX-License-Identifier: Apache-2.0

// libslirp in the parent: owns the Slirp instance, the SlirpConfig it is
// built from and everything that config points to (libslirp keeps the
// pointers), its timers and its callbacks. Guest-bound frames go to the
// tap through the Coalescer. Stack thread only: libslirp is not
// thread-safe.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/config.hpp"
#include "common/log_limiter.hpp"
#include "datapath/coalescer.hpp"
#include "slirp/reass_wrap_guard.hpp"
#include "datapath/tap_io.hpp"
#include "datapath/forward_spec.hpp"
#include "slirp/guest_sockets.hpp"
#include "slirp/poll_set.hpp"
#include "slirp/queue_drain.hpp"
#include "slirp/timers.hpp"

namespace rknp {

// A warning naming the guest-reachable bugs of a libslirp older than the
// release that fixed them and what rknp does about each; "" when none.
std::string libslirp_bug_warning(std::string_view version);
// Whether that version has the TCP reassembly-queue loop (before 4.8.0).
bool libslirp_has_reass_loop(std::string_view version);

class SlirpAdapter {
public:
    // Creates the libslirp instance; throws Error. libslirp's socket
    // registrations go to sockets (which must outlive this).
    SlirpAdapter(const ParentConfig &cfg, TapIo &tap, Coalescer &coalescer,
                 PollSet &polls, GuestSockets &sockets);
    ~SlirpAdapter();
    SlirpAdapter(const SlirpAdapter &) = delete;
    SlirpAdapter &operator=(const SlirpAdapter &) = delete;

    // One whole Ethernet frame from the guest (never an IPv4 fragment).
    void input(std::span<const uint8_t> frame);
    // Adds libslirp's host sockets to the poll set; lowers timeout_ms to
    // libslirp's and its timers' next deadline.
    void fill(uint32_t &timeout_ms, int64_t now_ms);
    // Services the host sockets with this round's poll results (error:
    // poll failed, libslirp skips them).
    void poll(bool error);
    void run_timers(int64_t now_ms) { timers_.run_due(now_ms); }

    // Host forwards; throw Error.
    void add_forward(const ForwardSpec &f);
    void remove_forward(const ForwardSpec &f);

private:
    friend struct SlirpCallbacks;

    void to_guest(std::span<const uint8_t> frame);

    const ParentConfig &cfg_;
    TapIo &tap_;
    Coalescer &coalescer_;
    PollSet &polls_;
    GuestSockets &sockets_;
    Timers timers_;
    // libslirp binds every outbound socket through these pointers for its
    // whole life: members, destroyed after slirp_cleanup.
    sockaddr_in out4_{};
    sockaddr_in6 out6_{};
    // libslirp's warnings about what the guest sent: 10 a minute at most.
    LogLimiter guest_error_log_{10, 60000};
    // Set with a libslirp that has the reassembly-queue loop.
    std::unique_ptr<ReassWrapGuard> wrap_guard_;
    // Runs before slirp_cleanup; see queue_drain.hpp.
    SlirpQueueDrain drain_;
    Slirp *slirp_ = nullptr;
};

} // namespace rknp
