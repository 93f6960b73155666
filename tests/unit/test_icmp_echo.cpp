// SPDX-License-Identifier: Apache-2.0

// The ICMP echo path (datapath/icmp/): the ping_group_range probe's
// parsing, guest echo requests parsed and checked, reply frames built (and
// fragmented), and FastPath with real ping sockets. Those run in a network
// namespace of the test's own (own_netns.hpp) that allows ping sockets: the
// host's ping_group_range is never touched. Without root they are skipped.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "datapath/checksum.hpp"
#include "datapath/icmp/fastpath.hpp"
#include "libslirp_stand_in.hpp"
#include "parent/guest_ingress.hpp"
#include "own_netns.hpp"

using namespace rknp;
using namespace rknp::icmp;

namespace {

using Bytes = std::vector<uint8_t>;

const uint8_t kGuestMac[6] = {0x02, 0x42, 0x0a, 0x00, 0x02, 0x64};

struct Collect final : GuestSink {
    std::vector<Bytes> frames;
    void write_frame(const VnetHdr &h, std::span<const uint8_t> frame,
                     std::span<const uint8_t> rest) override {
        CHECK(h.flags == 0);
        CHECK(h.gso_type == 0);
        Bytes f(frame.begin(), frame.end());
        f.insert(f.end(), rest.begin(), rest.end());
        frames.push_back(std::move(f));
    }
};

Bytes payload_of(size_t n, uint8_t seed = 7) {
    Bytes p(n);
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(seed + i * 13);
    return p;
}

void put_eth(Bytes &f, uint16_t type) {
    std::memcpy(f.data(), "\x52\x55\x0a\x00\x02\x02", 6);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    put_be16(f.data() + 12, type);
}

// An IPv4 echo request (Ethernet frame) from src to dst, checksums right.
Bytes echo4(const char *src, const char *dst, uint16_t id, uint16_t seq,
            const Bytes &payload, uint8_t type = 8) {
    Bytes f(14 + 20 + 8 + payload.size());
    put_eth(f, 0x0800);
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x45;
    put_be16(ip + 2, uint16_t(20 + 8 + payload.size()));
    ip[8] = 64;
    ip[9] = 1;
    inet_pton(AF_INET, src, ip + 12);
    inet_pton(AF_INET, dst, ip + 16);
    put_be16(ip + 10, uint16_t(~csum_fold(csum_add(0, ip, 20))));
    uint8_t *icmp = ip + 20;
    icmp[0] = type;
    put_be16(icmp + 4, id);
    put_be16(icmp + 6, seq);
    std::copy(payload.begin(), payload.end(), icmp + 8);
    put_be16(icmp + 2, uint16_t(~csum_fold(csum_add(0, icmp, 8 + payload.size()))));
    return f;
}

uint64_t pseudo6(const uint8_t *src, const uint8_t *dst, size_t len) {
    uint8_t tail[8] = {0, 0, uint8_t(len >> 8), uint8_t(len), 0, 0, 0, 58};
    return csum_add(csum_add(csum_add(0, src, 16), dst, 16), tail, 8);
}

Bytes echo6(const char *src, const char *dst, uint16_t id, uint16_t seq,
            const Bytes &payload, uint8_t type = 128) {
    Bytes f(14 + 40 + 8 + payload.size());
    put_eth(f, 0x86dd);
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x60;
    put_be16(ip + 4, uint16_t(8 + payload.size()));
    ip[6] = 58;
    ip[7] = 64;
    inet_pton(AF_INET6, src, ip + 8);
    inet_pton(AF_INET6, dst, ip + 24);
    uint8_t *icmp = ip + 40;
    icmp[0] = type;
    put_be16(icmp + 4, id);
    put_be16(icmp + 6, seq);
    std::copy(payload.begin(), payload.end(), icmp + 8);
    uint64_t sum = csum_add(pseudo6(ip + 8, ip + 24, 8 + payload.size()), icmp,
                            8 + payload.size());
    put_be16(icmp + 2, uint16_t(~csum_fold(sum)));
    return f;
}

// Checks a guest-bound IPv4 echo reply (one frame) and returns its payload.
Bytes check_reply4(const Bytes &f, const char *from, const char *to, uint16_t id,
                   uint16_t seq) {
    REQUIRE(f.size() >= 14 + 20 + 8);
    CHECK(std::memcmp(f.data(), kGuestMac, 6) == 0);
    CHECK(std::memcmp(f.data() + 6, "\x52\x55\x0a\x00\x02\x02", 6) == 0);
    CHECK(be16(f.data() + 12) == 0x0800);
    const uint8_t *ip = f.data() + 14;
    CHECK(ip[0] == 0x45);
    CHECK(be16(ip + 2) == f.size() - 14);
    CHECK((be16(ip + 6) & 0x3fff) == 0);
    CHECK(ip[8] > 0);
    CHECK(ip[9] == 1);
    CHECK(csum_fold(csum_add(0, ip, 20)) == 0xffff);
    uint8_t a[4];
    inet_pton(AF_INET, from, a);
    CHECK(std::memcmp(ip + 12, a, 4) == 0);
    inet_pton(AF_INET, to, a);
    CHECK(std::memcmp(ip + 16, a, 4) == 0);
    const uint8_t *icmp = ip + 20;
    const size_t len = f.size() - 34;
    CHECK(icmp[0] == 0);
    CHECK(icmp[1] == 0);
    CHECK(be16(icmp + 4) == id);
    CHECK(be16(icmp + 6) == seq);
    CHECK(csum_fold(csum_add(0, icmp, len)) == 0xffff);
    return Bytes(icmp + 8, icmp + len);
}

Bytes check_reply6(const Bytes &f, const char *from, const char *to, uint16_t id,
                   uint16_t seq) {
    REQUIRE(f.size() >= 14 + 40 + 8);
    uint8_t a[16];
    inet_pton(AF_INET6, from, a);
    CHECK(std::memcmp(f.data(), kGuestMac, 6) == 0);
    uint8_t mac[6] = {0x52, 0x56, a[12], a[13], a[14], a[15]};
    CHECK(std::memcmp(f.data() + 6, mac, 6) == 0);
    CHECK(be16(f.data() + 12) == 0x86dd);
    const uint8_t *ip = f.data() + 14;
    CHECK((ip[0] >> 4) == 6);
    CHECK(be16(ip + 4) == f.size() - 54);
    CHECK(ip[6] == 58);
    CHECK(ip[7] > 0);
    CHECK(std::memcmp(ip + 8, a, 16) == 0);
    inet_pton(AF_INET6, to, a);
    CHECK(std::memcmp(ip + 24, a, 16) == 0);
    const uint8_t *icmp = ip + 40;
    const size_t len = f.size() - 54;
    CHECK(icmp[0] == 129);
    CHECK(icmp[1] == 0);
    CHECK(be16(icmp + 4) == id);
    CHECK(be16(icmp + 6) == seq);
    CHECK(csum_fold(csum_add(pseudo6(ip + 8, ip + 24, len), icmp, len)) == 0xffff);
    return Bytes(icmp + 8, icmp + len);
}

EchoConfig base_config() {
    EchoConfig c;
    c.ipv6 = true;
    inet_pton(AF_INET6, "fd00::", &c.prefix6);
    inet_pton(AF_INET6, "fd00::2", &c.gateway6);
    inet_pton(AF_INET6, "fd00::3", &c.dns6);
    return c;
}

PingProbe allowed() {
    PingProbe p;
    p.v4 = p.v6 = true;
    p.why = "test";
    return p;
}

// ---- the test's own network namespace (own_netns.hpp), ping sockets allowed there

bool in_netns(const std::function<void(bool v6)> &body) {
    return testns::in_own_netns({{"/proc/sys/net/ipv4/ping_group_range", "0 2147483647"}},
                                body);
}

// Waits for replies (up to 2 s) until want frames have come.
void await(FastPath &p, Collect &out, size_t want) {
    for (int i = 0; i < 200 && out.frames.size() < want; ++i) {
        pollfd pfd{p.epoll_fd(), POLLIN, 0};
        if (::poll(&pfd, 1, 10) > 0) p.poll_events();
    }
}

} // namespace

