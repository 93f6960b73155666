// SPDX-License-Identifier: Apache-2.0

// UDP forwards on the fast path, with real loopback sockets: a host client
// sends to the forward's port, the guest gets the datagram from the
// client as it sees it (the gateway for loopback), its replies reach the
// client from the forward's address (on a wildcard forward, the address
// the client sent to); one flow per client, IPv6 listeners,
// EADDRINUSE, removal, the forwards' own pool (never the guest's flows),
// clashes, idle expiry, the guest's MAC.
#include <doctest/doctest.h>

#include <cerrno>

#include "parent/flow_limits.hpp"

#include "../lib/udp_segment.hpp"
#include "own_netns.hpp"
#include "udp_rig.hpp"

using namespace rknp;
using namespace rknp::udptest;

namespace {

constexpr uint32_t kGuestHost4 = 0x0a000264; // 10.0.2.100
constexpr uint16_t kGuestPort = 5353;

// A free loopback UDP port (bound, then released).
uint16_t free_port(bool v6) { return HostSocket(v6).port; }

// addr: an IPv4 or IPv6 address in text.
sockaddr_storage socket_address(const char *addr, uint16_t port, socklen_t &len) {
    sockaddr_storage ss{};
    auto &a6 = reinterpret_cast<sockaddr_in6 &>(ss);
    auto &a4 = reinterpret_cast<sockaddr_in &>(ss);
    if (inet_pton(AF_INET6, addr, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons(port);
        len = sizeof a6;
    } else {
        REQUIRE(inet_pton(AF_INET, addr, &a4.sin_addr) == 1);
        a4.sin_family = AF_INET;
        a4.sin_port = htons(port);
        len = sizeof a4;
    }
    return ss;
}

sockaddr_storage loopback(bool v6, uint16_t port, socklen_t &len) {
    return socket_address(v6 ? "::1" : "127.0.0.1", port, len);
}

uint16_t port_of(const sockaddr_storage &ss) {
    return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6 &>(ss).sin6_port
                                          : reinterpret_cast<const sockaddr_in &>(ss).sin_port);
}

// A forward on a free loopback port (IPv4 or, with v6, IPv6) of path to
// guest:kGuestPort (16 bytes: IPv4-mapped unless guest_v6), retried while
// other tests race for ports; its port, its address in host/host_len.
uint16_t add_loopback_forward(udp::FastPath &path, bool v6, const uint8_t guest[16],
                              bool guest_v6, sockaddr_storage &host, socklen_t &host_len) {
    for (int attempt = 0; attempt < 10; ++attempt) {
        const uint16_t p = free_port(v6);
        host = loopback(v6, p, host_len);
        if (path.add_forward(reinterpret_cast<sockaddr *>(&host), host_len, guest, guest_v6,
                             kGuestPort) == 0)
            return p;
    }
    return 0;
}

// A client's datagram to the forward at host, and the path serviced.
void send_to_forward(Rig &rig, HostSocket &client, const sockaddr_storage &host,
                     socklen_t host_len, const Bytes &data) {
    REQUIRE(::sendto(client.fd.get(), data.data(), data.size(), 0,
                     reinterpret_cast<const sockaddr *>(&host), host_len) ==
            ssize_t(data.size()));
    REQUIRE(rig.poll_host());
}

// The guest's MAC unknown, the first datagram waited for it: the only
// frame out is an ARP request for the guest's own IPv4 address (the MAC
// a routed end or an IPv6 one is reached through too). Then the guest's
// next frame teaches the path its MAC.
void expect_arp_then_teach(Rig &rig) {
    REQUIRE(rig.guest.out.size() == 1);
    const Bytes &arp = rig.guest.out[0].frame;
    REQUIRE(arp.size() == 42);
    CHECK(arp[12] == 0x08);
    CHECK(arp[13] == 0x06);
    CHECK(std::memcmp(arp.data() + 38, kGuest4, 4) == 0);
    const uint8_t dns[4] = {10, 0, 2, 3};
    REQUIRE(rig.path.guest_frame(guest_datagram(false, kGuest4, dns, 40000, 53,
                                                 pattern(4, 0))) == Verdict::NotMine);
}

// A forward on loopback (v4 or v6) to 10.0.2.100:5353 in a rig whose
// guest MAC is known (any guest frame teaches it).
struct FwdRig : Rig {
    bool v6;
    uint16_t port = 0;
    sockaddr_storage host{};
    socklen_t host_len = 0;
    // wildcard: the forward binds 0.0.0.0 or :: rather than loopback.
    explicit FwdRig(bool v6_ = false, std::function<Admission()> admit = {},
                    bool learn_mac = true, bool wildcard = false)
        : Rig(65520, true, std::move(admit)), v6(v6_) {
        for (int attempt = 0; attempt < 10 && port == 0; ++attempt) {
            const uint16_t p = free_port(v6);
            host = wildcard ? socket_address(v6 ? "::" : "0.0.0.0", p, host_len)
                            : loopback(v6, p, host_len);
            if (path.add_forward(reinterpret_cast<sockaddr *>(&host), host_len, kGuestHost4,
                                 kGuestPort) == 0)
                port = p;
        }
        REQUIRE(port != 0);
        if (learn_mac) {
            const uint8_t dns[4] = {10, 0, 2, 3};
            REQUIRE(path.guest_frame(guest_datagram(false, kGuest4, dns, 40000, 53,
                                                    pattern(4, 0))) == Verdict::NotMine);
        }
    }
    void send_from(HostSocket &client, std::span<const uint8_t> data) {
        REQUIRE(::sendto(client.fd.get(), data.data(), data.size(), 0,
                         reinterpret_cast<const sockaddr *>(&host), host_len) ==
                ssize_t(data.size()));
    }
    // The guest's reply from its end to 10.0.2.2:client_port.
    Verdict reply(uint16_t client_port, std::span<const uint8_t> data) {
        const Verdict v = path.guest_frame(
            guest_datagram(false, kGuest4, kGateway4, kGuestPort, client_port, data));
        path.flush();
        return v;
    }
};

// The guest-bound datagram frame o: src 10.0.2.2:sport -> 10.0.2.100:5353
// carrying payload.
void check_to_guest(const Out &o, uint16_t sport, const Bytes &payload) {
    const Bytes f = completed(o);
    REQUIRE(f.size() == 14 + 20 + 8 + payload.size());
    CHECK(std::equal(kGuestMac, kGuestMac + 6, f.begin()));
    const uint8_t *ip = f.data() + 14;
    CHECK(ip[9] == 17);
    CHECK(std::memcmp(ip + 12, kGateway4, 4) == 0);
    CHECK(std::memcmp(ip + 16, kGuest4, 4) == 0);
    CHECK(be16(ip + 20) == sport);
    CHECK(be16(ip + 22) == kGuestPort);
    CHECK(l4_checksum_ok(false, ip, {ip + 20, f.size() - 34}, 17));
    CHECK(std::equal(payload.begin(), payload.end(), f.begin() + 42));
}

} // namespace

