// SPDX-License-Identifier: Apache-2.0

// The one interface every path of the guest's traffic implements (the TCP
// and UDP fast paths, the ICMP echo path), so that the stack loop and
// GuestIngress keep them in a list, in ingress order, and loop over it:
// a guest frame in and a verdict out, the path's host events, its timers,
// the tap going away, its flow count and its counters. libslirp is the
// catch-all behind the list (GuestIngress's last step), not a Path: it
// polls its own sockets and takes every frame. A new path is a class
// implementing this and one line in StackLoop's list.
#pragma once

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/stats.hpp"
#include "datapath/event_source.hpp"

namespace rknp {

// What a path answers for a guest frame: NotMine goes on to the next path
// (and at the end to libslirp); Malformed is counted and dropped.
enum class Verdict { NotMine, Consumed, Malformed };

class Path {
public:
    // What a path needs of a frame before it sees it, and what its flows
    // cost (FlowLimits).
    struct Traits {
        bool needs_vnet_hdr = false;  // frames from a tap with vnet headers
                                      // only (their offloads carry it)
        bool needs_checksum = false;  // the checksum finished first (a
                                      // partial one is fine otherwise)
        bool lingering_flows = false; // flows the guest cannot end itself
                                      // (UDP, echo): FlowLimits' cap
    };

    virtual Traits traits() const = 0;
    // One whole Ethernet frame from the guest, filtered and reassembled.
    virtual Verdict guest_frame(std::span<const uint8_t> frame) = 0;
    // The end of a batch of guest frames (what the path queued goes out).
    virtual void end_of_input() {}
    // Its host sockets' events of a round (its owner's share of the shared
    // epoll set); burst: it had events in the previous round too.
    virtual EventOwner event_owner() const = 0;
    virtual void handle_events(std::span<const epoll_event> evs, bool burst) = 0;
    // -1: no timer armed.
    virtual int64_t ms_until_next_timer(int64_t now_ms) const = 0;
    virtual void run_timers(int64_t now_ms) = 0;
    // The tap is gone: end the host sides of its flows.
    virtual void tap_detached() = 0;
    // Open flows, as FlowLimits counts them.
    virtual size_t flows() const = 0;
    // Its gauges and counters into Stats (once a round).
    virtual void publish(Stats &) const {}

protected:
    ~Path() = default;
};

} // namespace rknp
