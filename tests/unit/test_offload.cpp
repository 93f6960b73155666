// SPDX-License-Identifier: Apache-2.0

// Tap offloads: checksum completion of guest frames, partial checksums and
// GSO merging of guest-bound segments (Coalescer).
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include "datapath/checksum.hpp"
#include "datapath/coalescer.hpp"
#include "datapath/offload.hpp"

using namespace rknp;

namespace {

using Bytes = std::vector<uint8_t>;

// Sum of the IPv4 TCP pseudo-header and the TCP segment of frame f.
uint64_t tcp4_sum(const Bytes &f) {
    size_t l4 = f.size() - 34;
    uint8_t pseudo[12];
    std::memcpy(pseudo, f.data() + 26, 8); // source and destination
    pseudo[8] = 0;
    pseudo[9] = 6;
    pseudo[10] = uint8_t(l4 >> 8);
    pseudo[11] = uint8_t(l4);
    return csum_add(csum_add(0, pseudo, 12), f.data() + 34, l4);
}

// Verifies an IPv4 TCP frame's IP and TCP checksums.
bool checksums_valid(const Bytes &f) {
    return csum_fold(csum_add(0, f.data() + 14, 20)) == 0xffff &&
           csum_fold(tcp4_sum(f)) == 0xffff;
}

void store(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v >> 8);
    p[1] = uint8_t(v);
}

void fix_checksums(Bytes &f) {
    store(f.data() + 24, 0);
    store(f.data() + 24, uint16_t(~csum_fold(csum_add(0, f.data() + 14, 20))));
    store(f.data() + 50, 0);
    store(f.data() + 50, uint16_t(~csum_fold(tcp4_sum(f))));
}

// An IPv4 TCP data segment from 10.0.2.2:80 to 10.0.2.100:5000.
Bytes segment(uint32_t seq, size_t payload, uint8_t flags = 0x10,
              uint16_t sport = 80, uint8_t fill = 0) {
    Bytes f(14 + 20 + 20 + payload, 0);
    uint8_t *eth = f.data();
    std::memset(eth, 0x02, 12);
    eth[12] = 0x08;
    uint8_t *ip = eth + 14;
    ip[0] = 0x45;
    uint16_t tot = uint16_t(40 + payload);
    ip[2] = uint8_t(tot >> 8);
    ip[3] = uint8_t(tot);
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    uint32_t s = htonl(0x0a000202), d = htonl(0x0a000264);
    std::memcpy(ip + 12, &s, 4);
    std::memcpy(ip + 16, &d, 4);
    uint8_t *tcp = ip + 20;
    tcp[0] = uint8_t(sport >> 8);
    tcp[1] = uint8_t(sport);
    tcp[2] = 0x13;
    tcp[3] = 0x88;
    uint32_t nseq = htonl(seq), ack = htonl(777);
    std::memcpy(tcp + 4, &nseq, 4);
    std::memcpy(tcp + 8, &ack, 4);
    tcp[12] = 0x50;
    tcp[13] = flags;
    tcp[14] = 0xff;
    tcp[15] = 0xff;
    for (size_t i = 0; i < payload; ++i)
        f[54 + i] = uint8_t(fill + seq + i);
    fix_checksums(f);
    return f;
}

struct Out {
    VnetHdr h;
    Bytes frame;
};

// Appends the Coalescer's frames (both parts joined) to out.
struct Collector final : GuestSink {
    std::vector<Out> &out;
    const uint8_t *rest_at = nullptr; // where the last frame's rest was
    explicit Collector(std::vector<Out> &o) : out(o) {}
    void write_frame(const VnetHdr &h, std::span<const uint8_t> f,
                     std::span<const uint8_t> rest) override {
        Bytes whole(f.begin(), f.end());
        whole.insert(whole.end(), rest.begin(), rest.end());
        out.push_back({h, whole});
        rest_at = rest.data();
    }
};

// The frame as the guest's kernel sees it once it completes a partial
// checksum.
Bytes completed(const Out &o) {
    Bytes f = o.frame;
    if (o.h.flags & kVnetNeedsCsum) REQUIRE(complete_checksum(f, o.h));
    return f;
}

} // namespace

TEST_CASE("checksum primitives match RFC 1071's example") {
    const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    CHECK(csum_fold(csum_add(0, data, sizeof data)) == 0xddf2);
    const uint8_t odd[] = {0x01, 0x02, 0x03};
    CHECK(csum_fold(csum_add(0, odd, 3)) == 0x0402);
}