TEST_CASE("udp_forward: a loopback client reaches the guest and its reply comes back") {
    FwdRig rig;
    CHECK(rig.path.forwards() == 1);
    HostSocket client(false);
    const Bytes ask = pattern(200, 1), answer = pattern(700, 2);
    rig.send_from(client, ask);
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 1);
    check_to_guest(rig.guest.out[0], client.port, ask);
    CHECK(rig.path.forward_flows() == 1);
    CHECK(rig.path.flows() == 0); // not the guest's
    CHECK(rig.reply(client.port, answer) == Verdict::Consumed);
    sockaddr_storage from{};
    std::optional<Bytes> got = client.recv(&from);
    REQUIRE(got);
    CHECK(*got == answer);
    // From the address and port the client sent to.
    CHECK(from.ss_family == AF_INET);
    CHECK(port_of(from) == rig.port);
    CHECK(reinterpret_cast<sockaddr_in &>(from).sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    // The same client again: the same flow.
    rig.send_from(client, ask);
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 2);
    check_to_guest(rig.guest.out[1], client.port, ask);
    CHECK(rig.path.forward_flows() == 1);
    CHECK(rig.path.stats().flows_opened == 1);
    CHECK(rig.path.stats().datagrams_to_host == 1);
    CHECK(rig.path.stats().datagrams_to_guest == 2);
}

TEST_CASE("udp_forward: each client gets its own flow and only its replies") {
    FwdRig rig;
    HostSocket a(false), b(false);
    rig.send_from(a, pattern(10, 1));
    rig.send_from(b, pattern(20, 2));
    while (rig.guest.out.size() < 2 && rig.poll_host()) {}
    REQUIRE(rig.guest.out.size() == 2);
    check_to_guest(rig.guest.out[0], a.port, pattern(10, 1));
    check_to_guest(rig.guest.out[1], b.port, pattern(20, 2));
    CHECK(rig.path.forward_flows() == 2);
    CHECK(rig.reply(b.port, pattern(30, 3)) == Verdict::Consumed);
    CHECK(rig.reply(a.port, pattern(40, 4)) == Verdict::Consumed);
    std::optional<Bytes> got_a = a.recv(), got_b = b.recv();
    REQUIRE(got_a);
    REQUIRE(got_b);
    CHECK(*got_a == pattern(40, 4));
    CHECK(*got_b == pattern(30, 3));
}

TEST_CASE("udp_forward: a run of equal replies leaves segmented and arrives whole") {
    FwdRig rig;
    HostSocket client(false);
    rig.send_from(client, pattern(8, 1));
    REQUIRE(rig.poll_host());
    for (int i = 0; i < 5; ++i)
        REQUIRE(rig.path.guest_frame(guest_datagram(false, kGuest4, kGateway4, kGuestPort,
                                                    client.port, pattern(1000, uint8_t(i)))) ==
                Verdict::Consumed);
    rig.path.flush();
    for (int i = 0; i < 5; ++i) {
        std::optional<Bytes> got = client.recv();
        REQUIRE(got);
        CHECK(*got == pattern(1000, uint8_t(i)));
    }
    CHECK(rig.path.stats().datagrams_to_host == 5);
}

