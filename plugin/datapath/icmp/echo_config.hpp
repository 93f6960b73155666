// SPDX-License-Identifier: Apache-2.0

// What the ICMP echo path is told at creation: the virtual networks as
// libslirp has them (VirtualNet, as the fast paths have them, so all route
// the gateway and the virtual network alike), the table
// size and admission hook, the idle timeout, and the clock and probe
// overrides tests use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "datapath/icmp/probe.hpp"
#include "datapath/flows/route.hpp"

namespace rknp::icmp {

// The virtual networks (VirtualNet, as the fast paths are told them: the
// gateway means the host's loopback unless disable_host_loopback, then
// its echo requests stay libslirp's, which answers them itself) and:
struct EchoConfig : VirtualNet {
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
    // A millisecond clock instead of CLOCK_MONOTONIC (the stack loop's
    // reading of its round, or a test's) and, for tests, the answer of
    // the ping-socket probe instead of asking the kernel.
    std::function<int64_t()> clock;
    std::function<PingProbe()> probe;
    // The stack loop's epoll set, shared with its other sources
    // (EventSource); -1: a set of its own, which poll_events() waits on.
    int shared_epoll_fd = -1;
};

// The networks, loopback and outbound choices and the MTU; the rest left
// at the defaults.
inline EchoConfig echo_config_from(const VirtualNet &net, uint32_t mtu) {
    EchoConfig e;
    static_cast<VirtualNet &>(e) = net;
    e.mtu = mtu;
    return e;
}

} // namespace rknp::icmp
