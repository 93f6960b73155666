// SPDX-License-Identifier: Apache-2.0

// The UDP fast path against real host sockets on loopback: datagrams both
// ways with the headers and checksums the guest checks, segmented sends,
// fragments over the MTU, ICMP errors (relayed, retried past, and for
// flows that cannot connect), idle expiry, admission, and what stays
// libslirp's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "icmp_spoof.hpp"
#include "own_netns.hpp"
#include "udp_rig.hpp"

using namespace rknp;
using namespace rknp::udptest;

namespace {

struct Addrs {
    bool v6;
    uint8_t guest[16]{}, gateway[16]{};
    size_t alen;
    explicit Addrs(bool v6_) : v6(v6_), alen(v6_ ? 16 : 4) {
        if (v6) {
            addr6(guest, "fd00::100");
            addr6(gateway, "fd00::2");
        } else {
            std::memcpy(guest, kGuest4, 4);
            std::memcpy(gateway, kGateway4, 4);
        }
    }
    Bytes to_gateway(uint16_t sport, uint16_t dport, std::span<const uint8_t> p) const {
        return guest_datagram(v6, guest, gateway, sport, dport, p);
    }
};

// The IP header and payload of a guest-bound frame.
struct Ip {
    const uint8_t *hdr;
    std::span<const uint8_t> payload;
    uint8_t proto;
};
Ip ip_of(const Bytes &f, bool v6) {
    const uint8_t *ip = f.data() + 14;
    if (v6) return {ip, {ip + 40, be16(ip + 4)}, ip[6]};
    size_t ihl = size_t(ip[0] & 15) * 4;
    return {ip, {ip + ihl, be16(ip + 2) - ihl}, ip[9]};
}

// Reassembles the fragments of one datagram the guest got (IPv4 or IPv6
// with a fragment header): the whole UDP datagram, or empty on a gap.
Bytes reassemble(const std::vector<Out> &frames, bool v6) {
    std::map<size_t, Bytes> parts;
    size_t total = 0;
    for (const Out &o : frames) {
        const uint8_t *ip = o.frame.data() + 14;
        size_t off, hdr;
        bool more;
        if (!v6) {
            hdr = size_t(ip[0] & 15) * 4;
            uint16_t fo = be16(ip + 6);
            off = size_t(fo & 0x1fff) * 8;
            more = (fo & 0x2000) != 0;
            Bytes data(ip + hdr, ip + be16(ip + 2));
            if (!more) total = off + data.size();
            parts[off] = data;
        } else {
            REQUIRE(ip[6] == 44);
            const uint8_t *fh = ip + 40;
            off = be16(fh + 2) & ~7u;
            more = (be16(fh + 2) & 1) != 0;
            Bytes data(fh + 8, ip + 40 + be16(ip + 4));
            if (!more) total = off + data.size();
            parts[off] = data;
        }
    }
    Bytes whole;
    for (auto &[off, data] : parts) {
        if (off != whole.size()) return {};
        whole.insert(whole.end(), data.begin(), data.end());
    }
    return whole.size() == total ? whole : Bytes{};
}

} // namespace

TEST_CASE("udp_fastpath: a guest datagram reaches a loopback server and the answer comes back") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        Rig rig;
        Addrs a(v6);
        HostSocket srv(v6);
        const Bytes ask = pattern(300, 1), answer = pattern(500, 2);
        CHECK(rig.path.guest_frame(a.to_gateway(40000, srv.port, ask)) == Verdict::Consumed);
        CHECK(rig.path.flows() == 1);
        rig.path.flush();
        sockaddr_storage from{};
        std::optional<Bytes> got = srv.recv(&from);
        REQUIRE(got);
        CHECK(*got == ask);
        srv.reply(from, answer);
        REQUIRE(rig.poll_host());
        REQUIRE(rig.guest.out.size() == 1);
        const Out &o = rig.guest.out[0];
        CHECK((o.vnet.flags & kVnetNeedsCsum) != 0);
        const Bytes f = completed(o);
        CHECK(std::equal(kGuestMac, kGuestMac + 6, f.begin()));
        Ip ip = ip_of(f, v6);
        CHECK(ip.proto == 17);
        if (v6) {
            CHECK(std::memcmp(ip.hdr + 8, a.gateway, 16) == 0);
            CHECK(std::memcmp(ip.hdr + 24, a.guest, 16) == 0);
        } else {
            CHECK(std::memcmp(ip.hdr + 12, a.gateway, 4) == 0);
            CHECK(std::memcmp(ip.hdr + 16, a.guest, 4) == 0);
            CHECK(csum_fold(csum_add(0, ip.hdr, 20)) == 0xffff);
        }
        REQUIRE(ip.payload.size() == 8 + answer.size());
        CHECK(be16(ip.payload.data()) == srv.port);
        CHECK(be16(ip.payload.data() + 2) == 40000);
        CHECK(be16(ip.payload.data() + 4) == 8 + answer.size());
        CHECK(l4_checksum_ok(v6, ip.hdr, ip.payload, 17));
        CHECK(Bytes(ip.payload.begin() + 8, ip.payload.end()) == answer);
        CHECK(rig.path.stats().datagrams_to_host == 1);
        CHECK(rig.path.stats().datagrams_to_guest == 1);
    }
}

