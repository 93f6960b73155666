// SPDX-License-Identifier: Apache-2.0

// A GuestSink that keeps every frame written to it, whole (the parts
// joined), for tests that look at what reached the guest.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "datapath/guest_sink.hpp"

struct RecordingSink final : rknp::GuestSink {
    std::vector<std::vector<uint8_t>> frames;
    void write_frame(const rknp::VnetHdr &, std::span<const uint8_t> f,
                     std::span<const uint8_t> rest) override {
        std::vector<uint8_t> b(f.begin(), f.end());
        b.insert(b.end(), rest.begin(), rest.end());
        frames.push_back(std::move(b));
    }
};
