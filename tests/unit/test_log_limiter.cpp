// SPDX-License-Identifier: Apache-2.0

// The limiter on guest-triggered log messages: a burst per period, then
// silence, and the count of what was left out told with the next message.
#include <doctest/doctest.h>

#include "common/log_limiter.hpp"

using namespace rknp;

TEST_CASE("at most a burst per period; the next message says how many were left out") {
    LogLimiter lim(3, 1000);
    uint64_t suppressed = 99;
    for (int i = 0; i < 3; ++i) {
        CHECK(lim.admit(5000 + i, suppressed));
        CHECK(suppressed == 0);
    }
    for (int i = 0; i < 1000; ++i) CHECK_FALSE(lim.admit(5100 + i % 800, suppressed));
    CHECK(lim.admit(6000, suppressed)); // a new period
    CHECK(suppressed == 1000);
    CHECK(lim.admit(6001, suppressed));
    CHECK(suppressed == 0);
    // A clock that steps back starts a new period rather than muting.
    LogLimiter back(1, 1000);
    CHECK(back.admit(10000, suppressed));
    CHECK_FALSE(back.admit(10001, suppressed));
    CHECK(back.admit(500, suppressed));
    CHECK(suppressed == 1);
}
