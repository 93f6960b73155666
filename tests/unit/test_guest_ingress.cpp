// SPDX-License-Identifier: Apache-2.0

// GuestIngress, the one chain from a tap frame to the fast path or
// libslirp: what each kind of frame becomes and the Stats it leaves
// (the counts the stack loop has always kept), with a recording stand-in
// for libslirp and, for the fast paths, real ones; and that the clients of
// forwards never spend the guest's budget.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "ipv4_datagram.hpp"
#include "libslirp_stand_in.hpp"
#include "parent/guest_ingress.hpp"
#include "recording_sink.hpp"
#include "slirp_rig.hpp"
#include "tcp_sim_forward.hpp"
#include "udp_rig.hpp"

using namespace rknp;
using namespace tcpsim;
using Outcome = GuestIngress::Outcome;

namespace {

Bytes with_vnet(const Bytes &eth, const VnetHdr &h = {}) {
    Bytes raw(kVnetHdrSize);
    std::memcpy(raw.data(), &h, kVnetHdrSize);
    raw.insert(raw.end(), eth.begin(), eth.end());
    return raw;
}

// A fragment of an IPv4 datagram (Ethernet frame): len payload bytes from
// offset (a multiple of 8), with More Fragments if more.
Bytes fragment(const Bytes &whole, size_t offset, size_t len, bool more) {
    Bytes f(whole.begin(), whole.begin() + 34);
    f.insert(f.end(), whole.begin() + 34 + long(offset),
             whole.begin() + 34 + long(offset + len));
    put_be16(f.data() + 16, uint16_t(20 + len));
    put_be16(f.data() + 20, uint16_t((more ? 0x2000 : 0) | offset / 8));
    test::set_ip_checksum(f);
    return f;
}

struct Rig {
    Stats stats;
    FlowLimits limits;
    std::unique_ptr<FastPath> fast;
    LibslirpStandIn slirp;
    std::vector<Bytes> &to_libslirp = slirp.frames;
    GuestIngress ingress;
    int64_t now = 1000;

    explicit Rig(uint32_t max_flows = 100, uint32_t rate = 1000, bool fast_path = false)
        : limits(max_flows, rate, stats, uint64_t(now)),
          fast(fast_path ? make_fast_path() : nullptr),
          slirp(ParentConfig::from_c(default_config()).cidr, max_flows,
                [this](bool l) { return ingress.admit_flow(now, l); }),
          ingress(ParentConfig::from_c(default_config()).cidr, stats, limits,
                  {fast.get(), &slirp}) {}

    std::unique_ptr<FastPath> make_fast_path() {
        FastPathConfig c = Sim::base_config();
        c.clock = [this] { return now; };
        c.admit_flow = [this] { return ingress.admit_flow(now, false); };
        return std::make_unique<FastPath>(std::move(c));
    }
    Outcome input(Bytes raw, bool vnet = false) { return ingress.input(raw, vnet, now); }
};

} // namespace

TEST_CASE("guest ingress: malformed and foreign frames are counted, never passed on") {
    Rig r;
    CHECK(r.input(Bytes(5, 0), true) == Outcome::Dropped); // shorter than a vnet header
    CHECK(r.stats.frames_dropped.load() == 1);
    CHECK(r.stats.frames_filtered.load() == 0);

    Bytes lldp = syn_frame(40000, 80);
    put_be16(lldp.data() + 12, 0x88cc);
    CHECK(r.input(lldp) == Outcome::Filtered);
    Bytes spoofed = syn_frame(40000, 80);
    spoofed[14 + 14] = 3; // 10.0.3.100: outside the guest's network
    CHECK(r.input(spoofed) == Outcome::Filtered);
    // An ICMPv6 router advertisement from a link-local address.
    Bytes ra(14 + 40 + 16, 0);
    std::memcpy(ra.data() + 6, kGuestMac, 6);
    put_be16(ra.data() + 12, 0x86dd);
    ra[14] = 0x60;
    put_be16(ra.data() + 14 + 4, 16);
    ra[14 + 6] = 58;
    ra[14 + 7] = 255;
    addr6(ra.data() + 14 + 8, "fe80::1");
    addr6(ra.data() + 14 + 24, "ff02::1");
    ra[14 + 40] = 134;
    CHECK(r.input(ra) == Outcome::Filtered);

    CHECK(r.stats.frames_dropped.load() == 4);
    CHECK(r.stats.frames_filtered.load() == 3);
    CHECK(r.stats.frames_from_tap.load() == 0);
    CHECK(r.to_libslirp.empty());
}

