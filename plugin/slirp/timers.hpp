// SPDX-License-Identifier: Apache-2.0

// libslirp's timers, run by the stack loop. Only a handful exist at a time
// (router advertisements, delayed ACK bookkeeping), so a vector is enough.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace rknp {

class Timers {
public:
    using Callback = void (*)(void *);

    void *create(Callback cb, void *opaque);
    void destroy(void *timer);
    void arm(void *timer, int64_t expire_ms);
    // Milliseconds until the earliest armed timer (0 if overdue), or -1.
    int64_t ms_until_next(int64_t now_ms) const;
    // Runs every timer due at now_ms; each fires once per arm().
    void run_due(int64_t now_ms);

private:
    struct Timer {
        Callback cb;
        void *opaque;
        int64_t expire_ms = -1; // -1: not armed
    };
    std::vector<std::unique_ptr<Timer>> timers_;
};

} // namespace rknp
