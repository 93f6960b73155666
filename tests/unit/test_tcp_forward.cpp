// SPDX-License-Identifier: Apache-2.0

// Forwarded ports on the TCP fast path: a real host client connects to the
// forward's loopback port, the simulated guest (tcp_sim_guest.hpp) gets the
// SYN and answers; data both ways, resets, SYN retransmission and timeout,
// the guest's MAC learnt or asked for, removal, port in use, a full table.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>

#include "tcp_sim_forward.hpp"

using namespace tcpsim;

TEST_CASE_FIXTURE(Forwarded,
                  "tcp_forward: a host client reaches the guest; data both ways byte-exact") {
    CHECK(sim.fp->forwards() == 1);
    REQUIRE(c >= 0);
    Server g(sim, cport);
    Rx syn;
    REQUIRE(g.accept(&syn));
    // The SYN: what libslirp's hostfwd would show the guest.
    CHECK(syn.csum_ok);
    CHECK(syn.seg.mss == 65520 - 40);
    CHECK(syn.seg.wscale == Flow::kOurWs);
    CHECK(std::memcmp(syn.frame.data(), kGuestMac, 6) == 0);
    const uint8_t gw_mac[6] = {0x52, 0x55, 10, 0, 2, 2};
    CHECK(std::memcmp(syn.frame.data() + 6, gw_mac, 6) == 0);
    uint8_t gw[16], guest[16];
    addr4(gw, 10, 0, 2, 2);
    addr4(guest, 10, 0, 2, 100);
    CHECK(std::memcmp(syn.seg.src, gw, 16) == 0);
    CHECK(std::memcmp(syn.seg.dst, guest, 16) == 0);
    CHECK(syn.seg.sport == cport);
    CHECK(syn.seg.dport == kGuestPort);
    CHECK(sim.fp->stats().forward_accepted == 1);
    CHECK(sim.fp->stats().forward_established == 1);
    CHECK(sim.fp->forward_flows() == 1);
    CHECK(sim.fp->flows() == 0); // not the guest's

    Bytes up = pattern(3 << 20, 11);
    CHECK(guest_to_host(sim, g, c, up, 60000) == up);
    Bytes down = pattern(3 << 20, 12);
    H2G o;
    CHECK(host_to_guest(sim, g, c, down, o) == down);
    CHECK(o.gso_frames > 0);

    // The client closes: the guest gets a FIN, answers with its own.
    ::shutdown(c, SHUT_WR);
    Rx r;
    bool fin = false;
    while (!fin && g.next(r)) {
        g.absorb(r, nullptr);
        fin = g.got_fin;
    }
    REQUIRE(fin);
    g.send(kFin | kAck, g.snd_nxt);
    g.snd_nxt += 1;
    Bytes rest;
    int d = 1;
    for (int i = 0; i < 500 && d != 0; ++i) {
        sim.pump(2);
        d = drain(c, rest);
    }
    CHECK(d == 0); // EOF, not a reset
    CHECK(sim.fp->flows() == 0);
    ::close(c);
}

TEST_CASE("tcp_forward: an unknown guest MAC is asked for with ARP, then the SYN goes") {
    Sim sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    uint16_t cport = 0;
    int c = client(port, &cport);
    REQUIRE(c >= 0);
    const Bytes arp = await_arp(sim);
    REQUIRE(!arp.empty());
    // Who has 10.0.2.100? Tell 10.0.2.2, broadcast.
    CHECK(arp[0] == 0xff);
    CHECK(arp[21] == 1);
    CHECK(arp[28] == 10);
    CHECK(arp[31] == 2);
    CHECK(arp[41] == 100);
    CHECK(sim.fp->stats().arp_requests == 1);
    sim.rx.clear();
    guest_arp_reply(sim); // the SYN follows at once, no timer needed
    Server g(sim, cport);
    REQUIRE(g.accept());
    ::close(c);
}