TEST_CASE("guest ingress: a frame reaches libslirp once, counted, urgent data cleared") {
    Rig r;
    Bytes syn = syn_frame(40000, 80, kSyn | 0x20);
    put_be16(syn.data() + 14 + 20 + 18, 1000); // urgent pointer
    CHECK(r.input(syn) == Outcome::Path);
    REQUIRE(r.to_libslirp.size() == 1);
    const Bytes &got = r.to_libslirp[0];
    REQUIRE(got.size() == syn.size());
    CHECK((got[14 + 20 + 13] & 0x20) == 0);
    CHECK(got[14 + 20 + 18] == 0);
    CHECK(got[14 + 20 + 19] == 0);
    CHECK(r.stats.frames_from_tap.load() == 1);
    CHECK(r.stats.bytes_from_tap.load() == syn.size());
    CHECK(r.stats.frames_dropped.load() == 0);
}

TEST_CASE("guest ingress: libslirp gets partial checksums completed; bogus offsets drop") {
    Rig r;
    Bytes whole = syn_frame(40000, 80); // a 20-byte TCP header, no payload
    Bytes partial = whole;
    VnetHdr h = partial_checksum(partial.data(), 14, partial.size(), 20, false);
    REQUIRE(partial != whole);
    CHECK(r.input(with_vnet(partial, h), true) == Outcome::Path);
    REQUIRE(r.to_libslirp.size() == 1);
    CHECK(r.to_libslirp[0] == whole);
    CHECK(r.stats.bytes_from_tap.load() == whole.size()); // without the vnet header

    h.csum_offset = 60000;
    CHECK(r.input(with_vnet(partial, h), true) == Outcome::Dropped);
    CHECK(r.stats.frames_dropped.load() == 1);
    CHECK(r.stats.frames_from_tap.load() == 1);
    CHECK(r.to_libslirp.size() == 1);
}

TEST_CASE("guest ingress: IPv4 fragments are held until whole, then counted as fragments") {
    Rig r;
    Bytes whole = test::ipv4_datagram(64);
    std::memcpy(whole.data() + 6, kGuestMac, 6);
    // The last fragment alone (the 4.7.0 crasher) never comes out.
    CHECK(r.input(fragment(whole, 32, 32, false)) == Outcome::Reassembling);
    CHECK(r.to_libslirp.empty());
    CHECK(r.input(fragment(whole, 0, 32, true)) == Outcome::Path);
    REQUIRE(r.to_libslirp.size() == 1);
    CHECK(r.to_libslirp[0] == whole);
    CHECK(r.stats.frames_from_tap.load() == 2);
    CHECK(r.stats.bytes_from_tap.load() == whole.size());
    CHECK(r.stats.frames_dropped.load() == 0);
}

TEST_CASE("guest ingress: a new flow over the limits never reaches libslirp") {
    Rig r(100, 1); // one new flow a second
    CHECK(r.input(syn_frame(40000, 80)) == Outcome::Path);
    CHECK(r.input(syn_frame(40001, 80)) == Outcome::Refused);
    CHECK(r.stats.flows_rate_limited.load() == 1);
    CHECK(r.stats.frames_dropped.load() == 0); // FlowLimits' count, not a drop
    CHECK(r.stats.frames_from_tap.load() == 2);
    CHECK(r.input(syn_frame(40000, 80, kAck, 1001)) == Outcome::Path); // no new flow
    r.now += 1000;
    CHECK(r.input(syn_frame(40001, 80)) == Outcome::Path);
    CHECK(r.to_libslirp.size() == 3);
}

TEST_CASE("guest ingress: the fast path takes guest TCP first, on a tap with vnet headers") {
    Rig r(1, 1000, true);
    Listener l;
    Bytes syn = syn_frame(40000, l.port);
    CHECK(r.input(with_vnet(syn), true) == Outcome::Path);
    CHECK(r.fast->flows() == 1);
    CHECK(r.to_libslirp.empty());
    CHECK(r.stats.frames_from_tap.load() == 1);
    CHECK(r.stats.bytes_from_tap.load() == syn.size());
    // Without vnet headers the fast path cannot answer: libslirp's, and
    // the one flow max_flows allows is taken by the fast path's.
    CHECK(r.input(syn_frame(40000, l.port, kAck, 1001)) == Outcome::Path);
    CHECK(r.ingress.taken_by() == &r.slirp);
    CHECK(r.input(syn_frame(40001, l.port)) == Outcome::Refused);
    CHECK(r.stats.flows_refused.load() == 1);
    CHECK(r.fast->flows() == 1);
    // At max_flows the fast path's next flow is refused with an RST.
    r.fast->frames().clear();
    CHECK(r.input(with_vnet(syn_frame(40002, l.port)), true) == Outcome::Path);
    CHECK(r.stats.flows_refused.load() == 2);
    CHECK(r.fast->flows() == 1);
    REQUIRE(r.fast->frames().size() == 1);
    CHECK((r.fast->frames().headers(0)[14 + 20 + 13] & kRst) != 0);
}

