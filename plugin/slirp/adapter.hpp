// SPDX-License-Identifier: Apache-2.0

// libslirp as the stack loop's last, catch-all path (datapath/path.hpp):
// owns the Slirp instance, the SlirpConfig it is built from and everything
// that config points to (libslirp keeps the pointers), its timers, its
// callbacks and the gate that admits new flows before slirp_input
// (flow_gate.hpp). Guest-bound frames go to the tap through the Coalescer.
// Stack thread only: libslirp is not thread-safe.
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
#include "datapath/path.hpp"
#include "slirp/flow_gate.hpp"
#include "slirp/forward_reaper.hpp"
#include "slirp/poll_set.hpp"
#include "slirp/queue_drain.hpp"
#include "slirp/routed_ends.hpp"
#include "slirp/timers.hpp"

namespace rknp {

// A warning naming the guest-reachable bugs of a libslirp older than the
// release that fixed them and what rknp does about each; "" when none.
std::string libslirp_bug_warning(std::string_view version);
// Whether that version has the TCP reassembly-queue loop (before 4.8.0).
bool libslirp_has_reass_loop(std::string_view version);

class SlirpAdapter final : public Path {
public:
    // Creates the libslirp instance; throws Error. admit: a new flow's
    // admission (FlowLimits through GuestIngress::admit_flow).
    SlirpAdapter(const ParentConfig &cfg, TapIo &tap, Coalescer &coalescer,
                 PollSet &polls, SlirpFlowGate::AdmitFlow admit);
    ~SlirpAdapter() override;
    SlirpAdapter(const SlirpAdapter &) = delete;
    SlirpAdapter &operator=(const SlirpAdapter &) = delete;

    const char *name() const override { return "libslirp"; }
    // Whole frames, checksums finished and URG cleared (libslirp before
    // 4.9.2 over-reads urgent data).
    Traits traits() const override { return {.needs_checksum = true}; }
    // Takes every frame (never an IPv4 fragment): Refused when it would
    // open a flow the limits refuse, else into slirp_input.
    Verdict guest_frame(std::span<const uint8_t> frame) override;
    // A reply from an address routed behind the guest on one of its
    // forwards (RoutedEnds::admits), into slirp_input; else NotMine.
    Verdict routed_frame(std::span<const uint8_t> frame) override;
    // libslirp's host sockets in its PollSet (updated by difference),
    // lowering timeout_ms to libslirp's own deadline (first, the ARP
    // replies owed to it for routed ends); serviced with the
    // round's results (an error: libslirp skips them).
    int own_set_fd() const override { return polls_.fd(); }
    void before_wait(uint32_t &timeout_ms) override;
    void after_wait(bool ready, bool wait_failed) override;
    int64_t ms_until_next_timer(int64_t now_ms) const override {
        return timers_.ms_until_next(now_ms);
    }
    void run_timers(int64_t now_ms) override { timers_.run_due(now_ms); }
    // libslirp's flows end on its own timers; its frames for a dead tap
    // are dropped by TapIo.
    void tap_detached() override {}
    size_t flows() const override { return gate_.flows(); }
    size_t lingering_flows() const override { return gate_.lingering_flows(); }

    // Host forwards, of any kind; add throws Error, remove throws Error
    // when libslirp has no such forward.
    bool carries(const ForwardSpec &) const override { return true; }
    void add_forward(const ForwardSpec &f) override;
    void remove_forward(const ForwardSpec &f) override;

private:
    friend struct SlirpCallbacks;

    void to_guest(std::span<const uint8_t> frame);
    // One admitted frame into slirp_input, past the reassembly guard.
    void input(std::span<const uint8_t> frame);
    // The reaper's resets, into slirp_input (never inside a libslirp call).
    void reap();

    const ParentConfig &cfg_;
    TapIo &tap_;
    Coalescer &coalescer_;
    PollSet &polls_;
    // Outlives slirp_cleanup, which unregisters libslirp's sockets.
    SlirpFlowGate gate_;
    Timers timers_;
    // libslirp binds every outbound socket through these pointers for its
    // whole life: members, destroyed after slirp_cleanup.
    sockaddr_in out4_{};
    sockaddr_in6 out6_{};
    // libslirp's warnings about what the guest sent: 10 a minute at most.
    LogLimiter guest_error_log_{10, 60000};
    // Forwards to addresses routed behind the guest.
    RoutedEnds routed_;
    RoutedEnds::ArpFrame arp_{};
    // Forwarded connections whose client is gone: out of libslirp.
    ForwardReaper reaper_;
    // Set with a libslirp that has the reassembly-queue loop.
    std::unique_ptr<ReassWrapGuard> wrap_guard_;
    // Runs before slirp_cleanup; see queue_drain.hpp.
    SlirpQueueDrain drain_;
    Slirp *slirp_ = nullptr;
};

} // namespace rknp
