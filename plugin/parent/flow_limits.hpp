// SPDX-License-Identifier: Apache-2.0

// max_flows and max_new_flows_per_sec, enforced on the stack thread over
// every path's flows (counted through the Path interface: the fast paths'
// flows, the echo path's entries, libslirp's host sockets). A guest can
// ask for a host socket with every SYN, every new UDP source port and
// every echo request; without a cap it exhausts rootlesskit's fds (its API
// socket and port driver die with them) and memory. Before a guest frame
// opens a flow on any path (libslirp's gate, slirp/flow_gate.hpp, asks
// too) it must be admitted here:
//   - the flows of all paths must be below max_flows, else flows_refused;
//   - lingering flows (UDP and ICMP: libslirp's sockets, the UDP fast
//     path's flows, echo entries) must be below half of max_flows, else
//     flows_refused: the guest can end its TCP connections but not these,
//     which only idle timers close (libslirp's 240 s, the UDP fast path's
//     30 s or 180 s), so a burst of UDP sources (a scan, a flood) must
//     leave room for TCP for those minutes;
//   - a token must be left in the bucket of max_new_flows_per_sec, else
//     flows_rate_limited.
// What the guest sees: libslirp's gate drops refused frames (a dropped SYN
// is retransmitted for about two minutes and gets through as soon as a
// socket frees; libslirp's own reply to an over-the-limit SYN would be a
// half-open connection it cannot serve); the fast path answers a refused
// SYN at the cap with an RST (the connect fails at once, as for any
// refused connection) and drops it when only rate-limited (transient: the
// retransmission a second later passes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/stats.hpp"
#include "datapath/flows/token_bucket.hpp"

namespace rknp {

// The effective max_flows: configured, lowered so that a quarter of the
// soft RLIMIT_NOFILE (nofile_soft; 0 = unlimited) stays free for the rest
// of rootlesskit; at least 1.
uint32_t effective_max_flows(uint32_t configured, uint64_t nofile_soft);

class FlowLimits {
public:
    enum class Admit { Ok, Full, RateLimited };

    FlowLimits(uint32_t max_flows, uint32_t max_new_per_sec, Stats &stats,
               uint64_t now_ms);

    uint32_t max_flows() const { return max_flows_; }

    // One new guest flow (lingering: UDP/ICMP), with flows open on all
    // paths, lingering_flows of them UDP or ICMP: checks the caps, then
    // takes a token; counts refusals in stats.
    Admit admit(size_t flows, uint64_t now_ms, bool lingering = false,
                size_t lingering_flows = 0);
    // The most UDP/ICMP flows: half of max_flows (at least 1).
    size_t max_lingering() const { return max_lingering_; }

private:
    uint32_t max_flows_;
    size_t max_lingering_;
    Stats &stats_;
    TokenBucket bucket_;
};

} // namespace rknp