TEST_CASE("udp_fastpath: runs of equal datagrams go out segmented, in the guest's order") {
    for (bool segmentation : {true, false}) {
        CAPTURE(segmentation);
        Rig rig(65520, segmentation);
        Addrs a(false);
        HostSocket srv(false);
        std::vector<Bytes> sent;
        for (int i = 0; i < 20; ++i) sent.push_back(pattern(1000, uint8_t(i)));
        sent.push_back(pattern(300, 50)); // ends the run
        sent.push_back(pattern(1200, 51));
        sent.push_back(pattern(1200, 52));
        sent.push_back({}); // an empty datagram is one too
        sent.push_back(pattern(1200, 53));
        for (const Bytes &p : sent)
            REQUIRE(rig.path.guest_frame(a.to_gateway(40001, srv.port, p)) == Verdict::Consumed);
        rig.path.flush();
        for (size_t i = 0; i < sent.size(); ++i) {
            CAPTURE(i);
            std::optional<Bytes> got = srv.recv();
            REQUIRE(got);
            CHECK(*got == sent[i]);
        }
        CHECK(rig.path.stats().datagrams_to_host == sent.size());
        CHECK(rig.path.stats().dropped_to_host == 0);
        if (segmentation)
            CHECK(rig.path.stats().segmented_sends >= 2);
        else
            CHECK(rig.path.stats().segmented_sends == 0);
    }
}

TEST_CASE("udp_fastpath: a batch of tap reads' first datagram goes out at once, later ones "
          "in runs") {
    Rig rig(65520, true);
    Addrs a(false);
    HostSocket srv(false);
    const Bytes request = pattern(64, 1);
    // A request must not wait for the tap read that would tell whether
    // more follow.
    REQUIRE(rig.path.guest_frame(a.to_gateway(40020, srv.port, request)) == Verdict::Consumed);
    REQUIRE(srv.has_datagram());
    CHECK(srv.recv() == request);
    // The same batch of reads goes on: equal datagrams wait to go out as
    // one segmented send.
    std::vector<Bytes> run;
    for (int i = 0; i < 3; ++i) {
        run.push_back(pattern(64, uint8_t(10 + i)));
        REQUIRE(rig.path.guest_frame(a.to_gateway(40020, srv.port, run.back())) ==
                Verdict::Consumed);
    }
    CHECK(!srv.has_datagram());
    rig.path.end_of_input();
    for (const Bytes &b : run) CHECK(srv.recv() == b);
    CHECK(rig.path.stats().segmented_sends == 1);
    // The next batch's first one again without waiting.
    REQUIRE(rig.path.guest_frame(a.to_gateway(40020, srv.port, request)) == Verdict::Consumed);
    REQUIRE(srv.has_datagram());
    CHECK(srv.recv() == request);
    CHECK(rig.path.stats().datagrams_to_host == 5);
}

TEST_CASE("udp_fastpath: coalesced host reads reach the guest as separate datagrams") {
    Rig rig;
    Addrs a(false);
    HostSocket srv(false);
    REQUIRE(rig.path.guest_frame(a.to_gateway(40002, srv.port, pattern(10, 1))) == Verdict::Consumed);
    rig.path.flush();
    sockaddr_storage from{};
    REQUIRE(srv.recv(&from));
    // Enough back-to-back datagrams that UDP_GRO may merge some.
    std::vector<Bytes> answers;
    for (int i = 0; i < 40; ++i) answers.push_back(pattern(1400, uint8_t(i)));
    for (const Bytes &b : answers) srv.reply(from, b);
    size_t polls = 0;
    while (rig.guest.out.size() < answers.size() && polls++ < 50) rig.poll_host(200);
    REQUIRE(rig.guest.out.size() == answers.size());
    for (size_t i = 0; i < answers.size(); ++i) {
        CAPTURE(i);
        const Bytes f = completed(rig.guest.out[i]);
        Ip ip = ip_of(f, false);
        CHECK(l4_checksum_ok(false, ip.hdr, ip.payload, 17));
        CHECK(Bytes(ip.payload.begin() + 8, ip.payload.end()) == answers[i]);
    }
}

TEST_CASE("udp_fastpath: where the tap takes UDP GSO, a burst of host datagrams is one frame") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        Rig rig(1500);
        rig.path.set_guest_gso(true);
        Addrs a(v6);
        HostSocket srv(v6);
        REQUIRE(rig.path.guest_frame(a.to_gateway(40012, srv.port, pattern(10, 1))) ==
                Verdict::Consumed);
        rig.path.flush();
        sockaddr_storage from{};
        REQUIRE(srv.recv(&from));
        std::vector<Bytes> answers;
        for (int i = 0; i < 12; ++i) answers.push_back(pattern(1400, uint8_t(i)));
        answers.push_back(pattern(600, 99)); // a shorter one ends a frame
        answers.push_back(pattern(1400, 100));
        answers.push_back(pattern(3000, 101)); // over the MTU: fragments
        for (const Bytes &b : answers) srv.reply(from, b);
        // What the guest's kernel makes of the frames: the datagrams.
        std::vector<Bytes> got;
        size_t gso_frames = 0, seen = 0;
        for (int polls = 0; got.size() < answers.size() && polls < 50; ++polls) {
            rig.poll_host(200);
            for (; seen < rig.guest.out.size(); ++seen) {
                const Out &o = rig.guest.out[seen];
                Ip ip = ip_of(o.frame, v6);
                if (!v6 && (be16(ip.hdr + 6) & 0x3fff) != 0) { // fragments: one datagram
                    std::vector<Out> frags(rig.guest.out.begin() + long(seen),
                                           rig.guest.out.end());
                    if (frags.size() < 3) break;
                    Bytes udp = reassemble({frags.begin(), frags.begin() + 3}, v6);
                    got.emplace_back(udp.begin() + 8, udp.end());
                    seen += 2;
                    continue;
                }
                if (v6 && ip.proto == 44) {
                    std::vector<Out> frags(rig.guest.out.begin() + long(seen),
                                           rig.guest.out.end());
                    if (frags.size() < 3) break;
                    Bytes udp = reassemble({frags.begin(), frags.begin() + 3}, v6);
                    got.emplace_back(udp.begin() + 8, udp.end());
                    seen += 2;
                    continue;
                }
                const Bytes f = completed(o);
                Ip full = ip_of(f, v6);
                CHECK(be16(full.payload.data() + 4) == full.payload.size());
                CHECK(l4_checksum_ok(v6, full.hdr, full.payload, 17));
                std::span<const uint8_t> data = full.payload.subspan(8);
                if (o.vnet.gso_type == kVnetGsoUdpL4) {
                    ++gso_frames;
                    CHECK(o.vnet.gso_size == 1400);
                    CHECK((o.vnet.flags & kVnetNeedsCsum) != 0);
                    for (size_t off = 0; off < data.size(); off += o.vnet.gso_size)
                        got.emplace_back(data.begin() + long(off),
                                         data.begin() + long(std::min<size_t>(
                                                            off + o.vnet.gso_size, data.size())));
                } else {
                    got.emplace_back(data.begin(), data.end());
                }
            }
        }
        REQUIRE(got.size() == answers.size());
        for (size_t i = 0; i < answers.size(); ++i) {
            CAPTURE(i);
            CHECK(got[i] == answers[i]);
        }
        CHECK(gso_frames >= 1);
        CHECK(rig.path.stats().gso_frames == gso_frames);
        CHECK(rig.path.stats().datagrams_to_guest == answers.size());
    }
}

