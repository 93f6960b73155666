// SPDX-License-Identifier: Apache-2.0

// Counters shared between the stack thread (writer) and any reader.
#pragma once

#include <atomic>
#include <cstdint>

namespace rknp {

struct Stats {
    std::atomic<bool> tap_attached{false};
    std::atomic<uint64_t> frames_from_tap{0};
    std::atomic<uint64_t> bytes_from_tap{0};
    std::atomic<uint64_t> frames_to_tap{0};
    std::atomic<uint64_t> bytes_to_tap{0};
    std::atomic<uint64_t> frames_dropped{0};
    std::atomic<uint64_t> handovers_refused{0};
    std::atomic<uint64_t> segments_merged{0};
    std::atomic<uint64_t> acks_superseded{0};
    std::atomic<uint64_t> frames_truncated{0};
    std::atomic<uint64_t> frames_filtered{0};
    std::atomic<uint64_t> flows_refused{0};
    std::atomic<uint64_t> flows_rate_limited{0};
    std::atomic<uint64_t> host_sockets{0};       // a gauge
    std::atomic<uint64_t> tcp_fast_flows{0};     // a gauge
    std::atomic<uint64_t> tcp_fast_retransmits{0};
    std::atomic<uint32_t> sandbox{0};            // RKNP_SANDBOX_* bits
    // The fast path's way of reading host sockets once it resolved
    // ParentConfig::tcp_peek_mode: RKNP_TCP_PEEK_OFFSET or _DISCARD
    // (uint32_t(TcpPeekMode)); 0 while the fast path is off.
    std::atomic<uint32_t> tcp_peek_mode{0};
    std::atomic<uint64_t> udp_fast_flows{0};     // a gauge (1.5)
    // Guest datagrams the UDP fast path dropped because the host socket's
    // send failed; flows refused at the limits count in flows_refused and
    // flows_rate_limited instead.
    std::atomic<uint64_t> udp_fast_dropped{0};
    // Published ports' clients (1.7), counted apart from the guest's
    // flows: TCP connections accepted, refused (all reasons), refused at
    // a cap, refused over the rate, open now (a gauge); UDP clients now (a
    // gauge), admitted, over the rate, evicted, refused for want of room.
    std::atomic<uint64_t> tcp_forward_accepted{0};
    std::atomic<uint64_t> tcp_forward_refused{0};
    std::atomic<uint64_t> tcp_forward_full{0};
    std::atomic<uint64_t> tcp_forward_rate_limited{0};
    std::atomic<uint64_t> tcp_forward_flows{0};
    std::atomic<uint64_t> udp_forward_clients{0};
    std::atomic<uint64_t> udp_forward_admitted{0};
    std::atomic<uint64_t> udp_forward_rate_limited{0};
    std::atomic<uint64_t> udp_forward_evicted{0};
    std::atomic<uint64_t> udp_forward_full{0};

    static void add(std::atomic<uint64_t> &c, uint64_t n) {
        c.fetch_add(n, std::memory_order_relaxed);
    }
};

} // namespace rknp
