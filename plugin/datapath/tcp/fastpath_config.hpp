// SPDX-License-Identifier: Apache-2.0

// What the TCP fast path is told at creation: the virtual networks as
// libslirp has them (VirtualNet), the flow-table size and admission hook,
// how host sockets are peeked, and the clock, ISN and kernel-probe
// overrides tests use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "datapath/flows/route.hpp"
#include "datapath/guest_sink.hpp"

namespace rknp::tcp {

// How flows peek at the host data the guest has not acknowledged yet
// (peek_mode.hpp). Automatic is a request only: FastPath::peek_mode() is
// always Offset or Discard.
enum class PeekMode : uint8_t {
    Automatic, // Offset if the kernel has SO_PEEK_OFF for TCP, else Discard
    Offset,    // SO_PEEK_OFF (Linux >= 6.9): each peek starts past what was
               // sent; FastPath's constructor throws without it
    Discard,   // peek from the queue's start, the bytes already sent into
               // a discard buffer (what passt did before 6.9)
};

// The virtual networks (datapath/flows/route.hpp) and, from here on, what
// only the TCP fast path is told.
struct FastPathConfig : VirtualNet {
    uint32_t mtu = 65520;
    // Slots of the flow table for the guest's flows; the parent passes its
    // effective max_flows (already lowered for RLIMIT_NOFILE) and enforces
    // the cap it shares with libslirp through admit_flow.
    size_t max_flows = 16384;
    // Asked before every new flow the guest opens (a SYN); empty: always
    // Accept. Never for connections accepted on forwarded ports: strangers
    // must not use up what the guest may open. Those have their own bounds:
    // the table has forward_flows more slots for them (all forwards'
    // connections at once), one forward holds at most forward_flows_each,
    // and takes at most forward_new_per_sec new ones a second (a token
    // bucket of its own); beyond, the client gets an RST at once.
    std::function<Admission()> admit_flow;
    size_t forward_flows = 4096, forward_flows_each = 2048;
    uint32_t forward_new_per_sec = 20000;
    size_t batch_data_frames = 32;    // 64 KiB of payload memory each
    size_t batch_control_frames = 32;
    PeekMode peek_mode = PeekMode::Automatic;
    // A millisecond clock instead of CLOCK_MONOTONIC (the stack loop's
    // reading of its round, or a test's) and, for tests, a fixed initial
    // sequence number instead of RFC 6528's.
    std::function<int64_t()> clock;
    std::optional<uint32_t> fixed_isn;
    // The stack loop's epoll set, shared with its other sources
    // (EventSource); -1: a set of its own, which poll_events() waits on.
    int shared_epoll_fd = -1;
    // Where the guest-bound batch goes at the end of every call (the tap
    // in the stack, as for every path: one way out); nullptr keeps it in
    // frames() for the caller (tests read it there).
    GuestSink *guest = nullptr;
    // For tests: answers "does the kernel have SO_PEEK_OFF for TCP?"
    // instead of the probe (e.g. a kernel before 6.9 on a newer one).
    std::function<bool()> peek_off_probe;
};

} // namespace rknp::tcp