TEST_CASE("udp_forward: an IPv6 listener forwards to the IPv4 guest; the v4 port stays free") {
    FwdRig rig(true);
    HostSocket client(true);
    rig.send_from(client, pattern(100, 5));
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 1);
    // IPv6 peers show as the gateway.
    check_to_guest(rig.guest.out[0], client.port, pattern(100, 5));
    CHECK(rig.reply(client.port, pattern(60, 6)) == Verdict::Consumed);
    sockaddr_storage from{};
    std::optional<Bytes> got = client.recv(&from);
    REQUIRE(got);
    CHECK(*got == pattern(60, 6));
    CHECK(from.ss_family == AF_INET6);
    CHECK(port_of(from) == rig.port);
    // IPV6_V6ONLY: the same port on IPv4 is a forward of its own.
    socklen_t len4;
    sockaddr_storage v4 = loopback(false, rig.port, len4);
    CHECK(rig.path.add_forward(reinterpret_cast<sockaddr *>(&v4), len4, kGuestHost4, 53) == 0);
    CHECK(rig.path.forwards() == 2);
}

TEST_CASE("udp_forward: a port in use is EADDRINUSE") {
    Rig rig;
    HostSocket taken(false);
    socklen_t len;
    sockaddr_storage ss = loopback(false, taken.port, len);
    CHECK(rig.path.add_forward(reinterpret_cast<sockaddr *>(&ss), len, kGuestHost4, kGuestPort) ==
          EADDRINUSE);
    CHECK(rig.path.forwards() == 0);
    // A second forward on a port the first holds too.
    FwdRig fwd;
    CHECK(fwd.path.add_forward(reinterpret_cast<sockaddr *>(&fwd.host), fwd.host_len,
                               kGuestHost4, 9) == EADDRINUSE);
    CHECK(fwd.path.forwards() == 1);
}

TEST_CASE("udp_forward: removal closes the socket and the forward's flows (as libslirp)") {
    FwdRig rig;
    HostSocket client(false);
    rig.send_from(client, pattern(10, 1));
    REQUIRE(rig.poll_host());
    CHECK(rig.path.forward_flows() == 1);
    CHECK(rig.path.remove_forward(reinterpret_cast<sockaddr *>(&rig.host), rig.host_len));
    CHECK(rig.path.forwards() == 0);
    CHECK(rig.path.forward_flows() == 0);
    CHECK(rig.path.ms_until_next_timer(rig.now) == -1);
    CHECK_FALSE(rig.path.remove_forward(reinterpret_cast<sockaddr *>(&rig.host), rig.host_len));
    // The port is free again.
    UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    CHECK(::bind(s.get(), reinterpret_cast<sockaddr *>(&rig.host), rig.host_len) == 0);
}

TEST_CASE("udp_forward: a new client over its forward's rate is dropped, the guest's "
          "admission never asked") {
    int asked = 0;
    Collector guest;
    udp::FastPathConfig c = Rig::config(65520, true);
    c.admit_flow = [&] {
        ++asked;
        return Admission::Reset;
    };
    c.forward_new_per_sec = 2; // a burst of 2, then one each 500 ms
    int64_t now = 1000;
    c.clock = [&] { return now; };
    udp::FastPath path(c, guest);
    const uint16_t port = free_port(false);
    socklen_t len;
    sockaddr_storage host = loopback(false, port, len);
    REQUIRE(path.add_forward(reinterpret_cast<sockaddr *>(&host), len, kGuestHost4, kGuestPort) ==
            0);
    const uint8_t dns[4] = {10, 0, 2, 3};
    REQUIRE(path.guest_frame(guest_datagram(false, kGuest4, dns, 40000, 53, pattern(4, 0))) ==
            Verdict::NotMine);
    HostSocket a(false), b(false), d(false);
    auto send = [&](HostSocket &s) {
        REQUIRE(::sendto(s.fd.get(), "x", 1, 0, reinterpret_cast<sockaddr *>(&host), len) == 1);
        pollfd p{path.epoll_fd(), POLLIN, 0};
        REQUIRE(::poll(&p, 1, 2000) == 1);
        path.poll_events();
    };
    send(a);
    send(b);
    send(d);
    CHECK(guest.out.size() == 2);
    CHECK(path.forward_flows() == 2);
    CHECK(path.stats().forward_rate_limited == 1);
    CHECK(asked == 0);
    // A known client is no new one; the refused one gets in once a token
    // came.
    send(a);
    CHECK(guest.out.size() == 3);
    now += 500;
    send(d);
    CHECK(guest.out.size() == 4);
    CHECK(path.forward_flows() == 3);
    CHECK(asked == 0);
    // What rknp_stats shows (1.7): the forward's own counters, none of
    // the guest's.
    Stats shown;
    path.publish(shown);
    CHECK(shown.udp_forward_clients.load() == 3);
    CHECK(shown.udp_forward_admitted.load() == 3);
    CHECK(shown.udp_forward_rate_limited.load() == 1);
    CHECK(shown.udp_forward_evicted.load() == 0);
    CHECK(shown.flows_rate_limited.load() == 0);
}

