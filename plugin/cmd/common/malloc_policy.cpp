// SPDX-License-Identifier: Apache-2.0

// glibc's mmap threshold held at 64 KiB (see the header for why).
#include "cmd/common/malloc_policy.hpp"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace cmd {

void hold_mmap_threshold() {
    const char *tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables != nullptr && std::strstr(tunables, "mmap_threshold") != nullptr) return;
    // Setting it at all turns glibc's dynamic threshold off.
    (void)::mallopt(M_MMAP_THRESHOLD, int(kHeldMmapThreshold));
}

} // namespace cmd
