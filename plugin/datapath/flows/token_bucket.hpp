// SPDX-License-Identifier: Apache-2.0

// A token bucket for new flows: `rate` tokens a second, at most `rate`
// banked (the burst), one taken per new flow: the guest's
// max_new_flows_per_sec (FlowLimits) and each forward's own rate (the fast
// paths' forwarded clients). Refilled from the stack loop's millisecond
// clock; no thread, no allocation.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rknp {

class TokenBucket {
public:
    // Starts full: a guest that has been quiet may open `rate` flows at once.
    TokenBucket(uint32_t rate, uint64_t now_ms)
        : rate_(std::max<uint32_t>(rate, 1)), milli_(uint64_t(rate_) * 1000),
          last_(now_ms) {}

    // Takes one token if there is one. The clock is read modulo 2^64: a
    // difference that would be negative (a clock stepping back, or one that
    // wrapped around) counts as no time passed rather than as an eternity.
    bool take(uint64_t now_ms) {
        uint64_t elapsed = now_ms - last_; // modular
        last_ = now_ms;
        if (elapsed < (uint64_t(1) << 63)) {
            // Beyond a second the bucket is full anyway; capping first keeps
            // elapsed * rate far from overflowing.
            elapsed = std::min<uint64_t>(elapsed, 1000);
            milli_ = std::min<uint64_t>(milli_ + elapsed * rate_,
                                        uint64_t(rate_) * 1000);
        }
        if (milli_ < 1000) return false;
        milli_ -= 1000;
        return true;
    }

    // Whole tokens banked now (for tests and logs).
    uint64_t tokens() const { return milli_ / 1000; }

private:
    uint32_t rate_;
    uint64_t milli_; // thousandths of a token: a token per 1000/rate ms
    uint64_t last_;
};

} // namespace rknp
