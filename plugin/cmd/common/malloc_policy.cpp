// SPDX-License-Identifier: Apache-2.0

// glibc's mmap threshold held at its default (see the header for why).
#include "cmd/common/malloc_policy.hpp"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace cmd {

void hold_mmap_threshold() {
    const char *tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables != nullptr && std::strstr(tunables, "mmap_threshold") != nullptr) return;
    // Setting it at all turns glibc's dynamic threshold off; the value is
    // glibc's default (DEFAULT_MMAP_THRESHOLD_MIN).
    (void)::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

} // namespace cmd
