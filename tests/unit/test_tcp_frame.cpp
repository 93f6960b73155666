// SPDX-License-Identifier: Apache-2.0

// Parsing guest TCP frames (hostile inputs included), building guest-bound
// frames, and the routing decision for a guest SYN.
#include <doctest/doctest.h>

#include <random>

#include "tcp_sim_guest.hpp"

using namespace tcpsim;

namespace {

Bytes v4_syn(const Bytes &opts = syn_options(1460, 7), size_t payload = 0) {
    uint8_t s[16], d[16];
    addr4(s, 10, 0, 2, 100);
    addr4(d, 93, 184, 216, 34);
    Bytes data(payload, 0xab);
    return guest_frame(false, s, d, 40000, 443, kSyn, 0x11223344, 0, 64240,
                       data.data(), data.size(), opts);
}

Bytes v6_seg(size_t payload) {
    uint8_t s[16], d[16];
    addr6(s, "fd00::100");
    addr6(d, "2001:db8::1");
    Bytes data(payload, 0xcd);
    return guest_frame(true, s, d, 40001, 80, kAck | kPsh, 7, 9, 1000, data.data(),
                       data.size());
}

} // namespace

TEST_CASE("tcp_frame: parses a SYN with options") {
    Segment s;
    Bytes f = v4_syn();
    REQUIRE(parse_segment(f, s) == Parse::Ok);
    CHECK_FALSE(s.v6);
    CHECK(s.sport == 40000);
    CHECK(s.dport == 443);
    CHECK(s.seq == 0x11223344u);
    CHECK(s.flags == kSyn);
    CHECK(s.window == 64240);
    CHECK(s.mss == 1460);
    CHECK(s.wscale == 7);
    CHECK(s.payload.empty());
    CHECK(s.src[15] == 100);
    CHECK(s.dst[12] == 93);
    CHECK(is_mapped_v4(s.dst));
    CHECK(std::memcmp(s.src_mac, kGuestMac, 6) == 0);
}

TEST_CASE("tcp_frame: parses IPv6 with payload, ignores Ethernet padding") {
    Segment s;
    Bytes f = v6_seg(100);
    REQUIRE(parse_segment(f, s) == Parse::Ok);
    CHECK(s.v6);
    CHECK(s.payload.size() == 100);
    CHECK(s.payload[0] == 0xcd);
    Bytes padded = v4_syn();
    padded.resize(padded.size() + 6, 0); // padding after the datagram
    REQUIRE(parse_segment(padded, s) == Parse::Ok);
    CHECK(s.payload.empty());
}

TEST_CASE("tcp_frame: hostile lengths never parse as Ok") {
    Segment s;
    Bytes good = v4_syn({}, 10);
    // Every truncation: NotTcp or Malformed, never Ok past the IP length.
    for (size_t n = 0; n < good.size(); ++n) {
        Bytes t(good.begin(), good.begin() + long(n));
        CHECK(parse_segment(t, s) != Parse::Ok);
    }
    // IP total length beyond the frame.
    Bytes f = good;
    put16(f.data() + 14 + 2, uint16_t(f.size()));
    CHECK(parse_segment(f, s) == Parse::Malformed);
    // IP total length shorter than the TCP header.
    f = good;
    put16(f.data() + 14 + 2, 30);
    CHECK(parse_segment(f, s) == Parse::Malformed);
    // IHL below 5 and beyond the datagram.
    f = good;
    f[14] = 0x44;
    CHECK(parse_segment(f, s) == Parse::Malformed);
    f = good;
    f[14] = 0x4f;
    CHECK(parse_segment(f, s) == Parse::Malformed);
    // TCP data offset < 5 and beyond the segment.
    for (uint8_t doff : {0, 1, 4, 9, 15}) {
        f = good;
        f[14 + 20 + 12] = uint8_t(doff << 4);
        // 9: a 36-byte header in a 30-byte segment.
        CHECK(parse_segment(f, s) == Parse::Malformed);
    }
    // IPv6 payload length beyond the frame, and zero (jumbogram).
    f = v6_seg(10);
    put16(f.data() + 14 + 4, 2000);
    CHECK(parse_segment(f, s) == Parse::Malformed);
    put16(f.data() + 14 + 4, 0);
    CHECK(parse_segment(f, s) == Parse::Malformed);
}

