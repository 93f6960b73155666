// SPDX-License-Identifier: Apache-2.0

// The one interface every path of the guest's traffic implements (the TCP
// and UDP fast paths, the ICMP echo path, and libslirp as the last,
// catch-all path), so that the stack loop and GuestIngress keep them in
// one list, in ingress order, and loop over it: a guest frame in and a
// verdict out, the path's host events, its timers, the tap coming and
// going, its flow count, its counters and its forwards. A new path is a
// class implementing this (a folder of its own) and one line in
// StackLoop::make_paths.
#pragma once

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/stats.hpp"
#include "datapath/event_source.hpp"
#include "datapath/forward_spec.hpp"

namespace rknp {

class TapIo;

// What a path answers for a guest frame: NotMine goes on to the next path;
// Refused is taken but over the flow limits (counted there, not as a
// dropped frame); Malformed is counted and dropped.
enum class Verdict { NotMine, Consumed, Refused, Malformed };

class Path {
public:
    virtual ~Path() = default;

    // What a path needs of a frame before it sees it.
    struct Traits {
        bool needs_vnet_hdr = false;  // frames from a tap with vnet headers
                                      // only (their offloads carry it);
                                      // its forwards too
        bool needs_checksum = false;  // the checksum finished and URG
                                      // cleared first (a partial checksum
                                      // is fine otherwise)
    };

    // For the log ("TCP fast path", "libslirp").
    virtual const char *name() const = 0;
    virtual Traits traits() const = 0;
    // One whole Ethernet frame from the guest, filtered and reassembled.
    virtual Verdict guest_frame(std::span<const uint8_t> frame) = 0;
    // A whole IPv4 TCP or UDP frame from a source outside the guest's own
    // addresses: a reply from an address routed behind the guest
    // (ForwardSpec::routed) is taken for a flow of such a forward only;
    // anything else is NotMine and, after every path, dropped. Never a new
    // flow: the guest reaches nothing through this it could not before.
    virtual Verdict routed_frame(std::span<const uint8_t>) { return Verdict::NotMine; }
    // The end of a batch of guest frames (what the path queued goes out).
    virtual void end_of_input() {}

    // Host events of a round. A path whose sockets are in the shared epoll
    // set has an owner there and gets its share of the set's events (only
    // when there are some); burst: it had events in the previous round too.
    virtual std::optional<EventOwner> event_owner() const { return std::nullopt; }
    virtual void handle_events(std::span<const epoll_event>, bool /*burst*/) {}
    // A path whose sockets are in a set of its own (libslirp's PollSet,
    // kept by difference) names that set, which the loop waits on too;
    // before the wait it updates the set, lowering timeout_ms; after it,
    // it services its sockets (ready: its set had events; wait_failed: the
    // wait failed).
    virtual int own_set_fd() const { return -1; }
    virtual void before_wait(uint32_t & /*timeout_ms*/) {}
    virtual void after_wait(bool /*ready*/, bool /*wait_failed*/) {}

    // -1: no timer armed.
    virtual int64_t ms_until_next_timer(int64_t now_ms) const = 0;
    virtual void run_timers(int64_t now_ms) = 0;

    // A tap arrived (attached, in the loop's set): what the path learns
    // from it. Returns a line for the log, or "".
    virtual std::string tap_attached(TapIo &) { return {}; }
    // The tap is gone: end the host sides of its flows.
    virtual void tap_detached() = 0;

    // Open flows, as FlowLimits counts them, and of those the lingering
    // ones (UDP, echo: the guest cannot end them itself).
    virtual size_t flows() const = 0;
    virtual size_t lingering_flows() const { return 0; }
    // Its gauges and counters into Stats (once a round).
    virtual void publish(Stats &) const {}

    // Forwards. The first path in ingress order that carries a forward
    // (and, with needs_vnet_hdr, only on a tap with vnet headers) takes
    // it: add_forward throws Error; remove_forward takes what add_forward
    // was given.
    virtual bool carries(const ForwardSpec &) const { return false; }
    virtual void add_forward(const ForwardSpec &) {}
    virtual void remove_forward(const ForwardSpec &) {}
    // A path after this one took (taken) or gave up a forward: the frames
    // of its guest end must reach that path (UDP: the guest's replies).
    virtual void forward_behind(const ForwardSpec &, bool /*taken*/) {}
};

} // namespace rknp
