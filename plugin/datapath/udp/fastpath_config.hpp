// SPDX-License-Identifier: Apache-2.0

// What the UDP fast path is told at creation (FastPathConfig: the virtual
// networks, the table's size and admission hook, the forwards' bounds,
// the timeouts, the clock tests use) and what it counts (FastPathStats),
// both shared by udp::FastPath and its forwarded ports (udp::Forwards).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/clock.hpp"
#include "datapath/flows/route.hpp"

namespace rknp::udp {

struct FastPathConfig : VirtualNet {
    uint32_t mtu = 65520;
    // Slots of the flow table (the parent's effective max_flows; the cap
    // shared with TCP and libslirp is enforced through admit_flow).
    size_t max_flows = 16384;
    // Asked before every new flow the guest opens; empty: always Accept.
    // Never for a forward's clients, which have their own bounds:
    std::function<Admission()> admit_flow;
    // Forwarded ports' clients (client_pool.hpp): all forwards' at once,
    // one forward's, and one forward's new clients a second.
    size_t forward_clients = 4096, forward_clients_each = 2048;
    uint32_t forward_new_per_sec = 20000;
    // conntrack's UDP timeouts: a flow only the guest spoke on, and one
    // the host answered.
    int64_t idle_ms = 30000, idle_answered_ms = 180000;
    // UDP_SEGMENT sends and UDP_GRO reads (tests turn them off to check
    // the plain path).
    bool segmentation = true;
    // A millisecond clock instead of CLOCK_MONOTONIC: the stack loop's
    // reading of its round, or a test's.
    std::function<int64_t()> clock;
    // The stack loop's epoll set, shared with its other sources
    // (EventSource); -1: a set of its own, which poll_events() waits on.
    int shared_epoll_fd = -1;
};

// The time now by cfg's clock, in milliseconds.
inline int64_t clock_ms(const FastPathConfig &cfg) {
    return cfg.clock ? cfg.clock() : monotonic_ms();
}

// SO_RCVBUF of host sockets, the guest's flows' and the forwards': room
// for what arrives while the stack thread is busy elsewhere (the default,
// 208 KiB, overflows in about a millisecond at 2 Gbit/s: the
// udp_drops.sh benchmark counted it); the kernel caps it at rmem_max.
inline constexpr int kHostRcvBuf = 2 << 20;

struct FastPathStats {
    uint64_t flows_opened = 0, flows_refused = 0, flows_expired = 0;
    uint64_t datagrams_to_host = 0, datagrams_to_guest = 0;
    uint64_t dropped_to_host = 0;  // the host socket refused them
    // A flow that could not connect (socket, bind or connect failed): the
    // guest told with ICMP unreachable, for the first datagram and for
    // those the short negative cache answered.
    uint64_t unreachable = 0, unreachable_cached = 0;
    uint64_t segmented_sends = 0;  // UDP_SEGMENT sends (of > 1 datagram)
    uint64_t gso_frames = 0;       // guest-bound frames of > 1 datagram
    uint64_t fragmented = 0;       // guest-bound datagrams over the MTU
    uint64_t icmp_to_guest = 0;    // errors relayed
    uint64_t socket_errors = 0;    // errors set with nothing queued (SO_ERROR)
    uint64_t closed_by_guest = 0;  // flows the guest's port unreachable ended
    uint64_t malformed = 0;
    // Forwarded ports: datagrams from clients; clients given another
    // port than their own towards the guest (another client the gateway
    // translation made the same, or a flow the guest opened, had it) and
    // those refused for want of one; datagrams dropped while the guest's
    // MAC was asked for.
    uint64_t forward_datagrams = 0, forward_remapped = 0, forward_clashes = 0;
    uint64_t forward_waiting_mac = 0;
    // New clients given a place, those over their forward's rate
    // (dropped), clients evicted for a new one, and new ones refused for
    // want of room (every client of the pool an answered one of another
    // forward).
    uint64_t forward_admitted = 0;
    uint64_t forward_rate_limited = 0, forward_evicted = 0, forward_full = 0;
    uint64_t arp_requests = 0;
};

} // namespace rknp::udp
