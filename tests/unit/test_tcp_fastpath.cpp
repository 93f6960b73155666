// SPDX-License-Identifier: Apache-2.0

// The fast path against a simulated guest (frames built by the test, read
// back from the GuestFrames batch) with real loopback sockets as the host
// side: handshake, bulk both ways, loss, reordering, windows, resets,
// teardown, limits and sequence wraparound. Timers run on a fake clock.
#include <doctest/doctest.h>

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <random>

#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

TEST_CASE("tcp_fastpath: handshake negotiates MSS and window scaling") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    Rx synack;
    REQUIRE(g.connect(&synack));
    CHECK(synack.csum_ok);
    CHECK(synack.seg.mss == 65520 - 40);
    CHECK(synack.seg.wscale == Flow::kOurWs);
    CHECK(synack.vnet.flags == kVnetNeedsCsum);
    const uint8_t gw_mac[6] = {0x52, 0x55, 10, 0, 2, 2};
    CHECK(std::memcmp(synack.frame.data() + 6, gw_mac, 6) == 0);
    CHECK(std::memcmp(synack.frame.data(), kGuestMac, 6) == 0);
    CHECK(synack.seg.src[15] == 2); // from the gateway address the guest dialled
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    CHECK(sim.fp->flows() == 1);
    CHECK(sim.fp->stats().flows_opened == 1);
    ::close(c);
}

TEST_CASE("tcp_fastpath: a guest without window scaling gets none") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    g.ws = -1;
    g.mss = 1400;
    Rx synack;
    REQUIRE(g.connect(&synack));
    CHECK(synack.seg.wscale == -1);
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    // Host -> guest frames use the guest's MSS for GSO.
    Bytes data = pattern(200000, 1);
    H2G o;
    Bytes got = host_to_guest(sim, g, c, data, o);
    CHECK(got == data);
    CHECK(o.gso_frames > 0);
    ::close(c);
}

TEST_CASE("tcp_fastpath: bulk guest -> host, byte exact") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(4 << 20, 2);
    Bytes got = guest_to_host(sim, g, c, data, 65000);
    CHECK(got.size() == data.size());
    CHECK(got == data);
    CHECK(sim.fp->stats().bytes_to_host == data.size());
    ::close(c);
}

TEST_CASE("tcp_fastpath: bulk host -> guest in GSO frames, byte exact") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(4 << 20, 3);
    H2G o;
    Bytes got = host_to_guest(sim, g, c, data, o);
    CHECK(got == data);
    CHECK(o.gso_frames > 0);
    CHECK(o.max_payload > 60000);
    CHECK(sim.fp->stats().retransmits == 0);
    ::close(c);
}

TEST_CASE("tcp_fastpath: IPv6 through the gateway to ::1") {
    Sim sim;
    Listener l(true);
    Guest g(sim, true, l.port);
    Rx synack;
    REQUIRE(g.connect(&synack));
    CHECK(synack.seg.v6);
    CHECK(synack.seg.mss == 65520 - 60);
    const uint8_t gw_mac[6] = {0x52, 0x56, 0, 0, 0, 2};
    CHECK(std::memcmp(synack.frame.data() + 6, gw_mac, 6) == 0);
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes up = pattern(300000, 4);
    CHECK(guest_to_host(sim, g, c, up, 20000) == up);
    Bytes down = pattern(300000, 5);
    H2G o;
    CHECK(host_to_guest(sim, g, c, down, o) == down);
    ::close(c);
}

TEST_CASE("tcp_fastpath: a lost frame is resent after duplicate ACKs") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    g.mss = 1460;
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(2 << 20, 6);
    H2G o;
    o.drop_first_data = true;
    Bytes got = host_to_guest(sim, g, c, data, o);
    CHECK(got == data);
    CHECK(sim.fp->stats().fast_retransmits >= 1);
    ::close(c);
}

TEST_CASE("tcp_fastpath: a lost frame is resent by the retransmission timer") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(1 << 20, 7);
    H2G o;
    o.silent_drop = true;
    Bytes got = host_to_guest(sim, g, c, data, o);
    CHECK(got == data);
    CHECK(sim.fp->stats().retransmits >= 1);
    ::close(c);
}