TEST_CASE("udp_fastpath: host datagrams over the guest's MTU arrive as fragments") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        Rig rig(1500);
        Addrs a(v6);
        HostSocket srv(v6);
        REQUIRE(rig.path.guest_frame(a.to_gateway(40003, srv.port, pattern(100, 1))) ==
                Verdict::Consumed);
        rig.path.flush();
        sockaddr_storage from{};
        REQUIRE(srv.recv(&from));
        const Bytes answer = pattern(4000, 9);
        srv.reply(from, answer);
        REQUIRE(rig.poll_host());
        REQUIRE(rig.guest.out.size() == 3);
        for (const Out &o : rig.guest.out) {
            CHECK(o.frame.size() <= 14 + 1500);
            CHECK(o.vnet.flags == 0); // checksum complete: fragments cannot be partial
            CHECK(o.vnet.gso_type == 0);
        }
        const Bytes udp = reassemble(rig.guest.out, v6);
        REQUIRE(udp.size() == 8 + answer.size());
        CHECK(be16(udp.data() + 4) == udp.size());
        CHECK(l4_checksum_ok(v6, rig.guest.out[0].frame.data() + 14, udp, 17));
        CHECK(Bytes(udp.begin() + 8, udp.end()) == answer);
        CHECK(rig.path.stats().fragmented == 1);
    }
}

TEST_CASE("udp_fastpath: a closed port answers the guest with ICMP port unreachable") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        Rig rig;
        Addrs a(v6);
        uint16_t closed;
        {
            HostSocket gone(v6);
            closed = gone.port;
        }
        const Bytes ask = pattern(200, 3);
        REQUIRE(rig.path.guest_frame(a.to_gateway(40004, closed, ask)) == Verdict::Consumed);
        rig.path.flush();
        REQUIRE(rig.poll_host());
        REQUIRE(rig.guest.out.size() == 1);
        const Bytes &f = rig.guest.out[0].frame;
        Ip ip = ip_of(f, v6);
        CHECK(ip.proto == (v6 ? 58 : 1));
        REQUIRE(ip.payload.size() >= 8 + (v6 ? 40u : 20u) + 8);
        CHECK(ip.payload[0] == (v6 ? 1 : 3)); // destination unreachable
        CHECK(ip.payload[1] == (v6 ? 4 : 3)); // port unreachable
        CHECK(l4_checksum_ok(v6, ip.hdr, ip.payload, v6 ? 58 : 1));
        if (!v6) CHECK(csum_fold(csum_add(0, ip.payload.data(), ip.payload.size())) == 0xffff);
        // The quote is the guest's own datagram: the guest matches it to
        // its socket by these addresses and ports.
        const uint8_t *inner = ip.payload.data() + 8;
        const size_t inner_len = v6 ? 40 : 20;
        if (v6) {
            CHECK(std::memcmp(inner + 8, a.guest, 16) == 0);
            CHECK(std::memcmp(inner + 24, a.gateway, 16) == 0);
        } else {
            CHECK(std::memcmp(inner + 12, a.guest, 4) == 0);
            CHECK(std::memcmp(inner + 16, a.gateway, 4) == 0);
        }
        CHECK(be16(inner + inner_len) == 40004);
        CHECK(be16(inner + inner_len + 2) == closed);
        CHECK(rig.path.stats().icmp_to_guest == 1);
        CHECK(rig.path.flows() == 1); // the flow lives on, as a socket does
    }
}