TEST_CASE("tcp_frame: not TCP, fragments, extension headers are NotMine") {
    Segment s;
    Bytes f = v4_syn();
    f[14 + 9] = 17; // UDP
    CHECK(parse_segment(f, s) == Parse::NotMine);
    f = v4_syn();
    put16(f.data() + 14 + 6, 0x2000); // MF
    CHECK(parse_segment(f, s) == Parse::NotMine);
    f = v4_syn();
    put16(f.data() + 14 + 6, 0x0010); // offset
    CHECK(parse_segment(f, s) == Parse::NotMine);
    f = v6_seg(0);
    f[14 + 6] = 0; // hop-by-hop header first
    CHECK(parse_segment(f, s) == Parse::NotMine);
    f = v4_syn();
    put16(f.data() + 12, 0x0806); // ARP
    CHECK(parse_segment(f, s) == Parse::NotMine);
    f = v4_syn();
    f[14] = 0x65; // version 6 in an IPv4 ethertype
    CHECK(parse_segment(f, s) == Parse::NotMine);
}

TEST_CASE("tcp_frame: IPv4 options are skipped") {
    Bytes f = v4_syn({}, 4);
    // Insert 4 bytes of options (NOP NOP NOP EOL) after the IPv4 header.
    Bytes g(f.begin(), f.begin() + 34);
    g.insert(g.end(), {1, 1, 1, 0});
    g.insert(g.end(), f.begin() + 34, f.end());
    g[14] = 0x46;
    put16(g.data() + 16, uint16_t(be16(g.data() + 16) + 4));
    Segment s;
    REQUIRE(parse_segment(g, s) == Parse::Ok);
    CHECK(s.sport == 40000);
    CHECK(s.payload.size() == 4);
}

TEST_CASE("tcp_frame: broken TCP options are ignored, never over-read") {
    Segment s;
    // Option length 0, 1, longer than the option space, known kinds with
    // wrong lengths, truncated kind at the end.
    std::vector<Bytes> bad = {
        {2, 0, 5, 0xb4},  {2, 1, 5, 0xb4}, {2, 40, 5, 0xb4}, {3, 4, 7, 0},
        {2, 3, 5, 0},     {1, 1, 1, 2},    {4, 3, 0, 0},     {8, 10, 0, 0},
    };
    for (auto &o : bad) {
        Bytes f = v4_syn(o);
        REQUIRE(parse_segment(f, s) == Parse::Ok);
        CHECK(s.mss == 0);
        CHECK(s.wscale == -1);
    }
    Bytes f = v4_syn({1, 1, 3, 3, 14, 0, 0, 0});
    REQUIRE(parse_segment(f, s) == Parse::Ok);
    CHECK(s.wscale == 14);
    // Random garbage in every header byte: whatever the verdict, no crash
    // and an Ok payload lies inside the frame (ASan checks the reads).
    std::mt19937 rng(42);
    Bytes base = v4_syn(syn_options(1460, 7), 40);
    Bytes base6 = v6_seg(40);
    for (int i = 0; i < 20000; ++i) {
        Bytes g = (i & 1) ? base : base6;
        int flips = 1 + int(rng() % 6);
        for (int k = 0; k < flips; ++k) g[rng() % 80] = uint8_t(rng());
        g.resize(rng() % (g.size() + 1));
        if (parse_segment(g, s) == Parse::Ok) {
            REQUIRE(s.payload.data() >= g.data());
            REQUIRE(s.payload.data() + s.payload.size() <= g.data() + g.size());
        }
    }
}