TEST_CASE("tcp_fastpath: partial and duplicate ACKs") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(1 << 20, 8);
    H2G o;
    o.ack_half = true;
    o.dup_acks = true;
    CHECK(host_to_guest(sim, g, c, data, o) == data);
    ::close(c);
}

TEST_CASE("tcp_fastpath: guest data ahead of a gap is held a moment, then dropped with a duplicate ACK") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    // The acknowledgement of the last frame the guest got (0: none came).
    auto last_ack = [&] {
        Rx r;
        uint32_t ack = 0;
        for (bool any = false; g.next(r, any ? 0 : 200); any = true) ack = r.seg.ack;
        return ack;
    };
    const uint32_t base = g.snd_nxt;
    Bytes a = pattern(1000, 9), b = pattern(1000, 10), c3 = pattern(1000, 13),
          d4 = pattern(1000, 14);
    // Reordered on the way to the tap (a container behind docker0):
    // segment 2 a moment before segment 1. Held, then both go on, no
    // duplicate ACK, nothing lost.
    g.send_data(base + 1000, b);
    CHECK(sim.fp->stats().reorder_held == 1);
    g.send_data(base, a);
    CHECK(sim.fp->stats().reorder_filled == 1);
    CHECK(last_ack() == base + 2000);
    CHECK(sim.fp->stats().segments_dropped == 0);
    // Segment 4 without 3: after the hold time it is dropped, and the
    // guest gets a duplicate ACK asking for 3.
    g.send_data(base + 3000, d4);
    sim.advance(ReorderStash::kHoldMs + 1);
    CHECK(sim.fp->stats().segments_dropped == 1);
    CHECK(last_ack() == base + 2000);
    g.send_data(base + 2000, c3);
    CHECK(last_ack() == base + 3000);
    g.send_data(base + 3000, d4);
    CHECK(last_ack() == base + 4000);
    // A retransmission overlapping what was taken: only the new part goes on.
    Bytes tail = pattern(500, 11);
    Bytes overlap(d4.begin() + 500, d4.end());
    overlap.insert(overlap.end(), tail.begin(), tail.end());
    g.send_data(base + 3500, overlap);
    CHECK(last_ack() == base + 4500);
    g.snd_nxt = base + 4500;
    Bytes want;
    for (const Bytes *p : {&a, &b, &c3, &d4, &tail}) want.insert(want.end(), p->begin(), p->end());
    Bytes got;
    for (int i = 0; i < 200 && got.size() < want.size(); ++i) {
        drain(c, got);
        sim.pump(1);
    }
    CHECK(got == want);
    // And with a whole reordering pass in bulk.
    Bytes data = pattern(500000, 12);
    g.snd_una = g.snd_nxt;
    CHECK(guest_to_host(sim, g, c, data, 10000, true) == data);
    ::close(c);
}

TEST_CASE("tcp_fastpath: zero window from the guest, probes, reopening") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(200000, 13);
    REQUIRE(::send(c, data.data(), data.size(), 0) == ssize_t(data.size()));
    // Take the first frame, then close the window.
    Rx r;
    Bytes got;
    REQUIRE(g.next(r));
    g.absorb(r, &got);
    g.win_field = 0;
    g.ack();
    // Drain what was already in flight; nothing new may come.
    sim.pump(5);
    while (g.next(r, 0)) {
        bool ok = int32_t(r.seg.seq - g.rcv_nxt) <= 0 || r.seg.payload.empty();
        CHECK(ok);
    }
    sim.rx.clear();
    sim.pump(20);
    for (auto &x : sim.rx) CHECK(x.seg.payload.empty());
    sim.rx.clear();
    // The persist timer probes with an old sequence number.
    sim.advance(1100);
    sim.advance(2200);
    bool probed = false;
    while (g.next(r, 0)) {
        CHECK(r.seg.payload.empty());
        if (r.seg.seq == g.rcv_nxt - 1) probed = true;
    }
    CHECK(probed);
    CHECK(sim.fp->stats().timeouts == 0);
    CHECK(sim.fp->flows() == 1);
    // Reopen: everything arrives.
    g.win_field = 65535;
    g.ack();
    Bytes rest(data.begin() + long(got.size()), data.end());
    Bytes tail;
    for (int i = 0; i < 2000 && got.size() + tail.size() < data.size(); ++i) {
        sim.pump(1);
        while (g.next(r, 0)) {
            if (g.absorb(r, &tail)) g.ack();
        }
    }
    CHECK(tail == rest);
    ::close(c);
}

