// SPDX-License-Identifier: Apache-2.0

// Neighbour solicitations for the host's IPv6 neighbours in pasta's model
// (rknp_config.ipv6_network): the guest's solicitation for any address of
// its network or a link-local one but its own is answered through
// GuestIngress with the MAC the fast paths send from; duplicate address
// detection and malformed solicitations are not. Off (libslirp's fd00::/64)
// every NDP frame goes on to libslirp as before. Also the 1.7 config checks
// and the routing of IPv6 flows in the model.
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/error.hpp"
#include "datapath/checksum.hpp"
#include "datapath/flows/route.hpp"
#include "datapath/ndp_proxy.hpp"
#include "libslirp_stand_in.hpp"
#include "parent/guest_ingress.hpp"
#include "recording_sink.hpp"

using namespace rknp;
using Bytes = std::vector<uint8_t>;

namespace {

const uint8_t kGuestMac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

in6_addr a6(const char *s) {
    in6_addr a{};
    REQUIRE(inet_pton(AF_INET6, s, &a) == 1);
    return a;
}

uint16_t icmpv6_checksum(const uint8_t *ip, const uint8_t *msg, size_t len) {
    const uint8_t tail[8] = {0, 0, uint8_t(len >> 8), uint8_t(len), 0, 0, 0, 58};
    uint64_t sum = csum_add(0, ip + 8, 32);
    sum = csum_add(sum, tail, sizeof tail);
    return uint16_t(~csum_fold(csum_add(sum, msg, len)));
}

// An Ethernet/IPv6 neighbour solicitation from the guest at src for target,
// with a source link-layer address option (none from ::), as Linux sends.
Bytes solicitation(const char *src, const char *target) {
    const in6_addr s = a6(src), t = a6(target);
    const bool dad = IN6_IS_ADDR_UNSPECIFIED(&s);
    const size_t msg_len = 24 + (dad ? 0 : 8);
    Bytes f(14 + 40 + msg_len, 0);
    f[0] = 0x33, f[1] = 0x33, f[2] = 0xff;
    std::memcpy(f.data() + 3, t.s6_addr + 13, 3);
    std::memcpy(f.data() + 6, kGuestMac, 6);
    f[12] = 0x86, f[13] = 0xdd;
    uint8_t *ip = f.data() + 14;
    ip[0] = 0x60;
    put_be16(ip + 4, uint16_t(msg_len));
    ip[6] = 58;
    ip[7] = 255;
    std::memcpy(ip + 8, &s, 16);
    // The solicited-node multicast address ff02::1:ffXX:XXXX.
    const uint8_t snm[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff,
                             t.s6_addr[13], t.s6_addr[14], t.s6_addr[15]};
    std::memcpy(ip + 24, snm, 16);
    uint8_t *msg = ip + 40;
    msg[0] = 135;
    std::memcpy(msg + 8, &t, 16);
    if (!dad) {
        msg[24] = 1, msg[25] = 1;
        std::memcpy(msg + 26, kGuestMac, 6);
    }
    put_be16(msg + 2, icmpv6_checksum(ip, msg, msg_len));
    return f;
}

NdpNetwork network() {
    NdpNetwork n;
    n.prefix.network = a6("2001:db8:5::");
    n.prefix.len = 64;
    n.guest = a6("2001:db8:5::1");
    n.gateway = a6("fe80::1");
    return n;
}

using Sink = RecordingSink;

rknp_config host6_config() {
    rknp_config c = default_config();
    c.cidr = "192.168.1.0/24";
    c.guest_address = "192.168.1.5";
    c.gateway = "192.168.1.1";
    c.network_model = RKNP_NETWORK_MODEL_HOST;
    c.enable_ipv6 = 1;
    c.ipv6_network = "2001:db8:5::1/64"; // host bits are cleared
    c.ipv6_address = "2001:db8:5::1";
    c.ipv6_gateway = "fe80::1";
    return c;
}

std::string refusal(const rknp_config &c) {
    try {
        ParentConfig::from_c(c);
    } catch (const Error &e) {
        return e.what();
    }
    return "no error";
}

// A GuestIngress on 192.168.1.0/24 with a libslirp stand-in as its only
// path, and a sink for what it answers itself.
struct IngressRig {
    Stats stats;
    FlowLimits limits{100, 1000, stats, 1000};
    Sink sink;
    Ipv4Cidr cidr = Ipv4Cidr::parse("cidr", "192.168.1.0/24");
    LibslirpStandIn slirp{cidr, 100, [this](bool l) { return ingress.admit_flow(1000, l); }};
    GuestIngress ingress{cidr, stats, limits, {&slirp}};
};

} // namespace

