// SPDX-License-Identifier: Apache-2.0

// The one monotonic clock every part of the stack reads (CLOCK_MONOTONIC):
// deadlines, libslirp's clock, initial sequence numbers and fallback seeds.
#pragma once

#include <time.h>

#include <cstdint>

namespace rknp {

inline int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t monotonic_us() { return monotonic_ns() / 1000; }
inline int64_t monotonic_ms() { return monotonic_ns() / 1000000; }

} // namespace rknp