TEST_CASE("tcp_frame: built segments parse back, with partial checksum and GSO") {
    Endpoints ep;
    std::memcpy(ep.guest_mac, kGuestMac, 6);
    uint8_t gw[4] = {10, 0, 2, 2};
    gateway_mac4(gw, ep.gw_mac);
    addr4(ep.guest, 10, 0, 2, 100);
    addr4(ep.remote, 93, 184, 216, 34);
    ep.guest_port = 40000;
    ep.remote_port = 443;
    OutFields f;
    f.seq = 0xfffffff0;
    f.ack = 12345;
    f.flags = kSyn | kAck;
    f.window = 65535;
    f.mss_opt = 65480;
    f.ws_opt = 7;
    uint8_t hdr[kMaxHeaders];
    VnetHdr v;
    size_t n = build_segment(hdr, v, ep, f, 0, 1460);
    CHECK(n == 14 + 20 + 28);
    Bytes frame(hdr, hdr + n);
    CHECK(checksums_ok(frame, v));
    CHECK(v.gso_type == 0);
    Segment s;
    REQUIRE(parse_segment(frame, s) == Parse::Ok);
    CHECK(s.flags == (kSyn | kAck));
    CHECK(s.mss == 65480);
    CHECK(s.wscale == 7);
    CHECK(s.seq == 0xfffffff0u);
    CHECK(s.sport == 443);
    CHECK(s.dport == 40000);
    const uint8_t want_mac[6] = {0x52, 0x55, 10, 0, 2, 2};
    CHECK(std::memcmp(frame.data() + 6, want_mac, 6) == 0);

    // A data frame of 5000 bytes with MSS 1460: GSO TCPV4.
    OutFields d;
    d.seq = 1;
    d.ack = 2;
    d.flags = kAck | kPsh;
    n = build_segment(hdr, v, ep, d, 5000, 1460);
    CHECK(v.gso_type == kVnetGsoTcp4);
    CHECK(v.gso_size == 1460);
    CHECK(v.hdr_len == n);
    CHECK(v.csum_start == 34);
    CHECK(v.csum_offset == 16);
    Bytes big(hdr, hdr + n);
    Bytes payload = pattern(5000, 3);
    big.insert(big.end(), payload.begin(), payload.end());
    CHECK(checksums_ok(big, v));

    // IPv6: GSO TCPV6, MAC 52:56 + last 4 bytes of the source.
    ep.v6 = true;
    addr6(ep.guest, "fd00::100");
    addr6(ep.remote, "2001:db8::a:b0c");
    gateway_mac6(ep.remote, ep.gw_mac);
    n = build_segment(hdr, v, ep, d, 3000, 1000);
    CHECK(v.gso_type == kVnetGsoTcp6);
    Bytes b6(hdr, hdr + n);
    Bytes p6 = pattern(3000, 4);
    b6.insert(b6.end(), p6.begin(), p6.end());
    CHECK(checksums_ok(b6, v));
    const uint8_t want6[6] = {0x52, 0x56, 0, 0x0a, 0x0b, 0x0c};
    CHECK(std::memcmp(b6.data() + 6, want6, 6) == 0);
}

TEST_CASE("tcp_fastpath: routing of guest SYN destinations") {
    FastPathConfig c = Sim::base_config();
    Segment s;
    auto route4 = [&](uint8_t a, uint8_t b, uint8_t cc, uint8_t d) {
        s = Segment{};
        addr4(s.src, 10, 0, 2, 100);
        addr4(s.dst, a, b, cc, d);
        return classify(c, s.v6, s.src, s.dst, 80);
    };
    CHECK(route4(93, 184, 216, 34) == Route::Host);
    CHECK(route4(10, 0, 2, 2) == Route::Loopback);
    CHECK(route4(10, 0, 2, 3) == Route::NotMine);   // DNS
    CHECK(route4(10, 0, 2, 77) == Route::NotMine);  // virtual network
    CHECK(route4(10, 0, 2, 255) == Route::NotMine);
    CHECK(route4(127, 0, 0, 1) == Route::NotMine);  // never the host's lo directly
    CHECK(route4(224, 0, 0, 1) == Route::NotMine);
    CHECK(route4(255, 255, 255, 255) == Route::NotMine);
    CHECK(route4(0, 0, 0, 0) == Route::NotMine);
    c.disable_host_loopback = true;
    CHECK(route4(10, 0, 2, 2) == Route::Refuse);

    auto route6 = [&](const char *dst) {
        s = Segment{};
        s.v6 = true;
        addr6(s.src, "fd00::100");
        addr6(s.dst, dst);
        return classify(c, s.v6, s.src, s.dst, 80);
    };
    c.disable_host_loopback = false;
    CHECK(route6("2001:db8::1") == Route::Host);
    CHECK(route6("fd00::2") == Route::Loopback);
    CHECK(route6("fd00::3") == Route::NotMine);
    CHECK(route6("fd00::99") == Route::NotMine);
    CHECK(route6("::1") == Route::NotMine);
    CHECK(route6("ff02::1") == Route::NotMine);
    CHECK(route6("fe80::1") == Route::NotMine);
    CHECK(route6("::ffff:1.2.3.4") == Route::NotMine);
    c.ipv6 = false;
    CHECK(route6("2001:db8::1") == Route::NotMine);
}