TEST_CASE("NDP: a neighbour, the gateway, link-local addresses, not the guest's") {
    const NdpNetwork net = network();
    std::array<uint8_t, kNdpAdvertLen> reply{};

    REQUIRE(answer_neighbour_ndp(solicitation("2001:db8:5::1", "2001:db8:5::77"), net,
                                 reply));
    // libslirp's MAC for the address, the one the fast paths send from.
    const uint8_t mac[6] = {0x52, 0x56, 0, 0, 0, 0x77};
    CHECK(std::memcmp(reply.data(), kGuestMac, 6) == 0); // to the asker
    CHECK(std::memcmp(reply.data() + 6, mac, 6) == 0);
    const uint8_t *ip = reply.data() + 14;
    CHECK(ip[6] == 58);
    CHECK(ip[7] == 255);
    CHECK(be16(ip + 4) == 32);
    CHECK(std::memcmp(ip + 8, a6("2001:db8:5::77").s6_addr, 16) == 0);
    CHECK(std::memcmp(ip + 24, a6("2001:db8:5::1").s6_addr, 16) == 0);
    const uint8_t *na = ip + 40;
    CHECK(na[0] == 136);
    CHECK(na[4] == 0x60); // solicited, override; not a router
    CHECK(std::memcmp(na + 8, a6("2001:db8:5::77").s6_addr, 16) == 0);
    CHECK(na[24] == 2);
    CHECK(na[25] == 1);
    CHECK(std::memcmp(na + 26, mac, 6) == 0);
    // A valid checksum: summed with it, the message folds to all ones.
    CHECK(icmpv6_checksum(ip, na, 32) == 0);

    // The link-local gateway, asked from the guest's link-local address: a
    // router.
    REQUIRE(answer_neighbour_ndp(solicitation("fe80::11:22ff:fe33:4455", "fe80::1"), net,
                                 reply));
    CHECK(reply[14 + 40 + 4] == 0xe0);
    CHECK(std::memcmp(reply.data() + 14 + 24, a6("fe80::11:22ff:fe33:4455").s6_addr, 16) ==
          0);
    // Another link-local neighbour.
    CHECK(answer_neighbour_ndp(solicitation("2001:db8:5::1", "fe80::9"), net, reply));

    // Not answered: duplicate address detection (source ::), the guest's
    // own address, the asker's own, other networks, multicast.
    CHECK_FALSE(answer_neighbour_ndp(solicitation("::", "2001:db8:5::77"), net, reply));
    CHECK_FALSE(answer_neighbour_ndp(solicitation("::", "fe80::11:22ff:fe33:4455"), net,
                                     reply));
    CHECK_FALSE(answer_neighbour_ndp(solicitation("fe80::5", "2001:db8:5::1"), net, reply));
    CHECK_FALSE(answer_neighbour_ndp(solicitation("fe80::5", "fe80::5"), net, reply));
    CHECK_FALSE(answer_neighbour_ndp(solicitation("2001:db8:5::1", "2001:db8:6::7"), net,
                                     reply));
    CHECK_FALSE(answer_neighbour_ndp(solicitation("2001:db8:5::1", "ff02::1"), net, reply));
}