TEST_CASE("tcp_fastpath: our window follows the host socket and reopens") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    int small = 256 * 1024; // not tiny: below one loopback MSS the host side crawls (SWS avoidance)
    ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    // The host application does not read: the guest fills the socket
    // buffers until our window closes.
    Bytes data = pattern(16 << 20, 14);
    uint32_t base = g.snd_nxt;
    size_t sent = 0;
    int still = 0;
    uint32_t min_wnd = UINT32_MAX;
    for (int i = 0; i < 3000 && still < 30; ++i) {
        uint32_t acked = g.snd_una - base;
        size_t edge = size_t(acked) + g.peer_wnd;
        size_t len = std::min<size_t>({65000, data.size() - sent, edge > sent ? edge - sent : 0});
        if (len > 0) {
            Bytes b(data.begin() + long(sent), data.begin() + long(sent + len));
            g.send_data(base + uint32_t(sent), b);
            sent += len;
        }
        Rx r;
        uint32_t before = g.snd_una;
        while (g.next(r, 0)) g.absorb(r, nullptr);
        min_wnd = std::min(min_wnd, g.peer_wnd);
        still = (g.snd_una == before && len == 0) ? still + 1 : 0;
        sent = g.snd_una - base; // what was refused goes again later
        sim.pump(0);
    }
    CHECK(min_wnd < 65536);
    CHECK(g.snd_una - base < data.size());
    // Now the host reads: a window update must reach the guest without it
    // sending anything (EPOLLOUT or the window timer).
    Bytes got;
    uint32_t wnd_before = g.peer_wnd;
    bool reopened = false;
    for (int i = 0; i < 3000 && !reopened; ++i) {
        drain(c, got);
        sim.pump(1);
        if (i % 50 == 49) sim.advance(20);
        Rx r;
        while (g.next(r, 0)) {
            g.absorb(r, nullptr);
            if (g.peer_wnd > wnd_before + 65536) reopened = true;
        }
    }
    CHECK(reopened);
    CHECK(Bytes(data.begin(), data.begin() + long(got.size())) == got);
    ::close(c);
}

TEST_CASE("tcp_fastpath: guest RST resets the host side") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
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

TEST_CASE("tcp_fastpath: host reset becomes an RST to the guest") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
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

TEST_CASE("tcp_fastpath: FIN both ways and half-close") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
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

TEST_CASE("tcp_fastpath: host closes first, guest keeps sending") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
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

TEST_CASE("tcp_fastpath: half-closed flows time out") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    g.send(kAck | kFin, g.snd_nxt);
    g.snd_nxt += 1;
    Rx r;
    REQUIRE(g.next(r));
    CHECK(sim.fp->flows() == 1);
    sim.advance(Flow::kHalfClosedIdleMs + 10);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().timeouts == 1);
    ::close(c);
}

TEST_CASE("tcp_fastpath: unacknowledged data gives up after the retries") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(10000, 18);
    ::send(c, data.data(), data.size(), 0);
    Rx r;
    REQUIRE(g.next(r)); // never ACKed
    for (int i = 0; i < 12 && sim.fp->flows() > 0; ++i) sim.advance(Flow::kRtoMaxMs + 1);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().retransmits == Flow::kMaxRetries);
    CHECK(sim.fp->stats().timeouts == 1);
    bool rst = false;
    while (g.next(r, 0)) rst = rst || (r.seg.flags & kRst);
    CHECK(rst);
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