TEST_CASE("udp_forward: a client whose 4-tuple a flow the guest opened has gets another port") {
    FwdRig rig;
    HostSocket client(false);
    // The guest's end talks to 10.0.2.2:<client port> on its own.
    REQUIRE(rig.reply(client.port, pattern(10, 1)) == Verdict::Consumed);
    REQUIRE(client.recv());
    CHECK(rig.path.flows() == 1);
    rig.send_from(client, pattern(10, 2));
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 1);
    const Bytes f = completed(rig.guest.out[0]);
    const uint16_t seen = be16(f.data() + 34);
    CHECK(seen != client.port);
    CHECK(seen >= 1024);
    CHECK(rig.path.stats().forward_remapped == 1);
    CHECK(rig.path.forward_flows() == 1);
    // The guest's reply to that port reaches the client; its own flow goes
    // on as before (to the host's loopback port, the client's).
    CHECK(rig.reply(seen, pattern(10, 3)) == Verdict::Consumed);
    sockaddr_storage from{};
    std::optional<Bytes> got = client.recv(&from);
    REQUIRE(got);
    CHECK(*got == pattern(10, 3));
    CHECK(port_of(from) == rig.port);
    CHECK(rig.reply(client.port, pattern(10, 4)) == Verdict::Consumed);
    got = client.recv(&from);
    REQUIRE(got);
    CHECK(*got == pattern(10, 4));
    CHECK(port_of(from) != rig.port);
}

