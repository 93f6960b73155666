// SPDX-License-Identifier: Apache-2.0

// What the ICMP echo path is told at creation: the virtual networks as
// libslirp has them (the same fields and meaning as the TCP fast path's,
// so both route the gateway and the virtual network alike), the table
// size and admission hook, the idle timeout, and the clock and probe
// overrides tests use.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "datapath/icmp/probe.hpp"
#include "datapath/tcp/fastpath_config.hpp"

namespace rknp::icmp {

struct EchoConfig {
    // IPv4 in host byte order; the defaults are libslirp's.
    uint32_t net4 = 0x0a000200, mask4 = 0xffffff00;
    uint32_t gateway4 = 0x0a000202, dns4 = 0x0a000203;
    bool ipv6 = false;
    in6_addr prefix6{};
    uint32_t prefix6_len = 64;
    in6_addr gateway6{}, dns6{};
    // The gateway means the host's loopback unless this is set; then its
    // echo requests stay libslirp's (which answers them itself).
    bool disable_host_loopback = false;
    std::optional<uint32_t> outbound_addr; // host byte order
    std::optional<in6_addr> outbound_addr6;
    // The guest's MTU: larger IPv4 replies go to it in fragments, larger
    // IPv6 replies are dropped (the guest could not have sent the request).
    uint32_t mtu = 65520;
    // Slots of the table: at most this many ping sockets at once.
    size_t max_entries = 1024;
    // Asked before every new entry (a new ping socket); false: the request
    // is dropped. Empty: always admitted.
    std::function<bool()> admit_entry;
    // An entry with no request and no reply for this long is closed
    // (libslirp keeps a socket 60 s for UDP DNS, passt 60 s for echo).
    int64_t idle_timeout_ms = 60000;
    // For tests: a millisecond clock instead of CLOCK_MONOTONIC, and the
    // answer of the ping-socket probe instead of asking the kernel.
    std::function<int64_t()> clock;
    std::function<PingProbe()> probe;
};

// The networks, loopback and outbound choices and MTU as the TCP fast
// path is told them; the rest left at the defaults.
inline EchoConfig echo_config_from(const tcp::FastPathConfig &f) {
    EchoConfig e;
    e.net4 = f.net4;
    e.mask4 = f.mask4;
    e.gateway4 = f.gateway4;
    e.dns4 = f.dns4;
    e.ipv6 = f.ipv6;
    e.prefix6 = f.prefix6;
    e.prefix6_len = f.prefix6_len;
    e.gateway6 = f.gateway6;
    e.dns6 = f.dns6;
    e.disable_host_loopback = f.disable_host_loopback;
    e.outbound_addr = f.outbound_addr;
    e.outbound_addr6 = f.outbound_addr6;
    e.mtu = f.mtu;
    return e;
}

} // namespace rknp::icmp