TEST_CASE("NDP: malformed solicitations are not answered") {
    const NdpNetwork net = network();
    std::array<uint8_t, kNdpAdvertLen> reply{};
    const Bytes good = solicitation("2001:db8:5::1", "2001:db8:5::77");
    REQUIRE(answer_neighbour_ndp(good, net, reply));
    auto changed = [&](size_t at, uint8_t value) {
        Bytes f = good;
        f[at] = value;
        return f;
    };
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 7, 64), net, reply));  // hop limit
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 40 + 1, 1), net, reply)); // code
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 40 + 2, 0), net, reply)); // checksum
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 40, 136), net, reply)); // an advert
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 6, 0), net, reply));  // hop-by-hop
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 40 + 25, 0), net, reply)); // option 0
    CHECK_FALSE(answer_neighbour_ndp(changed(14 + 40 + 25, 2), net, reply)); // past end
    Bytes longer = changed(14 + 5, 0xff); // payload length past the frame
    CHECK_FALSE(answer_neighbour_ndp(longer, net, reply));
    Bytes shorter = good;
    shorter.resize(14 + 40 + 20);
    CHECK_FALSE(answer_neighbour_ndp(shorter, net, reply));
    CHECK_FALSE(answer_neighbour_ndp(changed(12, 0x08), net, reply)); // not IPv6
}

TEST_CASE("NDP: GuestIngress answers in pasta's IPv6 model only") {
    for (bool host6 : {true, false}) {
        CAPTURE(host6);
        IngressRig rig;
        GuestIngress &ingress = rig.ingress;
        Sink &sink = rig.sink;
        auto &to_libslirp = rig.slirp.frames;
        if (host6) ingress.set_ipv6_host(network(), &sink);
        Bytes ns = solicitation("2001:db8:5::1", "2001:db8:5::77");
        const auto outcome = ingress.input(ns, false, 1000);
        if (host6) {
            CHECK(outcome == GuestIngress::Outcome::Answered);
            REQUIRE(sink.frames.size() == 1);
            CHECK(sink.frames[0][14 + 40] == 136);
            CHECK(to_libslirp.empty());
        } else {
            // fd00::/64: a source outside it is the guest's to lose.
            CHECK(outcome == GuestIngress::Outcome::Filtered);
            CHECK(sink.frames.empty());
        }
    }
}

TEST_CASE("NDP: IPv6 alone drops the guest's ARP and IPv4") {
    IngressRig rig;
    GuestIngress &ingress = rig.ingress;
    ingress.set_ipv6_host(network(), &rig.sink);
    ingress.set_ipv4_off();
    Bytes arp(42, 0);
    std::memcpy(arp.data() + 6, kGuestMac, 6);
    arp[12] = 0x08, arp[13] = 0x06;
    arp[14 + 1] = 1, arp[14 + 2] = 8, arp[14 + 4] = 6, arp[14 + 5] = 4, arp[14 + 7] = 1;
    const uint8_t ip[4] = {192, 168, 1, 5};
    std::memcpy(arp.data() + 14 + 14, ip, 4);
    CHECK(ingress.input(arp, false, 1000) == GuestIngress::Outcome::Filtered);
    Bytes ns = solicitation("2001:db8:5::1", "fe80::1");
    CHECK(ingress.input(ns, false, 1000) == GuestIngress::Outcome::Answered);
    CHECK(rig.slirp.frames.empty());
}

