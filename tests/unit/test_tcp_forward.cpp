// SPDX-License-Identifier: Apache-2.0

// Forwarded ports on the TCP fast path: a real host client connects to the
// forward's loopback port, the simulated guest (tcp_sim_guest.hpp) gets the
// SYN and answers; data both ways, resets, SYN retransmission and timeout,
// the guest's MAC learnt or asked for, removal, port in use, a full table.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/socket.h>

#include "tcp_sim_transfer.hpp"

using namespace tcpsim;

namespace {

constexpr uint32_t kGuest4 = 0x0a000264; // 10.0.2.100
constexpr uint16_t kGuestPort = 8080;

// A loopback port nobody listens on right now.
uint16_t free_port(bool v6 = false) {
    Listener l(v6);
    return l.port;
}

sockaddr_storage loopback(uint16_t port, bool v6 = false) {
    sockaddr_storage ss{};
    if (v6) {
        auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons(port);
    } else {
        auto *a = reinterpret_cast<sockaddr_in *>(&ss);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a->sin_port = htons(port);
    }
    return ss;
}

socklen_t len_of(bool v6) { return v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

int add(Sim &sim, uint16_t port, bool v6 = false) {
    sockaddr_storage ss = loopback(port, v6);
    return sim.fp->add_forward(reinterpret_cast<sockaddr *>(&ss), len_of(v6), kGuest4,
                               kGuestPort);
}

// A blocking client connected to the forward (the kernel completes the
// handshake from the listener's backlog); its local port in *port.
int client(uint16_t fwd_port, uint16_t *port, bool v6 = false) {
    int c = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage ss = loopback(fwd_port, v6);
    if (::connect(c, reinterpret_cast<sockaddr *>(&ss), len_of(v6)) < 0) {
        ::close(c);
        return -1;
    }
    socklen_t l = sizeof ss;
    ::getsockname(c, reinterpret_cast<sockaddr *>(&ss), &l);
    *port = ntohs(v6 ? reinterpret_cast<sockaddr_in6 &>(ss).sin6_port
                     : reinterpret_cast<sockaddr_in &>(ss).sin_port);
    return c;
}

// Any frame from the guest teaches the fast path its MAC (here: an ARP
// reply, which stays libslirp's).
void guest_arp_reply(Sim &sim) {
    Bytes f(42, 0);
    std::memset(f.data(), 0x52, 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    f[12] = 0x08;
    f[13] = 0x06;
    const uint8_t arp[8] = {0, 1, 0x08, 0, 6, 4, 0, 2};
    std::memcpy(f.data() + 14, arp, 8);
    std::memcpy(f.data() + 22, kGuestMac, 6);
    const uint8_t ip[4] = {10, 0, 2, 100};
    std::memcpy(f.data() + 28, ip, 4);
    CHECK(sim.input(f) == Verdict::NotMine);
}

// The guest side of a forwarded connection: the guest is the server, so
// its "source" is the guest port and its "destination" the client's port
// as the fast path translated it (10.0.2.2 for a loopback client).
struct Server : Guest {
    Server(Sim &s, uint16_t client_port) : Guest(s, false, client_port, kGuestPort, 7000) {}
    // Waits for the fast path's SYN, answers it with a SYN-ACK and checks
    // the ACK that completes the handshake.
    bool accept(Rx *syn_out = nullptr) {
        Rx syn;
        if (!next(syn)) return false;
        if (syn_out) *syn_out = syn;
        if (syn.seg.flags != kSyn) return false;
        irs = syn.seg.seq;
        rcv_nxt = irs + 1;
        peer_mss = syn.seg.mss;
        peer_ws = (ws >= 0 && syn.seg.wscale >= 0) ? syn.seg.wscale : 0;
        peer_wnd = syn.seg.window;
        if (send(kSyn | kAck, iss, nullptr, 0, syn_options(mss, ws)) != Verdict::Consumed)
            return false;
        snd_nxt = snd_una = iss + 1;
        Rx ack;
        if (!next(ack)) return false;
        absorb(ack, nullptr);
        return ack.seg.flags == kAck && ack.seg.ack == iss + 1 && ack.seg.seq == irs + 1;
    }
};

int recv_error(int fd) {
    char b[16];
    for (int i = 0; i < 200; ++i) {
        ssize_t n = ::recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN) return errno;
        if (n == 0) return 0;
        ::usleep(2000);
    }
    return EAGAIN;
}

} // namespace

TEST_CASE("tcp_forward: a host client reaches the guest; data both ways byte-exact") {
    Sim sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    CHECK(sim.fp->forwards() == 1);
    guest_arp_reply(sim);
    uint16_t cport = 0;
    int c = client(port, &cport);
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
    CHECK(sim.fp->flows() == 1);

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
    bool arp = false;
    for (int i = 0; i < 500 && !arp; ++i) {
        sim.pump(2);
        for (auto &r : sim.rx)
            if (r.frame.size() == 42 && r.frame[12] == 0x08 && r.frame[13] == 0x06) {
                arp = true;
                // Who has 10.0.2.100? Tell 10.0.2.2, broadcast.
                CHECK(r.frame[0] == 0xff);
                CHECK(r.frame[21] == 1);
                CHECK(r.frame[28] == 10);
                CHECK(r.frame[31] == 2);
                CHECK(r.frame[41] == 100);
                CHECK(r.vnet.flags == 0);
            }
    }
    REQUIRE(arp);
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

TEST_CASE("tcp_forward: the SYN is retransmitted with backoff; a silent guest means a reset") {
    Sim sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);
    uint16_t cport = 0;
    int c = client(port, &cport);
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
    CHECK(sim.fp->flows() == 1);
    sim.advance(gap);
    CHECK(sim.fp->flows() == 0);
    CHECK(sim.fp->stats().forward_syn_timeouts == 1);
    CHECK(recv_error(c) == ECONNRESET);
    ::close(c);
}

TEST_CASE("tcp_forward: a late SYN-ACK after a retransmitted SYN still connects") {
    Sim sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);
    uint16_t cport = 0;
    int c = client(port, &cport);
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

TEST_CASE("tcp_forward: removal closes the listener, open flows continue") {
    Sim sim;
    uint16_t port = free_port();
    REQUIRE(add(sim, port) == 0);
    guest_arp_reply(sim);
    uint16_t cport = 0;
    int c = client(port, &cport);
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

TEST_CASE("tcp_forward: a full flow table resets the accepted connection at once") {
    FastPathConfig cfg = Sim::base_config();
    cfg.max_flows = 1;
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
    int err = EAGAIN;
    for (int i = 0; i < 500 && err == EAGAIN; ++i) {
        sim.pump(2);
        char b;
        ssize_t n = ::recv(c2, &b, 1, MSG_DONTWAIT);
        if (n == 0) err = 0;
        else if (n < 0 && errno != EAGAIN) err = errno;
    }
    CHECK(err == ECONNRESET);
    CHECK(sim.fp->stats().flows_refused == 1);
    CHECK(sim.fp->stats().forward_refused == 1);
    CHECK(sim.fp->flows() == 1);
    ::close(c2);
    ::close(c1);
}