TEST_CASE("icmp_echo: ping_group_range parsing and the gid it allows") {
    auto r = parse_ping_group_range("1\t0\n");
    REQUIRE(r);
    CHECK(r->low == 1);
    CHECK(r->high == 0);
    CHECK(!parse_ping_group_range(""));
    CHECK(!parse_ping_group_range("1"));
    CHECK(!parse_ping_group_range("1 0 3"));
    CHECK(!parse_ping_group_range("-1 0"));
    auto all = parse_ping_group_range("0 4294967294");
    REQUIRE(all);
    const uint32_t groups[] = {100, 1000};
    CHECK(!allowing_gid(*r, 0, groups));
    CHECK(allowing_gid(*all, 0, groups) == 0u);
    CHECK(allowing_gid(GidRange{1000, 1000}, 5, groups) == 1000u);
    CHECK(!allowing_gid(GidRange{1001, 2000}, 5, groups));

    PingProbe p;
    p.why = "socket(...): Permission denied";
    CHECK(describe(p) == "ICMP echo: libslirp (ping sockets refused: "
                         "socket(...): Permission denied)");
    p.v4 = p.v6 = true;
    p.why = "net.ipv4.ping_group_range 0 0 allows gid 0";
    CHECK(describe(p) == "ICMP echo: ping sockets (net.ipv4.ping_group_range "
                         "0 0 allows gid 0)");
    p.v6 = false;
    p.why6 = "no IPv6";
    CHECK(describe(p).find("libslirp for IPv6 (no IPv6)") != std::string::npos);
}

