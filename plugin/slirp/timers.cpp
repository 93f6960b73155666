// SPDX-License-Identifier: Apache-2.0

// libslirp's timers: create, arm, and run the due ones.
#include "slirp/timers.hpp"

#include <algorithm>

namespace rknp {

void *Timers::create(Callback cb, void *opaque) {
    timers_.push_back(std::make_unique<Timer>(Timer{cb, opaque}));
    return timers_.back().get();
}

void Timers::destroy(void *timer) {
    std::erase_if(timers_, [&](const auto &t) { return t.get() == timer; });
}

void Timers::arm(void *timer, int64_t expire_ms) {
    static_cast<Timer *>(timer)->expire_ms = std::max<int64_t>(expire_ms, 0);
}

int64_t Timers::ms_until_next(int64_t now_ms) const {
    int64_t best = -1;
    for (const auto &t : timers_) {
        if (t->expire_ms < 0) continue;
        int64_t d = std::max<int64_t>(t->expire_ms - now_ms, 0);
        if (best < 0 || d < best) best = d;
    }
    return best;
}

void Timers::run_due(int64_t now_ms) {
    // A callback may create, destroy or re-arm timers: collect first, then
    // fire only those still present.
    std::vector<Timer *> due;
    for (const auto &t : timers_)
        if (t->expire_ms >= 0 && t->expire_ms <= now_ms) due.push_back(t.get());
    for (Timer *t : due) {
        bool alive = std::any_of(timers_.begin(), timers_.end(),
                                 [&](const auto &u) { return u.get() == t; });
        if (!alive || t->expire_ms < 0 || t->expire_ms > now_ms) continue;
        t->expire_ms = -1;
        t->cb(t->opaque);
    }
}

} // namespace rknp