TEST_CASE("udp_forward: loopback clients the gateway makes one get ports of their own") {
    // 127.0.0.1:P and [::1]:P forwarded to one guest end, a client on each
    // from the same port number: both come from 10.0.2.2 as the guest sees
    // them, so one of them must come from another port, and each reply
    // must reach its own client.
    FwdRig rig;
    socklen_t len6;
    sockaddr_storage host6{};
    uint16_t port6 = 0;
    for (int attempt = 0; attempt < 10 && port6 == 0; ++attempt) {
        const uint16_t p = free_port(true);
        host6 = loopback(true, p, len6);
        if (rig.path.add_forward(reinterpret_cast<sockaddr *>(&host6), len6, kGuestHost4,
                                 kGuestPort) == 0)
            port6 = p;
    }
    REQUIRE(port6 != 0);
    // Two clients on one port number, one each family.
    std::optional<HostSocket> a;
    UniqueFd b;
    for (int attempt = 0; attempt < 20 && !b; ++attempt) {
        a.emplace(false);
        socklen_t l;
        sockaddr_storage same = loopback(true, a->port, l);
        b.reset(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (::bind(b.get(), reinterpret_cast<sockaddr *>(&same), l) != 0) b.reset();
    }
    REQUIRE(b);
    const uint16_t cport = a->port;
    rig.send_from(*a, pattern(10, 1));
    REQUIRE(rig.poll_host());
    REQUIRE(::sendto(b.get(), "six", 3, 0, reinterpret_cast<sockaddr *>(&host6), len6) == 3);
    while (rig.guest.out.size() < 2 && rig.poll_host()) {}
    REQUIRE(rig.guest.out.size() == 2);
    const uint16_t seen_a = be16(completed(rig.guest.out[0]).data() + 34);
    const uint16_t seen_b = be16(completed(rig.guest.out[1]).data() + 34);
    CHECK(seen_a == cport);
    CHECK(seen_b != cport);
    CHECK(rig.path.stats().forward_clashes == 0);
    CHECK(rig.reply(seen_b, pattern(7, 2)) == Verdict::Consumed);
    CHECK(rig.reply(seen_a, pattern(8, 3)) == Verdict::Consumed);
    std::optional<Bytes> got_a = a->recv();
    REQUIRE(got_a);
    CHECK(*got_a == pattern(8, 3));
    pollfd p{b.get(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 2000) == 1);
    uint8_t buf[64];
    CHECK(::recv(b.get(), buf, sizeof buf, 0) == 7);
    CHECK(Bytes(buf, buf + 7) == pattern(7, 2));
}

TEST_CASE("udp_forward: a spray of clients never takes the guest's flows; the forward's "
          "pool stays bounded, answered clients keep working") {
    // The guest's own limits as the stack loop has them: max_flows 8 (4 for
    // UDP), a rate of 1000 new flows a second shared with TCP.
    Stats stats;
    FlowLimits limits(8, 1000, stats, 1000);
    Collector guest;
    udp::FastPathConfig c = Rig::config(65520, true);
    int64_t now = 1000;
    c.clock = [&] { return now; };
    udp::FastPath *self = nullptr;
    c.admit_flow = [&] {
        const size_t n = self->flows();
        return limits.admit(n, uint64_t(now), true, n) == FlowLimits::Admit::Ok
                   ? Admission::Accept
                   : Admission::Reset;
    };
    c.forward_clients = 64;
    c.forward_clients_each = 16;
    udp::FastPath path(c, guest);
    self = &path;
    const uint16_t port = free_port(false);
    socklen_t len;
    sockaddr_storage host = loopback(false, port, len);
    REQUIRE(path.add_forward(reinterpret_cast<sockaddr *>(&host), len, kGuestHost4, kGuestPort) ==
            0);
    const uint8_t dns[4] = {10, 0, 2, 3};
    REQUIRE(path.guest_frame(guest_datagram(false, kGuest4, dns, 40000, 53, pattern(4, 0))) ==
            Verdict::NotMine);
    auto drain = [&] {
        pollfd p{path.epoll_fd(), POLLIN, 0};
        while (::poll(&p, 1, 50) == 1) path.poll_events();
    };
    auto reply = [&](uint16_t to, const Bytes &data) {
        const Verdict v = path.guest_frame(
            guest_datagram(false, kGuest4, kGateway4, kGuestPort, to, data));
        path.flush();
        return v;
    };
    // A client the guest's service answers.
    HostSocket known(false);
    REQUIRE(::sendto(known.fd.get(), "hi", 2, 0, reinterpret_cast<sockaddr *>(&host), len) == 2);
    drain();
    REQUIRE(guest.out.size() == 1);
    REQUIRE(reply(known.port, pattern(5, 1)) == Verdict::Consumed);
    REQUIRE(known.recv());
    // 200 new source ports, 25 times max_flows, none answered.
    for (int i = 0; i < 200; ++i) {
        HostSocket s(false);
        REQUIRE(::sendto(s.fd.get(), "spray", 5, 0, reinterpret_cast<sockaddr *>(&host), len) ==
                5);
        if (i % 8 == 7) drain();
        now += 1;
    }
    drain();
    CHECK(path.stats().forward_datagrams == 201);
    CHECK(path.forward_flows() == 16);
    CHECK(path.stats().forward_evicted >= 150); // 185 but for ports the kernel gave twice
    CHECK(path.flows() == 0);
    // rknp_stats (1.7) shows the pool at work: as many admitted as the
    // 16 places and the evicted make, nothing refused for want of room.
    path.publish(stats);
    CHECK(stats.udp_forward_clients.load() == 16);
    CHECK(stats.udp_forward_evicted.load() == path.stats().forward_evicted);
    CHECK(stats.udp_forward_admitted.load() == 16 + path.stats().forward_evicted);
    CHECK(stats.udp_forward_full.load() == 0);
    CHECK(stats.flows_refused.load() == 0);
    CHECK(stats.flows_rate_limited.load() == 0);
    // The answered client still reaches the guest, and the guest it.
    const size_t before = guest.out.size();
    REQUIRE(::sendto(known.fd.get(), "again", 5, 0, reinterpret_cast<sockaddr *>(&host), len) ==
            5);
    drain();
    REQUIRE(guest.out.size() == before + 1);
    check_to_guest(guest.out.back(), known.port, Bytes{'a', 'g', 'a', 'i', 'n'});
    REQUIRE(reply(known.port, pattern(6, 2)) == Verdict::Consumed);
    std::optional<Bytes> got = known.recv();
    REQUIRE(got);
    CHECK(*got == pattern(6, 2));
    // The guest still opens flows of its own: UDP here, and a TCP SYN or
    // a libslirp socket would get the same admission.
    for (uint16_t sport = 41000; sport < 41004; ++sport) {
        HostSocket srv(false);
        REQUIRE(path.guest_frame(guest_datagram(false, kGuest4, kGateway4, sport, srv.port,
                                                pattern(3, 3))) == Verdict::Consumed);
        path.flush();
        CHECK(srv.recv());
    }
    CHECK(path.flows() == 4);
    CHECK(limits.admit(path.flows(), uint64_t(now)) == FlowLimits::Admit::Ok);
    CHECK(stats.flows_refused.load() == 0);
}

TEST_CASE("udp_forward: flows expire as other UDP flows do") {
    FwdRig rig;
    HostSocket client(false);
    rig.send_from(client, pattern(10, 1));
    REQUIRE(rig.poll_host());
    CHECK(rig.path.ms_until_next_timer(rig.now) == 30000);
    rig.now += 30000;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.forward_flows() == 0);
    // Answered by the guest: 180 s.
    rig.send_from(client, pattern(10, 2));
    REQUIRE(rig.poll_host());
    CHECK(rig.path.forward_flows() == 1);
    rig.now += 1000;
    REQUIRE(rig.reply(client.port, pattern(10, 3)) == Verdict::Consumed);
    REQUIRE(client.recv());
    const int64_t answered_at = rig.now;
    rig.now = answered_at + 179999;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.forward_flows() == 1);
    rig.now = answered_at + 180000;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.forward_flows() == 0);
    CHECK(rig.path.forwards() == 1);
}

