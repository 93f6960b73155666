// SPDX-License-Identifier: Apache-2.0

// How many guest-triggered messages reach the caller's log: at most `burst`
// in any `period_ms`, the rest counted and reported with the next one let
// through. The guest decides how often libslirp complains; rootlesskit's
// log must not grow with it.
#pragma once

#include <cstdint>

namespace rknp {

class LogLimiter {
public:
    LogLimiter(uint32_t burst, int64_t period_ms)
        : burst_(burst), period_ms_(period_ms) {}

    // Whether a message may be logged at now_ms; if so, suppressed gets the
    // number left out since the last one that was.
    bool admit(int64_t now_ms, uint64_t &suppressed) {
        if (count_ == 0 || now_ms - window_start_ >= period_ms_ ||
            now_ms < window_start_) {
            window_start_ = now_ms;
            count_ = 0;
        }
        if (count_ >= burst_) {
            ++suppressed_;
            return false;
        }
        ++count_;
        suppressed = suppressed_;
        suppressed_ = 0;
        return true;
    }

private:
    uint32_t burst_;
    int64_t period_ms_;
    int64_t window_start_ = 0;
    uint32_t count_ = 0;
    uint64_t suppressed_ = 0;
};

} // namespace rknp
