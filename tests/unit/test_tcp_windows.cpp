// SPDX-License-Identifier: Apache-2.0

// The fast path's loss recovery and flow control against the simulated
// guest: duplicate-ACK and timer retransmits, held out-of-order data, zero
// windows and probes, our window following the host socket, the RTO, the
// host socket's buffer and its ACKs while the guest's window is full.
#include <doctest/doctest.h>

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include "own_netns.hpp"
#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

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

TEST_CASE_FIXTURE(Accepted,
                  "tcp_fastpath: a lost frame is resent by the retransmission timer") {
    Bytes data = pattern(1 << 20, 7);
    H2G o;
    o.silent_drop = true;
    Bytes got = host_to_guest(sim, g, c, data, o);
    CHECK(got == data);
    CHECK(sim.fp->stats().retransmits >= 1);
    ::close(c);
}

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: partial and duplicate ACKs") {
    Bytes data = pattern(1 << 20, 8);
    H2G o;
    o.ack_half = true;
    o.dup_acks = true;
    CHECK(host_to_guest(sim, g, c, data, o) == data);
    ::close(c);
}

TEST_CASE_FIXTURE(Accepted,
                  "tcp_fastpath: guest data ahead of a gap is held a moment, then dropped with a duplicate ACK") {
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

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: zero window from the guest, probes, reopening") {
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

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: our window follows the host socket and reopens") {
    int small = 256 * 1024; // not tiny: below one loopback MSS the host side crawls (SWS avoidance)
    ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    // The host application does not read: the guest fills the socket
    // buffers until our window closes.
    Bytes data = pattern(16 << 20, 14);
    uint32_t base = g.snd_nxt;
    uint32_t min_wnd = fill_window(sim, g, data, base);
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

TEST_CASE("tcp_fastpath: a guest MSS above half the host socket's buffer still gets window updates") {
    // At MTU 65520 the guest's MSS is 64 KiB; on a lossy path the kernel
    // autotunes the host socket's send buffer below twice that (here:
    // tcp_wmem's maximum 64 KiB, in a namespace of the test's own). A
    // window update waiting for 64 KiB of room never came: the guest sent
    // only when its persist timer probed (2 Mbit/s where the path carried
    // 17). Once the host reads, the reopened window must reach the guest
    // with nothing sent by it, within a few of our window checks.
    testns::in_own_netns({{"/proc/sys/net/ipv4/tcp_wmem", "4096 16384 65536"}}, [](bool) {
        Sim sim;
        Listener l;
        Guest g(sim, false, l.port);
        g.mss = 65480;
        REQUIRE(g.connect());
        int c = accept_from(sim, l);
        REQUIRE(c >= 0);
        int small = 64 * 1024;
        ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        // The host application does not read: the guest fills what our
        // window allows, all but a little (as on a path whose ACKs keep
        // freeing bits of the buffer), until it stays nearly shut.
        Bytes data = pattern(4 << 20, 21);
        fill_window(sim, g, data, g.snd_nxt, 2048);
        REQUIRE(g.peer_wnd > 0); // nearly shut: no zero window to reopen from
        REQUIRE(g.peer_wnd < 16384);
        // The host reads everything; the send buffer never frees 64 KiB
        // at once, yet the reopened window must reach the guest.
        Bytes got;
        const uint32_t shut = g.peer_wnd;
        bool reopened = false;
        for (int i = 0; i < 400 && !reopened; ++i) {
            drain(c, got);
            sim.pump(1);
            if (i % 10 == 9) sim.advance(10); // the window timer's first steps
            Rx r;
            while (g.next(r, 0)) {
                g.absorb(r, nullptr);
                if (g.peer_wnd >= shut + 16384) reopened = true;
            }
        }
        CHECK(reopened);
        CHECK(Bytes(data.begin(), data.begin() + long(got.size())) == got);
        ::close(c);
    });
}

TEST_CASE("tcp_fastpath: the MSS the guest is offered is no larger than the host path's") {
    // The guest's segments, and so the steps of the window it waits for,
    // follow the path behind the host socket (a 1500-byte link behind a
    // 65520-byte tap), not the tap's MTU alone: here loopback with an MTU
    // of 1500, in a namespace of the test's own.
    testns::in_own_netns({}, [](bool) {
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ifreq ifr{};
        std::strcpy(ifr.ifr_name, "lo");
        ifr.ifr_mtu = 1500;
        REQUIRE(::ioctl(s, SIOCSIFMTU, &ifr) == 0);
        ::close(s);
        Sim sim;
        Listener l;
        Guest g(sim, false, l.port);
        g.mss = 65480;
        REQUIRE(g.connect());
        CHECK(g.peer_mss == 1460);
    });
    // Over loopback as it is the tap's MTU stays the bound.
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    g.mss = 65480;
    REQUIRE(g.connect());
    CHECK(g.peer_mss == 65480);
}

TEST_CASE_FIXTURE(Accepted,
                  "tcp_fastpath: a refused tail is not acked; reopening asks for it") {
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

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: guest keepalives and window probes are answered") {
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

namespace {

int int_opt(int fd, int level, int opt) {
    int v = -1;
    socklen_t len = sizeof v;
    return ::getsockopt(fd, level, opt, &v, &len) == 0 ? v : -1;
}

} // namespace

TEST_CASE("tcp_fastpath: a bulk flow's host socket gets room for what is in flight to the "
          "guest") {
    // Bytes the guest has not acknowledged stay in the host socket's queue:
    // with the kernel's initial buffer they would close the window the
    // sender sees while it ramps up.
    Conn k;
    const int fd = flow_socket_of(k.c);
    REQUIRE(fd >= 0);
    const int initial = int_opt(fd, SOL_SOCKET, SO_RCVBUF);
    H2G o;
    Bytes small = pattern(4000, 3);
    CHECK(host_to_guest(k.sim, k.g, k.c, small, o) == small);
    CHECK(int_opt(fd, SOL_SOCKET, SO_RCVBUF) == initial); // a small reply: untouched
    Bytes bulk = pattern(4 << 20, 4);
    CHECK(host_to_guest(k.sim, k.g, k.c, bulk, o) == bulk);
    const int raised = int_opt(fd, SOL_SOCKET, SO_RCVBUF);
    CHECK(raised >= 1024 * 1024);
    CHECK(raised > initial);
    // Readiness as before: the low mark is back at one byte.
    CHECK(int_opt(fd, SOL_SOCKET, SO_RCVLOWAT) == 1);
}

TEST_CASE("tcp_fastpath: the host sender is acked at once while the guest's window is full") {
    // The kernel acks two full segments at once only if the reader keeps
    // the window's right edge moving; bytes held for the guest stop it,
    // and the ACK would wait for the delayed-ACK timer (tens of ms) or the
    // guest. A sender limited by its send buffer (a download over a long
    // path) goes as fast as its ACKs come back.
    Conn k;
    H2G o;
    // A bulk transfer first: the kernel's quick ACKs of a new connection
    // are spent.
    Bytes bulk = pattern(4 << 20, 5);
    REQUIRE(host_to_guest(k.sim, k.g, k.c, bulk, o) == bulk);
    // The guest takes 64 KiB more, then neither acks nor opens its window.
    k.g.win_field = uint16_t((64 << 10) >> k.g.ws);
    k.g.ack();
    Bytes held = pattern(64 << 10, 6);
    REQUIRE(::send(k.c, held.data(), held.size(), 0) == ssize_t(held.size()));
    size_t in_flight = 0;
    Rx r;
    while (in_flight < held.size() && k.g.next(r, 200)) in_flight += r.seg.payload.size();
    REQUIRE(in_flight == held.size());
    // What the host sends now waits in the socket for the guest's window.
    auto unacked = [&] {
        tcp_info ti{};
        socklen_t len = sizeof ti;
        REQUIRE(::getsockopt(k.c, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0);
        return ti.tcpi_unacked;
    };
    // Enough that the bytes held fill more than half the socket's buffer:
    // the window's right edge cannot move.
    const int rcvbuf = int_opt(flow_socket_of(k.c), SOL_SOCKET, SO_RCVBUF);
    REQUIRE(rcvbuf > 0);
    Bytes more = pattern(size_t(rcvbuf) / 2, 7);
    REQUIRE(::send(k.c, more.data(), more.size(), 0) == ssize_t(more.size()));
    // Acked as the loop reads, not at the delayed-ACK timer (40 ms at the
    // least on loopback): looked at for 25 ms of wall time, not a count of
    // rounds, which a loaded machine (ctest runs two tests at once) could
    // spend before the sender's last segments left (seen: 2 unacked after
    // 10 rounds of 1 ms). A last lone segment may wait for the timer: the
    // kernel acks every second segment at once, for any reader.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(25);
    while (unacked() > 1 && std::chrono::steady_clock::now() < until) k.sim.pump(1);
    CHECK(unacked() <= 1);
    // Nothing went past the guest's window meanwhile.
    while (k.g.next(r, 0)) CHECK(r.seg.payload.empty());
}

TEST_CASE("tcp_fastpath: a flow that gets one full frame a round trip gets the room too") {
    // At MTU 65520 a full frame carries 65480 bytes. While the host
    // socket's buffer is small, the bytes in flight to the guest hold the
    // sender's window down to about that much a round trip (43 Mbit/s at
    // 10 ms, for seconds): the raise must not wait for more in flight.
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    g.mss = 65480;
    REQUIRE(g.connect());
    const int c = accept_from(sim, l);
    REQUIRE(c >= 0);
    const int fd = flow_socket_of(c);
    REQUIRE(fd >= 0);
    H2G o;
    for (int i = 0; i < 4; ++i) {
        Bytes frame = pattern(65480, uint32_t(40 + i)); // one frame, acked, the next
        REQUIRE(host_to_guest(sim, g, c, frame, o) == frame);
    }
    CHECK(o.max_payload <= 65480);
    CHECK(int_opt(fd, SOL_SOCKET, SO_RCVBUF) >= 1024 * 1024);
    ::close(c);
}