TEST_CASE("config 1.7: pasta's IPv6 model is checked field by field") {
    ParentConfig p = ParentConfig::from_c(host6_config());
    REQUIRE(p.ipv6_host);
    CHECK(format_ipv6(p.ipv6_host->prefix.network) == "2001:db8:5::");
    CHECK(p.ipv6_host->prefix.len == 64);
    CHECK(format_ipv6(p.ipv6_host->gateway) == "fe80::1");
    CHECK(format_ipv6(*p.ipv6_address) == "2001:db8:5::1");

    rknp_config c = host6_config();
    c.ipv6_gateway = nullptr; // the network's ::1 is the guest's: ::2
    CHECK(format_ipv6(ParentConfig::from_c(c).ipv6_host->gateway) == "2001:db8:5::2");
    c = host6_config();
    c.network_model = RKNP_NETWORK_MODEL_SLIRP;
    c.cidr = nullptr, c.guest_address = nullptr, c.gateway = nullptr;
    CHECK(refusal(c) == "invalid ipv6_network \"2001:db8:5::1/64\": needs network_model "
                        "RKNP_NETWORK_MODEL_HOST");
    c = host6_config();
    c.ipv6_address = "2001:db8:6::1";
    CHECK(refusal(c) == "invalid ipv6_address \"2001:db8:6::1\": not a unicast address "
                        "in 2001:db8:5::1/64");
    c = host6_config();
    c.ipv6_gateway = "2001:db8:7::1";
    CHECK(refusal(c) == "invalid ipv6_gateway \"2001:db8:7::1\": neither in "
                        "2001:db8:5::1/64 nor link-local");
    c = host6_config();
    c.map_guest_addr6 = "2001:db8:5::1";
    CHECK(refusal(c) == "invalid map_guest_addr6 \"2001:db8:5::1\": the ipv6_address");
    c = host6_config();
    c.enable_ipv6 = 0;
    CHECK(refusal(c) == "invalid ipv6_network \"2001:db8:5::1/64\": IPv6 is not enabled");
    c = default_config();
    c.map_host_loopback6 = "fd99::3";
    CHECK(refusal(c) == "invalid map_host_loopback6 \"fd99::3\": needs ipv6_network");
    c = default_config();
    c.disable_ipv4 = 1;
    CHECK(refusal(c) == "invalid disable_ipv4: needs enable_ipv6");
    // dns_address6: where IPv6 DNS reaches the host's resolver; its own
    // switch, not disable_dns (the IPv4 forwarder's).
    c = host6_config();
    c.dns_address6 = "fd99::53";
    c.disable_dns = 1;
    CHECK(format_ipv6(*ParentConfig::from_c(c).ipv6_host->dns) == "fd99::53");
    CHECK_FALSE(ParentConfig::from_c(host6_config()).ipv6_host->dns);
    c.dns_address6 = "2001:db8:5::1";
    CHECK(refusal(c) == "invalid dns_address6 \"2001:db8:5::1\": the ipv6_address");
    c.dns_address6 = "fe80::1";
    CHECK(refusal(c) == "invalid dns_address6 \"fe80::1\": the ipv6_gateway");
    c.dns_address6 = "ff02::1";
    CHECK(refusal(c) == "invalid dns_address6 \"ff02::1\": not a unicast address");
    c.dns_address6 = "fd99::2";
    c.map_guest_addr6 = "fd99::2";
    CHECK(refusal(c) == "invalid dns_address6 \"fd99::2\": the map_guest_addr6");
    c = default_config();
    c.dns_address6 = "fd99::53";
    CHECK(refusal(c) == "invalid dns_address6 \"fd99::53\": needs ipv6_network");
}

TEST_CASE("route: IPv6 flows in pasta's model") {
    VirtualNet net;
    net.ipv6 = true;
    net.host_network6 = true;
    net.prefix6 = a6("2001:db8:5::");
    net.prefix6_len = 64;
    net.gateway6 = a6("fe80::1");
    net.guest6 = a6("2001:db8:5::1");
    net.map_guest6 = a6("fd99::2");
    net.map_loopback6 = a6("fd99::3");
    const in6_addr guest = net.guest6, guest_ll = a6("fe80::5");
    auto route = [&](const in6_addr &src, const char *dst) {
        return classify(net, true, src.s6_addr, a6(dst).s6_addr, 80);
    };
    CHECK(route(guest, "2001:db8:5::77") == Route::Host); // a neighbour
    CHECK(route(guest, "2001:db8:99::1") == Route::Host); // behind the gateway
    CHECK(route(guest, "fd00::3") == Route::Host);        // no libslirp fd00::/64
    CHECK(route(guest_ll, "fe80::1") == Route::Loopback); // the gateway, mapped
    CHECK(route(guest, "fd99::2") == Route::GuestAddr);
    CHECK(route(guest, "fd99::3") == Route::Loopback);
    CHECK(route(guest, "2001:db8:5::1") == Route::NotMine);
    CHECK(route(guest, "ff02::1") == Route::NotMine);
    CHECK(route(guest_ll, "fe80::9") == Route::NotMine);
    net.disable_host_loopback = true; // --no-map-gw: a link-local gateway is refused
    CHECK(route(guest_ll, "fe80::1") == Route::Refuse);
    net.gateway6 = a6("2001:db8:5::fe"); // a global one is reached
    CHECK(route(guest, "2001:db8:5::fe") == Route::Host);

    const HostAddrs to_host =
        host_addrs(net, Route::GuestAddr, true, a6("fd99::2").s6_addr, 8080);
    const auto &t = reinterpret_cast<const sockaddr_in6 &>(to_host.target);
    CHECK(format_ipv6(t.sin6_addr) == "2001:db8:5::1");
    CHECK(ntohs(t.sin6_port) == 8080);
}