TEST_CASE("icmp_echo: the probe agrees with the kernel") {
    PingProbe p = probe_ping_sockets();
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
    CHECK(p.v4 == (fd >= 0));
    if (fd >= 0) ::close(fd);
    CHECK(!p.why.empty());
    MESSAGE(describe(p));
}

TEST_CASE("icmp_echo: guest echo requests are parsed and checked") {
    EchoRequest r;
    Bytes f = echo4("10.0.2.100", "192.0.2.1", 0x1234, 7, payload_of(56));
    REQUIRE(parse_echo_request(f, r) == Parse::Ok);
    CHECK(!r.v6);
    CHECK(r.id == 0x1234);
    CHECK(r.seq == 7);
    CHECK(r.message.size() == 64);
    CHECK(std::memcmp(r.src_mac, kGuestMac, 6) == 0);
    CHECK(r.dst[10] == 0xff);
    CHECK(r.dst[12] == 192);
    CHECK(echo_checksum_ok(r));

    SUBCASE("Ethernet padding is ignored") {
        Bytes padded = echo4("10.0.2.100", "192.0.2.1", 1, 1, {});
        padded.resize(60, 0xee);
        REQUIRE(parse_echo_request(padded, r) == Parse::Ok);
        CHECK(r.message.size() == 8);
    }
    SUBCASE("lengths that lie are malformed") {
        Bytes g = f;
        put_be16(g.data() + 16, uint16_t(g.size())); // past the frame
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
        g = f;
        g.resize(14 + 20 + 4); // ICMP shorter than its header
        put_be16(g.data() + 16, 24);
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
        g = f;
        g[14] = 0x44; // IHL 16
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
        g = f;
        g[24] ^= 1; // the IPv4 header checksum
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
        g = f;
        g[14 + 21] = 1; // code 1
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
        g = f;
        g.back() ^= 0x40; // the ICMP checksum
        REQUIRE(parse_echo_request(g, r) == Parse::Ok);
        CHECK(!echo_checksum_ok(r));
        for (size_t n = 0; n < f.size(); ++n) { // every truncation
            Bytes t(f.begin(), f.begin() + long(n));
            CHECK(parse_echo_request(t, r) != Parse::Ok);
        }
    }
    SUBCASE("anything but an echo request is not ours") {
        CHECK(parse_echo_request(echo4("10.0.2.100", "192.0.2.1", 1, 1, {}, 0), r) ==
              Parse::NotMine);
        Bytes frag = f;
        put_be16(frag.data() + 20, 0x2000); // More Fragments
        CHECK(parse_echo_request(frag, r) == Parse::NotMine);
        Bytes udp = f;
        udp[14 + 9] = 17;
        CHECK(parse_echo_request(udp, r) == Parse::NotMine);
        Bytes ns = echo6("fd00::100", "fd00::2", 1, 1, {}, 135);
        CHECK(parse_echo_request(ns, r) == Parse::NotMine);
        Bytes ext = echo6("fd00::100", "2001:db8::1", 1, 1, {});
        ext[14 + 6] = 0; // a hop-by-hop header
        CHECK(parse_echo_request(ext, r) == Parse::NotMine);
        CHECK(parse_echo_request(Bytes(13, 0), r) == Parse::NotMine);
    }
    SUBCASE("IPv6: the checksum covers the pseudo-header") {
        Bytes g = echo6("fd00::100", "2001:db8::1", 9, 3, payload_of(100));
        REQUIRE(parse_echo_request(g, r) == Parse::Ok);
        CHECK(r.v6);
        CHECK(r.id == 9);
        CHECK(r.seq == 3);
        CHECK(echo_checksum_ok(r));
        g[14 + 39] ^= 1; // the destination: the pseudo-header changes
        REQUIRE(parse_echo_request(g, r) == Parse::Ok);
        CHECK(!echo_checksum_ok(r));
        put_be16(g.data() + 18, 4); // payload length below the ICMPv6 header
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
        put_be16(g.data() + 18, 2000); // past the frame
        CHECK(parse_echo_request(g, r) == Parse::Malformed);
    }
}