TEST_CASE("udp_forward: an unknown guest MAC is asked for with ARP") {
    FwdRig rig(false, {}, false);
    HostSocket client(false);
    rig.send_from(client, pattern(10, 1));
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 1);
    const Bytes &arp = rig.guest.out[0].frame;
    REQUIRE(arp.size() == 42);
    CHECK(be16(arp.data() + 12) == 0x0806);
    CHECK(be16(arp.data() + 20) == 1); // request
    CHECK(std::memcmp(arp.data() + 28, kGateway4, 4) == 0);
    CHECK(std::memcmp(arp.data() + 38, kGuest4, 4) == 0);
    CHECK(rig.path.stats().forward_waiting_mac == 1);
    CHECK(rig.path.stats().arp_requests == 1);
    // The guest's ARP reply (any frame from it) teaches the MAC; the
    // client's retry goes through.
    Bytes reply(42, 0);
    std::memcpy(reply.data(), arp.data() + 6, 6);
    std::memcpy(reply.data() + 6, kGuestMac, 6);
    put_be16(reply.data() + 12, 0x0806);
    CHECK(rig.path.guest_frame(reply) == Verdict::NotMine);
    rig.send_from(client, pattern(10, 2));
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 2);
    check_to_guest(rig.guest.out[1], client.port, pattern(10, 2));
}

TEST_CASE("udp_forward: the tap going away ends the flows, not the forwards") {
    FwdRig rig;
    HostSocket client(false);
    rig.send_from(client, pattern(10, 1));
    REQUIRE(rig.poll_host());
    CHECK(rig.path.forward_flows() == 1);
    rig.path.tap_detached();
    CHECK(rig.path.forward_flows() == 0);
    CHECK(rig.path.forwards() == 1);
}

TEST_CASE("udp_forward: with disable_host_loopback a loopback client still gets the replies") {
    Collector guest;
    udp::FastPathConfig c = Rig::config(65520, true);
    c.disable_host_loopback = true;
    udp::FastPath path(c, guest);
    const uint16_t port = free_port(false);
    socklen_t len;
    sockaddr_storage host = loopback(false, port, len);
    REQUIRE(path.add_forward(reinterpret_cast<sockaddr *>(&host), len, kGuestHost4, kGuestPort) ==
            0);
    const uint8_t dns[4] = {10, 0, 2, 3};
    REQUIRE(path.guest_frame(guest_datagram(false, kGuest4, dns, 40000, 53, pattern(4, 0))) ==
            Verdict::NotMine);
    HostSocket client(false);
    REQUIRE(::sendto(client.fd.get(), "ping", 4, 0, reinterpret_cast<sockaddr *>(&host), len) == 4);
    pollfd p{path.epoll_fd(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 2000) == 1);
    path.poll_events();
    REQUIRE(guest.out.size() == 1);
    check_to_guest(guest.out[0], client.port, Bytes{'p', 'i', 'n', 'g'});
    CHECK(path.guest_frame(guest_datagram(false, kGuest4, kGateway4, kGuestPort, client.port,
                                          pattern(9, 1))) == Verdict::Consumed);
    path.flush();
    std::optional<Bytes> got = client.recv();
    REQUIRE(got);
    CHECK(*got == pattern(9, 1));
    // Anything else to the gateway stays refused (libslirp's, which drops it).
    CHECK(path.guest_frame(guest_datagram(false, kGuest4, kGateway4, kGuestPort, 9,
                                          pattern(9, 1))) == Verdict::NotMine);
    CHECK(path.forward_flows() == 1);
}

TEST_CASE("udp_forward: where the tap takes UDP GSO, a client's burst is one frame") {
    FwdRig rig;
    rig.path.set_guest_gso(true);
    HostSocket client(false);
    // Ten 1000-byte datagrams in one UDP_SEGMENT send: one coalesced read.
    const Bytes burst = pattern(10 * 1000, 7);
    REQUIRE(send_segmented(client.fd.get(), rig.host, burst, 1000) == ssize_t(burst.size()));
    size_t datagrams = 0;
    Bytes got;
    for (int polls = 0; datagrams < 10 && polls < 20; ++polls) {
        rig.poll_host(200);
        datagrams = 0;
        got.clear();
        for (const Out &o : rig.guest.out) {
            const Bytes f = completed(o);
            const uint8_t *ip = f.data() + 14;
            CHECK(std::memcmp(ip + 12, kGateway4, 4) == 0);
            CHECK(be16(ip + 20) == client.port);
            CHECK(be16(ip + 22) == kGuestPort);
            CHECK(l4_checksum_ok(false, ip, {ip + 20, f.size() - 34}, 17));
            if (o.vnet.gso_type == kVnetGsoUdpL4) {
                CHECK(o.vnet.gso_size == 1000);
                datagrams += (f.size() - 42 + 999) / 1000;
            } else {
                ++datagrams;
            }
            got.insert(got.end(), f.begin() + 42, f.end());
        }
    }
    CHECK(datagrams == 10);
    CHECK(got == burst);
    CHECK(rig.path.stats().gso_frames >= 1);
    CHECK(rig.guest.out.size() < 10);
}