TEST_CASE("tcp_forward: a guest RST resets the host client") {
    Sim sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);

    SUBCASE("refused: RST to the SYN") {
        uint16_t cport = 0;
        int c = client(port, &cport);
        Server g(sim, cport);
        Rx syn;
        REQUIRE(g.next(syn));
        g.rcv_nxt = syn.seg.seq + 1;
        g.send(kRst | kAck, 0);
        CHECK(recv_error(c) == ECONNRESET);
        CHECK(sim.fp->flows() == 0);
        CHECK(sim.fp->stats().resets_from_guest == 1);
        ::close(c);
    }
    SUBCASE("established: RST mid-stream") {
        uint16_t cport = 0;
        int c = client(port, &cport);
        Server g(sim, cport);
        REQUIRE(g.accept());
        Bytes up = pattern(100000, 3);
        CHECK(guest_to_host(sim, g, c, up, 30000) == up);
        g.send(kRst | kAck, g.snd_nxt);
        CHECK(recv_error(c) == ECONNRESET);
        CHECK(sim.fp->flows() == 0);
        ::close(c);
    }
}

TEST_CASE_FIXTURE(Forwarded,
                  "tcp_forward: the SYN is retransmitted with backoff; a silent guest means a reset") {
    Server g(sim, cport);
    Rx syn;
    REQUIRE(g.next(syn));
    const uint32_t isn = syn.seg.seq;
    int64_t gap = 1000;
    for (int i = 0; i < Flow::kMaxSynRetries; ++i) {
        sim.advance(gap - 1);
        Rx none;
        CHECK_FALSE(g.next(none, 0)); // not before the timer
        sim.advance(1);
        Rx again;
        REQUIRE(g.next(again, 0));
        CHECK(again.seg.flags == kSyn);
        CHECK(again.seg.seq == isn);
        gap = std::min<int64_t>(gap * 2, Flow::kRtoMaxMs);
    }
    CHECK(sim.fp->forward_flows() == 1);
    sim.advance(gap);
    CHECK(sim.fp->forward_flows() == 0);
    CHECK(sim.fp->stats().forward_syn_timeouts == 1);
    CHECK(recv_error(c) == ECONNRESET);
    ::close(c);
}

TEST_CASE_FIXTURE(Forwarded,
                  "tcp_forward: a late SYN-ACK after a retransmitted SYN still connects") {
    // The client writes before the guest answered: it waits in the socket.
    const char hello[] = "hello guest";
    REQUIRE(::send(c, hello, sizeof hello, 0) == ssize_t(sizeof hello));
    Server g(sim, cport);
    Rx first;
    REQUIRE(g.next(first));
    sim.advance(1000);
    Rx second;
    REQUIRE(g.next(second, 0));
    CHECK(second.seg.flags == kSyn);
    CHECK(second.seg.seq == first.seg.seq);
    sim.rx.push_front(second); // the guest answers the retransmission
    REQUIRE(g.accept());
    Rx r;
    Bytes got;
    while (got.size() < sizeof hello && g.next(r)) g.absorb(r, &got);
    CHECK(Bytes(hello, hello + sizeof hello) == got);
    ::close(c);
}

TEST_CASE_FIXTURE(Forwarded,
                  "tcp_forward: removal closes the listener, open flows continue") {
    Server g(sim, cport);
    REQUIRE(g.accept());
    sockaddr_storage ss = loopback(port);
    CHECK(sim.fp->remove_forward(reinterpret_cast<sockaddr *>(&ss), len_of(false)));
    CHECK_FALSE(sim.fp->remove_forward(reinterpret_cast<sockaddr *>(&ss), len_of(false)));
    CHECK(sim.fp->forwards() == 0);
    uint16_t p2 = 0;
    CHECK(client(port, &p2) == -1); // nobody listens: refused
    Bytes down = pattern(500000, 5);
    H2G o;
    CHECK(host_to_guest(sim, g, c, down, o) == down);
    ::close(c);
    // The port can be forwarded again.
    CHECK(add(sim, port) == 0);
}

TEST_CASE("tcp_forward: a port in use is EADDRINUSE; IPv6 loopback forwards to the IPv4 guest") {
    Sim sim;
    Listener busy;
    CHECK(add(sim, busy.port) == EADDRINUSE);
    CHECK(sim.fp->forwards() == 0);

    uint16_t port = free_port(true);
    REQUIRE(add(sim, port, true) == 0);
    guest_arp_reply(sim);
    uint16_t cport = 0;
    int c = client(port, &cport, true);
    REQUIRE(c >= 0);
    Server g(sim, cport);
    Rx syn;
    REQUIRE(g.accept(&syn));
    CHECK_FALSE(syn.seg.v6);
    CHECK(syn.seg.src[15] == 2); // from 10.0.2.2
    Bytes up = pattern(200000, 7);
    CHECK(guest_to_host(sim, g, c, up, 30000) == up);
    ::close(c);
}