TEST_CASE("icmp_echo: reply frames carry the guest's id and full checksums") {
    Collect out;
    ReplyEnds e;
    std::memcpy(e.guest_mac, kGuestMac, 6);
    gateway_mac4(reinterpret_cast<const uint8_t *>("\x0a\x00\x02\x02"), e.gw_mac);
    Bytes buf(kHeadroom + 8 + 3000);
    uint8_t *msg = buf.data() + kHeadroom;
    auto fill = [&](size_t payload) {
        msg[0] = 0;
        msg[1] = 0;
        put_be16(msg + 2, 0xdead); // whatever the socket left
        put_be16(msg + 4, 0x4242); // the socket's own id
        put_be16(msg + 6, 11);
        Bytes p = payload_of(payload);
        std::memcpy(msg + 8, p.data(), payload);
        return p;
    };
    SUBCASE("IPv4, one frame") {
        e.v6 = false;
        inet_pton(AF_INET, "10.0.2.100", e.guest + 12);
        e.guest[10] = e.guest[11] = 0xff;
        inet_pton(AF_INET, "192.0.2.1", e.remote + 12);
        e.remote[10] = e.remote[11] = 0xff;
        e.guest_id = 0x1234;
        Bytes p = fill(56);
        CHECK(write_reply(out, e, msg, 64, 1500, 1) == 1);
        REQUIRE(out.frames.size() == 1);
        CHECK(check_reply4(out.frames[0], "192.0.2.1", "10.0.2.100", 0x1234, 11) == p);
    }
    SUBCASE("IPv4 longer than the MTU: fragments") {
        e.v6 = false;
        inet_pton(AF_INET, "10.0.2.100", e.guest + 12);
        inet_pton(AF_INET, "192.0.2.1", e.remote + 12);
        e.guest_id = 5;
        Bytes p = fill(3000);
        CHECK(write_reply(out, e, msg, 3008, 1500, 77) == 3);
        REQUIRE(out.frames.size() == 3);
        Bytes whole;
        for (size_t i = 0; i < 3; ++i) {
            const Bytes &f = out.frames[i];
            const uint8_t *ip = f.data() + 14;
            CHECK(f.size() - 14 <= 1500);
            CHECK(be16(ip + 2) == f.size() - 14);
            CHECK(be16(ip + 4) == 77);
            CHECK(csum_fold(csum_add(0, ip, 20)) == 0xffff);
            uint16_t frag = be16(ip + 6);
            CHECK(bool(frag & 0x2000) == (i < 2));
            CHECK(size_t(frag & 0x1fff) * 8 == whole.size());
            whole.insert(whole.end(), ip + 20, f.data() + f.size());
        }
        REQUIRE(whole.size() == 3008);
        CHECK(csum_fold(csum_add(0, whole.data(), whole.size())) == 0xffff);
        CHECK(be16(whole.data() + 4) == 5);
        CHECK(Bytes(whole.begin() + 8, whole.end()) == p);
    }
    SUBCASE("IPv6, and too long for the MTU: dropped") {
        e.v6 = true;
        inet_pton(AF_INET6, "fd00::100", e.guest);
        inet_pton(AF_INET6, "2001:db8::1", e.remote);
        gateway_mac6(e.remote, e.gw_mac);
        e.guest_id = 0xbeef;
        Bytes p = fill(100);
        msg[0] = 129;
        CHECK(write_reply(out, e, msg, 108, 1500, 0) == 1);
        REQUIRE(out.frames.size() == 1);
        CHECK(check_reply6(out.frames[0], "2001:db8::1", "fd00::100", 0xbeef, 11) == p);
        CHECK(write_reply(out, e, msg, 1500, 1500, 0) == 0);
        CHECK(out.frames.size() == 1);
    }
}