TEST_CASE("a partial checksum from the kernel is completed correctly") {
    Bytes f = segment(1000, 333);
    REQUIRE(checksums_valid(f));
    // What the kernel hands over with NEEDS_CSUM: the pseudo-header sum
    // only (the full sum minus the segment's own bytes).
    Bytes header_only = f;
    header_only.resize(34);
    header_only.resize(34 + 20 + 333, 0);
    store(f.data() + 50, csum_fold(tcp4_sum(header_only)));
    CHECK_FALSE(checksums_valid(f));
    VnetHdr h{kVnetNeedsCsum, 0, 0, 0, 34, 16};
    REQUIRE(complete_checksum(f, h));
    CHECK(checksums_valid(f));
    VnetHdr bogus{kVnetNeedsCsum, 0, 0, 0, 34, 60000};
    CHECK_FALSE(complete_checksum(f, bogus));
}

TEST_CASE("a tap frame's partial checksum is finished only when asked, once") {
    Bytes f = segment(1000, 333);
    Bytes header_only = f;
    header_only.resize(34);
    header_only.resize(34 + 20 + 333, 0);
    store(f.data() + 50, csum_fold(tcp4_sum(header_only)));
    VnetHdr h{kVnetNeedsCsum, 0, 0, 0, 34, 16};
    Bytes raw(sizeof h);
    std::memcpy(raw.data(), &h, sizeof h);
    raw.insert(raw.end(), f.begin(), f.end());
    TapFrame t = split_tap_frame(raw, true);
    REQUIRE(t.eth.size() == f.size());
    CHECK(t.csum_partial);
    CHECK_FALSE(checksums_valid(Bytes(t.eth.begin(), t.eth.end()))); // the fast path's view
    REQUIRE(finish_checksum(t));
    CHECK_FALSE(t.csum_partial);
    CHECK(checksums_valid(Bytes(t.eth.begin(), t.eth.end()))); // libslirp's
    Bytes again(t.eth.begin(), t.eth.end());
    REQUIRE(finish_checksum(t)); // a second call changes nothing
    CHECK(Bytes(t.eth.begin(), t.eth.end()) == again);
    // Bogus offsets: dropped, but only where the checksum is needed.
    std::memcpy(raw.data(), &h, sizeof h);
    VnetHdr bogus{kVnetNeedsCsum, 0, 0, 0, 34, 60000};
    std::memcpy(raw.data(), &bogus, sizeof bogus);
    TapFrame b = split_tap_frame(raw, true);
    CHECK(b.eth.size() == f.size());
    CHECK_FALSE(finish_checksum(b));
    CHECK(split_tap_frame({raw.data(), 5}, true).eth.empty());
}

TEST_CASE("consecutive segments of one flow become one GSO frame") {
    std::vector<Out> out;
    Collector sink(out);
    Stats stats;
    Coalescer c(sink, stats);
    c.push(segment(1000, 1460));
    c.push(segment(2460, 1460));
    c.push(segment(3920, 500, 0x18)); // PSH ends the batch
    CHECK(out.empty());
    c.flush();
    REQUIRE(out.size() == 1);
    const auto &o = out[0];
    CHECK(o.h.gso_type == kVnetGsoTcp4);
    CHECK(o.h.gso_size == 1460);
    CHECK(stats.segments_merged.load() == 3);
    CHECK(o.h.hdr_len == 54);
    CHECK(o.h.flags == kVnetNeedsCsum);
    CHECK(o.h.csum_start == 34);
    CHECK(o.h.csum_offset == 16);
    REQUIRE(o.frame.size() == 54 + 1460 + 1460 + 500);
    CHECK(((o.frame[16] << 8) | o.frame[17]) == 40 + 3420); // IP total length
    CHECK((o.frame[47] & 0x08) != 0);                       // PSH kept
    // Payload bytes are the three payloads in order.
    for (size_t i = 0; i < 3420; ++i)
        REQUIRE(o.frame[54 + i] == uint8_t(1000 + i));
    // The IP header checksum is valid; the TCP field is the pseudo sum,
    // which the kernel completes into a valid checksum when it must.
    CHECK(csum_fold(csum_add(0, o.frame.data() + 14, 20)) == 0xffff);
    Bytes completed = o.frame;
    REQUIRE(complete_checksum(completed, o.h));
    CHECK(checksums_valid(completed));
}

TEST_CASE("frames that cannot merge are written unchanged and in order") {
    std::vector<Out> out;
    Collector sink(out);
    Stats stats;
    Coalescer c(sink, stats);
    Bytes a = segment(1000, 1460);
    Bytes gap = segment(5000, 1460);               // not contiguous
    Bytes other = segment(6460, 1460, 0x10, 81);   // another flow
    Bytes ack = segment(0, 0);                     // no payload
    Bytes arp(60, 0);
    arp[12] = 0x08;
    arp[13] = 0x06;
    for (auto *f : {&a, &gap, &other, &ack, &arp}) c.push(*f);
    c.flush();
    REQUIRE(out.size() == 5);
    // Data segments get a partial checksum, so the guest skips verifying.
    CHECK(out[0].h.flags == kVnetNeedsCsum);
    CHECK(out[0].h.gso_type == 0);
    CHECK(out[0].h.csum_start == 34);
    CHECK(out[0].h.csum_offset == 16);
    CHECK(completed(out[0]) == a);
    CHECK(completed(out[1]) == gap);
    CHECK(completed(out[2]) == other);
    CHECK(out[3].frame == ack);
    CHECK(out[3].h.flags == 0);
    CHECK(out[4].frame == arp);
    for (int i = 0; i < 3; ++i) CHECK(checksums_valid(completed(out[size_t(i)])));
}

