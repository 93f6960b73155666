// SPDX-License-Identifier: Apache-2.0

// A stand-in for libslirp as the last, catch-all path: it records every
// frame it takes, with SlirpAdapter's traits (checksum finished, URG
// cleared) and its gate (SlirpFlowGate: new flows admitted first), so a
// test sees exactly what libslirp would be handed.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "datapath/path.hpp"
#include "slirp/flow_gate.hpp"

struct LibslirpStandIn final : rknp::Path {
    std::vector<std::vector<uint8_t>> frames;
    rknp::SlirpFlowGate gate;

    LibslirpStandIn(const rknp::Ipv4Cidr &net, uint32_t max_flows,
                    rknp::SlirpFlowGate::AdmitFlow admit)
        : gate(net, max_flows, std::move(admit)) {}

    const char *name() const override { return "libslirp stand-in"; }
    Traits traits() const override { return {.needs_checksum = true}; }
    rknp::Verdict guest_frame(std::span<const uint8_t> f) override {
        if (!gate.begin(f)) return rknp::Verdict::Refused;
        frames.emplace_back(f.begin(), f.end());
        gate.end();
        return rknp::Verdict::Consumed;
    }
    int64_t ms_until_next_timer(int64_t) const override { return -1; }
    void run_timers(int64_t) override {}
    void tap_detached() override {}
    size_t flows() const override { return gate.flows(); }
    size_t lingering_flows() const override { return gate.lingering_flows(); }
};