TEST_CASE("icmp_echo: refused ping sockets leave every request to libslirp") {
    Collect out;
    EchoConfig c = base_config();
    c.probe = [] {
        PingProbe p;
        p.why = "Permission denied";
        return p;
    };
    FastPath path(c, out);
    CHECK(!path.enabled());
    CHECK(path.description().rfind("ICMP echo: libslirp (", 0) == 0);
    CHECK(path.guest_frame(echo4("10.0.2.100", "192.0.2.1", 1, 1, {})) ==
          Verdict::NotMine);
    CHECK(path.flows() == 0);
}

TEST_CASE("icmp_echo: what stays libslirp's, what is dropped") {
    Collect out;
    EchoConfig c = base_config();
    c.probe = allowed;
    FastPath path(c, out);
    // DNS, the rest of the virtual network, non-unicast: libslirp answers.
    CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.3", 1, 1, {})) == Verdict::NotMine);
    CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.50", 1, 1, {})) == Verdict::NotMine);
    CHECK(path.guest_frame(echo4("10.0.2.100", "224.0.0.1", 1, 1, {})) == Verdict::NotMine);
    CHECK(path.guest_frame(echo4("10.0.2.100", "127.0.0.1", 1, 1, {})) == Verdict::NotMine);
    CHECK(path.guest_frame(echo6("fd00::100", "fd00::3", 1, 1, {})) == Verdict::NotMine);
    CHECK(path.guest_frame(echo6("fd00::100", "ff02::1", 1, 1, {})) == Verdict::NotMine);
    CHECK(path.guest_frame(echo6("fe80::1", "2001:db8::1", 1, 1, {})) == Verdict::NotMine);
    // Malformed requests to destinations of ours are dropped.
    Bytes bad = echo4("10.0.2.100", "192.0.2.1", 1, 1, payload_of(8));
    bad.back() ^= 1;
    CHECK(path.guest_frame(bad) == Verdict::Malformed);
    Bytes bad6 = echo6("fd00::100", "2001:db8::1", 1, 1, payload_of(8));
    bad6.back() ^= 1;
    CHECK(path.guest_frame(bad6) == Verdict::Malformed);
    Bytes coded = echo4("10.0.2.100", "192.0.2.1", 1, 1, {});
    coded[14 + 21] = 3;
    CHECK(path.guest_frame(coded) == Verdict::Malformed);
    CHECK(path.stats().malformed == 3);
    CHECK(path.flows() == 0);
    CHECK(out.frames.empty());

    SUBCASE("the gateway with disable_host_loopback is libslirp's") {
        EchoConfig d = base_config();
        d.probe = allowed;
        d.disable_host_loopback = true;
        FastPath p2(d, out);
        CHECK(p2.guest_frame(echo4("10.0.2.100", "10.0.2.2", 1, 1, {})) == Verdict::NotMine);
        CHECK(p2.guest_frame(echo6("fd00::100", "fd00::2", 1, 1, {})) == Verdict::NotMine);
    }
    SUBCASE("IPv6 off, or refused for IPv6 only") {
        EchoConfig d = base_config();
        d.ipv6 = false;
        d.probe = allowed;
        FastPath p2(d, out);
        CHECK(p2.guest_frame(echo6("fd00::100", "2001:db8::1", 1, 1, {})) == Verdict::NotMine);
        EchoConfig d6 = base_config();
        d6.probe = [] {
            PingProbe p = allowed();
            p.v6 = false;
            return p;
        };
        FastPath p3(d6, out);
        CHECK(p3.guest_frame(echo6("fd00::100", "2001:db8::1", 1, 1, {})) == Verdict::NotMine);
    }
}

