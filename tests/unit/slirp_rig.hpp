// SPDX-License-Identifier: Apache-2.0

// A real libslirp (SlirpAdapter with the default configuration), the one
// path behind GuestIngress and FlowLimits, as the stack loop drives it (no
// fast path), with no tap attached: frames to the guest are counted in
// stats.frames_dropped. Plus the guest's TCP segments from 10.0.2.100 to
// the gateway (10.0.2.2, host loopback).
#pragma once

#include <memory>

#include "parent/flow_limits.hpp"
#include "parent/guest_ingress.hpp"
#include "slirp/adapter.hpp"
#include "tcp_sim_guest.hpp"

namespace tcpsim {

inline Bytes syn_frame(uint16_t sport, uint16_t dport, uint8_t flags = rknp::tcp::kSyn,
                       uint32_t seq = 1000) {
    uint8_t src[16], dst[16];
    addr4(src, 10, 0, 2, 100);
    addr4(dst, 10, 0, 2, 2);
    return guest_frame(false, src, dst, sport, dport, flags, seq, 0, 65535,
                       nullptr, 0);
}

struct SlirpRig {
    rknp::ParentConfig cfg = rknp::ParentConfig::from_c(rknp::default_config());
    rknp::Stats stats;
    rknp::TapIo tap{stats};
    rknp::Coalescer coalescer{tap, stats};
    rknp::PollSet polls;
    rknp::FlowLimits limits;
    std::unique_ptr<rknp::SlirpAdapter> slirp;
    rknp::GuestIngress ingress;
    uint64_t now = 1000;

    SlirpRig(uint32_t max_flows, uint32_t rate)
        : limits(max_flows, rate, stats, 1000), slirp(make_slirp(max_flows)),
          ingress(cfg.cidr, stats, limits, {slirp.get()}) {}
    std::unique_ptr<rknp::SlirpAdapter> make_slirp(uint32_t max_flows) {
        cfg.max_flows = max_flows;
        return std::make_unique<rknp::SlirpAdapter>(
            cfg, tap, coalescer, polls,
            [this](bool lingering) { return ingress.admit_flow(int64_t(now), lingering); });
    }
    // Whether the frame (from a tap without vnet headers) reached libslirp.
    bool input(Bytes f) {
        return ingress.input(f, false, int64_t(now)) == rknp::GuestIngress::Outcome::Path;
    }
    // One round of the stack loop's host-socket servicing (timeout_ms for
    // poll(2)).
    void poll_sockets(int timeout_ms) {
        uint32_t timeout = uint32_t(timeout_ms);
        slirp->before_wait(timeout);
        int n = polls.wait(timeout_ms); // collects what is ready
        slirp->after_wait(false, n < 0);
    }
};

} // namespace tcpsim
