// SPDX-License-Identifier: Apache-2.0

// The fast path against a simulated guest (frames built by the test, read
// back from the GuestFrames batch) with real loopback sockets as the host
// side: handshake, bulk both ways, routing, sequence wraparound, batching,
// many flows, urgent data. Loss and windows are in test_tcp_windows.cpp,
// resets and closes in test_tcp_teardown.cpp. Timers run on a fake clock.
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

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: bulk guest -> host, byte exact") {
    Bytes data = pattern(4 << 20, 2);
    Bytes got = guest_to_host(sim, g, c, data, 65000);
    CHECK(got.size() == data.size());
    CHECK(got == data);
    CHECK(sim.fp->stats().bytes_to_host == data.size());
    ::close(c);
}

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: bulk host -> guest in GSO frames, byte exact") {
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

TEST_CASE_FIXTURE(Accepted, "tcp_fastpath: urgent data stays in the byte stream") {
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
