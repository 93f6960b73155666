// SPDX-License-Identifier: Apache-2.0

// libslirp's timer table: arm, re-arm, fire once, next deadline.
#include <doctest/doctest.h>

#include "slirp/timers.hpp"

using namespace rknp;

namespace {
int fired = 0;
void count(void *) { ++fired; }
} // namespace

TEST_CASE("timers fire once per arm, in time, and can be destroyed") {
    Timers t;
    fired = 0;
    void *a = t.create(count, nullptr);
    void *b = t.create(count, nullptr);
    CHECK(t.ms_until_next(0) == -1);
    t.arm(a, 100);
    t.arm(b, 50);
    CHECK(t.ms_until_next(0) == 50);
    CHECK(t.ms_until_next(70) == 0);
    t.run_due(60);
    CHECK(fired == 1);
    CHECK(t.ms_until_next(60) == 40);
    t.run_due(60);
    CHECK(fired == 1);
    t.destroy(a);
    t.run_due(1000);
    CHECK(fired == 1);
    CHECK(t.ms_until_next(1000) == -1);
}

namespace {
struct Rearm {
    Timers *timers;
    void *self;
    int runs = 0;
};
void rearm(void *p) {
    auto *r = static_cast<Rearm *>(p);
    ++r->runs;
    r->timers->arm(r->self, 10);
}
void destroy_other(void *p) {
    auto *pair = static_cast<std::pair<Timers *, void *> *>(p);
    pair->first->destroy(pair->second);
}
} // namespace

TEST_CASE("a callback may re-arm itself or destroy another due timer") {
    Timers t;
    Rearm r{&t, nullptr};
    r.self = t.create(rearm, &r);
    t.arm(r.self, 5);
    t.run_due(5);
    CHECK(r.runs == 1);
    t.run_due(5); // re-armed for 10: not due yet
    CHECK(r.runs == 1);

    fired = 0;
    std::pair<Timers *, void *> ctx{&t, nullptr};
    void *killer = t.create(destroy_other, &ctx);
    ctx.second = t.create(count, nullptr);
    t.arm(killer, 1);
    t.arm(ctx.second, 1);
    t.run_due(1); // the victim is gone before its turn
    CHECK(fired == 0);
}