TEST_CASE("tcp_fastpath: what is not the fast path's") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    // Non-SYN on an unknown tuple: a libslirp connection.
    CHECK(g.ack() == Verdict::NotMine);
    // SYN-ACK from the guest: answering a libslirp host forward.
    CHECK(g.send(kSyn | kAck, 5) == Verdict::NotMine);
    // TCP to the DNS address and inside the virtual network.
    uint8_t dns[16];
    addr4(dns, 10, 0, 2, 3);
    std::memcpy(g.dst, dns, 16);
    CHECK(g.syn() == Verdict::NotMine);
    // UDP and ARP.
    Bytes f = guest_frame(false, g.src, dns, 1, 53, 0, 0, 0, 0, nullptr, 0);
    f[14 + 9] = 17;
    CHECK(sim.fp->guest_frame(f) == Verdict::NotMine);
    Bytes arp(42, 0);
    arp[12] = 0x08;
    arp[13] = 0x06;
    CHECK(sim.fp->guest_frame(arp) == Verdict::NotMine);
    CHECK(sim.fp->flows() == 0);
    // A malformed TCP frame is dropped, counted.
    Bytes bad = guest_frame(false, g.src, dns, 1, 2, kSyn, 0, 0, 0, nullptr, 0);
    bad[14 + 20 + 12] = 0xf0;
    CHECK(sim.fp->guest_frame(bad) == Verdict::Consumed);
    CHECK(sim.fp->stats().malformed == 1);
}

TEST_CASE("tcp_fastpath: outbound address is bound before connect") {
    FastPathConfig cfg = Sim::base_config();
    cfg.outbound_addr = 0x7f000005; // 127.0.0.5
    Sim sim(cfg);
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    sockaddr_storage peer{};
    int c = accept_from(sim, l, &peer);
    REQUIRE(c >= 0);
    auto *a = reinterpret_cast<sockaddr_in *>(&peer);
    CHECK(ntohl(a->sin_addr.s_addr) == 0x7f000005u);
    ::close(c);
}

TEST_CASE("tcp_fastpath: sequence numbers wrap around 2^32 both ways") {
    FastPathConfig cfg = Sim::base_config();
    cfg.fixed_isn = 0xfffff000u;
    Sim sim(cfg);
    Listener l;
    Guest g(sim, false, l.port, 43000, 0xffffff00u);
    Rx synack;
    REQUIRE(g.connect(&synack));
    CHECK(synack.seg.seq == 0xfffff000u);
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes up = pattern(1 << 20, 19);
    CHECK(guest_to_host(sim, g, c, up, 40000) == up);
    Bytes down = pattern(1 << 20, 20);
    H2G o;
    o.drop_first_data = true; // a rewind across the wrap too
    CHECK(host_to_guest(sim, g, c, down, o) == down);
    CHECK(int32_t(g.snd_nxt) > 0); // wrapped
    ::close(c);
}