TEST_CASE("a short segment ends the batch; a full batch stays under 64 KiB") {
    std::vector<Out> out;
    Collector sink(out);
    Stats stats;
    Coalescer c(sink, stats);
    c.push(segment(0, 1000));
    c.push(segment(1000, 400)); // shorter than gso_size: last one allowed
    c.push(segment(1400, 1000)); // cannot follow a short segment
    c.flush();
    REQUIRE(out.size() == 2);
    CHECK(out[0].frame.size() == 54 + 1400);
    CHECK(out[1].frame.size() == 54 + 1000);

    out.clear();
    uint32_t seq = 0;
    for (int i = 0; i < 100; ++i, seq += 1460) c.push(segment(seq, 1460));
    c.flush();
    size_t total = 0;
    for (auto &o : out) {
        CHECK(o.frame.size() - 14 <= 65535);
        total += o.frame.size() - 54;
    }
    CHECK(total == 146000);
    CHECK(out.size() == 3);
}

TEST_CASE("a segment too large to merge goes out at once, its payload uncopied") {
    std::vector<Out> out;
    Collector sink(out);
    Stats stats;
    Coalescer c(sink, stats);
    c.push(segment(0, 1000)); // pending, then flushed by the big one
    Bytes big = segment(1000, 40000);
    c.push(big);
    REQUIRE(out.size() == 2); // nothing left pending: no flush needed
    CHECK(out[0].frame.size() == 54 + 1000);
    CHECK(sink.rest_at == big.data() + 54); // written from the caller's buffer
    CHECK(out[1].h.flags == kVnetNeedsCsum);
    CHECK(out[1].h.gso_type == 0);
    CHECK(completed(out[1]) == big);
    c.flush();
    CHECK(out.size() == 2);
}

namespace {

// A pure ACK from 10.0.2.2:sport acking ack, with the given window.
Bytes pure_ack(uint32_t ack, uint16_t sport = 80, uint16_t window = 0xffff,
               uint8_t flags = 0x10) {
    Bytes f = segment(5000, 0, flags, sport);
    uint32_t n = htonl(ack);
    std::memcpy(f.data() + 42, &n, 4);
    store(f.data() + 48, window);
    fix_checksums(f);
    return f;
}

} // namespace

TEST_CASE("of consecutive advancing pure ACKs of a flow only the last goes out") {
    std::vector<Out> out;
    Collector sink(out);
    Stats stats;
    Coalescer c(sink, stats);
    Bytes last = pure_ack(3000, 80, 0x1000); // a new window rides along
    for (const Bytes &f : {pure_ack(1000), pure_ack(2000), last}) c.push(f);
    CHECK(out.empty());
    c.flush();
    REQUIRE(out.size() == 1);
    CHECK(out[0].frame == last);
    CHECK(checksums_valid(out[0].frame));
    CHECK(stats.acks_superseded.load() == 2);
    // Across the 32-bit wrap of the ack number too.
    out.clear();
    c.push(pure_ack(0xffffff00));
    c.push(pure_ack(0x10));
    c.flush();
    REQUIRE(out.size() == 1);
    CHECK(out[0].frame == pure_ack(0x10));
}

TEST_CASE("duplicate ACKs, other flows, other flags and data keep every ACK, in order") {
    auto a1 = pure_ack(1000), a1_again = pure_ack(1000);
    auto other_flow = pure_ack(2000, 81);
    auto fin = pure_ack(3000, 80, 0xffff, 0x11);
    auto older = pure_ack(900); // behind: not superseding
    auto data = segment(1, 100);
    auto a2 = pure_ack(4000);
    std::vector<Bytes> in = {a1, a1_again, other_flow, pure_ack(1500), older,
                             data, a2, fin};
    std::vector<Out> out;
    Collector sink(out);
    Stats stats;
    Coalescer c(sink, stats);
    for (const auto &f : in) c.push(f);
    c.flush();
    REQUIRE(out.size() == in.size());
    for (size_t i = 0; i < in.size(); ++i) CHECK(completed(out[i]) == in[i]);
    CHECK(stats.acks_superseded.load() == 0);
}