TEST_CASE("tcp_fastpath: routing in pasta's model (the host's network)") {
    // The namespace has the host's 192.168.1.5/24, gateway .1; Podman's
    // --dns-forward 169.254.1.1 --map-guest-addr 169.254.1.2.
    FastPathConfig c = Sim::base_config();
    c.host_network = true;
    c.net4 = 0xc0a80100;
    c.mask4 = 0xffffff00;
    c.guest4 = 0xc0a80105;
    c.gateway4 = 0xc0a80101;
    c.dns4 = 0xa9fe0101;
    c.map_guest4 = 0xa9fe0102;
    c.resolver4 = 0x7f000035; // 127.0.0.53
    Segment s;
    auto route4 = [&](uint32_t dst, uint16_t port) {
        s = Segment{};
        addr4(s.src, 192, 168, 1, 5);
        addr4(s.dst, uint8_t(dst >> 24), uint8_t(dst >> 16), uint8_t(dst >> 8), uint8_t(dst));
        return classify(c, s.v6, s.src, s.dst, port);
    };
    CHECK(route4(0xc0a80107, 80) == Route::Host);       // a neighbour
    CHECK(route4(0xc0a80103, 80) == Route::Host);       // .3 is no forwarder
    CHECK(route4(0xc0a80101, 80) == Route::Loopback);   // gateway, mapped
    CHECK(route4(0xa9fe0102, 80) == Route::GuestAddr);  // host.containers.internal
    CHECK(route4(0xa9fe0101, 53) == Route::Resolver);
    CHECK(route4(0xa9fe0101, 80) == Route::Unreachable); // DNS address, not DNS
    CHECK(route4(0x5db8d822, 443) == Route::Host);
    CHECK(route4(0xc0a801ff, 80) == Route::NotMine);    // broadcast
    c.disable_host_loopback = true;                      // --no-map-gw
    CHECK(route4(0xc0a80101, 80) == Route::Host);       // the real gateway
    c.map_loopback4 = 0xa9fe0103;                        // --map-host-loopback
    CHECK(route4(0xa9fe0103, 80) == Route::Loopback);
    c.resolver4.reset();                                 // no nameserver
    CHECK(route4(0xa9fe0101, 53) == Route::Unreachable);
    c.dns = false;                                       // no --dns-forward
    CHECK(route4(0xa9fe0101, 53) == Route::Host);

    // Where flows go on the host.
    c.resolver4 = 0x7f000035;
    c.dns = true;
    auto target = [&](Route r, uint32_t dst, uint16_t port) {
        uint8_t d[16];
        addr4(d, uint8_t(dst >> 24), uint8_t(dst >> 16), uint8_t(dst >> 8), uint8_t(dst));
        HostAddrs a = host_addrs(c, r, false, d, port);
        const auto &t = reinterpret_cast<const sockaddr_in &>(a.target);
        return std::pair(ntohl(t.sin_addr.s_addr), ntohs(t.sin_port));
    };
    CHECK(target(Route::Resolver, 0xa9fe0101, 53) == std::pair(0x7f000035u, uint16_t(53)));
    CHECK(target(Route::GuestAddr, 0xa9fe0102, 8080) == std::pair(0xc0a80105u, uint16_t(8080)));
    CHECK(target(Route::Host, 0xc0a80107, 22) == std::pair(0xc0a80107u, uint16_t(22)));

    // What a guest sees of a forwarded port's client: a neighbour keeps
    // its address, the host's own address shows as --map-guest-addr.
    auto seen = [&](uint32_t peer) {
        sockaddr_storage ss{};
        auto &p = reinterpret_cast<sockaddr_in &>(ss);
        p.sin_family = AF_INET;
        p.sin_addr.s_addr = htonl(peer);
        return forwarded_source(c, ss);
    };
    CHECK(seen(0xc0a80107) == 0xc0a80107u);
    CHECK(seen(0xc0a80105) == 0xa9fe0102u);
    CHECK(seen(0x7f000001) == 0xc0a80101u);
    CHECK(seen(0x0a0b0c0d) == 0x0a0b0c0du);
    c.map_guest4.reset();
    CHECK(seen(0xc0a80105) == 0xc0a80101u);
}