TEST_CASE("icmp_echo: real ping sockets, IPv4 and IPv6, host and gateway") {
    in_netns([](bool v6) {
        Collect out;
        EchoConfig c = base_config();
        int64_t now = 5000;
        c.clock = [&now] { return now; };
        FastPath path(c, out);
        REQUIRE_MESSAGE(path.enabled(), path.description());
        CHECK(path.description().find("allows gid") != std::string::npos);

        // The gateway: the host's 127.0.0.1; the reply comes from 10.0.2.2.
        Bytes p = payload_of(56);
        CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 0x1234, 1, p)) ==
              Verdict::Consumed);
        await(path, out, 1);
        REQUIRE(out.frames.size() == 1);
        CHECK(check_reply4(out.frames[0], "10.0.2.2", "10.0.2.100", 0x1234, 1) == p);

        // The same (guest, id, destination): the same entry.
        CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 0x1234, 2, p)) ==
              Verdict::Consumed);
        await(path, out, 2);
        REQUIRE(out.frames.size() == 2);
        CHECK(check_reply4(out.frames[1], "10.0.2.2", "10.0.2.100", 0x1234, 2) == p);
        CHECK(path.flows() == 1);
        CHECK(path.stats().opened == 1);

        // Outside the virtual network (an address of this namespace).
        Bytes big = payload_of(1400, 3);
        CHECK(path.guest_frame(echo4("10.0.2.100", "192.0.2.1", 0x1234, 9, big)) ==
              Verdict::Consumed);
        await(path, out, 3);
        REQUIRE(out.frames.size() == 3);
        CHECK(check_reply4(out.frames[2], "192.0.2.1", "10.0.2.100", 0x1234, 9) == big);
        CHECK(path.flows() == 2);

        if (!v6) {
            MESSAGE("IPv6 cases skipped: no IPv6 in the test namespace");
            return;
        }
        CHECK(path.guest_frame(echo6("fd00::100", "fd00::2", 0x77, 4, p)) ==
              Verdict::Consumed);
        await(path, out, 4);
        REQUIRE(out.frames.size() == 4);
        CHECK(check_reply6(out.frames[3], "fd00::2", "fd00::100", 0x77, 4) == p);
        CHECK(path.guest_frame(echo6("fd00::100", "2001:db8::1", 0x77, 5, big)) ==
              Verdict::Consumed);
        await(path, out, 5);
        REQUIRE(out.frames.size() == 5);
        CHECK(check_reply6(out.frames[4], "2001:db8::1", "fd00::100", 0x77, 5) == big);
        CHECK(path.flows() == 4);
        CHECK(path.stats().requests == 5);
        CHECK(path.stats().replies == 5);
        CHECK(path.stats().replies_dropped == 0);
    });
}