TEST_CASE("guest ingress: the TCP path writes its frames to its sink, one way out") {
    RecordingSink sink;
    Stats stats;
    FlowLimits limits(10, 1000, stats, 1000);
    FastPathConfig c = Sim::base_config();
    c.guest = &sink;
    c.admit_flow = [] { return Admission::Reset; }; // answered at once: an RST
    FastPath fast(std::move(c));
    GuestIngress ingress(ParentConfig::from_c(default_config()).cidr, stats, limits, {&fast});
    Listener l;
    Bytes raw = with_vnet(syn_frame(40000, l.port));
    CHECK(ingress.input(raw, true, 1000) == Outcome::Path);
    // The RST went out through the sink before the call returned.
    REQUIRE(sink.frames.size() == 1);
    CHECK((sink.frames[0][14 + 20 + 13] & kRst) != 0);
    CHECK(fast.frames().empty());
}

TEST_CASE("guest ingress: fast-path admission is FlowLimits' verdict") {
    Rig r(100, 1);
    CHECK(r.ingress.admit_flow(r.now, false) == Admission::Accept);
    CHECK(r.ingress.admit_flow(r.now, false) == Admission::Drop); // rate
    CHECK(r.stats.flows_rate_limited.load() == 1);
}

TEST_CASE("guest ingress: clients of forwards never spend the guest's budget (TCP, UDP, "
          "DNS, ping)") {
    // A TCP and a UDP forward flooded from many source ports, with the
    // guest's limits at max_flows 8 (4 for UDP and ICMP): the guest still
    // gets its TCP, UDP and ping flows admitted and its DNS to libslirp.
    Stats stats;
    FlowLimits limits(8, 1000, stats, 1000);
    GuestIngress *in = nullptr;
    FastPathConfig tc = Sim::base_config();
    tc.max_flows = 8;
    tc.forward_flows = 16;
    tc.forward_flows_each = 8;
    Sim *self = nullptr;
    tc.admit_flow = [&] { return in->admit_flow(self->now, false); };
    Sim sim(tc);
    self = &sim;
    udp::FastPathConfig uc = udptest::Rig::config(65520, true);
    uc.max_flows = 8;
    uc.forward_clients = 32;
    uc.forward_clients_each = 16;
    uc.clock = [&] { return sim.now; };
    uc.admit_flow = [&] { return in->admit_flow(sim.now, true); };
    udptest::Collector udp_out;
    udp::FastPath udp(uc, udp_out);
    LibslirpStandIn slirp(ParentConfig::from_c(default_config()).cidr, 8,
                                [&](bool l) { return in->admit_flow(sim.now, l); });
    std::vector<Bytes> &to_libslirp = slirp.frames;
    GuestIngress ingress(ParentConfig::from_c(default_config()).cidr, stats, limits,
                         {sim.fp.get(), &udp, &slirp});
    in = &ingress;
    // The forwards, and the guest's MAC for both paths.
    const uint16_t tport = free_port();
    REQUIRE(add(sim, tport) == 0);
    guest_arp_reply(sim);
    const uint16_t uport = udptest::HostSocket(false).port;
    const sockaddr_storage uhost = loopback(uport);
    REQUIRE(udp.add_forward(reinterpret_cast<const sockaddr *>(&uhost), len_of(false), kGuest4,
                            5353) == 0);
    const uint8_t dns[4] = {10, 0, 2, 3};
    const Bytes ask = udptest::guest_datagram(false, udptest::kGuest4, dns, 40000, 53,
                                              udptest::pattern(20, 1));
    REQUIRE(udp.guest_frame(ask) == Verdict::NotMine);
    // 16 TCP clients and 40 UDP ones, none answered by the guest.
    std::vector<int> tcp_clients;
    for (int i = 0; i < 16; ++i) {
        uint16_t cp = 0;
        tcp_clients.push_back(client(tport, &cp));
        REQUIRE(tcp_clients.back() >= 0);
        sim.pump(2);
    }
    for (int i = 0; i < 40; ++i) {
        udptest::HostSocket s(false);
        REQUIRE(::sendto(s.fd.get(), "x", 1, 0, reinterpret_cast<const sockaddr *>(&uhost),
                         len_of(false)) == 1);
        pollfd p{udp.epoll_fd(), POLLIN, 0};
        while (::poll(&p, 1, 20) == 1) udp.poll_events();
    }
    for (int i = 0; i < 20; ++i) sim.pump(2);
    CHECK(sim.fp->forward_flows() == 8);
    CHECK(udp.forward_flows() == 16);
    CHECK(ingress.path_flows() == 0);
    CHECK(stats.flows_refused.load() == 0);
    // What the guest asks for next: a TCP flow, a UDP flow or an echo
    // entry (both lingering), and DNS through libslirp.
    CHECK(ingress.admit_flow(sim.now, false) == Admission::Accept);
    CHECK(ingress.admit_flow(sim.now, true) == Admission::Accept);
    Bytes raw = ask;
    CHECK(ingress.input(raw, false, sim.now) == Outcome::Path);
    CHECK(ingress.taken_by() == &slirp);
    CHECK(to_libslirp.size() == 1);
    CHECK(stats.flows_refused.load() == 0);
    for (int fd : tcp_clients) ::close(fd);
}