TEST_CASE("tcp_fastpath: a tiny batch postpones work and wakes the loop") {
    FastPathConfig cfg = Sim::base_config();
    cfg.batch_data_frames = 1;
    cfg.batch_control_frames = 4;
    Sim sim(cfg);
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes data = pattern(1 << 20, 21);
    REQUIRE(::send(c, data.data(), 200000, 0) == 200000);
    // One frame per batch; the epoll fd stays readable while more waits.
    Bytes got;
    for (int i = 0; i < 100 && got.size() < 200000; ++i) {
        pollfd p{sim.fp->epoll_fd(), POLLIN, 0};
        REQUIRE(::poll(&p, 1, 1000) == 1);
        sim.fp->poll_events();
        CHECK(sim.fp->frames().size() <= 1 + 4);
        sim.collect();
        Rx r;
        while (g.next(r, 0))
            if (g.absorb(r, &got)) g.ack();
    }
    CHECK(got == Bytes(data.begin(), data.begin() + 200000));
    CHECK(sim.fp->stats().retransmits == 0);
    CHECK(sim.max_batch_seen <= 5);
    ::close(c);
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

TEST_CASE("tcp_fastpath: SYN and bad ACKs on an open flow get ACKs, nothing else") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
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

TEST_CASE("tcp_fastpath: many flows, freed in random order, stay apart") {
    FastPathConfig cfg = Sim::base_config();
    cfg.max_flows = 256;
    Sim sim(cfg);
    Listener l, l6(true);
    std::vector<std::unique_ptr<Guest>> gs;
    const int n = 150;
    for (int i = 0; i < n; ++i) {
        bool v6 = (i % 3) == 0;
        gs.push_back(std::make_unique<Guest>(sim, v6, v6 ? l6.port : l.port,
                                             uint16_t(50000 + i), uint32_t(i) * 7919u));
        REQUIRE(gs.back()->connect());
    }
    CHECK(sim.fp->flows() == size_t(n));
    std::vector<int> hs;
    for (int i = 0; i < 5000 && hs.size() < size_t(n); ++i) {
        int c = l.try_accept();
        if (c < 0) c = l6.try_accept();
        if (c >= 0) hs.push_back(c);
        else sim.pump(1);
    }
    REQUIRE(hs.size() == size_t(n));
    // Each guest flow says its port; each host socket must read exactly one
    // port, all different.
    auto say = [&](Guest &g) {
        uint8_t b[2] = {uint8_t(g.sport >> 8), uint8_t(g.sport)};
        g.send(kAck | kPsh, g.snd_nxt, b, 2);
        g.snd_nxt += 2;
    };
    auto hear = [&](std::vector<uint16_t> &ports) {
        for (int round = 0; round < 200; ++round) {
            size_t total = 0;
            ports.clear();
            for (int c : hs) {
                Bytes got;
                drain(c, got);
                for (size_t k = 0; k + 1 < got.size(); k += 2)
                    ports.push_back(uint16_t(got[k] << 8 | got[k + 1]));
                total += got.size();
            }
            if (total != 0) return;
            sim.pump(1);
        }
    };
    for (auto &g : gs) say(*g);
    std::vector<uint16_t> ports, all;
    for (int i = 0; i < 20 && all.size() < size_t(n); ++i) {
        hear(ports);
        all.insert(all.end(), ports.begin(), ports.end());
    }
    std::sort(all.begin(), all.end());
    REQUIRE(all.size() == size_t(n));
    for (int i = 0; i < n; ++i) CHECK(all[size_t(i)] == 50000 + i);
    // Reset every other flow in a scrambled order, then talk again.
    std::mt19937 rng(7);
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[size_t(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<bool> alive(n, true);
    for (int i = 0; i < n / 2; ++i) {
        Guest &g = *gs[size_t(order[size_t(i)])];
        g.send(kRst, g.snd_nxt);
        alive[size_t(order[size_t(i)])] = false;
    }
    CHECK(sim.fp->flows() == size_t(n - n / 2));
    sim.rx.clear();
    for (int i = 0; i < n; ++i) {
        Verdict v = gs[size_t(i)]->ack();
        CHECK((v == Verdict::Consumed) == bool(alive[size_t(i)]));
    }
    for (int i = 0; i < n; ++i)
        if (alive[size_t(i)]) say(*gs[size_t(i)]);
    all.clear();
    for (int i = 0; i < 20 && all.size() < size_t(n - n / 2); ++i) {
        hear(ports);
        all.insert(all.end(), ports.begin(), ports.end());
    }
    CHECK(all.size() == size_t(n - n / 2));
    for (uint16_t p : all) CHECK(alive[size_t(p - 50000)]);
    for (int c : hs) ::close(c);
}

TEST_CASE("tcp_fastpath: urgent data stays in the byte stream") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    // Host -> guest: an out-of-band byte arrives inline, in order.
    Bytes a = pattern(5000, 23), b = {0x42}, d = pattern(5000, 24);
    REQUIRE(::send(c, a.data(), a.size(), 0) == 5000);
    REQUIRE(::send(c, b.data(), 1, MSG_OOB) == 1);
    REQUIRE(::send(c, d.data(), d.size(), 0) == 5000);
    Bytes want = a;
    want.insert(want.end(), b.begin(), b.end());
    want.insert(want.end(), d.begin(), d.end());
    Bytes got;
    Rx r;
    for (int i = 0; i < 500 && got.size() < want.size(); ++i) {
        sim.pump(1);
        while (g.next(r, 0)) {
            CHECK((r.seg.flags & kUrg) == 0);
            if (g.absorb(r, &got)) g.ack();
        }
    }
    CHECK(got == want);
    // Guest -> host: URG and an urgent pointer change nothing.
    Bytes u = pattern(3000, 25);
    Bytes f = guest_frame(false, g.src, g.dst, g.sport, g.dport, kAck | kUrg, g.snd_nxt,
                          g.rcv_nxt, 65535, u.data(), u.size());
    put16(f.data() + 14 + 20 + 18, 10); // urgent pointer
    sim.input(f);
    Bytes host;
    for (int i = 0; i < 200 && host.size() < u.size(); ++i) drain(c, host), sim.pump(1);
    CHECK(host == u);
    ::close(c);
}

TEST_CASE("tcp_fastpath: a refused tail is not acked; reopening asks for it") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    int small = 64 * 1024;
    ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    // A guest that ignores our window until the socket refuses data.
    Bytes data = pattern(64 << 20, 26);
    uint32_t base = g.snd_nxt;
    size_t off = 0;
    Rx r;
    for (int i = 0; i < 2000 && sim.fp->stats().partial_sends == 0; ++i) {
        Bytes b(data.begin() + long(off), data.begin() + long(off + 65000));
        g.send_data(base + uint32_t(off), b);
        off += 65000;
        while (g.next(r, 0)) g.absorb(r, nullptr);
        off = g.snd_una - base; // from what was acked
    }
    REQUIRE(sim.fp->stats().partial_sends > 0);
    uint32_t ack_before = g.snd_una;
    CHECK(ack_before - base < off + 65000);
    // The host reads: the window reopens, with duplicate ACKs so that a real
    // guest retransmits the refused part at once.
    Bytes got;
    int same = 0;
    for (int i = 0; i < 2000 && same < 3; ++i) {
        drain(c, got);
        sim.pump(1);
        if (i % 20 == 19) sim.advance(50);
        uint32_t last_ack = 0, last_wnd = 0;
        while (g.next(r, 0)) {
            g.absorb(r, nullptr);
            if (r.seg.ack == last_ack && r.seg.window == last_wnd && r.seg.window != 0)
                ++same;
            last_ack = r.seg.ack;
            last_wnd = r.seg.window;
        }
    }
    CHECK(same >= 3);
    // Everything the host got is exactly the acked prefix.
    for (int i = 0; i < 100; ++i) drain(c, got), sim.pump(0);
    CHECK(got.size() == g.snd_una - base);
    CHECK(Bytes(data.begin(), data.begin() + long(got.size())) == got);
    ::close(c);
}

TEST_CASE("tcp_fastpath: guest keepalives and window probes are answered") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Rx r;
    while (g.next(r, 20)) {} // window updates after the handshake
    // A plain ACK at rcv_nxt gets no answer...
    g.ack();
    CHECK_FALSE(g.next(r, 10));
    // ...one below it (zero-window probe, empty keepalive) does,
    g.send(kAck, g.snd_nxt - 1);
    REQUIRE(g.next(r));
    CHECK(r.seg.ack == g.snd_nxt);
    CHECK(r.seg.window > 0);
    // and so does a 1-byte keepalive of an old byte.
    uint8_t junk = 0;
    g.send(kAck, g.snd_nxt - 1, &junk, 1);
    REQUIRE(g.next(r));
    CHECK(r.seg.ack == g.snd_nxt);
    Bytes got;
    drain(c, got);
    CHECK(got.empty());
    ::close(c);
}