TEST_CASE("udp_fastpath: a host socket given the very port the guest dialled never echoes") {
    // A flow's socket connected to 127.0.0.1:P where nothing is bound can
    // get P itself as its ephemeral port: it would then read back its own
    // datagrams, and the guest would get them as the host's answer.
    auto ask = [](Rig &rig, const Addrs &a, uint16_t port) {
        const Bytes bytes = pattern(200, 3);
        REQUIRE(rig.path.guest_frame(a.to_gateway(40004, port, bytes)) == Verdict::Consumed);
        rig.path.flush();
        (void)rig.poll_host(200);
        for (const Out &o : rig.guest.out) CHECK(ip_of(o.frame, a.v6).proto != 17);
    };
    SUBCASE("one ephemeral port: the only one is the dialled port, the flow is dropped") {
        testns::in_own_netns({{"/proc/sys/net/ipv4/ip_local_port_range", "45000 45000"}},
                             [&](bool v6_usable) {
            for (bool v6 : {false, true}) {
                if (v6 && !v6_usable) continue;
                CAPTURE(v6);
                Rig rig;
                Addrs a(v6);
                ask(rig, a, 45000);
                CHECK(rig.guest.out.empty());
                CHECK(rig.path.flows() == 0);
                CHECK(rig.path.stats().dropped_to_host == 1);
            }
        });
    }
    SUBCASE("two: the guest hears port unreachable whichever the kernel picks first") {
        testns::in_own_netns({{"/proc/sys/net/ipv4/ip_local_port_range", "45000 45001"}},
                             [&](bool v6_usable) {
            // The kernel picks at random: the chance that none of 16 flows
            // is offered the dialled port first is 1 in 65536.
            for (int i = 0; i < 16; ++i) {
                const bool v6 = v6_usable && i % 2 == 1;
                CAPTURE(i);
                Rig rig;
                Addrs a(v6);
                ask(rig, a, 45000);
                REQUIRE(rig.guest.out.size() == 1);
                Ip ip = ip_of(rig.guest.out[0].frame, v6);
                CHECK(ip.proto == (v6 ? 58 : 1));
                REQUIRE(ip.payload.size() >= 2);
                CHECK(ip.payload[0] == (v6 ? 1 : 3)); // destination unreachable
                CHECK(ip.payload[1] == (v6 ? 4 : 3)); // port unreachable
            }
        });
    }
}

TEST_CASE("udp_fastpath: idle flows close after 30 s, answered ones after 180 s") {
    Rig rig;
    Addrs a(false);
    HostSocket srv(false);
    REQUIRE(rig.path.guest_frame(a.to_gateway(40005, srv.port, pattern(10, 1))) == Verdict::Consumed);
    rig.path.flush();
    CHECK(srv.recv());
    CHECK(rig.path.ms_until_next_timer(rig.now) == 30000);
    rig.now += 29999;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.flows() == 1);
    rig.now += 1;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.flows() == 0);
    CHECK(rig.path.stats().flows_expired == 1);
    CHECK(rig.path.ms_until_next_timer(rig.now) == -1);

    REQUIRE(rig.path.guest_frame(a.to_gateway(40005, srv.port, pattern(10, 1))) == Verdict::Consumed);
    rig.path.flush();
    sockaddr_storage from{};
    REQUIRE(srv.recv(&from));
    rig.now += 10000;
    srv.reply(from, pattern(10, 2));
    REQUIRE(rig.poll_host());
    const int64_t answered_at = rig.now;
    rig.now = answered_at + 179999;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.flows() == 1);
    rig.now = answered_at + 180000;
    rig.path.run_timers(rig.now);
    CHECK(rig.path.flows() == 0);
}

TEST_CASE("udp_fastpath: DNS, DHCP, the virtual network and multicast stay libslirp's") {
    Rig rig;
    const uint8_t dns[4] = {10, 0, 2, 3}, other[4] = {10, 0, 2, 77},
                  bcast[4] = {255, 255, 255, 255}, mcast[4] = {224, 0, 0, 251};
    const Bytes p = pattern(20, 1);
    CHECK(rig.path.guest_frame(guest_datagram(false, kGuest4, dns, 40006, 53, p)) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(guest_datagram(false, kGuest4, kGateway4, 68, 67, p)) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(guest_datagram(false, kGuest4, bcast, 68, 67, p)) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(guest_datagram(false, kGuest4, other, 40006, 9, p)) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(guest_datagram(false, kGuest4, mcast, 5353, 5353, p)) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(guest_datagram(false, kGuest4, kGateway4, 0, 9, p)) == Verdict::NotMine);
    uint8_t g6[16], dns6[16], ll[16];
    addr6(g6, "fd00::100");
    addr6(dns6, "fd00::3");
    addr6(ll, "fe80::1");
    CHECK(rig.path.guest_frame(guest_datagram(true, g6, dns6, 40006, 53, p)) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(guest_datagram(true, g6, ll, 40006, 53, p)) == Verdict::NotMine);
    CHECK(rig.path.flows() == 0);
}

TEST_CASE("udp_fastpath: a refused new flow costs no socket and is counted") {
    Admission answer = Admission::Reset;
    Rig rig(65520, true, [&] { return answer; });
    Addrs a(false);
    HostSocket srv(false);
    CHECK(rig.path.guest_frame(a.to_gateway(40007, srv.port, pattern(10, 1))) == Verdict::Consumed);
    answer = Admission::Drop;
    CHECK(rig.path.guest_frame(a.to_gateway(40008, srv.port, pattern(10, 1))) == Verdict::Consumed);
    CHECK(rig.path.flows() == 0);
    CHECK(rig.path.stats().flows_refused == 2);
    answer = Admission::Accept;
    CHECK(rig.path.guest_frame(a.to_gateway(40009, srv.port, pattern(10, 1))) == Verdict::Consumed);
    CHECK(rig.path.flows() == 1);
}