TEST_CASE("icmp_echo: no route: the guest is told, from the gateway") {
    in_netns([](bool v6) {
        Collect out;
        FastPath path(base_config(), out);
        REQUIRE(path.enabled());
        // This namespace has no route there: nothing is sent anywhere.
        Bytes req = echo4("10.0.2.100", "198.51.100.1", 3, 4, payload_of(20));
        CHECK(path.guest_frame(req) == Verdict::Consumed);
        REQUIRE(out.frames.size() == 1);
        const Bytes &f = out.frames[0];
        REQUIRE(f.size() == 14 + 20 + 8 + 20 + 8);
        CHECK(std::memcmp(f.data(), kGuestMac, 6) == 0);
        const uint8_t *ip = f.data() + 14;
        CHECK(csum_fold(csum_add(0, ip, 20)) == 0xffff);
        CHECK(ip[9] == 1);
        CHECK(std::memcmp(ip + 12, "\x0a\x00\x02\x02", 4) == 0);
        CHECK(std::memcmp(ip + 16, "\x0a\x00\x02\x64", 4) == 0);
        const uint8_t *icmp = ip + 20;
        CHECK(icmp[0] == 3);
        CHECK(icmp[1] == 0);
        CHECK(csum_fold(csum_add(0, icmp, 8 + 28)) == 0xffff);
        CHECK(std::memcmp(icmp + 8, req.data() + 14, 28) == 0); // header + 8
        CHECK(path.stats().unreachable == 1);
        if (!v6) return;
        Bytes req6 = echo6("fd00::100", "2001:db8:1::1", 3, 4, payload_of(20));
        CHECK(path.guest_frame(req6) == Verdict::Consumed);
        REQUIRE(out.frames.size() == 2);
        const Bytes &g = out.frames[1];
        REQUIRE(g.size() == 14 + 40 + 8 + 40 + 28);
        const uint8_t *ip6 = g.data() + 14;
        uint8_t gw6[16];
        inet_pton(AF_INET6, "fd00::2", gw6);
        CHECK(std::memcmp(ip6 + 8, gw6, 16) == 0);
        CHECK(std::memcmp(ip6 + 24, req6.data() + 14 + 8, 16) == 0);
        const uint8_t *icmp6 = ip6 + 40;
        CHECK(icmp6[0] == 1);
        CHECK(icmp6[1] == 0);
        CHECK(csum_fold(csum_add(pseudo6(ip6 + 8, ip6 + 24, 76), icmp6, 76)) == 0xffff);
        CHECK(std::memcmp(icmp6 + 8, req6.data() + 14, 68) == 0); // all of it
    });
}

TEST_CASE("icmp_echo: idle entries expire") {
    in_netns([](bool) {
        Collect out;
        EchoConfig c = base_config();
        int64_t now = 5000;
        c.clock = [&now] { return now; };
        FastPath path(c, out);
        REQUIRE(path.enabled());
        CHECK(path.ms_until_next_timer(now) == -1);
        path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 1, 1, {}));
        await(path, out, 1);
        CHECK(out.frames.size() == 1);
        CHECK(path.flows() == 1);
        CHECK(path.ms_until_next_timer(now) > 0);
        CHECK(path.ms_until_next_timer(now) <= 1000);

        now += 30000; // a request half-way keeps it
        path.run_timers(now);
        path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 1, 2, {}));
        await(path, out, 2);
        now += 59000;
        path.run_timers(now);
        CHECK(path.flows() == 1);
        now += 1000;
        path.run_timers(now);
        CHECK(path.flows() == 0);
        CHECK(path.stats().expired == 1);
        CHECK(path.ms_until_next_timer(now) == -1);

        // The next request opens a new entry.
        path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 1, 3, {}));
        await(path, out, 3);
        CHECK(out.frames.size() == 3);
        CHECK(path.stats().opened == 2);
    });
}