TEST_CASE("tcp_fastpath: the retransmission timer follows the measured RTT") {
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect()); // SYN-ACK -> ACK at the same fake instant: RTT 0
    int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    Bytes a = pattern(1000, 27);
    REQUIRE(::send(c, a.data(), a.size(), 0) == 1000);
    Rx r;
    REQUIRE(g.next(r));
    CHECK(r.seg.payload.size() == 1000);
    // Data frames only (window updates may come and go meanwhile).
    auto data_frame = [&] {
        while (g.next(r, 0))
            if (!r.seg.payload.empty()) return true;
        return false;
    };
    // Not ACKed: nothing before the 200 ms floor, a resend after it.
    sim.advance(Flow::kRtoMinMs - 10);
    CHECK_FALSE(data_frame());
    sim.advance(20);
    REQUIRE(data_frame());
    CHECK(r.seg.payload.size() == 1000);
    CHECK(sim.fp->stats().retransmits == 1);
    // Backoff: the next one comes after twice as long.
    sim.advance(Flow::kRtoMinMs * 2 - 10);
    CHECK_FALSE(data_frame());
    sim.advance(20);
    REQUIRE(data_frame());
    CHECK(sim.fp->stats().retransmits == 2);
    g.absorb(r, nullptr);
    g.ack();
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
