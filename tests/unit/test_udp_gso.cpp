// SPDX-License-Identifier: Apache-2.0

// A guest's UDP GSO super-frames (the tap's USO offload): UdpGsoSplitter
// alone (each datagram's headers, lengths, checksums and bytes; what it
// refuses) and through GuestIngress (the fast path sends one datagram per
// segment to a real host socket; libslirp gets each as a frame of its own).
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "common/config.hpp"
#include "datapath/udp/gso_splitter.hpp"
#include "libslirp_stand_in.hpp"
#include "parent/guest_ingress.hpp"
#include "udp_rig.hpp"

using namespace rknp;
using namespace rknp::udptest;
using Outcome = GuestIngress::Outcome;

namespace {

constexpr uint8_t kGuest6Text[] = "fd00::100";

// A super-frame: one datagram carrying payload, marked as the guest's
// kernel marks a UDP_SEGMENT send of seg-byte datagrams.
struct Super {
    Bytes eth;
    VnetHdr hdr{};
};
Super super_frame(bool v6, uint16_t dport, std::span<const uint8_t> payload, uint16_t seg) {
    uint8_t src6[16], dst6[16];
    addr6(src6, reinterpret_cast<const char *>(kGuest6Text));
    addr6(dst6, "fd00::2");
    Super s;
    s.eth = v6 ? guest_datagram(true, src6, dst6, 40000, dport, payload)
               : guest_datagram(false, kGuest4, kGateway4, 40000, dport, payload);
    const size_t l4 = 14 + (v6 ? 40 : 20);
    s.hdr.flags = kVnetNeedsCsum;
    s.hdr.gso_type = kVnetGsoUdpL4;
    s.hdr.gso_size = seg;
    s.hdr.hdr_len = uint16_t(l4 + 8);
    s.hdr.csum_start = uint16_t(l4);
    s.hdr.csum_offset = 6;
    return s;
}

Bytes with_vnet(const Super &s) {
    Bytes raw(kVnetHdrSize);
    std::memcpy(raw.data(), &s.hdr, kVnetHdrSize);
    raw.insert(raw.end(), s.eth.begin(), s.eth.end());
    return raw;
}

// Every datagram the splitter makes of s, checksums completed.
std::vector<Bytes> split(UdpGsoSplitter &g, const Super &s) {
    std::vector<Bytes> out;
    REQUIRE(g.start(s.eth, s.hdr));
    TapFrame t;
    while (g.next(t)) {
        CHECK(t.csum_partial);
        REQUIRE(finish_checksum(t));
        out.emplace_back(t.eth.begin(), t.eth.end());
    }
    return out;
}

} // namespace

TEST_CASE("udp_gso: a super-frame becomes its datagrams, each whole and checksummed") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        const Bytes payload = pattern(10 * 1400 + 321, 3);
        Super s = super_frame(v6, 5000, payload, 1400);
        UdpGsoSplitter g;
        const std::vector<Bytes> dgrams = split(g, s);
        REQUIRE(dgrams.size() == 11);
        const size_t ip_len = v6 ? 40 : 20;
        Bytes joined;
        for (size_t i = 0; i < dgrams.size(); ++i) {
            CAPTURE(i);
            const Bytes &f = dgrams[i];
            const size_t n = i < 10 ? 1400 : 321;
            REQUIRE(f.size() == 14 + ip_len + 8 + n);
            CHECK(std::equal(s.eth.begin(), s.eth.begin() + 14, f.begin())); // MACs, type
            const uint8_t *ip = f.data() + 14;
            if (v6) {
                CHECK(be16(ip + 4) == 8 + n);
                CHECK(std::equal(ip + 6, ip + 40, s.eth.data() + 14 + 6)); // next header, addrs
            } else {
                CHECK(be16(ip + 2) == 20 + 8 + n);
                CHECK(be16(ip + 4) == uint16_t(i)); // identifications in turn
                CHECK(csum_fold(csum_add(0, ip, 20)) == 0xffff);
                CHECK(std::equal(ip + 12, ip + 20, s.eth.data() + 14 + 12));
            }
            const uint8_t *u = ip + ip_len;
            CHECK(be16(u) == 40000);
            CHECK(be16(u + 2) == 5000);
            CHECK(be16(u + 4) == 8 + n);
            CHECK(l4_checksum_ok(v6, ip, {u, 8 + n}, 17));
            joined.insert(joined.end(), u + 8, u + 8 + n);
        }
        CHECK(joined == payload);
        TapFrame t;
        CHECK_FALSE(g.next(t)); // done, and stays done
    }
}

TEST_CASE("udp_gso: a segment size as large as the payload is one datagram") {
    const Bytes payload = pattern(900, 1);
    Super s = super_frame(false, 5000, payload, 900);
    UdpGsoSplitter g;
    const std::vector<Bytes> d = split(g, s);
    REQUIRE(d.size() == 1);
    CHECK(Bytes(d[0].begin() + 42, d[0].end()) == payload);
    s = super_frame(false, 5000, payload, 65535);
    CHECK(split(g, s).size() == 1);
}