TEST_CASE("udp_fastpath: malformed datagrams are dropped and counted") {
    Rig rig;
    Addrs a(false);
    Bytes f = a.to_gateway(40010, 9, pattern(20, 1));
    put_be16(f.data() + 14 + 20 + 4, 200); // UDP length past the datagram
    CHECK(rig.path.guest_frame(f) == Verdict::Consumed);
    Bytes g = a.to_gateway(40010, 9, pattern(20, 1));
    put_be16(g.data() + 14 + 20 + 4, 7); // shorter than its header
    CHECK(rig.path.guest_frame(g) == Verdict::Consumed);
    Addrs b(true);
    Bytes h = b.to_gateway(40010, 9, pattern(20, 1));
    put_be16(h.data() + 14 + 40 + 6, 0); // IPv6 forbids "no checksum"
    CHECK(rig.path.guest_frame(h) == Verdict::Consumed);
    Bytes cut = a.to_gateway(40010, 9, pattern(20, 1));
    cut.resize(cut.size() - 5); // IP total length past the frame
    CHECK(rig.path.guest_frame(cut) == Verdict::Consumed);
    CHECK(rig.path.stats().malformed == 4);
    CHECK(rig.path.flows() == 0);
    // IPv4 allows it: a zero checksum means none.
    HostSocket srv(false);
    Bytes z = a.to_gateway(40011, srv.port, pattern(20, 1));
    put_be16(z.data() + 14 + 20 + 6, 0);
    CHECK(rig.path.guest_frame(z) == Verdict::Consumed);
    rig.path.flush();
    CHECK(srv.recv());
}

TEST_CASE("udp_fastpath: every flow ends when the tap goes away") {
    Rig rig;
    Addrs a(false);
    HostSocket srv(false);
    for (uint16_t port = 41000; port < 41010; ++port)
        REQUIRE(rig.path.guest_frame(a.to_gateway(port, srv.port, pattern(10, 1))) ==
                Verdict::Consumed);
    CHECK(rig.path.flows() == 10);
    rig.path.tap_detached();
    CHECK(rig.path.flows() == 0);
    CHECK(rig.path.ms_until_next_timer(rig.now) == -1);
    // The queued datagram still went out.
    CHECK(srv.recv());
}

TEST_CASE("udp_fastpath: the guest end of a forward libslirp carries stays libslirp's") {
    Rig rig;
    Addrs a(false);
    HostSocket srv(false);
    const uint32_t guest4 = 0x0a000264; // 10.0.2.100
    rig.path.keep_for_libslirp(guest4, 5353);
    rig.path.keep_for_libslirp(guest4, 5353); // a second forward to the same end
    CHECK(rig.path.guest_frame(a.to_gateway(5353, srv.port, pattern(10, 1))) == Verdict::NotMine);
    rig.path.release_to_fast_path(guest4, 5353);
    CHECK(rig.path.guest_frame(a.to_gateway(5353, srv.port, pattern(10, 1))) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(a.to_gateway(5354, srv.port, pattern(10, 1))) == Verdict::Consumed);
    rig.path.release_to_fast_path(guest4, 5353);
    CHECK(rig.path.guest_frame(a.to_gateway(5353, srv.port, pattern(10, 1))) == Verdict::Consumed);
}

TEST_CASE("udp_fastpath: a flow from an end that becomes a libslirp forward's is closed") {
    // The guest talked from port 5353 before libslirp got a forward to it:
    // from then on its datagrams are libslirp's (whose forwarding socket
    // must carry the forward's replies), those of the earlier flow too.
    Rig rig;
    Addrs a(false);
    HostSocket srv(false);
    const uint32_t guest4 = 0x0a000264; // 10.0.2.100
    CHECK(rig.path.guest_frame(a.to_gateway(5353, srv.port, pattern(10, 1))) == Verdict::Consumed);
    CHECK(rig.path.guest_frame(a.to_gateway(5354, srv.port, pattern(10, 1))) == Verdict::Consumed);
    rig.path.flush();
    REQUIRE(rig.path.flows() == 2);
    rig.path.keep_for_libslirp(guest4, 5353);
    CHECK(rig.path.flows() == 1);
    CHECK(rig.path.guest_frame(a.to_gateway(5353, srv.port, pattern(10, 1))) == Verdict::NotMine);
    CHECK(rig.path.guest_frame(a.to_gateway(5354, srv.port, pattern(10, 1))) == Verdict::Consumed);
}