TEST_CASE("udp_forward: on a wildcard address, replies leave from the address the client "
          "sent to") {
    // A client on the loopback address that connect()s to another of the
    // host's addresses takes only what comes from that address; the
    // kernel's own choice for a reply to loopback is the loopback address.
    testns::in_own_netns({}, [](bool have_v6) {
        for (bool v6 : {false, true}) {
            if (v6 && !have_v6) {
                MESSAGE("no IPv6 address in the test's namespace: IPv6 not checked");
                continue;
            }
            CAPTURE(v6);
            FwdRig rig(v6, {}, true, true);
            HostSocket client(v6); // bound to 127.0.0.1 or ::1
            socklen_t len;
            const sockaddr_storage other =
                socket_address(v6 ? "2001:db8::1" : "192.0.2.1", rig.port, len);
            REQUIRE(::connect(client.fd.get(), reinterpret_cast<const sockaddr *>(&other),
                              len) == 0);
            const Bytes ask = pattern(90, 7), answer = pattern(300, 8);
            REQUIRE(::send(client.fd.get(), ask.data(), ask.size(), 0) == ssize_t(ask.size()));
            REQUIRE(rig.poll_host());
            REQUIRE(rig.guest.out.size() == 1);
            check_to_guest(rig.guest.out[0], client.port, ask);
            // A run of equal replies too: the source rides with UDP_SEGMENT.
            CHECK(rig.reply(client.port, answer) == Verdict::Consumed);
            for (int i = 0; i < 3; ++i)
                REQUIRE(rig.path.guest_frame(guest_datagram(false, kGuest4, kGateway4, kGuestPort,
                                                            client.port, answer)) ==
                        Verdict::Consumed);
            rig.path.flush();
            for (int i = 0; i < 4; ++i) {
                CAPTURE(i);
                sockaddr_storage from{};
                std::optional<Bytes> got = client.recv(&from);
                REQUIRE(got); // the old code's reply came from loopback: filtered out
                CHECK(*got == answer);
                CHECK(port_of(from) == rig.port);
            }
            CHECK(rig.path.stats().dropped_to_host == 0);
            // A client that sends to loopback still hears from loopback.
            HostSocket plain(v6);
            const sockaddr_storage lo = loopback(v6, rig.port, len);
            REQUIRE(::connect(plain.fd.get(), reinterpret_cast<const sockaddr *>(&lo), len) ==
                    0);
            REQUIRE(::send(plain.fd.get(), ask.data(), ask.size(), 0) == ssize_t(ask.size()));
            REQUIRE(rig.poll_host());
            REQUIRE(rig.guest.out.size() == 2);
            CHECK(rig.reply(plain.port, answer) == Verdict::Consumed);
            std::optional<Bytes> got = plain.recv();
            REQUIRE(got);
            CHECK(*got == answer);
        }
    });
}

TEST_CASE("udp_forward: the guest's port unreachable ends a client's flow") {
    FwdRig rig;
    HostSocket client(false);
    rig.send_from(client, pattern(10, 1));
    REQUIRE(rig.poll_host());
    CHECK(rig.path.forward_flows() == 1);
    CHECK(rig.path.guest_frame(guest_port_unreachable(false, kGuest4, kGateway4, kGuestPort,
                                                      client.port, 10)) == Verdict::Consumed);
    CHECK(rig.path.forward_flows() == 0);
    CHECK(rig.path.stats().closed_by_guest == 1);
    // The client's next datagram is a new client to the forward.
    rig.send_from(client, pattern(10, 2));
    REQUIRE(rig.poll_host());
    CHECK(rig.path.forward_flows() == 1);
    CHECK(rig.guest.out.size() == 2);
}

TEST_CASE("udp_forward: to an address routed behind the guest, its replies taken") {
    // Podman's bridge network in the namespace: the forward goes to a
    // container's address the guest routes (10.89.0.2), through the
    // guest's MAC; the container's replies come from that address.
    Rig rig;
    const uint8_t routed[4] = {10, 89, 0, 2};
    const uint8_t routed_key[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 89, 0, 2};
    sockaddr_storage host{};
    socklen_t host_len = 0;
    REQUIRE(add_loopback_forward(rig.path, false, routed_key, false, host, host_len) != 0);
    HostSocket client(false);
    const Bytes ask = pattern(300, 3), answer = pattern(900, 4);
    // The guest's MAC unknown: the ARP asks for the guest's own address.
    send_to_forward(rig, client, host, host_len, ask);
    expect_arp_then_teach(rig);
    send_to_forward(rig, client, host, host_len, ask);
    REQUIRE(rig.guest.out.size() == 2);
    const Bytes f = completed(rig.guest.out[1]);
    REQUIRE(f.size() == 14 + 20 + 8 + ask.size());
    CHECK(std::equal(kGuestMac, kGuestMac + 6, f.begin()));
    CHECK(std::memcmp(f.data() + 14 + 12, kGateway4, 4) == 0); // the client as before
    CHECK(std::memcmp(f.data() + 14 + 16, routed, 4) == 0);
    CHECK(be16(f.data() + 14 + 22) == kGuestPort);

    // The reply, from 10.89.0.2, through routed_frame: to the client.
    const Bytes reply = guest_datagram(false, routed, kGateway4, kGuestPort, client.port, answer);
    CHECK(rig.path.routed_frame(reply) == Verdict::Consumed);
    rig.path.flush();
    std::optional<Bytes> got = client.recv();
    REQUIRE(got);
    CHECK(*got == answer);
    // Nothing else from that address: not another port, not a new flow
    // anywhere, not as the guest's own traffic.
    const uint8_t far[4] = {192, 0, 2, 1};
    CHECK(rig.path.routed_frame(guest_datagram(false, routed, far, kGuestPort, 53, answer)) ==
          Verdict::NotMine);
    CHECK(rig.path.routed_frame(guest_datagram(false, routed, kGateway4, kGuestPort + 1,
                                               client.port, answer)) == Verdict::NotMine);
    CHECK(rig.path.flows() == 0);
    // The guest's own flows are never routed_frame's.
    CHECK(rig.path.routed_frame(guest_datagram(false, kGuest4, far, 41000, 53, answer)) ==
          Verdict::NotMine);
    CHECK(rig.path.flows() == 0);
}

