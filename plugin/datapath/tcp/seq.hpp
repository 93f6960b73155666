// SPDX-License-Identifier: Apache-2.0

// TCP sequence-number arithmetic modulo 2^32 (RFC 793 3.3, RFC 1982): every
// comparison of sequence or acknowledgement numbers in the fast path goes
// through these, so flows that cross 2^32 behave like any other.
#pragma once

#include <cstdint>

namespace rknp::tcp {

// Signed distance from b forward to a; valid while |a - b| < 2^31, which
// windows (at most 2^30 with scaling) guarantee.
constexpr int32_t seq_diff(uint32_t a, uint32_t b) { return int32_t(a - b); }

constexpr bool seq_lt(uint32_t a, uint32_t b) { return seq_diff(a, b) < 0; }
constexpr bool seq_le(uint32_t a, uint32_t b) { return seq_diff(a, b) <= 0; }
constexpr bool seq_gt(uint32_t a, uint32_t b) { return seq_diff(a, b) > 0; }
constexpr bool seq_ge(uint32_t a, uint32_t b) { return seq_diff(a, b) >= 0; }

// lo <= a <= hi, walking forward from lo (an empty or wrapped range is
// fine: the test is on unsigned distances from lo).
constexpr bool seq_between(uint32_t a, uint32_t lo, uint32_t hi) {
    return uint32_t(a - lo) <= uint32_t(hi - lo);
}

// The later / earlier of two sequence numbers.
constexpr uint32_t seq_max(uint32_t a, uint32_t b) { return seq_ge(a, b) ? a : b; }
constexpr uint32_t seq_min(uint32_t a, uint32_t b) { return seq_le(a, b) ? a : b; }

} // namespace rknp::tcp