TEST_CASE("udp_gso: what no guest kernel sends is refused whole") {
    UdpGsoSplitter g;
    const Bytes payload = pattern(3000, 2);
    auto refused = [&g](const Super &s) { return !g.start(s.eth, s.hdr); };
    Super s = super_frame(false, 5000, payload, 0); // no segment size
    CHECK(refused(s));
    s = super_frame(false, 5000, Bytes(), 1000); // nothing to split
    CHECK(refused(s));
    s = super_frame(false, 5000, pattern(129 * 8, 1), 8); // over UDP_MAX_SEGMENTS
    CHECK(refused(s));
    CHECK_FALSE(refused(super_frame(false, 5000, pattern(128 * 8, 1), 8)));
    s = super_frame(false, 5000, payload, 1000);
    put_be16(s.eth.data() + 14 + 6, 0x2000); // More Fragments
    CHECK(refused(s));
    s = super_frame(false, 5000, payload, 1000);
    s.eth[14] = 0x44; // IHL 4
    CHECK(refused(s));
    s = super_frame(false, 5000, payload, 1000);
    s.eth[14 + 9] = 6; // TCP
    CHECK(refused(s));
    s = super_frame(false, 5000, payload, 1000);
    put_be16(s.eth.data() + 14 + 2, uint16_t(s.eth.size() - 14 + 1)); // longer than the frame
    CHECK(refused(s));
    s = super_frame(false, 5000, payload, 1000);
    put_be16(s.eth.data() + 14 + 2, 20 + 7); // shorter than a UDP header
    CHECK(refused(s));
    s = super_frame(true, 5000, payload, 1000);
    s.eth[14 + 6] = 0; // a hop-by-hop header first
    CHECK(refused(s));
    s = super_frame(true, 5000, payload, 1000);
    put_be16(s.eth.data() + 14 + 4, uint16_t(s.eth.size() - 54 + 1));
    CHECK(refused(s));
    s = super_frame(false, 5000, payload, 1000);
    put_be16(s.eth.data() + 12, 0x0806); // ARP
    CHECK(refused(s));
    CHECK(refused(Super{Bytes(10, 0), s.hdr}));
    // Refused means nothing comes out, even what an accepted frame left.
    const Super good = super_frame(false, 5000, payload, 1000);
    REQUIRE(g.start(good.eth, good.hdr));
    CHECK_FALSE(g.start(s.eth, s.hdr));
    TapFrame t;
    CHECK_FALSE(g.next(t));
}

TEST_CASE("udp_gso: padding after the super-frame's IP datagram is not payload") {
    Super s = super_frame(false, 5000, pattern(2500, 4), 1000);
    s.eth.insert(s.eth.end(), 6, 0xee);
    UdpGsoSplitter g;
    const std::vector<Bytes> d = split(g, s);
    REQUIRE(d.size() == 3);
    CHECK(d[2].size() == 42 + 500);
}

namespace {

// GuestIngress with a UDP fast path (udptest::Rig) and libslirp recorded.
struct IngressRig {
    Rig udp;
    Stats stats;
    FlowLimits limits{100, 1000, stats, 1000};
    LibslirpStandIn slirp;
    std::vector<Bytes> &to_libslirp = slirp.frames;
    GuestIngress ingress;
    explicit IngressRig(bool fast = true)
        : slirp(ParentConfig::from_c(default_config()).cidr, 100,
                [this](bool l) { return ingress.admit_flow(1000, l); }),
          ingress(ParentConfig::from_c(default_config()).cidr, stats, limits,
                  {fast ? &udp.path : nullptr, &slirp}) {}
    Outcome input(const Super &s) {
        Bytes raw = with_vnet(s);
        return ingress.input(raw, true, 1000);
    }
};

} // namespace

TEST_CASE("udp_gso: through the fast path, the host socket gets each datagram") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        IngressRig r;
        HostSocket host(v6);
        const Bytes payload = pattern(40 * 1400 + 100, 9);
        REQUIRE(r.input(super_frame(v6, host.port, payload, 1400)) == Outcome::Path);
        r.udp.path.flush();
        Bytes joined;
        for (int i = 0; i < 41; ++i) {
            CAPTURE(i);
            std::optional<Bytes> got = host.recv();
            REQUIRE(got);
            CHECK(got->size() == (i < 40 ? 1400 : 100));
            joined.insert(joined.end(), got->begin(), got->end());
        }
        CHECK(joined == payload);
        CHECK(r.udp.path.stats().datagrams_to_host == 41);
        CHECK(r.stats.frames_from_tap.load() == 41);
        CHECK(r.stats.frames_dropped.load() == 0);
        CHECK(r.to_libslirp.empty());
    }
}

TEST_CASE("udp_gso: without the fast path libslirp gets each datagram as a frame") {
    IngressRig r(false);
    const Bytes payload = pattern(3 * 1000 + 1, 5);
    REQUIRE(r.input(super_frame(false, 5353, payload, 1000)) == Outcome::Path);
    REQUIRE(r.to_libslirp.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        const Bytes &f = r.to_libslirp[i];
        const size_t n = i < 3 ? 1000 : 1;
        REQUIRE(f.size() == 42 + n);
        CHECK(l4_checksum_ok(false, f.data() + 14, {f.data() + 34, 8 + n}, 17));
        CHECK(std::equal(f.begin() + 42, f.end(), payload.begin() + long(i * 1000)));
    }
    // A malformed one: one frame dropped, nothing passed on.
    Super bad = super_frame(false, 5353, payload, 0);
    CHECK(r.input(bad) == Outcome::Dropped);
    CHECK(r.stats.frames_dropped.load() == 1);
    CHECK(r.to_libslirp.size() == 4);
}
