// SPDX-License-Identifier: Apache-2.0

// The UDP fast path's data path allocates nothing: operator new is counted
// while guest_frame(), flush() and poll_events() run, after a warm-up, for
// guest datagrams on existing flows (single ones and a segmented run),
// host replies (single, a coalesced UDP_GRO read, one over the MTU that
// leaves in fragments) and an ICMP error relayed from a closed port; and
// on a forward, new clients, their datagrams and the guest's replies. The
// guest-bound frames go to a sink that only counts them; frames are built
// by the test outside the counted calls. It has a test executable of its
// own (alloc_count.hpp).
#include <doctest/doctest.h>

#include "../lib/udp_segment.hpp"
#include "alloc_count.hpp"
#include "udp_rig.hpp"

using namespace rknp;
using namespace rknp::udptest;
using alloc_count::counted;

namespace {

// Counts guest-bound frames without keeping them (a Collector allocates);
// a UDP GSO frame counts as the datagrams the guest cuts it into.
struct CountingSink final : GuestSink {
    size_t frames = 0, partial = 0, icmp = 0, gso = 0;
    void write_frame(const VnetHdr &h, std::span<const uint8_t> f,
                     std::span<const uint8_t> rest) override {
        count(h, f, f.size() + rest.size());
    }
    void write_frame_parts(const VnetHdr &h, std::span<const uint8_t> f,
                           std::span<const iovec> rest) override {
        size_t len = f.size();
        for (const iovec &v : rest) len += v.iov_len;
        count(h, f, len);
    }
    void count(const VnetHdr &h, std::span<const uint8_t> f, size_t len) {
        if (h.flags & kVnetNeedsCsum) ++partial;
        const uint8_t proto = be16(f.data() + 12) == 0x86dd ? f[20] : f[23];
        if (proto == 1 || proto == 58) ++icmp;
        if (h.gso_type != kVnetGsoUdpL4) {
            ++frames;
            return;
        }
        ++gso;
        frames += (len - h.hdr_len + h.gso_size - 1) / h.gso_size;
    }
};


struct Setup {
    int64_t now = 1000;
    CountingSink sink;
    udp::FastPath path;
    size_t allocs = 0;

    Setup() : path(config(), sink) {}
    udp::FastPathConfig config() {
        udp::FastPathConfig c = Rig::config(1500, true);
        c.clock = [this] { return now; };
        return c;
    }

    void guest(const Bytes &f) {
        allocs += counted([&] { CHECK(path.guest_frame(f) == Verdict::Consumed); });
    }
    void flush() {
        allocs += counted([&] { path.flush(); });
    }
    // Polls until `frames` guest-bound frames arrived (or 2 s).
    void poll_until(size_t frames) {
        for (int i = 0; i < 200 && sink.frames < frames; ++i) {
            pollfd p{path.epoll_fd(), POLLIN, 0};
            if (::poll(&p, 1, 10) == 1) allocs += counted([&] { path.poll_events(); });
        }
    }
};

} // namespace