TEST_CASE("udp_fastpath: an error an ICMP message left on the socket costs no guest datagram") {
    // The kernel fails the next send on a connected socket once with the
    // error an ICMP message left (and keeps it in the error queue, which
    // tells the guest): a packet-too-big, a source route failed, a host
    // isolated, a protocol unreachable, administratively prohibited. The
    // guest's next datagram, and a segmented run after such an error, must
    // still leave, and a run must keep UDP_SEGMENT.
    struct Case {
        bool v6;
        uint8_t type, code;
        uint32_t info;
        const char *err;
    };
    const Case cases[] = {
        {false, 3, 4, 1400, "EMSGSIZE"}, {false, 3, 5, 0, "EOPNOTSUPP"},
        {false, 3, 8, 0, "ENONET"},      {false, 3, 2, 0, "ENOPROTOOPT"},
        {true, 1, 1, 0, "EACCES"},       {true, 2, 0, 1400, "EMSGSIZE"},
    };
    testns::in_own_netns({}, [&](bool v6_usable) {
        for (const Case &c : cases) {
            if (c.v6 && !v6_usable) continue;
            CAPTURE(std::string(c.err));
            CAPTURE(c.v6);
            Rig rig;
            Addrs a(c.v6);
            HostSocket srv(c.v6);
            const sockaddr_storage srv_addr = testicmp::local_of(srv.fd.get());
            auto guest = [&](uint16_t sport, const Bytes &p) {
                REQUIRE(rig.path.guest_frame(a.to_gateway(sport, srv.port, p)) ==
                        Verdict::Consumed);
            };
            // What reached the server by now (loopback delivers within the
            // send).
            auto received = [&] {
                std::vector<Bytes> got;
                while (srv.has_datagram()) got.push_back(*srv.recv());
                return got;
            };
            sockaddr_storage flow{};
            guest(40020, pattern(100, 1));
            rig.path.end_of_input();
            REQUIRE(srv.recv(&flow));
            // A lone datagram (the first of a round of tap reads).
            REQUIRE(testicmp::send_error(c.type, c.code, c.info, flow, srv_addr, 100));
            guest(40020, pattern(100, 2));
            rig.path.end_of_input();
            CHECK(received() == std::vector<Bytes>{pattern(100, 2)});
            // A run: the first of the round alone, then four equal ones in
            // one UDP_SEGMENT send that meets the error.
            guest(40020, pattern(100, 3));
            REQUIRE(received().size() == 1);
            REQUIRE(testicmp::send_error(c.type, c.code, c.info, flow, srv_addr, 100));
            std::vector<Bytes> run;
            for (uint8_t i = 0; i < 4; ++i) {
                run.push_back(pattern(100, uint8_t(10 + i)));
                guest(40020, run.back());
            }
            rig.path.end_of_input();
            CHECK(received() == run);
            CHECK(rig.path.stats().dropped_to_host == 0);
            // Segmentation is still on for the flow: the next run is one
            // send again.
            const uint64_t runs = rig.path.stats().segmented_sends;
            guest(40020, pattern(100, 4));
            for (uint8_t i = 0; i < 4; ++i) guest(40020, pattern(100, uint8_t(20 + i)));
            rig.path.end_of_input();
            CHECK(received().size() == 5);
            CHECK(rig.path.stats().segmented_sends == runs + 1);
        }
    });
}

TEST_CASE("udp_fastpath: ICMP unreachable stands for what the errno says") {
    using udp::unreachable_for;
    struct Want {
        int err;
        uint8_t code4, code6;
    };
    for (const Want &w : {Want{ENETUNREACH, 0, 0}, Want{EHOSTUNREACH, 1, 3},
                          Want{EHOSTDOWN, 1, 3}, Want{ENONET, 1, 3}, Want{ECONNREFUSED, 3, 4},
                          Want{EACCES, 13, 1}, Want{EPERM, 13, 1}}) {
        CAPTURE(w.err);
        REQUIRE(unreachable_for(w.err, false));
        CHECK(unreachable_for(w.err, false)->type == 3);
        CHECK(unreachable_for(w.err, false)->code == w.code4);
        REQUIRE(unreachable_for(w.err, true));
        CHECK(unreachable_for(w.err, true)->type == 1);
        CHECK(unreachable_for(w.err, true)->code == w.code6);
    }
    for (int err : {EMFILE, ENOBUFS, EAGAIN, EMSGSIZE, EINVAL})
        CHECK_FALSE(unreachable_for(err, false));
}

TEST_CASE("udp_fastpath: a flow that cannot connect answers ICMP unreachable, then from a "
          "short cache") {
    // In a namespace with no route out: connect() fails with ENETUNREACH
    // (IPv4 and IPv6), and an outbound address the host lacks fails bind()
    // with EADDRNOTAVAIL. The guest hears it at once, from the gateway,
    // quoting its datagram; its retry within a second is answered the same
    // way without an admission token or another socket.
    static constexpr uint8_t kFar4[4] = {198, 51, 100, 1}; // no route to it
    testns::in_own_netns({}, [](bool v6_usable) {
        for (int variant = 0; variant < 3; ++variant) {
            const bool v6 = variant == 1, outbound = variant == 2;
            if (v6 && !v6_usable) continue;
            CAPTURE(variant);
            int asked = 0;
            Collector out;
            udp::FastPathConfig c = Rig::config(65520, true);
            int64_t now = 1000;
            c.clock = [&] { return now; };
            c.admit_flow = [&] {
                ++asked;
                return Admission::Accept;
            };
            if (outbound) c.outbound_addr = 0xcb007109; // 203.0.113.9
            udp::FastPath path(c, out);
            Addrs a(v6);
            uint8_t far[16] = {};
            if (v6)
                addr6(far, "2001:db8:1::1");
            else if (outbound)
                std::memcpy(far, kGateway4, 4); // the host's loopback
            else
                std::memcpy(far, kFar4, 4);
            const Bytes ask = pattern(60, 1);
            REQUIRE(path.guest_frame(guest_datagram(v6, a.guest, far, 40030, 53, ask)) ==
                    Verdict::Consumed);
            path.flush();
            REQUIRE(out.out.size() == 1);
            const Bytes &f = out.out[0].frame;
            Ip ip = ip_of(f, v6);
            CHECK(ip.proto == (v6 ? 58 : 1));
            REQUIRE(ip.payload.size() >= 8 + (v6 ? 40u : 20u) + 8);
            CHECK(ip.payload[0] == (v6 ? 1 : 3));
            CHECK(ip.payload[1] == 0); // network unreachable, no route
            CHECK(l4_checksum_ok(v6, ip.hdr, ip.payload, v6 ? 58 : 1));
            if (!v6) CHECK(csum_fold(csum_add(0, ip.payload.data(), ip.payload.size())) == 0xffff);
            // From the gateway, to the guest; the quote is the guest's
            // datagram with its own lengths.
            const uint8_t *inner = ip.payload.data() + 8;
            if (v6) {
                CHECK(std::memcmp(ip.hdr + 8, a.gateway, 16) == 0);
                CHECK(std::memcmp(ip.hdr + 24, a.guest, 16) == 0);
                CHECK(std::memcmp(inner + 24, far, 16) == 0);
                CHECK(be16(inner + 4) == 8 + ask.size());
            } else {
                CHECK(std::memcmp(ip.hdr + 12, a.gateway, 4) == 0);
                CHECK(std::memcmp(ip.hdr + 16, a.guest, 4) == 0);
                CHECK(std::memcmp(inner + 16, far, 4) == 0);
                CHECK(be16(inner + 2) == 20 + 8 + ask.size());
            }
            const uint8_t *udp = inner + (v6 ? 40 : 20);
            CHECK(be16(udp) == 40030);
            CHECK(be16(udp + 2) == 53);
            CHECK(be16(udp + 4) == 8 + ask.size());
            CHECK(path.flows() == 0);
            CHECK(asked == 1);
            CHECK(path.stats().unreachable == 1);
            // The next try, another port, within the second: from the cache.
            REQUIRE(path.guest_frame(guest_datagram(v6, a.guest, far, 40031, 443, ask)) ==
                    Verdict::Consumed);
            CHECK(out.out.size() == 2);
            CHECK(asked == 1);
            CHECK(path.stats().unreachable_cached == 1);
            // A second later it is tried for real again.
            now += 1000;
            REQUIRE(path.guest_frame(guest_datagram(v6, a.guest, far, 40032, 53, ask)) ==
                    Verdict::Consumed);
            CHECK(out.out.size() == 3);
            CHECK(asked == 2);
            CHECK(path.stats().unreachable == 2);
        }
    });
}

