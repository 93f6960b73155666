// SPDX-License-Identifier: Apache-2.0

// max_flows and max_new_flows_per_sec, enforced on the stack thread for
// both TCP paths and for libslirp's UDP and ICMP sockets. A guest can ask
// for a host socket with every SYN, every new UDP source port and every
// echo request; without a cap it exhausts rootlesskit's fds (its API
// socket and port driver die with them) and memory. Before a guest frame
// that would make a new host socket reaches libslirp (or opens a fast-path
// flow) it must be admitted here:
//   - the host sockets held for guest flows (libslirp's, tracked exactly by
//     GuestSockets from its register/unregister callbacks, plus the fast
//     path's flows) must be below max_flows, else flows_refused;
//   - UDP and ICMP sockets (libslirp's, any libslirp made for a frame not
//     seen as a new flow, and the UDP fast path's flows) must be below
//     half of max_flows, else flows_refused: the guest can end its TCP
//     connections but not these, which only idle timers close (libslirp's
//     240 s, the UDP fast path's 30 s or 180 s), so a burst of UDP sources
//     (a scan, a flood) must leave room for TCP for those minutes;
//   - a token must be left in the bucket of max_new_flows_per_sec, else
//     flows_rate_limited.
// Refused frames never reach libslirp. What the guest sees: the libslirp
// path drops refused frames (a dropped SYN is retransmitted for about two
// minutes and gets through as soon as a socket frees; libslirp's own reply
// to an over-the-limit SYN would be a half-open connection it cannot
// serve); the fast path answers a refused SYN at the cap with an RST (the
// connect fails at once, as for any refused connection) and drops it when
// only rate-limited (transient: the retransmission a second later passes).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/addr.hpp"
#include "common/stats.hpp"
#include "datapath/flows/token_bucket.hpp"
#include "slirp/guest_sockets.hpp"

namespace rknp {

// Room GuestSockets keeps beyond max_flows for sockets made by a frame not
// seen as a new flow (none known in libslirp 4.7.0): they are still
// counted, so the cap then refuses the next new flow.
inline constexpr size_t kGuestSocketSlack = 64;

// The effective max_flows: configured, lowered so that a quarter of the
// soft RLIMIT_NOFILE (nofile_soft; 0 = unlimited) stays free for the rest
// of rootlesskit; at least 1.
uint32_t effective_max_flows(uint32_t configured, uint64_t nofile_soft);

// What a guest frame may cost libslirp.
struct NewFlow {
    bool candidate = false; // could make a host socket
    FlowKey key;            // proto 0: every such frame makes its own
};

// TCP segments with SYN and none of ACK/RST/FIN (tcp_input makes a socket
// only for those), every UDP datagram (keyed by source: libslirp's
// per-source socket, or DHCP/TFTP that make none), ICMP echo requests not
// to the gateway or DNS address (icmp_send: one socket each). IPv4 header
// options are skipped; IPv6 packets whose next header is not TCP/UDP are
// not candidates (libslirp 4.7.0 forwards no IPv6 echo and drops extension
// headers). Frames must be whole (IPv4 fragments reassembled).
NewFlow classify_new_flow(std::span<const uint8_t> eth_frame,
                          const Ipv4Cidr &net);

class FlowLimits {
public:
    enum class Admit { Ok, Full, RateLimited };

    FlowLimits(uint32_t max_flows, uint32_t max_new_per_sec, Stats &stats,
               uint64_t now_ms);

    uint32_t max_flows() const { return max_flows_; }
    GuestSockets &sockets() { return sockets_; }
    const GuestSockets &sockets() const { return sockets_; }

    // One new guest flow (lingering: UDP/ICMP), with fast_flows fast-path
    // flows open, fast_lingering of them UDP: checks the caps, then takes
    // a token; counts refusals in stats.
    Admit admit(size_t fast_flows, uint64_t now_ms, bool lingering = false,
                size_t fast_lingering = 0);
    // The most UDP/ICMP sockets: half of max_flows (at least 1).
    size_t max_lingering() const { return max_lingering_; }

    // The libslirp path: whether the frame may go to slirp_input. When it
    // may, call end_slirp_input() after slirp_input returns.
    bool begin_slirp_input(std::span<const uint8_t> eth_frame,
                           const Ipv4Cidr &net, size_t fast_flows,
                           uint64_t now_ms, size_t fast_lingering = 0);
    void end_slirp_input() { sockets_.end_input(); }

    // Sockets held for guest flows: libslirp's plus the fast path's.
    size_t host_sockets(size_t fast_flows) const {
        return sockets_.size() + fast_flows;
    }

private:
    uint32_t max_flows_;
    size_t max_lingering_;
    Stats &stats_;
    TokenBucket bucket_;
    GuestSockets sockets_;
};

} // namespace rknp