TEST_CASE("tcp_forward: all forwards' slots taken, the accepted connection is reset at once") {
    FastPathConfig cfg = Sim::base_config();
    cfg.forward_flows = 1;
    Sim sim(cfg);
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);
    uint16_t p1 = 0, p2 = 0;
    int c1 = client(port, &p1);
    Server g(sim, p1);
    REQUIRE(g.accept());
    int c2 = client(port, &p2);
    REQUIRE(c2 >= 0);
    CHECK(pumped_recv_error(sim, c2) == ECONNRESET);
    CHECK(sim.fp->stats().forward_full == 1);
    CHECK(sim.fp->stats().forward_refused == 1);
    CHECK(sim.fp->stats().flows_refused == 0); // the guest's count
    CHECK(sim.fp->forward_flows() == 1);
    ::close(c2);
    ::close(c1);
}

TEST_CASE("tcp_forward: to an address routed behind the guest, its replies taken") {
    // Podman's bridge network in the namespace: the forward's target is a
    // container's address (10.89.0.2) the guest routes to, not the guest.
    Sim sim;
    uint16_t port = free_port();
    sockaddr_storage ss = loopback(port);
    constexpr uint32_t kRouted = 0x0a590002; // 10.89.0.2
    REQUIRE(sim.fp->add_forward(reinterpret_cast<sockaddr *>(&ss), len_of(false), kRouted,
                                kGuestPort) == 0);
    uint16_t cport = 0;
    int c = client(port, &cport);
    REQUIRE(c >= 0);
    // The guest's MAC unknown: the ARP asks for the guest's own address
    // (10.0.2.100), which answers, not for the routed one, which cannot.
    const Bytes arp = await_arp(sim);
    REQUIRE(!arp.empty());
    const uint8_t guest[4] = {10, 0, 2, 100};
    CHECK(std::memcmp(arp.data() + 38, guest, 4) == 0);
    sim.rx.clear();
    guest_arp_reply(sim);

    Server g(sim, cport);
    addr4(g.src, 10, 89, 0, 2);
    sim.routed = true; // from here on the guest's frames come from 10.89.0.2
    Rx syn;
    REQUIRE(g.accept(&syn));
    uint8_t routed[16], gw[16];
    addr4(routed, 10, 89, 0, 2);
    addr4(gw, 10, 0, 2, 2);
    CHECK(std::memcmp(syn.frame.data(), kGuestMac, 6) == 0); // through the guest
    CHECK(std::memcmp(syn.seg.dst, routed, 16) == 0);
    CHECK(std::memcmp(syn.seg.src, gw, 16) == 0); // a loopback client, as before
    CHECK(syn.seg.dport == kGuestPort);
    Bytes up = pattern(1 << 20, 21);
    CHECK(guest_to_host(sim, g, c, up, 60000) == up);
    Bytes down = pattern(1 << 20, 22);
    H2G o;
    CHECK(host_to_guest(sim, g, c, down, o) == down);
    CHECK(sim.fp->forward_flows() == 1);

    // From that address nothing but the forward's flow: a SYN anywhere
    // opens nothing, a segment of no flow is not taken.
    Guest other(sim, false, 80, kGuestPort, 5000);
    addr4(other.src, 10, 89, 0, 2);
    addr4(other.dst, 192, 0, 2, 1);
    CHECK(other.syn() == Verdict::NotMine);
    CHECK(other.send(kAck, 5000) == Verdict::NotMine);
    Guest wrong_port(sim, false, cport, kGuestPort + 1, 5000);
    addr4(wrong_port.src, 10, 89, 0, 2);
    CHECK(wrong_port.send(kAck, 5000) == Verdict::NotMine);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->forward_flows() == 1);
    // A flow the guest opened from its own address is never the routed
    // path's: the same segment through routed_frame is not taken.
    sim.routed = false;
    Listener l;
    Guest own(sim, false, l.port, 41000, 9000);
    // (its destination the gateway: the host's loopback)
    REQUIRE(own.syn() == Verdict::Consumed);
    CHECK(sim.fp->flows() == 1);
    sim.routed = true;
    CHECK(own.send(kAck, 9001) == Verdict::NotMine);
    ::close(c);
}

