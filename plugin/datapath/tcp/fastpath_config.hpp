// SPDX-License-Identifier: Apache-2.0

// What the fast path is told at creation: the virtual networks as libslirp
// has them, the host-loopback and outbound-address choices, the flow-table
// size and admission hook, how host sockets are peeked, and the clock,
// ISN and kernel-probe overrides tests use.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace rknp::tcp {

// What becomes of a guest SYN that would open a new flow (the parent's
// max_flows and max_new_flows_per_sec, FlowLimits).
enum class Admission {
    Accept,
    Reset, // at the cap: RST, the guest's connect fails at once
    Drop,  // rate-limited: silence, the guest retransmits
};

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

struct FastPathConfig {
    // The virtual networks as libslirp has them (IPv4 in host byte order).
    // Destinations inside them other than the gateway stay libslirp's.
    uint32_t net4 = 0x0a000200, mask4 = 0xffffff00;
    uint32_t gateway4 = 0x0a000202, dns4 = 0x0a000203;
    bool ipv6 = false;
    in6_addr prefix6{};
    uint32_t prefix6_len = 64;
    in6_addr gateway6{}, dns6{};
    // The gateway means the host's loopback unless this is set; then a SYN
    // to it gets an RST (as libslirp refuses it).
    bool disable_host_loopback = false;
    std::optional<uint32_t> outbound_addr; // host byte order
    std::optional<in6_addr> outbound_addr6;
    uint32_t mtu = 65520;
    // Slots of the flow table; the parent passes its effective max_flows
    // (already lowered for RLIMIT_NOFILE) and enforces the cap it shares
    // with libslirp through admit_flow.
    size_t max_flows = 16384;
    // Asked before every new flow; empty: always Accept.
    std::function<Admission()> admit_flow;
    size_t batch_data_frames = 32;    // 64 KiB of payload memory each
    size_t batch_control_frames = 32;
    PeekMode peek_mode = PeekMode::Automatic;
    // For tests: a millisecond clock instead of CLOCK_MONOTONIC, and a
    // fixed initial sequence number instead of RFC 6528's.
    std::function<int64_t()> clock;
    std::optional<uint32_t> fixed_isn;
    // For tests: answers "does the kernel have SO_PEEK_OFF for TCP?"
    // instead of the probe (e.g. a kernel before 6.9 on a newer one).
    std::function<bool()> peek_off_probe;
};

} // namespace rknp::tcp
