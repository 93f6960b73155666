// SPDX-License-Identifier: Apache-2.0

// How fast-path flows end against the simulated guest: RSTs either way and
// in every state, refused connects (also a socket connected to itself), FIN and half-close, max_flows, lost
// SYN-ACKs and stray SYNs on open flows (the closing cases the review
// found are in test_tcp_closing.cpp).
#include <doctest/doctest.h>

#include <sys/socket.h>

#include "own_netns.hpp"
#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: guest RST resets the host side") {
    g.send(kRst | kAck, g.snd_nxt);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().resets_from_guest == 1);
    Bytes got;
    int r = 1;
    for (int i = 0; i < 200 && r > 0; ++i) {
        r = drain(c, got);
        if (r > 0) sim.pump(2);
    }
    CHECK(r == -ECONNRESET);
    // Later segments of the tuple are not the fast path's any more.
    CHECK(g.ack() == Verdict::NotMine);
    ::close(c);
}

TEST_CASE("tcp_fastpath: RST in the handshake states frees the flow") {
    Sim sim;
    Listener l;
    {
        Guest g(sim, false, l.port, 41000);
        REQUIRE(g.syn() == Verdict::Consumed);
        // Before the connect completes (nothing pumped yet).
        g.send(kRst, g.iss + 1);
        CHECK(sim.fp->flows() == 0);
    }
    {
        Guest g(sim, false, l.port, 41001);
        REQUIRE(g.syn() == Verdict::Consumed);
        Rx r;
        REQUIRE(g.next(r)); // SYN-ACK
        g.send(kRst, g.iss + 1);
        CHECK(sim.fp->flows() == 0);
    }
    sim.advance(100000);
    CHECK(sim.fp->stats().flows_closed == 2);
}

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: host reset becomes an RST to the guest") {
    linger lg{1, 0};
    ::setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ::close(c);
    Rx r;
    bool rst = false;
    while (!rst && g.next(r)) rst = (r.seg.flags & kRst) != 0;
    CHECK(rst);
    CHECK(r.seg.seq == g.rcv_nxt);
    CHECK(sim.fp->flows() == 0);
}

TEST_CASE("tcp_fastpath: connection refused becomes an RST") {
    Sim sim;
    uint16_t port;
    {
        Listener gone; // bound and closed: nothing listens there now
        port = gone.port;
    }
    Guest g(sim, false, port);
    REQUIRE(g.syn() == Verdict::Consumed);
    Rx r;
    REQUIRE(g.next(r));
    CHECK((r.seg.flags & (kRst | kAck)) == (kRst | kAck));
    CHECK(r.seg.ack == g.iss + 1);
    CHECK(r.csum_ok);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().connect_failed == 1);
}

TEST_CASE("tcp_fastpath: a host socket given the very port the guest dialled is refused") {
    // With one ephemeral port, 45000, a connect to the gateway's 45000
    // (nothing listens there) can only get 45000 itself: the socket would
    // open simultaneously with itself and the guest would talk to its own
    // bytes. The guest must see the port closed instead.
    testns::in_own_netns({{"/proc/sys/net/ipv4/ip_local_port_range", "45000 45000"}},
                         [](bool v6_usable) {
        for (bool v6 : {false, true}) {
            if (v6 && !v6_usable) continue;
            CAPTURE(v6);
            Sim sim;
            Guest g(sim, v6, 45000);
            REQUIRE(g.syn() == Verdict::Consumed);
            Rx r;
            REQUIRE(g.next(r));
            CHECK((r.seg.flags & (kRst | kAck)) == (kRst | kAck));
            CHECK(r.seg.ack == g.iss + 1);
            CHECK(sim.fp->flows() == 0);
            CHECK(sim.fp->stats().connect_failed == 1);
        }
    });
}

TEST_CASE("tcp_fastpath: disable_host_loopback refuses the gateway") {
    FastPathConfig cfg = Sim::base_config();
    cfg.disable_host_loopback = true;
    Sim sim(cfg);
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.syn() == Verdict::Consumed);
    Rx r;
    REQUIRE(g.next(r));
    CHECK((r.seg.flags & kRst) != 0);
    CHECK(r.seg.ack == g.iss + 1);
    CHECK(l.try_accept() < 0);
}

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: FIN both ways and half-close") {
    // Guest sends data + FIN: the host reads the data, then EOF.
    Bytes hello = pattern(3000, 15);
    g.send(kAck | kFin, g.snd_nxt, hello.data(), hello.size());
    g.snd_nxt += 3001;
    Rx r;
    REQUIRE(g.next(r));
    CHECK(r.seg.ack == g.snd_nxt);
    Bytes got;
    int d = 1;
    for (int i = 0; i < 200 && d != 0; ++i) {
        d = drain(c, got);
        sim.pump(1);
    }
    CHECK(d == 0);
    CHECK(got == hello);
    // Half-closed: the host still sends, the guest still receives.
    Bytes reply = pattern(500000, 16);
    H2G o;
    CHECK(host_to_guest(sim, g, c, reply, o) == reply);
    CHECK(sim.fp->flows() == 1);
    // Host closes: FIN to the guest after the data; the guest ACKs it and
    // the flow is gone.
    ::shutdown(c, SHUT_WR);
    bool fin = false;
    for (int i = 0; i < 500 && !fin; ++i) {
        sim.pump(1);
        while (g.next(r, 0)) {
            g.absorb(r, nullptr);
            fin = fin || g.got_fin;
        }
    }
    REQUIRE(fin);
    g.ack();
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().flows_closed == 1);
    CHECK(sim.fp->stats().resets_to_guest == 0);
    ::close(c);
}

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: host closes first, guest keeps sending") {
    ::shutdown(c, SHUT_WR);
    Rx r;
    REQUIRE(g.next(r));
    g.absorb(r, nullptr);
    REQUIRE(g.got_fin);
    g.ack();
    Bytes up = pattern(300000, 17);
    CHECK(guest_to_host(sim, g, c, up, 30000) == up);
    g.send(kAck | kFin, g.snd_nxt);
    REQUIRE(g.next(r));
    CHECK(r.seg.ack == g.snd_nxt + 1);
    CHECK(sim.fp->flows() == 0);
    Bytes rest;
    int d = 1;
    for (int i = 0; i < 100 && d != 0; ++i) d = drain(c, rest), sim.pump(1);
    CHECK(d == 0);
    ::close(c);
}