TEST_CASE("tcp_forward: to an IPv6 address routed behind the guest, its replies taken") {
    // Podman's dual-stack bridge network: the target is a container's
    // IPv6 address (fd00:aaaa::2, outside the guest's fd00::/64).
    Sim sim;
    uint16_t port = free_port(true);
    sockaddr_storage ss = loopback(port, true);
    uint8_t routed[16], gw[16], guest6[16];
    addr6(routed, "fd00:aaaa::2");
    addr6(gw, "fd00::2");
    addr6(guest6, "fd00::100");
    REQUIRE(sim.fp->add_forward(reinterpret_cast<sockaddr *>(&ss), len_of(true), routed, true,
                                kGuestPort) == 0);
    uint16_t cport = 0;
    int c = client(port, &cport, true);
    REQUIRE(c >= 0);
    // The guest's MAC unknown: asked by ARP for the guest's own IPv4
    // address (one MAC for both), not for anything of the routed end.
    const Bytes arp = await_arp(sim);
    REQUIRE(arp.size() == 42);
    const uint8_t guest4[4] = {10, 0, 2, 100};
    CHECK(std::memcmp(arp.data() + 38, guest4, 4) == 0);
    sim.rx.clear();
    guest_arp_reply(sim);

    Server g(sim, cport);
    g.v6 = true;
    std::memcpy(g.src, routed, 16);
    std::memcpy(g.dst, gw, 16);
    sim.routed = true; // the container's frames come from fd00:aaaa::2
    Rx syn;
    REQUIRE(g.accept(&syn));
    CHECK(syn.seg.v6);
    CHECK(syn.csum_ok);
    CHECK(std::memcmp(syn.frame.data(), kGuestMac, 6) == 0); // through the guest
    CHECK(std::memcmp(syn.seg.dst, routed, 16) == 0);
    CHECK(std::memcmp(syn.seg.src, gw, 16) == 0); // a loopback client: the gateway
    CHECK(syn.seg.dport == kGuestPort);
    CHECK(syn.seg.mss == 65520 - 60);
    Bytes up = pattern(1 << 20, 31);
    CHECK(guest_to_host(sim, g, c, up, 60000) == up);
    Bytes down = pattern(1 << 20, 32);
    H2G o;
    CHECK(host_to_guest(sim, g, c, down, o) == down);
    CHECK(sim.fp->forward_flows() == 1);

    // From that address nothing but the forward's flow.
    Guest other(sim, true, 80, kGuestPort, 5000);
    std::memcpy(other.src, routed, 16);
    addr6(other.dst, "2001:db8::1");
    CHECK(other.syn() == Verdict::NotMine);
    CHECK(other.send(kAck, 5000) == Verdict::NotMine);
    CHECK(sim.fp->flows() == 0);
    ::close(c);

    // An IPv4 client on a forward to the guest's own IPv6 address: from
    // the IPv6 gateway (it has no IPv6 address of its own to keep).
    sim.routed = false;
    uint16_t port4 = free_port();
    sockaddr_storage ss4 = loopback(port4);
    REQUIRE(sim.fp->add_forward(reinterpret_cast<sockaddr *>(&ss4), len_of(false), guest6, true,
                                kGuestPort) == 0);
    uint16_t cport4 = 0;
    int c4 = client(port4, &cport4);
    REQUIRE(c4 >= 0);
    Server g4(sim, cport4);
    g4.v6 = true;
    std::memcpy(g4.src, guest6, 16);
    std::memcpy(g4.dst, gw, 16);
    Rx syn4;
    REQUIRE(g4.accept(&syn4));
    CHECK(std::memcmp(syn4.seg.dst, guest6, 16) == 0);
    CHECK(std::memcmp(syn4.seg.src, gw, 16) == 0);
    Bytes up4 = pattern(1 << 16, 33);
    CHECK(guest_to_host(sim, g4, c4, up4, 60000) == up4);
    ::close(c4);
}