namespace {

// pasta's IPv6 model: 2001:db8:5::/64, the guest ::1, via fe80::1.
VirtualNet host6_net() {
    VirtualNet net;
    net.ipv6 = true;
    net.host_network6 = true;
    net.prefix6 = a6("2001:db8:5::");
    net.gateway6 = a6("fe80::1");
    net.guest6 = a6("2001:db8:5::1");
    return net;
}

} // namespace

TEST_CASE("route: an IPv6 DNS forwarder in pasta's model (dns_address6)") {
    VirtualNet net = host6_net();
    net.dns = false; // the IPv4 forwarder's switch: not this one's
    const in6_addr guest = net.guest6;
    auto route = [&](const char *dst, uint16_t port) {
        return classify(net, true, guest.s6_addr, a6(dst).s6_addr, port);
    };
    CHECK(route("fd99::53", 53) == Route::Host); // none set: an address like any
    net.dns6 = a6("fd99::53");
    CHECK(route("fd99::53", 53) == Route::Unreachable); // no nameserver known
    net.resolver6 = a6("::ffff:127.0.0.53");
    CHECK(route("fd99::53", 53) == Route::Resolver);
    CHECK(route("fd99::53", 80) == Route::Unreachable);
    net.outbound_addr6 = a6("2001:db8:5::9");
    HostAddrs to = host_addrs(net, Route::Resolver, true, a6("fd99::53").s6_addr, 53);
    const auto &t = reinterpret_cast<const sockaddr_in6 &>(to.target);
    CHECK(format_ipv6(t.sin6_addr) == "::ffff:127.0.0.53");
    CHECK(ntohs(t.sin6_port) == 53);
    CHECK(to.bind_len == 0); // an IPv4 resolver: no IPv6 bind
    net.resolver6 = a6("::1");
    to = host_addrs(net, Route::Resolver, true, a6("fd99::53").s6_addr, 53);
    CHECK(format_ipv6(reinterpret_cast<const sockaddr_in6 &>(to.target).sin6_addr) == "::1");
    CHECK(to.bind_len != 0);
}

TEST_CASE("route: the client an IPv6 forward's guest end sees") {
    VirtualNet net = host6_net();
    auto seen = [&](const char *peer) {
        sockaddr_storage ss{};
        in6_addr a{};
        if (inet_pton(AF_INET6, peer, &a) == 1) {
            auto &p6 = reinterpret_cast<sockaddr_in6 &>(ss);
            p6.sin6_family = AF_INET6;
            p6.sin6_addr = a;
        } else {
            auto &p4 = reinterpret_cast<sockaddr_in &>(ss);
            p4.sin_family = AF_INET;
            inet_pton(AF_INET, peer, &p4.sin_addr);
        }
        in6_addr out{};
        forwarded_source6(net, ss, out.s6_addr);
        return format_ipv6(out);
    };
    CHECK(seen("2001:db8:5::7") == "2001:db8:5::7"); // a neighbour keeps its address
    CHECK(seen("2001:db8:99::9") == "2001:db8:99::9"); // so does one further away
    CHECK(seen("::1") == "fe80::1");                  // loopback: the gateway
    CHECK(seen("127.0.0.1") == "fe80::1");            // IPv4: no IPv6 of its own
    CHECK(seen("::ffff:192.0.2.7") == "fe80::1");
    CHECK(seen("2001:db8:5::1") == "fe80::1"); // the host's own (the guest's)
    net.map_guest6 = a6("fd99::2");
    CHECK(seen("2001:db8:5::1") == "fd99::2");
    net.map_loopback6 = a6("fd99::3"); // answerable from behind a bridge too
    CHECK(seen("::1") == "fd99::3");
    // libslirp's fd00::/64: its own addresses are not a client's.
    net.host_network6 = false;
    net.prefix6 = a6("fd00::");
    net.gateway6 = a6("fd00::2");
    net.map_loopback6.reset();
    CHECK(seen("fd00::7") == "fd00::2");
    CHECK(seen("2001:db8:99::9") == "2001:db8:99::9");
}