TEST_CASE("tcp_fastpath: max_flows reached: RST and counted") {
    FastPathConfig cfg = Sim::base_config();
    cfg.max_flows = 2;
    Sim sim(cfg);
    Listener l;
    Guest a(sim, false, l.port, 42000), b(sim, false, l.port, 42001), x(sim, false, l.port, 42002);
    REQUIRE(a.connect());
    REQUIRE(b.connect());
    REQUIRE(x.syn() == Verdict::Consumed);
    Rx r;
    REQUIRE(x.next(r));
    CHECK((r.seg.flags & kRst) != 0);
    CHECK(sim.fp->stats().flows_refused == 1);
    CHECK(sim.fp->flows() == 2);
    // A slot frees, a new flow fits again.
    a.send(kRst, a.snd_nxt);
    Guest y(sim, false, l.port, 42003);
    CHECK(y.connect());
}

TEST_CASE("tcp_fastpath: lost SYN-ACK: resent on a SYN retransmission and by the timer") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.syn() == Verdict::Consumed);
    Rx r;
    REQUIRE(g.next(r));
    CHECK((r.seg.flags & (kSyn | kAck)) == (kSyn | kAck));
    uint32_t isn = r.seg.seq;
    // The guest lost it and sends its SYN again.
    REQUIRE(g.syn() == Verdict::Consumed);
    REQUIRE(g.next(r));
    CHECK((r.seg.flags & (kSyn | kAck)) == (kSyn | kAck));
    CHECK(r.seg.seq == isn);
    // Nothing from the guest: the timer resends with backoff, then gives up.
    sim.advance(Flow::kRtoInitialMs);
    REQUIRE(g.next(r, 0));
    CHECK(r.seg.seq == isn);
    CHECK((r.seg.flags & kSyn) != 0);
    for (int i = 0; i < 20 && sim.fp->flows() > 0; ++i) sim.advance(Flow::kRtoMaxMs);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().timeouts == 1);
    bool rst = false;
    while (g.next(r, 0)) rst = rst || (r.seg.flags & kRst);
    CHECK(rst);
}

TEST_CASE_FIXTURE(Accepted,
                  "tcp_fastpath: SYN and bad ACKs on an open flow get ACKs, nothing else") {
    // A SYN on the established flow: a challenge ACK.
    g.send(kSyn, g.iss + 12345);
    Rx r;
    REQUIRE(g.next(r));
    CHECK(r.seg.flags == kAck);
    CHECK(r.seg.ack == g.snd_nxt);
    // An ACK for data never sent: ACK back, the segment's data ignored.
    Bytes d = pattern(100, 22);
    sim.input(guest_frame(false, g.src, g.dst, g.sport, g.dport, kAck, g.snd_nxt,
                          g.rcv_nxt + 5000, 65535, d.data(), d.size()));
    REQUIRE(g.next(r));
    CHECK(r.seg.flags == kAck);
    CHECK(r.seg.ack == g.snd_nxt);
    // A segment without ACK on an established flow: dropped silently.
    g.send(kPsh, g.snd_nxt, d.data(), d.size());
    CHECK_FALSE(g.next(r, 20));
    CHECK(sim.fp->flows() == 1);
    Bytes got;
    drain(c, got);
    CHECK(got.empty());
    ::close(c);
}

TEST_CASE("tcp_fastpath: RST in the half-closed states") {
    Sim sim;
    Listener l;
    for (int which = 0; which < 2; ++which) {
        Guest g(sim, false, l.port, uint16_t(44000 + which));
        REQUIRE(g.connect());
        int c = accept_from(sim, l);
        REQUIRE(c >= 0);
        Rx r;
        if (which == 0) { // the guest closed its side first
            g.send(kAck | kFin, g.snd_nxt);
            g.snd_nxt += 1;
            REQUIRE(g.next(r));
        } else { // the host closed its side first
            ::shutdown(c, SHUT_WR);
            bool fin = false;
            while (!fin && g.next(r)) {
                g.absorb(r, nullptr);
                fin = g.got_fin;
            }
            REQUIRE(fin);
            g.ack();
        }
        REQUIRE(sim.fp->flows() == 1);
        g.send(kRst, g.snd_nxt);
        CHECK(sim.fp->flows() == 0);
        Bytes got;
        int d = 1;
        for (int i = 0; i < 200 && d > 0; ++i) {
            d = drain(c, got);
            if (d > 0) sim.pump(1);
        }
        // The guest's FIN was seen first (EOF) where it sent one; then the reset.
        CHECK((d == -ECONNRESET || (which == 0 && d == 0)));
        ::close(c);
    }
    CHECK(sim.fp->stats().resets_from_guest == 2);
}
