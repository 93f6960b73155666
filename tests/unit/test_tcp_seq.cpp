// SPDX-License-Identifier: Apache-2.0

// Sequence arithmetic across 2^32, the fast path's deadline heap and its
// reorder stash.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "datapath/tcp/reorder.hpp"
#include "datapath/tcp/seq.hpp"
#include "datapath/flows/timer_heap.hpp"

using namespace rknp::tcp;

TEST_CASE("tcp_seq: comparisons wrap around 2^32") {
    CHECK(seq_lt(1, 2));
    CHECK(seq_lt(0xffffff00u, 0x10u)); // across the wrap
    CHECK(seq_gt(0x10u, 0xffffff00u));
    CHECK(seq_le(5, 5));
    CHECK(seq_ge(5, 5));
    CHECK_FALSE(seq_lt(5, 5));
    CHECK(seq_diff(0x10u, 0xfffffff0u) == 0x20);
    CHECK(seq_diff(0xfffffff0u, 0x10u) == -0x20);
    CHECK(seq_between(0x5u, 0xfffffff0u, 0x10u));
    CHECK(seq_between(0xfffffff0u, 0xfffffff0u, 0x10u));
    CHECK(seq_between(0x10u, 0xfffffff0u, 0x10u));
    CHECK_FALSE(seq_between(0x11u, 0xfffffff0u, 0x10u));
    CHECK_FALSE(seq_between(0xffffffefu, 0xfffffff0u, 0x10u));
    CHECK(seq_max(0xfffffff0u, 0x10u) == 0x10u);
    CHECK(seq_min(0xfffffff0u, 0x10u) == 0xfffffff0u);
    // Half the space away is the edge of meaning: 2^31 - 1 is still "after".
    CHECK(seq_gt(0x7fffffffu, 0u));
}

TEST_CASE("tcp_timers: heap keeps the earliest deadline on top") {
    rknp::TimerHeap h(100);
    CHECK(h.empty());
    h.set(5, 50);
    h.set(7, 20);
    h.set(9, 70);
    CHECK(h.top_id() == 7);
    h.set(7, 80); // moved later
    CHECK(h.top_id() == 5);
    h.set(9, 10); // moved earlier
    CHECK(h.top_id() == 9);
    h.cancel(9);
    CHECK(h.top_id() == 5);
    CHECK(h.deadline(9) == -1);
    h.set(5, -1); // cancel through set
    CHECK(h.top_id() == 7);
    h.cancel(7);
    CHECK(h.empty());
}

TEST_CASE("tcp_timers: random operations match a reference") {
    std::mt19937 rng(1234);
    const uint32_t n = 200;
    rknp::TimerHeap h(n);
    std::vector<int64_t> ref(n, -1);
    for (int step = 0; step < 20000; ++step) {
        uint32_t id = rng() % n;
        if (rng() % 4 == 0)
            h.cancel(id), ref[id] = -1;
        else {
            int64_t t = rng() % 1000;
            h.set(id, t);
            ref[id] = t;
        }
        int64_t best = -1;
        for (int64_t t : ref)
            if (t >= 0 && (best < 0 || t < best)) best = t;
        if (best < 0) {
            REQUIRE(h.empty());
        } else {
            REQUIRE_FALSE(h.empty());
            REQUIRE(h.top_deadline() == best);
            REQUIRE(ref[h.top_id()] == best);
        }
    }
}

TEST_CASE("reorder stash: bounded slots, oldest ready first, expiry") {
    ReorderStash st(2, 100);
    const uint8_t f1[3] = {1, 2, 3}, f2[4] = {4, 5, 6, 7}, big[101] = {};
    CHECK(st.empty());
    CHECK_FALSE(st.hold(7, 500, big, 0)); // longer than a slot
    REQUIRE(st.hold(7, 0xfffffff0u, f1, 10)); // just before the wrap
    REQUIRE(st.hold(7, 20, f2, 11));
    CHECK_FALSE(st.hold(8, 1, f1, 11)); // all slots taken
    CHECK(st.next_deadline() == 10 + ReorderStash::kHoldMs);
    CHECK_FALSE(st.ready(7, 0xffffffe0u).has_value()); // both still ahead
    CHECK_FALSE(st.ready(8, 100).has_value());          // another flow's
    auto s = st.ready(7, 100); // both at or before 100: the older sequence first
    REQUIRE(s.has_value());
    CHECK(st.frame(*s).size() == 3);
    CHECK(st.frame(*s)[2] == 3);
    st.release(*s);
    CHECK_FALSE(st.expired(11 + ReorderStash::kHoldMs - 1).has_value());
    auto e = st.expired(11 + ReorderStash::kHoldMs);
    REQUIRE(e.has_value());
    CHECK(st.flow(*e) == 7);
    st.release(*e);
    CHECK(st.empty());
    CHECK(st.next_deadline() == -1);
}