namespace {

// This process's UDP socket bound to local: a flow's socket, found by its
// address (the fast path does not hand it out).
int socket_at(const sockaddr_storage &local) {
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::atoi(e.path().filename().c_str());
        int type = 0;
        socklen_t tl = sizeof type;
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_DGRAM ||
            ::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0 ||
            ss.ss_family != local.ss_family)
            continue;
        if (ss.ss_family == AF_INET6 ? std::memcmp(&ss, &local, sizeof(sockaddr_in6)) == 0
                                     : std::memcmp(&ss, &local, sizeof(sockaddr_in)) == 0)
            return fd;
    }
    return -1;
}

} // namespace

TEST_CASE("udp_fastpath: an error set on a socket with nothing queued wakes the loop once") {
    // Without IP_RECVERR the kernel sets an ICMP error on a connected
    // socket and queues nothing: the state an error that found no room in
    // the error queue (a full receive buffer, no memory) leaves. EPOLLERR
    // stays raised until the error is read; level-triggered, every round
    // would come back to the flow until it expired.
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        Rig rig;
        Addrs a(v6);
        std::optional<HostSocket> srv(std::in_place, v6);
        const uint16_t port = srv->port;
        REQUIRE(rig.path.guest_frame(a.to_gateway(40040, port, pattern(50, 1))) ==
                Verdict::Consumed);
        rig.path.end_of_input();
        sockaddr_storage flow{};
        REQUIRE(srv->recv(&flow));
        const int fd = socket_at(flow);
        REQUIRE(fd >= 0);
        const int off = 0;
        REQUIRE(::setsockopt(fd, v6 ? SOL_IPV6 : SOL_IP, v6 ? IPV6_RECVERR : IP_RECVERR, &off,
                             sizeof off) == 0);
        srv.reset(); // the next datagram meets port unreachable
        REQUIRE(rig.path.guest_frame(a.to_gateway(40040, port, pattern(50, 2))) ==
                Verdict::Consumed);
        rig.path.end_of_input();
        int wakeups = 0;
        for (int i = 0; i < 10; ++i) {
            pollfd p{rig.path.epoll_fd(), POLLIN, 0};
            if (::poll(&p, 1, i == 0 ? 2000 : 0) != 1) break;
            rig.path.poll_events();
            ++wakeups;
        }
        CHECK(wakeups == 1);
        CHECK(rig.path.stats().socket_errors == 1);
        // The guest still hears what the error was.
        REQUIRE(rig.guest.out.size() == 1);
        Ip ip = ip_of(rig.guest.out[0].frame, v6);
        CHECK(ip.proto == (v6 ? 58 : 1));
        REQUIRE(ip.payload.size() >= 8 + (v6 ? 40u : 20u) + 8);
        CHECK(ip.payload[0] == (v6 ? 1 : 3));
        CHECK(ip.payload[1] == (v6 ? 4 : 3)); // port unreachable
        CHECK(l4_checksum_ok(v6, ip.hdr, ip.payload, v6 ? 58 : 1));
        const uint8_t *udp = ip.payload.data() + 8 + (v6 ? 40 : 20);
        CHECK(be16(udp) == 40040);
        CHECK(be16(udp + 2) == port);
        CHECK(rig.path.flows() == 1);
    }
}

