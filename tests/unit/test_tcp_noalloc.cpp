// SPDX-License-Identifier: Apache-2.0

// The fast path's data path allocates nothing: operator new is counted
// while guest_frame(), poll_events() and run_timers() run during bulk
// transfers both ways (frames are built by the test outside the counted
// calls). It has a test executable of its own (alloc_count.hpp).
#include <doctest/doctest.h>

#include "alloc_count.hpp"
#include "datapath/tcp/seq.hpp"
#include "tcp_sim_guest.hpp"

using namespace tcpsim;
using alloc_count::counted;

TEST_CASE("tcp_noalloc: no allocation per frame, either direction") {
    // The instrument itself works.
    REQUIRE(counted([] { std::vector<int> v(10); (void)v; }) == 1);
    Sim sim;
    Listener l;
    Guest g(sim, false, l.port);
    REQUIRE(g.connect());
    int c = -1;
    for (int i = 0; i < 500 && c < 0; ++i) {
        c = l.try_accept();
        if (c < 0) sim.pump(1);
    }
    REQUIRE(c >= 0);
    FastPath &fp = *sim.fp;
    size_t allocs = 0;
    // Host -> guest.
    Bytes data = pattern(4 << 20, 30);
    size_t written = 0, got = 0;
    for (int i = 0; i < 5000 && got < data.size(); ++i) {
        ssize_t n = ::send(c, data.data() + written, data.size() - written, MSG_DONTWAIT);
        if (n > 0) written += size_t(n);
        pollfd p{fp.epoll_fd(), POLLIN, 0};
        if (::poll(&p, 1, 1) > 0) allocs += counted([&] { fp.poll_events(); });
        GuestFrames &b = fp.frames();
        for (size_t k = 0; k < b.size(); ++k) got += b.payload(k).size();
        b.clear();
        g.rcv_nxt = g.irs + 1 + uint32_t(got);
        Bytes ack = guest_frame(false, g.src, g.dst, g.sport, g.dport, kAck, g.snd_nxt,
                                g.rcv_nxt, 65535, nullptr, 0);
        allocs += counted([&] { fp.guest_frame(ack); });
        for (size_t k = 0; k < b.size(); ++k) got += b.payload(k).size();
        b.clear();
        sim.now += 5;
        allocs += counted([&] { fp.run_timers(sim.now); });
        b.clear();
    }
    CHECK(got == data.size());
    // Guest -> host.
    Bytes seg = pattern(60000, 31);
    Bytes sink(1 << 20);
    size_t sent = 0;
    for (int i = 0; i < 5000 && sent < (4u << 20); ++i) {
        Bytes f = guest_frame(false, g.src, g.dst, g.sport, g.dport, kAck, g.snd_nxt,
                              g.rcv_nxt, 65535, seg.data(), seg.size());
        allocs += counted([&] { fp.guest_frame(f); });
        GuestFrames &b = fp.frames();
        for (size_t k = 0; k < b.size(); ++k) {
            Segment s;
            auto h = b.headers(k);
            Bytes fr(h.begin(), h.end());
            if (parse_segment(fr, s) == Parse::Ok && seq_gt(s.ack, g.snd_nxt)) {
                sent += s.ack - g.snd_nxt;
                g.snd_nxt = s.ack;
            }
        }
        b.clear();
        while (::recv(c, sink.data(), sink.size(), MSG_DONTWAIT) > 0) {
        }
        pollfd p{fp.epoll_fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) allocs += counted([&] { fp.poll_events(); });
        b.clear();
    }
    CHECK(sent >= (4u << 20));
    CHECK(allocs == 0);
    ::close(c);
}
