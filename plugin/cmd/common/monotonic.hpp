// SPDX-License-Identifier: Apache-2.0

// The program's one monotonic clock read (CLOCK_MONOTONIC, milliseconds):
// the child's start deadline and the API socket's read deadline. The
// program uses the public C ABI only, so not the library's common/clock.hpp.
#pragma once

#include <time.h>

namespace cmd {

inline long now_ms() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

} // namespace cmd
