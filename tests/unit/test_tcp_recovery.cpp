// SPDX-License-Identifier: Apache-2.0

// Fast-path loss recovery against the simulated guest (tcp_sim_guest.hpp):
// acked data dropped across an urgent mark.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

TEST_CASE("tcp_recovery: an ACK across an urgent mark drops all the acked bytes") {
    Conn k;
    // The kernel ends a read at an urgent mark (even with SO_OOBINLINE):
    // one MSG_TRUNC discard of everything acked comes back short.
    // The guest takes the data before the mark, then (the next write) the
    // rest, and ACKs it all at once, as a delayed ACK does.
    Bytes a = pattern(5000, 31), b = {0x42}, d = pattern(5000, 32);
    REQUIRE(::send(k.c, a.data(), a.size(), MSG_NOSIGNAL) == 5000);
    REQUIRE(::send(k.c, b.data(), 1, MSG_OOB | MSG_NOSIGNAL) == 1);
    Bytes want = a;
    want.insert(want.end(), b.begin(), b.end());
    Bytes got;
    Rx r;
    auto take = [&](size_t n) {
        for (int i = 0; i < 500 && got.size() < n; ++i) {
            k.sim.pump(1);
            while (k.g.next(r, 0)) k.g.absorb(r, &got);
        }
    };
    take(a.size());
    REQUIRE(got.size() >= a.size());
    REQUIRE(::send(k.c, d.data(), d.size(), MSG_NOSIGNAL) == 5000);
    want.insert(want.end(), d.begin(), d.end());
    take(want.size());
    REQUIRE(got == want);
    k.g.ack(); // all of it at once
    CHECK(k.sim.fp->flows() == 1);
    CHECK(k.stats().resets_to_guest == 0);
    CHECK(k.stats().bytes_to_guest == want.size());
    // The flow goes on.
    Bytes e = pattern(3000, 33);
    REQUIRE(::send(k.c, e.data(), e.size(), MSG_NOSIGNAL) == 3000);
    Bytes more;
    for (int i = 0; i < 500 && more.size() < e.size(); ++i) {
        k.sim.pump(1);
        while (k.g.next(r, 0))
            if (k.g.absorb(r, &more)) k.g.ack();
    }
    CHECK(more == e);
    CHECK(k.stats().resets_to_guest == 0);
}
