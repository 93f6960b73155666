// SPDX-License-Identifier: Apache-2.0

// At most one log line a period for what a peer can trigger at will
// (refused clients, accept(2) failures): a client that repeats itself fills
// no disk; the lines held back are counted in the next one.
#pragma once

#include <string>

namespace cmd {

class LogLimiter {
public:
    explicit LogLimiter(long period_ms) : period_ms_(period_ms) {}

    // True when a line may be printed now; `suppressed` is how many were
    // held back since the last one.
    bool allow(long now_ms, unsigned &suppressed) {
        if (any_ && now_ms < next_ms_) {
            held_++;
            return false;
        }
        any_ = true;
        next_ms_ = now_ms + period_ms_;
        suppressed = held_;
        held_ = 0;
        return true;
    }

    // " (N more since the last report)" for a line allow() let through.
    static std::string held_back(unsigned held) {
        if (held == 0) return "";
        return " (" + std::to_string(held) + " more since the last report)";
    }

private:
    long period_ms_;
    long next_ms_ = 0;
    bool any_ = false;
    unsigned held_ = 0;
};

} // namespace cmd