TEST_CASE("udp_forward: to an IPv6 address routed behind the guest, its replies taken") {
    // Podman's dual-stack bridge network: the forward goes to a
    // container's IPv6 address (outside the guest's fd00::/64) through
    // the guest's MAC; its replies come from that address.
    Rig rig;
    uint8_t routed[16], gw6[16], guest6[16];
    addr6(routed, "fd00:aaaa::2");
    addr6(gw6, "fd00::2");
    addr6(guest6, "fd00::100");
    sockaddr_storage host{};
    socklen_t host_len = 0;
    REQUIRE(add_loopback_forward(rig.path, true, routed, true, host, host_len) != 0);
    HostSocket client(true);
    const Bytes ask = pattern(300, 5), answer = pattern(900, 6);
    // The guest's MAC unknown: the ARP asks for the guest's own IPv4
    // address (one MAC for both families).
    send_to_forward(rig, client, host, host_len, ask);
    expect_arp_then_teach(rig);
    send_to_forward(rig, client, host, host_len, ask);
    REQUIRE(rig.guest.out.size() == 2);
    const Bytes f = completed(rig.guest.out[1]);
    REQUIRE(f.size() == 14 + 40 + 8 + ask.size());
    CHECK(std::equal(kGuestMac, kGuestMac + 6, f.begin()));
    const uint8_t *ip = f.data() + 14;
    CHECK(be16(f.data() + 12) == 0x86dd);
    CHECK(std::memcmp(ip + 8, gw6, 16) == 0); // a loopback client: the gateway
    CHECK(std::memcmp(ip + 24, routed, 16) == 0);
    CHECK(be16(ip + 42) == kGuestPort);
    CHECK(l4_checksum_ok(true, ip, {ip + 40, f.size() - 54}, 17));
    CHECK(std::equal(ask.begin(), ask.end(), f.begin() + 62));

    // The reply, from fd00:aaaa::2, through routed_frame: to the client.
    const uint16_t seen_port = be16(ip + 40);
    const Bytes reply = guest_datagram(true, routed, gw6, kGuestPort, seen_port, answer);
    CHECK(rig.path.routed_frame(reply) == Verdict::Consumed);
    rig.path.flush();
    std::optional<Bytes> got = client.recv();
    REQUIRE(got);
    CHECK(*got == answer);
    // Nothing else from that address.
    uint8_t far[16];
    addr6(far, "2001:db8::1");
    CHECK(rig.path.routed_frame(guest_datagram(true, routed, far, kGuestPort, 53, answer)) ==
          Verdict::NotMine);
    CHECK(rig.path.routed_frame(guest_datagram(true, routed, gw6, kGuestPort + 1, seen_port,
                                               answer)) == Verdict::NotMine);
    CHECK(rig.path.flows() == 0);
    CHECK(rig.path.forward_flows() == 1);

    // An IPv4 client on a forward to the guest's own IPv6 address: seen
    // from the IPv6 gateway; the guest's reply (guest_frame) reaches it.
    sockaddr_storage host4{};
    socklen_t host4_len = 0;
    REQUIRE(add_loopback_forward(rig.path, false, guest6, true, host4, host4_len) != 0);
    HostSocket client4(false);
    send_to_forward(rig, client4, host4, host4_len, ask);
    REQUIRE(rig.guest.out.size() == 3);
    const Bytes g = completed(rig.guest.out[2]);
    const uint8_t *ip4 = g.data() + 14;
    CHECK(be16(g.data() + 12) == 0x86dd);
    CHECK(std::memcmp(ip4 + 8, gw6, 16) == 0);
    CHECK(std::memcmp(ip4 + 24, guest6, 16) == 0);
    CHECK(rig.path.guest_frame(guest_datagram(true, guest6, gw6, kGuestPort, be16(ip4 + 40),
                                              answer)) == Verdict::Consumed);
    rig.path.flush();
    got = client4.recv();
    REQUIRE(got);
    CHECK(*got == answer);
}