TEST_CASE("icmp_echo: a full table or the flow limits refuse new entries") {
    in_netns([](bool) {
        Collect out;
        EchoConfig c = base_config();
        c.max_entries = 2;
        bool admit = true;
        int asked = 0;
        c.admit_entry = [&] {
            ++asked;
            return admit;
        };
        FastPath path(c, out);
        REQUIRE(path.enabled());
        CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 1, 1, {})) == Verdict::Consumed);
        CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 2, 1, {})) == Verdict::Consumed);
        CHECK(path.flows() == 2);
        CHECK(asked == 2);
        // A third id: no slot (and no token taken from the limits).
        CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 3, 1, {})) == Verdict::Consumed);
        CHECK(path.flows() == 2);
        CHECK(asked == 2);
        CHECK(path.stats().refused == 1);
        // Known entries still work.
        CHECK(path.guest_frame(echo4("10.0.2.100", "10.0.2.2", 2, 2, {})) == Verdict::Consumed);
        await(path, out, 3);
        CHECK(out.frames.size() == 3);
        CHECK(path.stats().requests == 3);

        EchoConfig d = base_config();
        d.admit_entry = [&] { return admit; };
        FastPath p2(d, out);
        admit = false;
        CHECK(p2.guest_frame(echo4("10.0.2.100", "10.0.2.2", 1, 1, {})) == Verdict::Consumed);
        CHECK(p2.flows() == 0);
        CHECK(p2.stats().refused == 1);
        CHECK(p2.stats().requests == 0);
    });
}

TEST_CASE("icmp_echo: guest ingress offers echo requests before libslirp") {
    in_netns([](bool) {
        Stats stats;
        FlowLimits limits(1, 1000, stats, 1000);
        const Ipv4Cidr net = ParentConfig::from_c(default_config()).cidr;
        GuestIngress ingress(net, stats, limits, {});
        LibslirpStandIn slirp(net, 1, [&](bool l) { return ingress.admit_flow(1000, l); });
        auto &to_libslirp = slirp.frames;
        Collect out;
        EchoConfig c = base_config();
        c.admit_entry = [&] { return ingress.admit_flow(1000, true) == Admission::Accept; };
        FastPath path(c, out);
        ingress.add_path(&path);
        ingress.add_path(&slirp);
        using Outcome = GuestIngress::Outcome;
        Bytes dns = echo4("10.0.2.100", "10.0.2.3", 1, 1, {});
        CHECK(ingress.input(dns, false, 1000) == Outcome::Path);
        CHECK(ingress.taken_by() == &slirp);
        CHECK(to_libslirp.size() == 1);
        Bytes bad = echo4("10.0.2.100", "10.0.2.2", 1, 1, payload_of(8));
        bad.back() ^= 1;
        CHECK(ingress.input(bad, false, 1000) == Outcome::Dropped);
        CHECK(stats.frames_dropped.load() == 1);
        Bytes ok = echo4("10.0.2.100", "10.0.2.2", 1, 1, {});
        CHECK(ingress.input(ok, false, 1000) == Outcome::Path);
        CHECK(to_libslirp.size() == 1);
        // With max_flows 1, an open entry is the one flow: the next is refused.
        CHECK(path.flows() == 1);
        Bytes other = echo4("10.0.2.100", "10.0.2.2", 2, 1, {});
        CHECK(ingress.input(other, false, 1000) == Outcome::Path);
        CHECK(path.flows() == 1);
        CHECK(stats.flows_refused.load() == 1);
    });
}
