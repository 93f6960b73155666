// SPDX-License-Identifier: Apache-2.0

// Fast-path loss recovery against the simulated guest (tcp_sim_guest.hpp):
// acked data dropped across an urgent mark, RFC 6582's recover point after
// fast and timeout retransmissions, what is not a duplicate ACK, and how
// long unacknowledged data is retried.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

TEST_CASE("tcp_recovery: an ACK across an urgent mark drops all the acked bytes") {
    Conn k;
    // Discard mode never sends past a mark before what precedes it is
    // acked (its peek from the queue's start stops there): no such ACK.
    if (k.sim.fp->peek_mode() == PeekMode::Discard) return;
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

namespace {

// One host write of n bytes (appended to *sent); the frame it makes for
// the guest is returned, not taken.
Rx host_sends(Conn &k, uint32_t seed, Bytes *sent, size_t n) {
    Bytes d = pattern(n, seed);
    REQUIRE(::send(k.c, d.data(), d.size(), MSG_NOSIGNAL) == ssize_t(n));
    sent->insert(sent->end(), d.begin(), d.end());
    Rx f;
    REQUIRE(k.g.next(f));
    REQUIRE(f.seg.payload.size() == n);
    return f;
}

// Three host writes; the guest loses the first frame and holds the other
// two, sending a duplicate ACK for each if dup_acks. Sizes: each write
// brings as much as is in flight (a Discard-mode peek waits for that
// otherwise), all fit in what the socket holds unread on loopback (about
// 95 KiB), and a resend of all is two frames (64240 + 3760).
Bytes lose_one_hold_two(Conn &k, uint32_t seed, bool dup_acks) {
    Bytes sent;
    host_sends(k, seed, &sent, 17000); // lost
    for (uint32_t i = 1; i <= 2; ++i) {
        Rx f = host_sends(k, seed + i, &sent, i == 1 ? 17000 : 34000);
        k.g.absorb(f, nullptr); // held
        if (dup_acks) k.g.ack();
    }
    return sent;
}

// The guest takes what comes until it has want bytes in order, ACKing
// every data frame, and every ACK that moves forward twice (a duplicate
// ACK at once if that is at snd_una == recover).
Bytes receive_acking_twice(Conn &k, size_t want) {
    Bytes got;
    Rx r;
    for (int i = 0; i < 500 && got.size() < want; ++i) {
        k.sim.pump(1);
        while (k.g.next(r, 0)) {
            const uint32_t before = k.g.rcv_nxt;
            k.g.absorb(r, &got);
            if (r.seg.payload.empty()) continue;
            k.g.ack();
            if (k.g.rcv_nxt != before) k.g.ack();
        }
    }
    return got;
}

} // namespace

TEST_CASE("tcp_recovery: copies of data the guest held start no second fast retransmit") {
    // The guest keeps out-of-order data: after the rewind it ACKs up to
    // recover at once, and the resent copies behind that are duplicate
    // ACKs at snd_una == recover, not past it (RFC 6582): no new rewind.
    Conn k;
    k.g.keep_ooo = true;
    const Bytes sent = lose_one_hold_two(k, 51, true);
    REQUIRE(k.stats().fast_retransmits == 1);
    // The host's FIN goes out behind the resent copies (the socket has no
    // room for more data): still in flight when they arrive.
    REQUIRE(::shutdown(k.c, SHUT_WR) == 0);
    CHECK(receive_acking_twice(k, sent.size()) == sent);
    CHECK(k.stats().fast_retransmits == 1);
    CHECK(k.stats().retransmits == 0);
}

TEST_CASE("tcp_recovery: duplicates after a timeout retransmission start no fast retransmit") {
    // RFC 6582 4: a timeout sets recover to the highest sequence sent.
    Conn k;
    k.g.keep_ooo = true;
    const Bytes sent = lose_one_hold_two(k, 61, false); // the guest's ACKs are lost
    k.sim.advance(1100); // the timer rewinds and resends
    REQUIRE(k.stats().retransmits == 1);
    REQUIRE(::shutdown(k.c, SHUT_WR) == 0);
    CHECK(receive_acking_twice(k, sent.size()) == sent);
    CHECK(k.stats().fast_retransmits == 0);
    CHECK(k.stats().retransmits == 1);
}

TEST_CASE("tcp_recovery: guest keepalives and window probes are no duplicate ACKs") {
    Conn k;
    Bytes data = pattern(20000, 36);
    REQUIRE(::send(k.c, data.data(), data.size(), MSG_NOSIGNAL) == 20000);
    Rx r;
    REQUIRE(k.g.next(r)); // in flight, not taken: every ACK below is at snd_una
    // Linux's keepalive and zero-window probe: seq = rcv_nxt - 1, no data,
    // the same ACK and window as before.
    for (int i = 0; i < 4; ++i) k.g.send(kAck, k.g.snd_nxt - 1);
    k.sim.pump(2);
    CHECK(k.stats().fast_retransmits == 0);
    // Two real duplicate ACKs still mean a loss.
    k.g.ack();
    k.g.ack();
    CHECK(k.stats().fast_retransmits == 1);
}

TEST_CASE("tcp_recovery: unacknowledged data is retried for about 15 minutes, as Linux does") {
    // tcp_retries2 = 15 with a 200 ms RTO: 924.6 s before the reset.
    Conn k;
    Bytes data = pattern(10000, 37);
    REQUIRE(::send(k.c, data.data(), data.size(), MSG_NOSIGNAL) == 10000);
    Rx r;
    REQUIRE(k.g.next(r)); // never ACKed
    const int64_t start = k.sim.now;
    while (k.sim.fp->flows() > 0 && k.sim.now - start < 2'000'000) {
        k.sim.advance(1000);
        k.sim.rx.clear();
    }
    const int64_t lasted = k.sim.now - start;
    CHECK(lasted >= 900'000);
    CHECK(lasted <= 960'000);
    CHECK(k.sim.fp->flows() == 0);
    CHECK(k.stats().timeouts == 1);
    CHECK(k.stats().resets_to_guest == 1);
}