TEST_CASE("udp_noalloc: no allocation per datagram, either direction, nor per ICMP error") {
    // The instrument itself works.
    REQUIRE(counted([] { std::vector<int> v(10); (void)v; }) == 1);
    for (auto [v6, gso] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
        CAPTURE(v6);
        CAPTURE(gso);
        Setup s;
        s.path.set_guest_gso(gso); // the tap takes UDP GSO frames
        uint8_t guest[16], gw[16];
        if (v6) {
            addr6(guest, "fd00::100");
            addr6(gw, "fd00::2");
        } else {
            std::memcpy(guest, kGuest4, 4);
            std::memcpy(gw, kGateway4, 4);
        }
        HostSocket srv(v6);
        uint16_t closed;
        {
            HostSocket gone(v6);
            closed = gone.port;
        }
        // Frames built up front: the counted calls only take them.
        const Bytes one = guest_datagram(v6, guest, gw, 40000, srv.port, pattern(300, 1));
        const Bytes seg = guest_datagram(v6, guest, gw, 40000, srv.port, pattern(1000, 2));
        const Bytes tail = guest_datagram(v6, guest, gw, 40000, srv.port, pattern(400, 3));
        const Bytes to_closed = guest_datagram(v6, guest, gw, 40001, closed, pattern(200, 4));
        const Bytes reply = pattern(800, 5), big = pattern(5000, 6), burst = pattern(20 * 1200, 7);

        // Warm-up: both flows open, every path once (the table, the epoll
        // set and the fast path's buffers exist before counting).
        s.path.guest_frame(one);
        s.path.guest_frame(to_closed);
        s.path.flush();
        sockaddr_storage peer{};
        REQUIRE(srv.recv(&peer));
        srv.reply(peer, reply);
        s.poll_until(2); // the reply and the ICMP error
        REQUIRE(s.sink.frames == 2);
        REQUIRE(s.sink.icmp == 1);
        s.allocs = 0;

        for (int round = 0; round < 5; ++round) {
            CAPTURE(round);
            // Guest -> host: a single datagram, then a run of equal ones
            // (one UDP_SEGMENT send) ended by a shorter one.
            s.guest(one);
            s.flush();
            for (int i = 0; i < 10; ++i) s.guest(seg);
            s.guest(tail);
            s.flush();
            for (int i = 0; i < 12; ++i) REQUIRE(srv.recv(&peer));
            CHECK(s.path.stats().segmented_sends >= size_t(round + 1));
            // Host -> guest: a single reply, a coalesced one, one over the
            // MTU (fragments).
            size_t before = s.sink.frames;
            srv.reply(peer, reply);
            s.poll_until(before + 1);
            REQUIRE(s.sink.frames == before + 1);
            before = s.sink.frames;
            REQUIRE(send_segmented(srv.fd.get(), peer, burst, 1200) == ssize_t(burst.size()));
            s.poll_until(before + 20);
            REQUIRE(s.sink.frames == before + 20);
            before = s.sink.frames;
            srv.reply(peer, big);
            s.poll_until(before + 4); // 5008 bytes of UDP in 1480 / 1448-byte fragments
            REQUIRE(s.sink.frames == before + 4);
            // An ICMP error relayed: the closed port's flow exists.
            const size_t icmp = s.sink.icmp;
            s.guest(to_closed);
            s.flush();
            s.poll_until(s.sink.frames + 1);
            REQUIRE(s.sink.icmp == icmp + 1);
        }
        CHECK(s.path.stats().fragmented == 5);
        CHECK((s.sink.gso > 0) == gso);
        CHECK(s.path.flows() == 2);
        CHECK(s.allocs == 0);
    }
}

TEST_CASE("udp_noalloc: forwards allocate nothing per datagram or per new client") {
    Setup s;
    HostSocket probe(false);
    const uint16_t port = probe.port;
    probe.fd.reset();
    sockaddr_storage host{};
    auto &h4 = reinterpret_cast<sockaddr_in &>(host);
    h4.sin_family = AF_INET;
    h4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    h4.sin_port = htons(port);
    REQUIRE(s.path.add_forward(reinterpret_cast<sockaddr *>(&host), sizeof h4, 0x0a000264, 5353) ==
            0);
    const uint8_t dns[4] = {10, 0, 2, 3};
    REQUIRE(s.path.guest_frame(guest_datagram(false, kGuest4, dns, 40000, 53, pattern(4, 0))) ==
            Verdict::NotMine); // the guest's MAC
    std::vector<HostSocket> clients;
    for (int i = 0; i < 6; ++i) clients.emplace_back(false);
    std::vector<Bytes> replies, runs;
    for (const HostSocket &c : clients) {
        replies.push_back(guest_datagram(false, kGuest4, kGateway4, 5353, c.port, pattern(300, 1)));
        runs.push_back(guest_datagram(false, kGuest4, kGateway4, 5353, c.port, pattern(1000, 2)));
    }
    const Bytes ask = pattern(200, 3), burst = pattern(10 * 1000, 4);
    // Warm-up with the first client.
    REQUIRE(::sendto(clients[0].fd.get(), ask.data(), ask.size(), 0,
                     reinterpret_cast<sockaddr *>(&host), sizeof h4) == ssize_t(ask.size()));
    s.poll_until(1);
    REQUIRE(s.sink.frames == 1);
    s.path.guest_frame(replies[0]);
    s.path.flush();
    REQUIRE(clients[0].recv());
    s.allocs = 0;
    for (size_t i = 0; i < clients.size(); ++i) {
        CAPTURE(i);
        size_t before = s.sink.frames;
        // A new client (but the first), then a coalesced burst from it.
        REQUIRE(::sendto(clients[i].fd.get(), ask.data(), ask.size(), 0,
                         reinterpret_cast<sockaddr *>(&host), sizeof h4) == ssize_t(ask.size()));
        s.poll_until(before + 1);
        REQUIRE(s.sink.frames == before + 1);
        before = s.sink.frames;
        REQUIRE(send_segmented(clients[i].fd.get(), host, burst, 1000) == ssize_t(burst.size()));
        s.poll_until(before + 10);
        REQUIRE(s.sink.frames == before + 10);
        // The guest's replies: one, then a segmented run.
        s.guest(replies[i]);
        s.flush();
        for (int k = 0; k < 8; ++k) s.guest(runs[i]);
        s.flush();
        for (int k = 0; k < 9; ++k) REQUIRE(clients[i].recv());
    }
    CHECK(s.path.forward_flows() == clients.size());
    CHECK(s.path.flows() == 0);
    CHECK(s.allocs == 0);
}