TEST_CASE("udp_fastpath: an ICMP error quotes the datagram's own length") {
    // A router may quote 8 bytes of the datagram (RFC 792): the error queue
    // then holds none of its payload, yet the quoted IP and UDP lengths
    // are the datagram's (the guest's kernel guesses a path MTU from them
    // when none is given).
    testns::in_own_netns({}, [](bool v6_usable) {
        for (bool v6 : {false, true}) {
            if (v6 && !v6_usable) continue;
            CAPTURE(v6);
            Rig rig;
            Addrs a(v6);
            HostSocket srv(v6);
            REQUIRE(rig.path.guest_frame(a.to_gateway(40060, srv.port, pattern(200, 1))) ==
                    Verdict::Consumed);
            rig.path.end_of_input();
            sockaddr_storage flow{};
            REQUIRE(srv.recv(&flow));
            REQUIRE(testicmp::send_error(v6 ? 1 : 3, v6 ? 4 : 3, 0, flow,
                                         testicmp::local_of(srv.fd.get()), 200, 0));
            REQUIRE(rig.poll_host());
            REQUIRE(rig.guest.out.size() == 1);
            Ip ip = ip_of(rig.guest.out[0].frame, v6);
            REQUIRE(ip.payload.size() == 8 + (v6 ? 40u : 20u) + 8);
            const uint8_t *inner = ip.payload.data() + 8;
            CHECK(be16(inner + (v6 ? 4 : 2)) == (v6 ? 8 : 28) + 200);
            CHECK(be16(inner + (v6 ? 40 : 20) + 4) == 8 + 200);
            CHECK(l4_checksum_ok(v6, ip.hdr, ip.payload, v6 ? 58 : 1));
        }
    });
}

TEST_CASE("udp_fastpath: ICMP errors fit an MTU of 68") {
    Rig rig(68);
    Addrs a(false);
    uint16_t closed;
    {
        HostSocket gone(false);
        closed = gone.port;
    }
    const Bytes ask = pattern(40, 3); // 68 bytes of IP, the MTU
    REQUIRE(rig.path.guest_frame(a.to_gateway(40061, closed, ask)) == Verdict::Consumed);
    rig.path.flush();
    REQUIRE(rig.poll_host());
    REQUIRE(rig.guest.out.size() == 1);
    const Bytes &f = rig.guest.out[0].frame;
    CHECK(f.size() == 14 + 68);
    Ip ip = ip_of(f, false);
    CHECK(be16(ip.hdr + 2) == 68);
    CHECK(ip.payload[0] == 3);
    CHECK(ip.payload[1] == 3);
    CHECK(csum_fold(csum_add(0, ip.payload.data(), ip.payload.size())) == 0xffff);
    // 12 bytes of payload quoted, the lengths the datagram's own.
    const uint8_t *inner = ip.payload.data() + 8;
    CHECK(be16(inner + 2) == 68);
    CHECK(be16(inner + 24) == 48);
    CHECK(std::equal(ask.begin(), ask.begin() + 12, inner + 28));
}

TEST_CASE("udp_fastpath: the IPv4 id moves only for fragments") {
    // Only reassembly reads it: whole datagrams take the current id, each
    // fragmented one a new one, so the 16-bit counter wraps after 65536
    // fragmented datagrams rather than every 0.25 s at 260k datagrams a
    // second.
    Rig rig(1500);
    Addrs a(false);
    HostSocket srv(false);
    REQUIRE(rig.path.guest_frame(a.to_gateway(40062, srv.port, pattern(10, 1))) ==
            Verdict::Consumed);
    rig.path.flush();
    sockaddr_storage from{};
    REQUIRE(srv.recv(&from));
    auto reply = [&](size_t n) {
        const size_t before = rig.guest.out.size();
        srv.reply(from, pattern(n, 2));
        REQUIRE(rig.poll_host());
        std::vector<uint16_t> ids;
        for (size_t i = before; i < rig.guest.out.size(); ++i)
            ids.push_back(be16(rig.guest.out[i].frame.data() + 14 + 4));
        return ids;
    };
    const uint16_t id = reply(100)[0];
    CHECK(reply(100)[0] == id);
    CHECK(reply(200)[0] == id);
    const std::vector<uint16_t> frag1 = reply(3000), frag2 = reply(3000);
    REQUIRE(frag1.size() == 3);
    REQUIRE(frag2.size() == 3);
    CHECK(std::count(frag1.begin(), frag1.end(), frag1[0]) == 3);
    CHECK(std::count(frag2.begin(), frag2.end(), frag2[0]) == 3);
    CHECK(frag1[0] != id);
    CHECK(frag2[0] != frag1[0]);
    CHECK(reply(100)[0] == reply(100)[0]);
}

TEST_CASE("udp_fastpath: the guest's port unreachable ends the flow") {
    // The guest's socket for the host's datagrams is gone: a remote that
    // goes on sending must not keep the flow (and its socket) for ever.
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        Rig rig;
        Addrs a(v6);
        HostSocket srv(v6);
        REQUIRE(rig.path.guest_frame(a.to_gateway(40070, srv.port, pattern(10, 1))) ==
                Verdict::Consumed);
        rig.path.flush();
        sockaddr_storage from{};
        REQUIRE(srv.recv(&from));
        srv.reply(from, pattern(30, 2));
        REQUIRE(rig.poll_host());
        CHECK(rig.path.flows() == 1);
        // About no flow of ours (another guest port): libslirp's.
        CHECK(rig.path.guest_frame(guest_port_unreachable(v6, a.guest, a.gateway, 40071,
                                                          srv.port, 30)) == Verdict::NotMine);
        CHECK(rig.path.flows() == 1);
        CHECK(rig.path.guest_frame(guest_port_unreachable(v6, a.guest, a.gateway, 40070,
                                                          srv.port, 30)) == Verdict::Consumed);
        CHECK(rig.path.flows() == 0);
        CHECK(rig.path.stats().closed_by_guest == 1);
        CHECK(rig.path.ms_until_next_timer(rig.now) == -1);
    }
}
